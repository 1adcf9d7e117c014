"""The data home and `lceval data fetch`: verified, atomic, idempotent dataset installs.

Archives are checked against the sha256 their dataset declares before anything is unpacked
(a corrupt or partial download is an error, not a half-installed dataset). The dataset's
own `install` writes into a scratch folder inside the data home (same filesystem, so the
final rename is atomic), which replaces the old copy only when everything succeeded. Any
failure leaves the data home as it was. The engine knows no dataset by name: datasets come
from plugins through the `register_datasets` hook.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
import zlib
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Callable, Iterator

from lceval.errors import UserError
from lceval.io._digest import sha256_file
from lceval.interfaces import Dataset, DatasetFile

CHECKSUMS = "CHECKSUMS.json"
DOWNLOAD_TIMEOUT_S = 120
_SHA256 = re.compile(r"[0-9a-f]{64}")


#: The data home a command chose (`--data-home`), for everything it runs, plugins included:
#: a context variable, not the environment, so nothing leaks past the command or into
#: another thread's command.
_CHOSEN: ContextVar[Path | None] = ContextVar("lceval_data_home", default=None)


def data_home() -> Path:
    """The data home: the command's `--data-home`, else `$LCEVAL_DATA`, else the user cache
    dir. Data never lives in the repository."""
    chosen = _CHOSEN.get()
    if chosen is not None:
        return chosen
    env = os.environ.get("LCEVAL_DATA")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("lceval")) / "data"


#: set to 1 (true, yes, on), the user says there is no network: every Hugging Face library honours
#: them, and lceval then opens no connection at all (no first-use fetch, no download, no size asked)
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")


def network_off() -> bool:
    """HF_HUB_OFFLINE or HF_DATASETS_OFFLINE is set (read now, so a command's environment
    decides): nothing may be downloaded, and asking a server anything would hang on a
    firewall that drops packets."""
    return any(os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on") for name in OFFLINE_VARIABLES)


def offline_refusal(what: str) -> str:
    return f"cannot download {what}: the network is off here ({' / '.join(OFFLINE_VARIABLES)} is set)"


@contextmanager
def using_data_home(home: Path | None) -> Iterator[None]:
    """Make `--data-home` the data home of everything in the command, plugins included (a
    backend such as `replay:` looks files up there), until the block ends."""
    if home is None:
        yield
        return
    token = _CHOSEN.set(Path(home))
    try:
        yield
    finally:
        _CHOSEN.reset(token)


def dataset_path(name: str, home: Path | None = None) -> Path:
    """The installed copy of `name`; a missing one is a user error that says how to fetch it.

    Only a folder with its CHECKSUMS.json counts: that file is written last, inside the
    scratch folder, so its presence means a complete install was swapped in.
    """
    root = Path(home) if home is not None else data_home()
    path = root / name
    if not (path / CHECKSUMS).is_file():
        raise UserError(f"dataset '{name}' is not in the data home {root}",
                        hint=f"Run: lceval data fetch {name} [--from DIR]")
    return path


@dataclass
class FetchReport:
    """What `fetch` did, for the CLI to print."""

    name: str
    path: Path
    status: str  # "installed" | "already-present"
    files: dict[str, str] = field(default_factory=dict)  # archive name -> sha256


def _check_definition(dataset: Dataset) -> None:
    """A plugin's dataset definition is input too: refuse names that would escape the
    --from folder and hashes that could never match, naming the offending field."""
    where = f"dataset '{dataset.name}'"
    if not dataset.name or PurePosixPath(dataset.name).name != dataset.name or dataset.name.startswith("."):
        raise UserError(f"invalid dataset name {dataset.name!r} (must be a plain folder name)",
                        field="name")
    if not dataset.files and dataset.collect is None:
        raise UserError(f"{where} declares no archives", field="files")
    for f in dataset.files:
        if not f.name or PurePosixPath(f.name).name != f.name or f.name in (".", ".."):
            raise UserError(f"{where}: archive name {f.name!r} must be a plain file name",
                            field="files.name")
        if not _SHA256.fullmatch(f.sha256 or ""):
            raise UserError(f"{where}: sha256 {f.sha256!r} of '{f.name}' is not 64 lowercase hex "
                            "digits", field="files.sha256")


def _is_url(source: str) -> bool:
    return source.startswith(("http://", "https://", "file://"))


def read_record(target: Path) -> dict | None:
    """The CHECKSUMS.json an install wrote (archives it came from, sha256 of every file), or None."""
    try:
        record = json.loads((target / CHECKSUMS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _files_intact(target: Path, record: dict) -> bool:
    """Every installed file still has the sha256 recorded at install time."""
    files = record.get("files")
    if not isinstance(files, dict) or not files:
        return False
    for rel, digest in files.items():
        path = target / rel
        if ".." in PurePosixPath(rel).parts or not path.is_file() or sha256_file(path) != digest:
            return False
    return True


def offline_recipe(dataset: Dataset, name_them: bool = True) -> str:
    """What to do without network, as commands a user can paste: every archive of `dataset`
    by its URL (one `curl` line to run where there is network), then the `--from` fetch of the
    folder they went into. A dataset without pinned archives says to pass its files' folder."""
    if not dataset.files:
        return f"Put its files in a folder and run: `lceval data fetch {dataset.name} --from FOLDER`"
    folder = f"{dataset.name}-archives"
    urls = " ".join(f.url for f in dataset.files)
    n = len(dataset.files)
    names = (f"Its {f'{n} archives' if n > 1 else 'archive'}: {', '.join(f.name for f in dataset.files)}. "
             if name_them else "")
    return (f"{names}On a machine with network: `mkdir {folder} && cd {folder} && curl -fL --remote-name-all "
            f"{urls}`; copy the folder {folder} here, then: `lceval data fetch {dataset.name} --from {folder}`")


