"""Where the rows of a `documents` spec come from, read through the `datasets` library.

Two kinds of source, one reader:

- local files (`data_files` relative to the spec's folder, then to the data home), read with
  the json, parquet or csv builder of `datasets` (which converts them once to Arrow and
  memory-maps them: 10,000 long documents are not all held in memory);
- files of a Hugging Face Hub dataset repository (`path`) at a pinned `revision`, fetched
  with `huggingface_hub` into its cache (offline: only from that cache, and a revision that
  is not there is an error naming it, never a silent "latest cached version"), then read
  with the same builders.

A Hub dataset's config (`name`, with `split`) stands for the files its dataset card declares
(`hub.config_files`). `zip://INNER::ARCHIVE` reads one file inside an archive (LongBench's `data.zip`): the
archive is found (or fetched) and recorded like any other file, and the member is taken out of it
(`members.py`) so that `datasets` reads a local file, offline too. Every file read goes
through `ctx.record_file` (its sha256 into the manifest) and the source - repository,
resolved commit, files, the `datasets` fingerprint - through `ctx.record_source`.
"""

from __future__ import annotations

import glob
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lceval.errors import DataMissing, PackageMissing, UserError
from lceval.interfaces import TaskContext
from lceval.io import quote

from .hub import commit_of, config_files, hub_file
from .members import member_file

BUILDERS = {".json": "json", ".jsonl": "json", ".ndjson": "json", ".parquet": "parquet", ".csv": "csv"}
COMPRESSIONS = (".gz", ".bz2", ".xz", ".zst")
INSTALL_HINT = "pip install 'lceval[documents]'"


@dataclass
class Opened:
    """A split's rows (a `datasets.Dataset`) and what to say about where they came from."""

    dataset: Any
    label: str  # the file(s) or repo@revision, for messages
    files: list[Path] = field(default_factory=list)  # local files read (recorded)
    record: dict[str, Any] = field(default_factory=dict)  # what record_source keeps


def _import_datasets() -> Any:
    try:
        import datasets
    except ImportError:
        raise PackageMissing("the documents task type reads data with the `datasets` library, which is not installed",
                             field="options.source", install=INSTALL_HINT) from None
    return datasets


def _chain(entry: str) -> tuple[str, str]:
    """`zip://INNER::ARCHIVE` -> ("zip://INNER::", "ARCHIVE"); a plain path -> ("", path)."""
    head, sep, last = entry.rpartition("::")
    return (head + sep, last) if sep else ("", entry)


def builder_of(entries: list[str], given: str | None) -> str:
    """The builder the spec names, else the one the (inner) file's extension calls for."""
    if given:
        return given
    found = set()
    for entry in entries:
        head, outer = _chain(entry)
        name = head.split("://", 1)[-1].split("::")[0] if head else outer
        suffixes = [s.lower() for s in Path(name).suffixes]
        while suffixes and suffixes[-1] in COMPRESSIONS:
            suffixes.pop()
        builder = BUILDERS.get(suffixes[-1] if suffixes else "")
        if builder is None:
            raise UserError(f"cannot tell the format of data file {quote(entry)} from its extension "
                            f"(known: {', '.join(sorted(BUILDERS))})", field="options.source.builder",
                            hint="Set options.source.builder to json, parquet or csv.")
        found.add(builder)
    if len(found) > 1:
        raise UserError(f"data files of different formats ({', '.join(sorted(found))}) in one source",
                        field="options.source.data_files")
    return found.pop()


def _entries(source: dict[str, Any]) -> list[str]:
    files = source.get("data_files")
    if not files:
        raise UserError("the source names no data_files", field="options.source.data_files",
                        hint="Give the file(s) to read, e.g. data_files: questions.jsonl")
    return [files] if isinstance(files, str) else list(files)


