"""`lceval data pack` and `lceval data unpack`: everything some tasks need, carried in one file
from a connected machine to one without network.

A pack is a tar file: first `lceval-pack.json` (the lceval version that made it, the tasks, and
per need its key and files with their sha256 and size), then each file as
`needs/<n>/<path under the need's root>`. Unpacking recomputes the tasks' needs on this machine
(same lceval version, so the same keys) and puts each need's files under that need's root here
(the data home, the Hugging Face cache, tiktoken's cache ...). Every file is checked against its
sha256 while it is staged in a scratch folder beside where it goes; only when the whole pack has
been read and verified is anything renamed into place, and a need already present is left as it
is. So a damaged or half-copied pack installs nothing, and what was installed stays whole.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from lceval.engine._catalog import Catalog
from lceval.engine._needs import fetch_needs, human_size, missing_text, needs_of, task_data, unique_needs
from lceval.engine._plugin_host import Plugins
from lceval.engine._spec import TaskSpec, load_spec
from lceval.errors import PackageMissing, UserError
from lceval.io import check_writable, sha256_file
from lceval.needs import Need

MANIFEST = "lceval-pack.json"
FORMAT = "lceval-data-pack"
FORMAT_VERSION = 1
CHUNK = 1 << 20


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("lceval")
    except metadata.PackageNotFoundError:
        return "unknown"


@dataclass
class PackReport:
    path: Path
    tasks: list[str]
    needs: int
    files: int
    bytes: int
    fetched: list[str] = field(default_factory=list)
    #: `skip_missing`: task -> what it lacks (not packed)
    skipped: dict[str, str] = field(default_factory=dict)


SKIP_HINT = "`lceval data pack ... --skip-missing` packs the tasks whose data is here and lists the others."


def _fetch_all(rows: list, source: Path | None, say: Callable[[str], None], progress: bool,
               skip_missing: bool) -> list[str]:
    """Fetch what the rows lack; a failure stops the pack, or with `skip_missing` is said and
    left to the tasks' status afterwards (they are then not packed)."""
    try:
        return fetch_needs(unique_needs(rows), source, say, progress)
    except UserError as exc:
        if isinstance(exc, PackageMissing):
            raise
        if not skip_missing:
            raise exc.but(hint=f"{exc.hint.rstrip('.')}. {SKIP_HINT}" if exc.hint else SKIP_HINT) from None
        say("some of it could not be got: the tasks that need it are not packed (listed at the end)")
        return []


def _safe(rel: str) -> PurePosixPath:
    path = PurePosixPath(rel)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise UserError(f"a need's file {rel!r} is not inside its folder")
    return path


def pack(specs: list[TaskSpec], plugins: Plugins, catalog: Catalog, data_home: Path, out: Path, source: Path | None,
         say: Callable[[str], None], progress: bool = False, skip_missing: bool = False) -> PackReport:
    """Fetch what the tasks need and is missing (sizes said first), then write the pack to
    `out` (renamed into place once complete: an interrupted pack leaves no file at `out`).
    `skip_missing`: a task whose data cannot be got (a family only `--from FOLDER` installs, a
    download that fails) is left out and named in `PackReport.skipped`, the others packed."""
    rows = [task_data(spec, plugins, data_home) for spec in specs]
    broken = [row for row in rows if row.error]
    if broken:
        raise UserError(f"cannot pack task '{broken[0].task}': {broken[0].error}")
    lacking = [row.package for row in rows if row.package is not None]
    if lacking and not skip_missing:  # exit 4 with the pip line (--skip-missing leaves its tasks out)
        raise lacking[0]
    fetched = _fetch_all(rows, source, say, progress, skip_missing)
    unresolved = [row for row in rows if row.missing.get("?")]
    if unresolved:  # a type that reads data to say what it needs: ask it again now that it is here
        rows = [task_data(spec, plugins, data_home) for spec in specs]
        fetched += _fetch_all(rows, source, say, progress, skip_missing)
    skipped: dict[str, str] = {}
    if skip_missing:
        rows = [task_data(spec, plugins, data_home) for spec in specs]
        skipped = {row.task: f"{missing_text(row)}; {row.how}" for row in rows if not row.ready}
        kept = [(row, spec) for row, spec in zip(rows, specs) if row.ready]
        if not kept:
            raise UserError(f"none of the {len(rows)} task(s) has its data here, nothing to pack: "
                            + "; ".join(f"{task}: {why}" for task, why in list(skipped.items())[:3])
                            + (f" (and {len(skipped) - 3} more)" if len(skipped) > 3 else ""))
        rows, specs = [row for row, _ in kept], [spec for _, spec in kept]
    needs = unique_needs(rows)
    entries: list[dict[str, Any]] = []
    total = 0
    for need in needs:
        root = need.root()
        files = []
        for rel in need.files():
            path = root / _safe(rel)
            size = path.stat().st_size
            files.append({"path": rel, "sha256": sha256_file(path), "size": size})
            total += size
        if not files:
            raise UserError(f"{need.label} is present but has no files to pack")
        entries.append({"key": need.key, "label": need.label, "files": files})
    manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, "lceval": _version(),
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "tasks": {row.task: {"needs": [n.key for n in row.needs], "spec": _spec_file(spec, catalog)}
                          for row, spec in zip(rows, specs)},
                "needs": entries}
    out = Path(out).expanduser()
    check_writable(out.parent if str(out.parent) else Path("."), "-o")
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent if str(out.parent) else ".")
    os.close(fd)
    try:
        say(f"writing {out} ({human_size(total)}, {sum(len(e['files']) for e in entries)} files)")
        with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT, dereference=True) as tar:
            blob = json.dumps(manifest, indent=1).encode()  # the tasks in the order given
            info = tarfile.TarInfo(MANIFEST)
            info.size, info.mtime = len(blob), int(time.time())
            tar.addfile(info, _BytesReader(blob))
            for index, (need, entry) in enumerate(zip(needs, entries)):
                for item in entry["files"]:
                    tar.add(str(need.root() / item["path"]), arcname=f"needs/{index}/{item['path']}", recursive=False)
        os.replace(tmp, out)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return PackReport(path=out, tasks=[r.task for r in rows], needs=len(needs),
                      files=sum(len(e["files"]) for e in entries), bytes=total, fetched=fetched, skipped=skipped)


