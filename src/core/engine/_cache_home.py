"""Where the request cache is when no `--cache` says: `$LCEVAL_CACHE`, else beside the data
home when only `$LCEVAL_DATA` moved it (`$LCEVAL_DATA/cache.sqlite`: a user who puts the data
on a big disk, or a cluster's shared one, finds the answers there too, not under `~/.cache`),
else `cache.sqlite` in the user cache dir.

A cache at the old place (the user cache dir) when `$LCEVAL_DATA` points elsewhere is moved to
the new one the first time a command opens it: copied with SQLite's backup (the answers still
in its write-ahead log included), checked to hold as many answers, renamed into place, and only
then removed from the old place. When both places hold a cache, neither is touched: the
command says so and how to join them (`lceval cache import OLD`)."""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

logger = logging.getLogger("lceval")

CACHE_FILE = "cache.sqlite"


def user_cache_path() -> Path:
    """The cache's place when neither `$LCEVAL_CACHE` nor `$LCEVAL_DATA` is set."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("lceval")) / CACHE_FILE


def default_cache_path(migrate: bool = False) -> Path:
    """`$LCEVAL_CACHE`, else `$LCEVAL_DATA/cache.sqlite`, else `cache.sqlite` in the user cache
    dir (shared by every run, so a repeated request is never paid twice). `migrate`: a command
    about to open it moves a cache left at the user cache dir there first (see the module)."""
    env = os.environ.get("LCEVAL_CACHE")
    if env:
        return Path(env)
    data = os.environ.get("LCEVAL_DATA")
    if not data:
        return user_cache_path()
    path = Path(data).expanduser() / CACHE_FILE
    if migrate:
        move_cache(user_cache_path(), path)
    return path


def _answers(path: Path) -> int:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60)
    try:
        return int(db.execute("SELECT COUNT(*) FROM entries").fetchone()[0])
    except sqlite3.Error:
        return -1  # not a cache of ours (or an empty one): counted the same on both sides
    finally:
        db.close()


def move_cache(old: Path, new: Path) -> str | None:
    """Move the cache at `old` to `new` (which must not exist yet) without losing an answer;
    what was done, or why not, also logged. None when there is nothing to move."""
    if not old.is_file() or old.resolve() == new.resolve():
        return None
    if new.exists():
        said = (f"a request cache is at {new} (used) and another at {old} (the old default place, left as it "
                f"is): `lceval cache import {old}` adds its answers to the one in use")
        logger.warning(said)
        return said
    new.parent.mkdir(parents=True, exist_ok=True)
    scratch = new.with_name(f".{new.name}.moving-{os.getpid()}")
    try:
        source, target = sqlite3.connect(str(old), timeout=60), sqlite3.connect(str(scratch))
        try:
            source.backup(target)  # a consistent copy, the write-ahead log's answers included
        finally:
            target.close()
            source.close()
        if _answers(scratch) != _answers(old):
            raise sqlite3.DatabaseError("the copy does not hold as many answers as the original")
        os.replace(scratch, new)
    except (OSError, sqlite3.Error) as exc:
        scratch.unlink(missing_ok=True)
        said = f"could not move the request cache from {old} to {new} ({exc}); it was left at {old}"
        logger.warning(said)
        return said
    for leftover in (old, old.with_name(old.name + "-wal"), old.with_name(old.name + "-shm")):
        leftover.unlink(missing_ok=True)
    said = f"moved the request cache from {old} to {new}, beside the data home $LCEVAL_DATA"
    logger.warning(said)
    return said