def _download(url: str, dest: Path, dataset: Dataset) -> None:
    """Download `url` to `dest`; any failure is a user error that says how to fetch offline.
    With the network off, nothing is asked of the server."""
    if network_off():
        raise UserError(offline_refusal(url), hint=offline_recipe(dataset))
    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as resp, open(dest, "wb") as out:
            shutil.copyfileobj(resp, out)
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        raise UserError(f"cannot download {url}: {getattr(exc, 'reason', exc)}",
                        hint=offline_recipe(dataset)) from None


def _local_archives(dataset: Dataset, source: str) -> dict[str, Path]:
    """The archives inside a --from folder (or the --from file of a one-archive dataset); every
    one that is missing is named at once, not the first alone."""
    given = Path(source).expanduser()
    if given.is_file():
        if len(dataset.files) == 1:
            return {dataset.files[0].name: given}
        names = ", ".join(f.name for f in dataset.files)
        raise UserError(f"dataset '{dataset.name}' needs {len(dataset.files)} archives ({names}); "
                        "pass the folder holding them", file=given, field="--from")
    if not given.is_dir():
        raise UserError("--from must be a folder holding the published archives, an archive, or a "
                        "URL prefix; this path does not exist", file=given, field="--from",
                        hint=offline_recipe(dataset))
    missing = [f.name for f in dataset.files if not (given / f.name).is_file()]
    if missing:
        raise UserError(f"{len(missing)} of the {len(dataset.files)} archives of '{dataset.name}' "
                        f"{'is' if len(missing) == 1 else 'are'} missing from the --from folder: "
                        f"{', '.join(missing)}", file=given, field="--from",
                        hint=offline_recipe(dataset, name_them=False))
    return {f.name: given / f.name for f in dataset.files}


def _verify(file: DatasetFile, path: Path, actual: str | None = None) -> None:
    actual = actual or sha256_file(path)
    if actual != file.sha256:
        raise UserError(f"checksum mismatch for '{file.name}': expected {file.sha256}, got {actual} "
                        "(a corrupt, partial or different archive); the data home was left unchanged",
                        file=path)


def _swap_in(staging: Path, target: Path, parking: Path) -> None:
    """Replace `target` by `staging`: old copy renamed away, new one renamed in, old deleted
    by the caller. If the second rename fails the old copy is put back."""
    had_old = target.exists()
    if had_old:
        os.replace(target, parking)
    try:
        os.replace(staging, target)
    except OSError:
        if had_old:
            os.replace(parking, target)
        raise