def _spec_file(spec: TaskSpec, catalog: Catalog) -> str | None:
    """A task of no catalog (a spec file the user gave) is found again by its file's path."""
    known = catalog.specs.get(spec.name)
    return None if known is not None and known.resolve() == spec.path.resolve() else str(spec.path.resolve())


class _BytesReader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def read(self, n: int = -1) -> bytes:
        end = len(self.data) if n < 0 else self.at + n
        chunk, self.at = self.data[self.at:end], min(end, len(self.data))
        return chunk


@dataclass
class UnpackReport:
    tasks: list[str]
    installed: list[str]
    present: list[str]
    bytes: int


def _damaged(path: Path, why: str) -> UserError:
    return UserError(f"the pack is incomplete or damaged ({why}); nothing was installed", file=path,
                     hint="Copy it again (compare its size with the original), or make it again with "
                          "`lceval data pack`.")


def _read_manifest(tar: tarfile.TarFile, path: Path) -> dict[str, Any]:
    first = tar.next()
    if first is None or first.name != MANIFEST or not first.isfile():
        raise UserError("is not an lceval data pack (it does not start with lceval-pack.json)", file=path,
                        hint="Make one with `lceval data pack TASKS -o FILE` on a connected machine.")
    reader = tar.extractfile(first)
    try:
        manifest = json.loads(reader.read() if reader else b"")
    except ValueError:
        raise _damaged(path, "its lceval-pack.json is not JSON") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise UserError("is not an lceval data pack", file=path)
    tasks = ",".join(manifest.get("tasks") or {}) or "TASKS"
    if not isinstance(manifest.get("tasks"), dict) or not isinstance(manifest.get("needs"), list):
        raise _damaged(path, "its lceval-pack.json lists no tasks and needs")
    if manifest.get("format_version") != FORMAT_VERSION or manifest.get("lceval") != _version():
        raise UserError(f"this pack was made by lceval {manifest.get('lceval')}; this is lceval {_version()}, which "
                        "may need other files", file=path,
                        hint=f"Make it again with lceval {_version()} on the connected machine: "
                             f"`lceval data pack {tasks} -o FILE`.")
    return manifest


