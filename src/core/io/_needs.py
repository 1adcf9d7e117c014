"""Needs that live in the data home (`lceval.needs.Need`): a registered dataset, a file or
folder a spec reads there, and authors' files taken from a git repository at a commit.

They know nothing of any benchmark: a task type declares them from its spec, the engine adds
the dataset a spec names, and `lceval data status / fetch / pack / unpack` use them alike.
Every copy into the data home goes through a temporary name in the same folder, renamed into
place once complete, so an interrupted fetch never leaves half a file where a task reads it.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
from pathlib import Path, PurePosixPath

from lceval.errors import UserError
from lceval.interfaces import Dataset
from lceval.io._datahome import CHECKSUMS, fetch, network_off, offline_refusal
from lceval.needs import Need

HEAD_TIMEOUT_S = 15
GIT_TIMEOUT_S = 900


def remote_size(url: str) -> int | None:
    """The Content-Length a HEAD request reports for `url` (redirects followed), or None;
    None without asking when the network is off."""
    if network_off():
        return None
    try:
        request = urllib.request.Request(url, method="HEAD")
        with urllib.request.urlopen(request, timeout=HEAD_TIMEOUT_S) as resp:
            length = resp.headers.get("Content-Length")
            return int(length) if length and length.isdigit() else None
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _tree(root: Path, top: Path) -> list[str]:
    """Every file under `top` (a file or a folder), relative to `root`, in a stable order."""
    if top.is_file():
        return [top.relative_to(root).as_posix()]
    return sorted(p.relative_to(root).as_posix() for p in top.rglob("*") if p.is_file())


def copy_into(src: Path, dest: Path) -> None:
    """Copy the file or folder `src` to `dest`, which appears only once it is complete."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{dest.name}.copy-", dir=dest.parent))
    try:
        staged = scratch / dest.name
        if src.is_dir():
            shutil.copytree(src, staged, symlinks=False)
        else:
            shutil.copyfile(src, staged)
        if dest.is_dir() and not dest.is_symlink():
            shutil.rmtree(dest)
        os.replace(staged, dest)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


class DatasetNeed(Need):
    """A dataset a plugin registered (`lceval data fetch NAME`), in the data home."""

    def __init__(self, dataset: Dataset, home: Path) -> None:
        self.dataset, self.home = dataset, Path(home)
        self.key = f"dataset:{dataset.name}"
        self.label = f"dataset {dataset.name}"
        folder_only = (dataset.collect is not None and dataset.download is None) or not (dataset.files or dataset.download)
        self.from_folder = (f"the files of {dataset.name} (`lceval data list` describes it; its page in the docs "
                            "says where to get them)") if folder_only else None
        self.command = f"lceval data fetch {dataset.name}" + (" --from FOLDER" if folder_only else "")

    def root(self) -> Path:
        return self.home

    def missing(self) -> str | None:
        folder = self.home / self.dataset.name
        if folder.is_dir() and any(p.is_file() for p in folder.rglob("*")):
            return None  # fetched, or laid out by hand (a run reads such a folder too)
        return f"dataset '{self.dataset.name}' is not in the data home {self.home}"

    def size(self) -> int | None:
        sizes = [remote_size(f.url) for f in self.dataset.files]
        return sum(s for s in sizes if s is not None) if sizes and None not in sizes else None

    def fetch(self, source: Path | None) -> None:
        if source is None and self.from_folder:
            raise UserError(f"dataset '{self.dataset.name}' installs only from a folder of its files",
                            hint=f"Run: `lceval data fetch {self.dataset.name} --from FOLDER`")
        fetch(self.dataset, str(source) if source is not None else None, self.home)

    def files(self) -> list[str]:
        found = _tree(self.home, self.home / self.dataset.name)
        marker = f"{self.dataset.name}/{CHECKSUMS}"
        return [f for f in found if f != marker] + ([marker] if marker in found else [])


class DataHomePath(Need):
    """A file (or folder; a glob matches at least one file) a spec reads in the data home,
    which only the user can provide: `lceval data fetch FAMILY --from FOLDER` copies it from
    FOLDER (at the same relative path, or without its first folder: FOLDER may be that folder)."""

    def __init__(self, rel: str, home: Path, advice: str) -> None:
        path = PurePosixPath(rel)
        if path.is_absolute() or ".." in path.parts or not path.parts:
            raise ValueError(f"not a path inside the data home: {rel!r}")
        self.rel, self.home = path.as_posix(), Path(home)
        self.key = f"data-home:{self.rel}"
        self.label = f"{self.rel} in the data home"
        self.from_folder = advice

    @property
    def first(self) -> str:
        """The data home's folder this lies in (a dataset's name, when one is registered)."""
        return PurePosixPath(self.rel).parts[0]

    def root(self) -> Path:
        return self.home

    def _found(self, base: Path) -> list[Path]:
        target = base / self.rel
        if glob.has_magic(self.rel):
            return sorted(Path(p) for p in glob.glob(str(target), recursive=True) if Path(p).is_file())
        return [target] if target.is_file() or (target.is_dir() and any(target.iterdir())) else []

    def missing(self) -> str | None:
        return None if self._found(self.home) else f"{self.rel} is not in the data home {self.home}"

    def fetch(self, source: Path | None) -> None:
        if source is None:
            raise UserError(f"{self.rel} is not in the data home and lceval cannot download it",
                            hint=f"Get {self.from_folder}, then pass its folder with --from FOLDER")
        given = Path(source).expanduser()
        parts = PurePosixPath(self.rel).parts
        tries = [(PurePosixPath(self.rel), PurePosixPath())]
        if len(parts) > 1:  # FOLDER may be the data home's folder itself (`--from ~/helmet` for helmet/...)
            tries.append((PurePosixPath(*parts[1:]), PurePosixPath(parts[0])))
        for rel, prefix in tries:
            found = DataHomePath(rel.as_posix(), given, "")._found(given)
            if found:
                for path in found:
                    copy_into(path, self.home / prefix / path.relative_to(given))
                return
        raise UserError(f"--from {given} holds neither {tries[0][0]} nor {tries[-1][0]}", field="--from",
                        hint=f"Pass the folder of {self.from_folder}")

    def files(self) -> list[str]:
        return sorted({f for path in self._found(self.home) for f in _tree(self.home, path)})