def fetch(dataset: Dataset, source: str | None = None, home: Path | None = None,
          progress: bool = False) -> FetchReport:
    """Install `dataset` into the data home from `source`.

    `source`: None downloads each archive's official URL; a local folder holds the archives
    by name; an http(s)/file URL is a prefix the archive names are appended to. A complete,
    unmodified install of the same archives is left alone ("already-present").
    """
    _check_definition(dataset)
    root = Path(home) if home is not None else data_home()
    target = root / dataset.name
    expected = {f.name: f.sha256 for f in dataset.files}
    local = source is not None and not _is_url(source)
    say = (lambda msg: print(msg, file=sys.stderr, flush=True)) if progress else (lambda msg: None)

    # A local source is hashed up front: the no-op check compares what the user points at
    # with what was installed, and the same hashes then serve the verification.
    archives: dict[str, Path] = {}
    hashes: dict[str, str] = {}
    record = read_record(target)
    if dataset.collect is not None and not local and dataset.download is not None:
        if record is not None and _files_intact(target, record):
            return FetchReport(dataset.name, target, "already-present", record.get("archives") or {})
        return _fetch_downloaded(dataset, source, root, target, record, say)
    if dataset.collect is not None:  # no pinned checksums: files checked by content, then hashed
        if not local:
            raise UserError(f"dataset '{dataset.name}' has no published checksums to verify a download "
                            "against", field="--from", hint=f"Run: lceval data fetch {dataset.name} --from FOLDER")
        assert source is not None
        archives = dict(dataset.collect(Path(source).expanduser()))
        hashes = {name: sha256_file(path) for name, path in archives.items()}
        expected = dict(hashes)
    elif local:
        assert source is not None
        archives = _local_archives(dataset, source)
        hashes = {name: sha256_file(path) for name, path in archives.items()}
    if (record is not None and record.get("archives") == expected
            and (not local or hashes == expected) and _files_intact(target, record)):
        return FetchReport(dataset.name, target, "already-present", expected)
    for file in dataset.files:
        if local:
            _verify(file, archives[file.name], hashes[file.name])

    created_root = not root.exists()
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{dataset.name}.fetch-", dir=root))
    try:
        for file in dataset.files:
            if local:
                continue
            url = f"{source.rstrip('/')}/{file.name}" if source else file.url
            say(f"  downloading {url}")
            path = scratch / "download" / file.name
            path.parent.mkdir(exist_ok=True)
            _download(url, path, dataset)
            _verify(file, path)
            archives[file.name] = path
        used = str(Path(source).expanduser().resolve()) if local else (source or "official URLs")
        _install(dataset, archives, expected, used, scratch, target, say)
    finally:
        _clean_up(scratch, root, target, created_root)
    return FetchReport(dataset.name, target, "installed", expected)


def _install(dataset: Dataset, archives: dict[str, Path], expected: dict[str, str], used: str, scratch: Path,
             target: Path, say: Callable[[str], None]) -> None:
    """`dataset.install` into a staging folder, its CHECKSUMS.json written last, swapped in."""
    staging = scratch / "install"
    staging.mkdir()
    say(f"  unpacking {dataset.name}")
    dataset.install(dict(archives), staging)
    files = {p.relative_to(staging).as_posix(): sha256_file(p) for p in sorted(staging.rglob("*")) if p.is_file()}
    if not files:
        raise UserError(f"dataset '{dataset.name}': install produced no files", field="install")
    record = {"dataset": dataset.name, "source": used, "archives": expected, "files": files}
    (staging / CHECKSUMS).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    _swap_in(staging, target, scratch / "previous")


def _clean_up(scratch: Path, root: Path, target: Path, created_root: bool) -> None:
    shutil.rmtree(scratch, ignore_errors=True)
    if created_root and not target.exists():
        try:  # we created it for this fetch and it is empty again: leave no trace
            root.rmdir()
        except OSError:
            pass


