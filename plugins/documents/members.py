"""One file inside an archive (`zip://INNER::ARCHIVE`, LongBench's `data.zip`), taken out once
into a folder of the `datasets` cache and read from there as a plain local file.

Why not hand the chained URL to `datasets`: its readers treat `zip://...::/local/data.zip` as a
remote URL, ask fsspec for its ETag and, offline (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE), refuse
it before opening the local archive (OfflineModeIsEnabled), so every spec reading a member of a
cached Hub archive failed on an air-gapped node. Taking the member out ourselves works the same
online and offline, and the extracted copy is reused: its folder is named by the archive's
path, size and modification time, so a changed archive is taken out again.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from lceval.errors import UserError
from lceval.io import quote, sha256_text

#: the archive protocols a chained data file may name (`PROTO://INNER::ARCHIVE`)
PROTOCOLS = ("zip", "tar")
MEMBERS_FOLDER = "lceval-archive-members"


def _members_root() -> Path:
    """Where taken-out members live: beside the Arrow files `datasets` writes (its cache)."""
    try:
        import datasets.config

        return Path(datasets.config.HF_DATASETS_CACHE) / MEMBERS_FOLDER
    except ImportError:  # the caller reports the missing `datasets` with its install hint
        return Path(tempfile.gettempdir()) / MEMBERS_FOLDER


def _inner(head: str, entry: str) -> tuple[str, PurePosixPath]:
    """("zip", "data/trec.jsonl") of a chain head "zip://data/trec.jsonl::"."""
    protocol, sep, rest = head.partition("://")
    inner = rest[:-2] if rest.endswith("::") else rest
    if not sep or protocol not in PROTOCOLS or "::" in inner:
        raise UserError(f"data file {quote(entry)}: only one archive level is read ({', '.join(p + '://INNER::ARCHIVE' for p in PROTOCOLS)})",
                        field="options.source.data_files")
    rel = PurePosixPath(inner.lstrip("/"))
    if not inner or ".." in rel.parts:
        raise UserError(f"data file {quote(entry)} names no file inside its archive", field="options.source.data_files")
    return protocol, rel


def member_file(head: str, archive: Path, entry: str) -> Path:
    """The local copy of the member `head` names inside `archive` (taken out on first use)."""
    protocol, rel = _inner(head, entry)
    stat = archive.stat()
    key = sha256_text(f"{archive.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}")[:24]
    target = _members_root() / key / rel
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            _copy_member(protocol, archive, str(rel), out, entry)
        os.replace(tmp, target)  # a reader never sees half a member
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _copy_member(protocol: str, archive: Path, name: str, out, entry: str) -> None:
    missing = UserError(f"archive {archive.name} has no member {quote(name)} (data file {quote(entry)})",
                        file=archive, field="options.source.data_files")
    try:
        if protocol == "zip":
            with zipfile.ZipFile(archive) as zf:
                try:
                    info = zf.getinfo(name)
                except KeyError:
                    raise missing from None
                with zf.open(info) as src:
                    shutil.copyfileobj(src, out)
        else:
            with tarfile.open(archive) as tf:
                try:
                    member = tf.getmember(name)
                except KeyError:
                    raise missing from None
                src = tf.extractfile(member)
                if src is None:
                    raise missing
                shutil.copyfileobj(src, out)
    except (zipfile.BadZipFile, tarfile.TarError, zlib.error, EOFError, RuntimeError) as exc:
        raise UserError(f"cannot read {quote(name)} inside the archive: {exc}", file=archive,
                        field="options.source.data_files") from None