class GitFiles(Need):
    """Authors' files from a git repository at a pinned commit (GitHub, or any git URL or local
    repository), into the data home: `paths` maps a path of the repository (file or folder) to
    where it goes under the data home; `archive` instead writes the whole tree at the commit as
    one zip there (GitHub's "Download ZIP" of the commit: its members under `NAME-COMMIT/`).
    Fetching needs `git`; `--from` a checkout of the repository copies the paths from it (a
    folder without them is for another need: git fetches these)."""

    def __init__(self, url: str, commit: str, home: Path, paths: dict[str, str] | None = None,
                 archive: str | None = None, prefix: str = "") -> None:
        if not paths and not archive:
            raise ValueError("GitFiles needs paths or an archive")
        self.url, self.commit, self.home = url, commit, Path(home)
        self.paths, self.archive, self.prefix = dict(paths or {}), archive, prefix
        what = archive or ", ".join(sorted(self.paths))
        self.key = f"git:{url}@{commit}:{what}"
        self.label = f"{url} at {commit[:10]}: {what}"

    def root(self) -> Path:
        return self.home

    def _targets(self) -> list[Path]:
        return [self.home / self.archive] if self.archive else [self.home / d for d in self.paths.values()]

    def missing(self) -> str | None:
        absent = [t for t in self._targets() if not (t.is_file() or (t.is_dir() and any(t.iterdir())))]
        return None if not absent else f"{', '.join(str(t.relative_to(self.home)) for t in absent)} not in the data home"

    def _git(self, *args: str, cwd: Path) -> None:
        try:
            subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, timeout=GIT_TIMEOUT_S)
        except FileNotFoundError:
            raise UserError("fetching authors' files from their repository needs `git`, which is not installed",
                            hint=f"Install git, or clone {self.url} yourself and pass the checkout with --from") from None
        except subprocess.CalledProcessError as exc:
            lines = (exc.stderr or exc.stdout or "").strip().splitlines()
            raise UserError(f"git {args[0]} of {self.url} at {self.commit} failed: {lines[-1] if lines else exc}",
                            hint=f"Clone it yourself and pass the checkout with --from") from None
        except subprocess.TimeoutExpired:
            raise UserError(f"git {args[0]} of {self.url} took more than {GIT_TIMEOUT_S} s") from None

    def fetch(self, source: Path | None) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".git-fetch-", dir=self.home) as tmp:
            given = Path(source).expanduser() if source is not None else None
            if given is not None and not all((given / inside).exists() for inside in self.paths or [".git"]):
                source = None  # --from is for another need of the task: get these with git
            if source is None and network_off() and ("://" in self.url or self.url.startswith("git@")):
                raise UserError(offline_refusal(f"{self.url} at {self.commit[:10]}"),
                                hint="Clone it on a connected machine and pass the checkout with --from, or "
                                     "use `lceval data pack` there and `lceval data unpack` here")
            if source is None:  # only the blobs of the commit's paths are downloaded
                checkout = Path(tmp) / "repo"
                self._git("clone", "--quiet", "--no-checkout", "--filter=blob:none", self.url, str(checkout), cwd=Path(tmp))
                if not self.archive:
                    self._git("checkout", "--quiet", self.commit, "--", *self.paths, cwd=checkout)
            else:
                checkout = Path(source).expanduser()
            if self.archive:
                if not (checkout / ".git").exists():
                    raise UserError(f"{checkout} is not a git checkout of {self.url}", field="--from")
                staged = Path(tmp) / self.archive
                self._git("archive", "--format=zip", f"--prefix={self.prefix}", "-o", str(staged), self.commit,
                          cwd=checkout)
                copy_into(staged, self.home / self.archive)
                return
            for inside, dest in self.paths.items():
                src = checkout / inside
                if not src.exists():
                    raise UserError(f"{checkout} has no {inside} (a checkout of {self.url} at {self.commit} has)",
                                    field="--from" if source is not None else None)
                copy_into(src, self.home / dest)

    def files(self) -> list[str]:
        return [f for t in self._targets() if t.exists() for f in _tree(self.home, t)]
