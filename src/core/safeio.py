"""Bounded readers for users' files: a re-export of `lceval.io`'s readers, kept so that
`from lceval.safeio import read_json` written against lceval 0.1 still works."""

from lceval.io import (DATA_MAX_BYTES, QUOTE_CHARS, SPEC_MAX_BYTES, MiB, decode_utf8, loads_json, quote, read_bytes,
                       read_json, read_json_lines, read_json_object, read_text)

__all__ = ["DATA_MAX_BYTES", "MiB", "QUOTE_CHARS", "SPEC_MAX_BYTES", "decode_utf8", "loads_json", "quote", "read_bytes",
           "read_json", "read_json_lines", "read_json_object", "read_text"]
