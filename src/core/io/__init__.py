"""Files a user hands lceval, and files lceval writes for them (public API).

Plugin authors read data through these helpers so that a damaged, huge, non-UTF-8 or
misplaced file becomes a clear `UserError` naming the file, line and value, and write through
the atomic writers so that an interrupted command never leaves half a file:

- bounded readers: `read_text`, `read_json`, `read_json_object`, `read_json_lines`,
  `read_bytes`, `decode_utf8`, `loads_json`, `quote` (and the limits they apply);
- safe YAML with line numbers: `load_yaml_with_lines`, `loads_yaml_with_lines`, `line_of`;
- JSON Schemas: `validate` (errors with file, field and line), `load_schema`;
- atomic writes: `write_text_atomic`, `atomic_file`, `atomic_directory`, `replaced_directory`, `check_writable`;
- digests: `sha256_text`, `sha256_bytes`, `sha256_file`, `canonical_hash`;
- the data home: `data_home`, `dataset_path`, `using_data_home`, `fetch` (what
  `lceval data fetch` does), `offline_recipe` (the commands that fetch a dataset without
  network) and the archive helpers a dataset's `install` uses
  (`extract_zip`, `read_zip_member`, `safe_relpath`, `is_junk`);
- what a task needs in the data home (`lceval.needs.Need`s): `DatasetNeed` (a registered
  dataset), `DataHomePath` (a file or folder only the user can provide), `GitFiles` (authors'
  files from a git repository at a commit), and `copy_into` / `remote_size` for needs of one's own;
- the console's tables: `text_table` (plain text or Markdown); every amount of money lceval writes:
  `format_usd` (never in scientific notation, "unknown" for None) and `format_rate` (a price per token).
"""

from lceval.io._atomic import (atomic_directory, atomic_file, check_writable, clean_stale_partials, replaced_directory,
                               write_text_atomic)
from lceval.io._datahome import (CHECKSUMS, FetchReport, data_home, dataset_path, extract_zip, fetch, is_junk,
                                 network_off, offline_recipe, read_record, read_zip_member, safe_relpath, using_data_home)
from lceval.io._needs import DataHomePath, DatasetNeed, GitFiles, copy_into, remote_size
from lceval.io._money import format_rate, format_usd
from lceval.io._digest import canonical_hash, sha256_bytes, sha256_file, sha256_text
from lceval.io._readers import (DATA_MAX_BYTES, QUOTE_CHARS, SPEC_MAX_BYTES, MiB, decode_utf8, loads_json, quote,
                               read_bytes, read_json, read_json_lines, read_json_object, read_text)
from lceval.io._schema import PLUGIN_KEYWORD, PluginNames, load_schema, unknown_name, validate
from lceval.io._table import text_table
from lceval.io._yaml import MAX_DEPTH, MAX_VALUES, PathKey, line_of, load_yaml_with_lines, loads_yaml_with_lines

__all__ = [
    "CHECKSUMS", "DATA_MAX_BYTES", "DataHomePath", "DatasetNeed", "GitFiles", "copy_into", "remote_size", "MAX_DEPTH", "MAX_VALUES", "PLUGIN_KEYWORD", "QUOTE_CHARS", "SPEC_MAX_BYTES",
    "FetchReport", "MiB", "PathKey", "PluginNames",
    "atomic_directory", "atomic_file", "format_rate", "format_usd", "canonical_hash", "check_writable", "clean_stale_partials", "data_home",
    "replaced_directory",
    "dataset_path", "decode_utf8", "extract_zip", "fetch", "is_junk", "line_of", "load_schema",
    "load_yaml_with_lines", "loads_json", "loads_yaml_with_lines", "network_off", "offline_recipe", "quote", "read_bytes", "read_json",
    "read_json_lines", "read_json_object", "read_record", "read_text", "read_zip_member", "safe_relpath",
    "sha256_bytes", "sha256_file", "sha256_text", "unknown_name", "using_data_home", "validate",
    "write_text_atomic",
    "text_table",
]