def _fetch_downloaded(dataset: Dataset, source: str | None, root: Path, target: Path, record: dict | None,
                      say: Callable[[str], None]) -> FetchReport:
    """A dataset whose sources publish no checksums lceval could pin (`Dataset.download`): what
    the download got is hashed and recorded; a later fetch over a damaged install that gets
    other content for a file than the install recorded is refused, naming the files, rather
    than taken silently (the source changed them since)."""
    assert dataset.download is not None
    created_root = not root.exists()
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{dataset.name}.fetch-", dir=root))
    try:
        folder = scratch / "download"
        folder.mkdir()
        archives = dict(dataset.download(folder, source, say))
        expected = {name: sha256_file(path) for name, path in archives.items()}
        before = (record or {}).get("archives") or {}
        changed = sorted(n for n, digest in expected.items() if n in before and before[n] != digest)
        if changed:
            raise UserError(f"{len(changed)} file(s) of '{dataset.name}' now differ from those its install "
                            f"recorded: {', '.join(changed[:8])}{' ...' if len(changed) > 8 else ''} (their source "
                            "changed them since); the data home was left unchanged",
                            hint=f"To take the new content, remove {target} and fetch again; to keep the old, "
                                 "unpack a `lceval data pack` file made from it.")
        _install(dataset, archives, expected, source or "official URLs", scratch, target, say)
    finally:
        _clean_up(scratch, root, target, created_root)
    return FetchReport(dataset.name, target, "installed", expected)


# -- helpers for Dataset.install functions ---------------------------------------------------

def is_junk(name: str) -> bool:
    """macOS leftovers (`__MACOSX/`, AppleDouble `._*`, `.DS_Store`) that published archives
    often carry; they are never part of a dataset."""
    parts = PurePosixPath(name).parts
    return any(p == "__MACOSX" or p.startswith("._") or p == ".DS_Store" for p in parts)


def safe_relpath(name: str, archive: Path) -> PurePosixPath:
    """`name` as a relative path that stays inside the destination (no absolute paths, no
    `..`, no drive letters): a hostile archive must not write elsewhere."""
    rel = PurePosixPath(name.replace("\\", "/"))
    if rel.is_absolute() or ".." in rel.parts or (rel.parts and ":" in rel.parts[0]):
        raise UserError(f"archive member '{name}' would be written outside the dataset folder",
                        file=archive)
    return rel


def extract_zip(archive: Path, dest: Path, password: str | None,
                select: Callable[[PurePosixPath], PurePosixPath | None]) -> list[Path]:
    """Write each member that `select` maps to a relative path under `dest`.

    Directories and macOS junk are skipped; `password` opens legacy ZipCrypto members (as
    the ELITR-Bench archives use). A wrong password or damaged member is a UserError naming
    the archive, not a traceback.
    """
    written = []
    pwd = password.encode() if password else None
    try:
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                if info.is_dir() or is_junk(info.filename):
                    continue
                rel = select(safe_relpath(info.filename, archive))
                if rel is None:
                    continue
                out = dest / safe_relpath(str(rel), archive)
                out.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info, pwd=pwd) as src, open(out, "wb") as dst:
                    shutil.copyfileobj(src, dst)
                written.append(out)
    except (zipfile.BadZipFile, RuntimeError, NotImplementedError, zlib.error, EOFError) as exc:
        raise UserError(f"cannot unpack: {exc}", file=archive) from None
    return written


def read_zip_member(archive: Path, suffix: str, password: str | None) -> bytes:
    """The bytes of the one non-junk member whose name ends with `suffix` (e.g. the .tar
    inside a `.tar.zip`); zero or several matches is an error naming the archive."""
    try:
        with zipfile.ZipFile(archive) as zf:
            found = [i for i in zf.infolist()
                     if i.filename.endswith(suffix) and not i.is_dir() and not is_junk(i.filename)]
            if len(found) != 1:
                raise UserError(f"expected exactly one '*{suffix}' member, found {len(found)}",
                                file=archive)
            return zf.read(found[0], pwd=password.encode() if password else None)
    except (zipfile.BadZipFile, RuntimeError, NotImplementedError, zlib.error, EOFError) as exc:
        raise UserError(f"cannot unpack: {exc}", file=archive) from None
