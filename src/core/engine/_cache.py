"""The request cache: what makes an interrupted run resumable and a repeated run free.

sqlite in WAL mode, one row per finished request, committed as soon as the answer exists.
Keys are sha256 of the canonical request (model identity, messages, sampling parameters);
anything that looks like a secret is dropped from the identity before hashing.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from lceval.engine._dispatch import Dispatcher
from lceval.errors import UserError
from lceval.io import canonical_hash
from lceval.interfaces import ModelBackend
from lceval.types import Generation, GenerationRequest, Message

SECRET_MARKERS = ("key", "token", "secret", "password", "authorization")


def default_cache_path() -> Path:
    """`$LCEVAL_CACHE`, else `cache.sqlite` in the user cache dir (shared by every run, so a
    repeated request is never paid twice)."""
    env = os.environ.get("LCEVAL_CACHE")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("lceval")) / "cache.sqlite"


def strip_secrets(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: strip_secrets(v)
            for k, v in value.items()
            if not any(m in k.lower() for m in SECRET_MARKERS)
        }
    if isinstance(value, (list, tuple)):
        return [strip_secrets(v) for v in value]
    return value


def messages_payload(messages: Iterable[Message]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


def request_key(identity: dict[str, Any], request: GenerationRequest) -> str:
    params = request.params.as_dict()
    if params["temperature"] == 0:
        # greedy decoding ignores the seed: several --seed values share one answer
        params.pop("seed")
    return canonical_hash(
        {
            "kind": "generate",
            "model": strip_secrets(identity),
            "messages": messages_payload(request.messages),
            "params": params,
        }
    )


SQLITE_MAGIC = b"SQLite format 3\x00"
COLUMNS = ["key", "kind", "value", "created"]


def _fresh_cache_hint(path: Path) -> str:
    return (f"It was left untouched. Start a fresh cache with --cache NEW_FILE (or LCEVAL_CACHE=NEW_FILE), "
            f"or delete {path} if nothing in it is worth keeping (finished answers are lost with it).")


def _refuse(path: Path, message: str) -> UserError:
    return UserError(message + ("." if message.endswith(")") else ""), file=path, field="--cache",
                     hint=_fresh_cache_hint(path))


def _cannot_create(path: Path, why: str) -> UserError:
    return UserError(f"the cache cannot be created: {why}", file=path, field="--cache",
                     hint="Pass --cache NEW_FILE in a folder you can write (or set LCEVAL_CACHE).")


def _header_problem(path: Path, size: int) -> str | None:
    """What is wrong with the file's SQLite header, if anything: cheap checks (100 bytes read)
    that catch a file of other bytes and a truncated copy before sqlite sees them."""
    with open(path, "rb") as fh:
        head = fh.read(100)
    if not head.startswith(SQLITE_MAGIC):
        return f"not an SQLite database (its first bytes are {head[:16]!r})"
    if len(head) < 100:
        return f"a truncated SQLite database (only {len(head)} bytes)"
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    if head[24:28] == head[92:96] and pages and page_size * pages > size:
        # the in-header page count is valid when the two change counters agree (SQLite file format 1.3.8)
        return f"a truncated SQLite database: its header gives {page_size * pages:,} bytes, the file has {size:,}"
    return None


def check_cache_path(path: Path) -> None:
    """Refuse, before anything is created or written, a cache path that cannot be an lceval
    cache: a folder, a path under a file, a file that is not an SQLite database, a truncated
    one, or another program's database (writing our table into it would change it)."""
    try:
        info = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        info = None
    except OSError as exc:
        raise _refuse(path, f"cannot open the cache: {exc.strerror or exc}") from None
    if info is None:
        parent = path.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            raise _cannot_create(path, f"{parent} is a file, not a folder")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise _cannot_create(path, f"no write permission in {parent}")
        return
    if stat.S_ISDIR(info.st_mode):
        raise UserError("the cache path is a folder, not a database file", file=path, field="--cache",
                        hint=f"Pass --cache {path / 'cache.sqlite'} (or another file name).")
    if not stat.S_ISREG(info.st_mode):
        raise _refuse(path, "the cache path is not a regular file")
    if info.st_size == 0:
        return  # sqlite's own way of starting a database
    try:
        problem = _header_problem(path, info.st_size)
    except OSError as exc:
        raise _refuse(path, f"cannot read the cache: {exc.strerror or exc}") from None
    if problem:
        raise _refuse(path, problem)
    try:
        probe = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=60)
        try:
            tables = [r[0] for r in probe.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            columns = [r[1] for r in probe.execute("PRAGMA table_info(entries)")]
        finally:
            probe.close()
    except sqlite3.Error as exc:
        raise _refuse(path, f"an unreadable SQLite database ({exc})") from None
    if tables and columns != COLUMNS:
        raise _refuse(path, f"an SQLite database but not an lceval cache (its tables: {', '.join(tables)})")


@contextmanager
def cache_failures(path: Path) -> Iterator[None]:
    """An sqlite error past opening (a database damaged inside its pages, a disk error) as a
    UserError naming the cache, instead of a traceback from deep inside a run."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        raise UserError(f"the cache database failed: {exc}", file=path, field="--cache",
                        hint="Answers stored before the failure are kept. If the file is damaged, start a fresh "
                        "cache with --cache NEW_FILE (or LCEVAL_CACHE=NEW_FILE).") from None


class Cache:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        existed = self.path.exists()
        check_cache_path(self.path)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=60)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, kind TEXT NOT NULL,"
                " value TEXT NOT NULL, created REAL NOT NULL)"
            )
            self._db.commit()
        except (OSError, sqlite3.Error) as exc:
            why = getattr(exc, "strerror", None) or str(exc)
            raise (_refuse(self.path, f"cannot open the cache: {why}") if existed
                   else _cannot_create(self.path, why)) from None

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM entries WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, kind: str, value: dict[str, Any]) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO entries (key, kind, value, created) VALUES (?, ?, ?, ?)",
                (key, kind, json.dumps(value, ensure_ascii=False), time.time()),
            )
            self._db.commit()

    def close(self) -> None:
        with self._lock:
            self._db.close()


@dataclass
class UsageCounters:
    """What one model cost a run. Updated from several threads when the backend takes
    requests concurrently (`CachedModel` holds the lock)."""

    requests: int = 0
    cache_hits: int = 0
    generated: int = 0
    prompt_tokens: int = 0
    #: tokens the backend really prefilled; None as soon as one generated request's prefill is
    #: unknown (a server that reports no cached tokens): the sum of a subset is not the total
    prefilled_tokens: int | None = 0
    #: generated requests whose prefill the backend could not tell
    prefill_unknown: int = 0
    completion_tokens: int = 0
    #: wall-clock seconds with at least one request at the backend (concurrent requests
    #: counted once): what the generation took
    seconds: float = 0.0
    #: the sum of every request's own latency (exceeds `seconds` when requests overlap)
    request_seconds: float = 0.0
    #: the most requests the backend had at once
    peak_in_flight: int = 0
    #: requests the backend gave up on (finish_reason "error"): not cached, asked again next run
    failed: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def add(self, gen: Generation) -> None:
        self.request_seconds += gen.seconds
        if gen.finish_reason == "error":
            self.failed += 1
            return
        self.generated += 1
        self.prompt_tokens += gen.prompt_tokens
        self.completion_tokens += gen.completion_tokens
        if gen.prefilled_tokens is None:
            self.prefill_unknown += 1
            self.prefilled_tokens = None
        elif self.prefilled_tokens is not None:
            self.prefilled_tokens += gen.prefilled_tokens


class CachedModel:
    """A backend seen through the cache. The runner and model-calling judges both use it,
    so a judge's calls are cached and counted exactly like the system's.

    Thread-safe: the scheduler calls `call` from as many threads as the backend takes
    requests at once; every answer is stored the moment it exists, so an interrupt loses
    only the requests still in flight."""

    def __init__(self, backend: ModelBackend, cache: Cache, spec: str) -> None:
        self.backend = backend
        self.cache = cache
        self.spec = spec
        self.usage = UsageCounters()
        self._identity = strip_secrets(backend.identity())
        self._lock = threading.Lock()
        self._busy = 0
        self._busy_since = 0.0

    @property
    def identity(self) -> dict[str, Any]:
        return self._identity

    @property
    def slots(self) -> int:
        """Requests the backend takes at once (its declared `max_in_flight`)."""
        return max(1, int(getattr(self.backend, "max_in_flight", 1) or 1))

    def key(self, request: GenerationRequest) -> str:
        return request_key(self._identity, request)

    def lookup(self, request: GenerationRequest) -> Generation | None:
        """The cached answer to `request`, or None (counted either way)."""
        hit = self.cache.get(self.key(request))
        with self._lock:
            self.usage.requests += 1
            if hit is not None:
                self.usage.cache_hits += 1
        if hit is None:
            return None
        return Generation(**{**hit, "request_id": request.request_id, "cached": True})

    def call(self, requests: list[GenerationRequest]) -> list[Generation]:
        """Ask the backend (no cache lookup) and store each answer at once. A request the
        backend gave up on (finish_reason "error", an API past its retries) is no answer:
        never stored, so the same command run again asks it again."""
        with self._lock:
            if self._busy == 0:
                self._busy_since = time.perf_counter()
            self._busy += len(requests)
            self.usage.peak_in_flight = max(self.usage.peak_in_flight, self._busy)
        try:
            outs = self.backend.generate(requests)
        finally:
            with self._lock:
                self._busy -= len(requests)
                if self._busy == 0:
                    self.usage.seconds += time.perf_counter() - self._busy_since
        if len(outs) != len(requests):
            raise RuntimeError(f"backend returned {len(outs)} answers for {len(requests)} requests")
        for req, gen in zip(requests, outs):
            if gen.finish_reason != "error":
                record = asdict(gen)
                record.pop("cached", None)
                self.cache.put(self.key(req), "generate", record)
            with self._lock:
                self.usage.add(gen)
        return outs

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        """Answers in the order asked: cached ones at once, the rest from the backend with as
        many in flight as it takes (`max_in_flight`), or in chunks of `batch_size`."""
        results: list[Generation | None] = [self.lookup(req) for req in requests]
        misses = [i for i, r in enumerate(results) if r is None]
        slots = self.slots
        size = 1 if slots > 1 else max(1, int(self.backend.batch_size))
        chunks = [misses[start:start + size] for start in range(0, len(misses), size)]
        pool = Dispatcher(self.call, slots)
        for chunk in chunks:
            if pool.free() == 0:
                done, outs = pool.next()
                for i, gen in zip(done, outs):
                    results[i] = gen
            pool.submit(chunk, [requests[i] for i in chunk])
        while pool.in_flight:
            done, outs = pool.next()
            for i, gen in zip(done, outs):
                results[i] = gen
        return [r for r in results if r is not None]
