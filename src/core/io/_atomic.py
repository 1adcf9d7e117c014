"""Results that appear whole or not at all: written under a hidden `.NAME.partial` name and
renamed into place only when everything is written, so an interrupted or failed write never
leaves half a directory (runs, rankings) or half a file (reports, bundles, rules, noisy
transcripts) where a good one was expected.

A process killed while writing cannot remove its `.partial` folder; the next write into the
same output folder does, once the folder is stale (its writer is gone). And because a
read-only or full output folder used to surface as a traceback after hours of generation,
`check_writable` probes the folder before any model is loaded.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from lceval.errors import UserError

OWNER_FILE = ".owner"
#: a `.partial` folder whose writer cannot be checked (another host) counts as stale after this
STALE_AFTER_S = 6 * 3600
#: bytes written (and synced) by the probe: a full file system fails here, not after the run
PROBE_BYTES = 64 * 1024


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_writable(output: Path, flag: str = "--output") -> None:
    """Refuse, before any work, an output folder that is a file, lies under a file, or where
    a file cannot be written (read-only or full file system, no permission). Nothing is left
    behind: the probe is an unnamed temporary file, and a missing folder is not created."""
    output = Path(output)
    if output.exists() and not output.is_dir():
        raise UserError("is a file, not a folder for results", file=output, field=flag,
                        hint="Pass a folder (it is created if missing).")
    base = _nearest_existing(output)
    if not base.is_dir():
        raise UserError(f"cannot be created: {base} is a file, not a folder", file=output, field=flag)
    try:
        with tempfile.TemporaryFile(dir=base) as probe:
            probe.write(b"\0" * PROBE_BYTES)
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as exc:
        raise UserError(f"cannot create a file in this folder: {exc.strerror or exc}", file=base, field=flag,
                        hint=_why_not_writable(exc.errno, flag)) from None


def _why_not_writable(code: int | None, flag: str) -> str:
    """The advice that fits the reason: space only when space ran out, permissions only when
    they were refused; a folder that takes no files at all (/proc, /sys) is said to be one."""
    if code in (errno.ENOSPC, errno.EDQUOT):
        return f"The file system is full: free some space, or pass {flag} a folder on another disk."
    if code == errno.EROFS:
        return f"The file system is read-only: pass {flag} a folder on a writable one."
    if code in (errno.EACCES, errno.EPERM):
        return f"You may not write there: pass {flag} a folder you own (e.g. runs/ here)."
    return f"This folder does not take files (a system folder such as /proc?): pass {flag} a folder of yours (e.g. runs/ here)."


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _stale(partial: Path) -> bool:
    """A `.partial` folder nobody is writing any more: its writer (pid on this host) is gone,
    or it has not changed for STALE_AFTER_S when the writer cannot be checked."""
    try:
        host, _, pid = (partial / OWNER_FILE).read_text(encoding="utf-8").strip().partition(":")
        if host == socket.gethostname() and pid.isdigit():
            return not _alive(int(pid))
    except (OSError, UnicodeDecodeError):
        pass
    try:
        return time.time() - partial.stat().st_mtime > STALE_AFTER_S
    except OSError:
        return False


def clean_stale_partials(output: Path) -> list[Path]:
    """Remove the `.NAME.partial` folders interrupted writers left in `output`; returns them."""
    removed = []
    try:
        candidates = [p for p in output.iterdir() if p.name.startswith(".") and p.name.endswith(".partial")]
    except OSError:
        return removed
    for partial in candidates:
        if partial.is_dir() and not partial.is_symlink() and _stale(partial):
            shutil.rmtree(partial, ignore_errors=True)
            removed.append(partial)
    return removed


@contextmanager
def replaced_directory(folder: Path) -> Iterator[Path]:
    """Yield a folder to write `folder`'s new content into; when the block ends, the new
    folder takes `folder`'s place (the old one is moved aside, then removed). A failure before
    the swap leaves `folder` as it was: a run is never left half rewritten."""
    folder = Path(folder)
    tmp = folder.parent / f".{folder.name}.partial"
    old = folder.parent / f".{folder.name}.replaced"
    try:
        for leftover in (tmp, old):
            if leftover.exists():
                shutil.rmtree(leftover)
        tmp.mkdir()
        (tmp / OWNER_FILE).write_text(f"{socket.gethostname()}:{os.getpid()}\n", encoding="utf-8")
    except OSError as exc:
        raise _write_error(folder.parent, exc) from None
    try:
        yield tmp
        (tmp / OWNER_FILE).unlink()
        os.replace(folder, old)
        os.replace(tmp, folder)
        shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        if old.exists() and not folder.exists():
            os.replace(old, folder)
        shutil.rmtree(tmp, ignore_errors=True)
        raise _write_error(folder.parent, exc) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@contextmanager
def atomic_directory(output: Path, name: str, replace: Path | None = None) -> Iterator[tuple[Path, Path]]:
    """Yield (folder to write into, final path). The final path is `output/name`, or
    `name-2`, `name-3` ... when taken: an earlier result is never written over, unless the
    caller names it as `replace` (a folder in `output`), which the new one then takes the place
    of, whole, once it is written (the old one is removed only after the swap). A write that
    fails on the file system (full, read-only) is a UserError naming the folder."""
    try:
        output.mkdir(parents=True, exist_ok=True)
        clean_stale_partials(output)
        final = output / name
        n = 1
        if replace is not None and replace.parent.resolve() == output.resolve() and replace.is_dir():
            final = output / replace.name
        else:
            replace = None
        while final.exists() and replace is None:
            n += 1
            final = output / f"{name}-{n}"
        tmp = output / f".{final.name}.partial"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        (tmp / OWNER_FILE).write_text(f"{socket.gethostname()}:{os.getpid()}\n", encoding="utf-8")
    except OSError as exc:
        raise _write_error(output, exc) from None
    try:
        yield tmp, final
        (tmp / OWNER_FILE).unlink()
        if replace is not None:  # the old folder set aside, the new one renamed in, the old one removed
            parked = output / f".{final.name}.replaced.partial"
            if parked.exists():
                shutil.rmtree(parked)
            os.replace(final, parked)
            os.replace(tmp, final)
            shutil.rmtree(parked, ignore_errors=True)
        else:
            os.replace(tmp, final)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _write_error(output, exc) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write_error(output: Path, exc: OSError) -> UserError:
    return UserError(f"cannot write the results: {exc.strerror or exc}", file=output, field="--output",
                     hint="Nothing finished is lost: answers and judgments are in the cache, so the same "
                     "command run again after fixing this (space, permissions, another --output) redoes no work.")


@contextmanager
def atomic_file(path: Path) -> Iterator[Path]:
    """Yield a hidden temporary path beside `path` to write the whole file into; it replaces
    `path` when the block ends and is removed when the block fails."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text_atomic(path: Path, text: str) -> Path:
    """`text` as UTF-8 bytes (no newline translation), whole or not at all."""
    with atomic_file(path) as tmp:
        tmp.write_bytes(text.encode("utf-8"))
    return Path(path)