def _local(entry: str, ctx: TaskContext) -> list[Path]:
    """The local file(s) an entry names: absolute, else relative to the spec's folder, else to
    the data home; globs expand (sorted)."""
    raw = Path(entry).expanduser()
    bases = [None] if raw.is_absolute() else [ctx.spec_path.parent, ctx.data_home]
    for base in bases:
        candidate = raw if base is None else base / raw
        if glob.has_magic(str(candidate)):
            found = sorted(Path(p) for p in glob.glob(str(candidate), recursive=True) if Path(p).is_file())
            if found:
                return found
        elif candidate.is_file():
            return [candidate]
    if raw.is_absolute():
        raise UserError(f"data file {quote(entry)} not found", field="options.source.data_files")
    raise DataMissing(f"data file {quote(entry)} not found (looked in {ctx.spec_path.parent} and {ctx.data_home})",
                      field="options.source.data_files")


def _readable(head: str, path: Path, entry: str) -> str:
    """What `datasets` is given to read: the file itself, or the member a chain names taken out
    of the archive (`members.member_file`: a chained URL is refused by `datasets` offline)."""
    return str(member_file(head, path, entry)) if head else str(path)


def open_source(source: dict[str, Any], ctx: TaskContext) -> Opened:
    """Find (or fetch) the source's files, record them and open them as one `datasets.Dataset`."""
    repo, revision = source.get("path"), source.get("revision")
    if repo and revision and source.get("name") is not None and source.get("data_files"):
        raise UserError("a config's name picks its files: give options.source.name or data_files, not both",
                        field="options.source.name")
    if repo and revision and not source.get("data_files"):
        entries = config_files(repo, revision, source.get("name"), source.get("split") or "train")
    else:
        if source.get("name") is not None and not repo:
            raise UserError("a config name belongs to a Hub dataset: options.source.path is not set",
                            field="options.source.name")
        entries = _entries(source)
    builder = builder_of(entries, source.get("builder"))
    local: list[str] = []
    files: list[Path] = []
    commits: set[str] = set()
    if repo:
        if not revision:
            raise UserError(f"a Hub dataset ({repo}) needs a pinned revision", field="options.source.path",
                            hint="Add options.source.revision: <40-hex commit> so the data cannot change under "
                                 "the results.")
        for entry in entries:
            head, inner = _chain(entry)
            if glob.has_magic(inner):
                raise UserError(f"a Hub data file cannot be a glob ({quote(entry)}): name each file",
                                field="options.source.data_files")
            path = hub_file(repo, revision, inner)
            commit = commit_of(path)
            if commit:
                commits.add(commit)
            files.append(path)
            local.append(_readable(head, path, entry))
        label = f"{repo}@{revision[:12]} {', '.join(entries)}"
    else:
        if revision:
            raise UserError("a revision belongs to a Hub dataset: options.source.path is not set",
                            field="options.source.revision")
        for entry in entries:
            head, outer = _chain(entry)
            for path in _local(outer, ctx):
                files.append(path)
                local.append(_readable(head, path, entry))
        label = ", ".join(str(p) for p in files)
    datasets = _import_datasets()
    quiet = not sys.stderr.isatty() and not datasets.are_progress_bars_disabled()
    if quiet:  # no progress bars in logs and captured output; lceval's own bar shows the run
        datasets.disable_progress_bars()
    try:
        dataset = datasets.load_dataset(builder, data_files=local, split="train")
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure of the reader is about the user's file
        cause = exc
        while cause.__cause__ is not None and str(cause) in ("", "An error occurred while generating the dataset"):
            cause = cause.__cause__
        raise UserError(f"cannot read {label} with the datasets {builder} reader: {type(cause).__name__}: "
                        f"{str(cause).strip().splitlines()[0] if str(cause).strip() else ''}",
                        file=files[0] if files and not repo else None, field="options.source.data_files") from None
    finally:
        if quiet:
            datasets.enable_progress_bars()
    for path in files:
        ctx.record_file(path)
    record: dict[str, Any] = {"builder": builder, "split": source.get("split") or "train",
                              "data_files": entries, "rows": dataset.num_rows,
                              "fingerprint": getattr(dataset, "_fingerprint", None)}
    if repo:
        resolved = sorted(commits)[0] if len(commits) == 1 else revision
        record = {"dataset": repo, "name": source.get("name"), "revision": resolved, "requested_revision": revision,
                  **record}
    if source.get("where"):
        record["where"] = source["where"]
    ctx.record_source(record)
    return Opened(dataset=dataset, label=label, files=files, record=record)
