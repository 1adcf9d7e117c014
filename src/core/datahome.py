"""The data home and `lceval data fetch`: verified, atomic, idempotent dataset installs.

Archives are checked against the sha256 their dataset declares before anything is unpacked
(a corrupt or partial download is an error, not a half-installed dataset). The dataset's
own `install` writes into a scratch folder inside the data home, which replaces the old
copy in one rename only when everything succeeded.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Callable

from .errors import UserError
from .interfaces import Dataset, DatasetFile

CHECKSUMS = "CHECKSUMS.json"
DOWNLOAD_TIMEOUT_S = 120


def data_home() -> Path:
    env = os.environ.get("LCEVAL_DATA")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("lceval")) / "data"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def dataset_path(name: str, home: Path | None = None) -> Path:
    path = (home or data_home()) / name
    if not (path / CHECKSUMS).is_file():
        raise UserError(f"dataset '{name}' is not in the data home {path.parent}",
                        hint=f"Run: lceval data fetch {name} [--from DIR]")
    return path


@dataclass
class FetchReport:
    name: str
    path: Path
    status: str  # "installed" | "already-present"
    files: dict[str, str] = field(default_factory=dict)  # archive name -> sha256


def _installed_ok(target: Path, dataset: Dataset) -> bool:
    try:
        record = json.loads((target / CHECKSUMS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if record.get("archives") != {f.name: f.sha256 for f in dataset.files}:
        return False
    for rel, digest in record.get("files", {}).items():
        path = target / rel
        if not path.is_file() or sha256_file(path) != digest:
            return False
    return True


def _download(url: str, dest: Path, from_prefix: bool) -> None:
    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as resp, open(dest, "wb") as out:
            shutil.copyfileobj(resp, out)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise UserError(f"cannot download {url}: {getattr(exc, 'reason', exc)}",
                        field="--from" if from_prefix else None,
                        hint="Without network, copy the published archives into a folder and pass "
                        "--from FOLDER.") from None


def _obtain(file: DatasetFile, source: str | None, scratch: Path) -> Path:
    """The archive on local disk: from a --from folder, or downloaded into `scratch`."""
    if source and not source.startswith(("http://", "https://")):
        folder = Path(source).expanduser()
        if not folder.is_dir():
            raise UserError("--from must be a folder holding the published archives or a URL prefix",
                            file=folder, field="--from")
        path = folder / file.name
        if not path.is_file():
            raise UserError(f"archive '{file.name}' is missing from the --from folder", file=folder,
                            field="--from")
        return path
    url = f"{source.rstrip('/')}/{file.name}" if source else file.url
    dest = scratch / file.name
    _download(url, dest, from_prefix=bool(source))
    return dest


def _verify(file: DatasetFile, path: Path) -> None:
    actual = sha256_file(path)
    if actual != file.sha256:
        raise UserError(f"checksum mismatch for '{file.name}': expected {file.sha256}, got {actual} "
                        "(a corrupt, partial or different archive); the data home was left unchanged",
                        file=path)


def fetch(dataset: Dataset, source: str | None = None, home: Path | None = None,
          progress: bool = False) -> FetchReport:
    home = Path(home) if home else data_home()
    target = home / dataset.name
    expected = {f.name: f.sha256 for f in dataset.files}
    if _installed_ok(target, dataset):
        return FetchReport(dataset.name, target, "already-present", expected)
    home.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{dataset.name}.fetch-", dir=home))
    try:
        archives: dict[str, Path] = {}
        for file in dataset.files:
            if progress:
                print(f"  {file.name} ...", flush=True)
            path = _obtain(file, source, scratch)
            _verify(file, path)
            archives[file.name] = path
        staging = scratch / "install"
        staging.mkdir()
        dataset.install(archives, staging)
        files = {str(p.relative_to(staging)): sha256_file(p) for p in sorted(staging.rglob("*")) if p.is_file()}
        record = {"dataset": dataset.name, "source": source or "official URLs", "archives": expected,
                  "files": files}
        (staging / CHECKSUMS).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        old = scratch / "previous"
        if target.exists():
            os.replace(target, old)
        os.replace(staging, target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return FetchReport(dataset.name, target, "installed", expected)


# -- helpers for Dataset.install functions ---------------------------------------------------

def is_junk(name: str) -> bool:
    """macOS leftovers that published archives often carry."""
    parts = PurePosixPath(name).parts
    return any(p == "__MACOSX" or p.startswith("._") or p == ".DS_Store" for p in parts)


def safe_relpath(name: str, archive: Path) -> PurePosixPath:
    rel = PurePosixPath(name)
    if rel.is_absolute() or ".." in rel.parts:
        raise UserError(f"archive member '{name}' would be written outside the dataset folder",
                        file=archive)
    return rel


def extract_zip(archive: Path, dest: Path, password: str | None,
                select: Callable[[PurePosixPath], PurePosixPath | None]) -> list[Path]:
    """Write each member that `select` maps to a relative path under `dest`."""
    written = []
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
                with zf.open(info, pwd=password.encode() if password else None) as src, open(out, "wb") as dst:
                    shutil.copyfileobj(src, dst)
                written.append(out)
    except (zipfile.BadZipFile, RuntimeError) as exc:
        raise UserError(f"cannot unpack: {exc}", file=archive) from None
    return written