def unpack(path: Path, plugins: Plugins, catalog: Catalog, data_home: Path,
           say: Callable[[str], None]) -> UnpackReport:
    """Install the pack's needs where this machine's lceval looks for them; see the module doc."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise UserError("no such pack file", file=path)
    try:
        tar = tarfile.open(path, "r:")
    except (tarfile.TarError, OSError) as exc:
        raise UserError(f"is not an lceval data pack, or is damaged: {exc}", file=path,
                        hint="Copy it again, or make it with `lceval data pack TASKS -o FILE`.") from None
    with tar:
        try:
            manifest = _read_manifest(tar, path)
        except (tarfile.TarError, EOFError, OSError) as exc:  # cut short inside its first member
            raise _damaged(path, f"{type(exc).__name__}: {exc}") from None
        entries = {e["key"]: (i, e) for i, e in enumerate(manifest.get("needs") or [])}
        needs = _local_needs(manifest, plugins, catalog, data_home, entries, path)
        roots = {key: need.root() for key, need in needs.items()}
        for root in dict.fromkeys(roots.values()):
            check_writable(root, "--data-home" if root == data_home else f"the folder {root}")
        created = [root for root in dict.fromkeys(roots.values()) if not root.exists()]
        staging = {root: Path(tempfile.mkdtemp(prefix=".lceval-unpack-", dir=_made(root)))
                   for root in dict.fromkeys(roots.values())}
        try:
            staged = _stage(tar, path, entries, needs, roots, staging)
            installed, present = [], []
            for key, need in needs.items():
                if need.missing() is None:
                    present.append(need.label)
                    continue
                index, entry = entries[key]
                for item in entry["files"]:
                    dest = roots[key] / _safe(item["path"])
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(staged[(index, item["path"])], dest)
                installed.append(need.label)
        finally:
            for folder in staging.values():
                shutil.rmtree(folder, ignore_errors=True)
            for root in created:  # made for this unpack and still empty (it failed): leave no trace
                try:
                    root.rmdir()
                except OSError:
                    pass
    rows = [task_data(_task_spec(task, entry, catalog, path), plugins, data_home)
            for task, entry in manifest["tasks"].items()]
    still = [row for row in rows if not row.ready]
    if still:
        raise UserError(f"unpacked, but task '{still[0].task}' still lacks "
                        f"{'; '.join(still[0].missing.values()) or still[0].error}",
                        hint=f"Run: `{still[0].command}`" if still[0].command else None)
    total = sum(f["size"] for _, e in entries.values() for f in e["files"])
    return UnpackReport(tasks=list(manifest["tasks"]), installed=installed, present=present, bytes=total)


def _made(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    return root


def _local_needs(manifest: dict[str, Any], plugins: Plugins, catalog: Catalog, data_home: Path,
                 entries: dict[str, tuple[int, dict[str, Any]]], path: Path) -> dict[str, Need]:
    """The packed tasks' needs as this machine sees them, each matched to the pack's entry."""
    needs: dict[str, Need] = {}
    for task, entry in (manifest.get("tasks") or {}).items():
        for need in needs_of(_task_spec(task, entry, catalog, path), plugins, data_home):
            if need.key not in entries:
                raise UserError(f"task '{task}' needs {need.label}, which the pack does not hold", file=path,
                                hint=f"Make the pack again with the same plugins: `lceval data pack {task} -o FILE`.")
            needs[need.key] = need
    return needs


def _task_spec(task: str, entry: Any, catalog: Catalog, path: Path) -> TaskSpec:
    """The packed task's spec here: the catalog's, or the spec file it was packed from."""
    file = entry.get("spec") if isinstance(entry, dict) else None
    if file is None and task in catalog.specs:
        return catalog.spec(task)
    if file is not None and Path(file).is_file():
        return load_spec(Path(file))
    where = f"its spec file {file} is not here" if file else "this lceval does not know it"
    raise UserError(f"the pack holds task '{task}', and {where}", file=path,
                    hint="Copy the spec file to the same path (or install the plugin that provides the task), then "
                         "unpack again.")


def _stage(tar: tarfile.TarFile, path: Path, entries: dict[str, tuple[int, dict[str, Any]]], needs: dict[str, Need],
           roots: dict[str, Path], staging: dict[Path, Path]) -> dict[tuple[int, str], Path]:
    """Every member of the pack written to its root's scratch folder and checked against the
    manifest's sha256 and size; a missing, extra or different file is an error."""
    by_index = {i: (key, {f["path"]: f for f in e["files"]}) for key, (i, e) in entries.items()}
    staged: dict[tuple[int, str], Path] = {}
    try:
        for member in tar:
            if member.name == MANIFEST:  # read first, by _read_manifest
                continue
            parts = PurePosixPath(member.name).parts
            if len(parts) < 3 or parts[0] != "needs" or not parts[1].isdigit() or not member.isfile():
                raise _damaged(path, f"unexpected member {member.name!r}")
            index, rel = int(parts[1]), PurePosixPath(*parts[2:]).as_posix()
            key, files = by_index.get(index, ("", {}))
            expected = files.get(rel)
            if expected is None:
                raise _damaged(path, f"member {member.name!r} is not in its list of files")
            if key not in needs:  # a need of none of the tasks here (other plugins): not installed
                continue
            target = staging[roots[key]] / str(index) / _safe(rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            digest, size = hashlib.sha256(), 0
            reader = tar.extractfile(member)
            with open(target, "wb") as out:
                while reader is not None and (chunk := reader.read(CHUNK)):
                    digest.update(chunk)
                    size += len(chunk)
                    out.write(chunk)
            if size != expected["size"] or digest.hexdigest() != expected["sha256"]:
                raise _damaged(path, f"{rel} does not match its sha256")
            staged[(index, rel)] = target
    except (tarfile.TarError, EOFError, OSError) as exc:
        if isinstance(exc, OSError) and not isinstance(exc, EOFError) and exc.errno is not None:
            raise UserError(f"cannot write while unpacking: {exc.strerror or exc}", file=exc.filename) from None
        raise _damaged(path, f"{type(exc).__name__}: {exc}") from None
    lacking = [rel for key, (i, e) in entries.items() if key in needs for rel in (f["path"] for f in e["files"])
               if (i, rel) not in staged]
    if lacking:
        raise _damaged(path, f"{len(lacking)} file(s) missing, first {lacking[0]}")
    return staged

