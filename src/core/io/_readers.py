"""Reading the files users hand us (specs, data files, haystacks, recorded responses, run
directories) so that every way they can be wrong is a `UserError` naming the file, the line
and the offending value, never a traceback or a hang.

Why one module: each reader used to call `path.read_text()` + `json.loads()` and catch
what its author thought of. The failures that slipped through were always the same few
(not UTF-8, nested past Python's recursion limit, a folder or a FIFO where a file was
expected, a file far too big to be what it claims), so they are handled here once. Sizes are
checked from `stat` *before* reading, so a 50 MB "spec" is refused at once, and reading is
capped anyway, so a file that grows or lies about its size cannot exhaust memory.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

from lceval.errors import UserError

__all__ = ["DATA_MAX_BYTES", "MiB", "QUOTE_CHARS", "SPEC_MAX_BYTES", "decode_utf8", "loads_json", "quote", "read_bytes",
           "read_json", "read_json_lines", "read_json_object", "read_text"]

MiB = 1 << 20
#: a task spec or catalog: real ones are a few KB
SPEC_MAX_BYTES = 1 * MiB
#: a data file (questions, a haystack, recorded responses, results.json): real ones are < 10 MB
DATA_MAX_BYTES = 256 * MiB
#: how much of an offending value an error message quotes
QUOTE_CHARS = 80


def quote(value: Any, limit: int = QUOTE_CHARS) -> str:
    """`repr(value)` cut to `limit` characters, so an error message stays one short line."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _size(n: int) -> str:
    return f"{n / MiB:.1f} MB" if n >= MiB else f"{n:,} bytes"


def read_bytes(path: Path, *, what: str, limit: int = DATA_MAX_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes."""
    path = Path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise UserError(f"{what} not found", file=path) from None
    except OSError as exc:
        raise UserError(f"cannot read {what}: {exc.strerror or exc}", file=path) from None
    if stat.S_ISDIR(info.st_mode):
        raise UserError(f"{what} is a folder, not a file", file=path)
    if not stat.S_ISREG(info.st_mode):
        # a FIFO or a device would block or never end: refuse rather than hang
        raise UserError(f"{what} is not a regular file", file=path)
    if info.st_size > limit:
        raise UserError(f"{what} is {info.st_size:,} bytes, more than the {_size(limit)} ({limit:,} bytes) such "
                        "a file can be (refused before reading)", file=path)
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise UserError(f"cannot read {what}: {exc.strerror or exc}", file=path) from None
    if len(data) > limit:
        raise UserError(f"{what} is more than the {_size(limit)} such a file can be", file=path)
    return data


def decode_utf8(data: bytes, path: Path | str, *, what: str) -> str:
    """`data` as text; a byte that is not UTF-8 is reported with its line and offset. A
    leading byte-order mark (some Windows editors write one) is dropped."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise UserError(f"{what} is not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start} "
                        "cannot be decoded", file=path, line=line,
                        hint="Save the file as UTF-8.") from None
    return text[1:] if text.startswith("\ufeff") else text


def read_text(path: Path, *, what: str, limit: int = DATA_MAX_BYTES) -> str:
    """A UTF-8 text file of at most `limit` bytes."""
    return decode_utf8(read_bytes(path, what=what, limit=limit), path, what=what)


def loads_json(text: str, path: Path | str, *, what: str, line: int | None = None) -> Any:
    """Parse JSON text from `path`; `line` is the line of `text` in the file (JSON Lines)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        at = exc.lineno if line is None else line
        raise UserError(f"{what} is not valid JSON: {exc.msg} (column {exc.colno})", file=path,
                        line=at) from None
    except RecursionError:
        raise UserError(f"{what} is nested too deeply to read (more than Python's recursion limit)",
                        file=path, line=line) from None


def read_json(path: Path, *, what: str, limit: int = DATA_MAX_BYTES) -> Any:
    """A JSON file of at most `limit` bytes, parsed."""
    return loads_json(read_text(path, what=what, limit=limit), path, what=what)


def read_json_object(path: Path, *, what: str, limit: int = DATA_MAX_BYTES) -> dict[str, Any]:
    data = read_json(path, what=what, limit=limit)
    if not isinstance(data, dict):
        raise UserError(f"{what} must be a JSON object, got {type(data).__name__} {quote(data, 40)}", file=path)
    return data


def read_json_lines(path: Path, *, what: str, limit: int = DATA_MAX_BYTES) -> list[tuple[int, Any]]:
    """(line number, value) of every non-blank line of a JSON Lines file. Lines end at "\n"
    only (JSON Lines): str.splitlines would also cut at U+2028, U+0085 or \x1c, which JSON
    strings written with ensure_ascii=False carry raw (a model's answer may hold them)."""
    text = read_text(path, what=what, limit=limit)
    return [(n, loads_json(line, path, what=what, line=n))
            for n, line in enumerate(text.split("\n"), 1) if line.strip()]
