"""The request cache: what makes an interrupted run resumable and a repeated run free.

sqlite in WAL mode, one row per finished request, committed as soon as the answer exists.
Keys are sha256 of the canonical request (see `_cached_model.request_key`).

Several processes may share one cache file (two runs started together, shards on one
machine, a judge and a run): creating or upgrading the database waits for the others instead
of failing, and a request is *claimed* before it is sent (a lease row, renewed while the
request runs), so two runs of the same work never pay for the same request twice: the second
waits for the first's answer. A lease whose holder died (its process is gone, or it stopped
renewing) is taken over, so nothing waits for ever.

A provider's batch (`--batch`) is recorded here too, with the keys and requests it holds,
*before* it is sent, and its handle (the provider's batch id) as soon as the provider gives it:
a rerun after a crash finds the batches still open for its model and adopts them (their answers
are stored as they arrive) instead of sending, and paying for, the same requests again.
SQLite's WAL wants every user of a database on one host, so each machine of a cluster keeps
its own cache; answers travel between them as files: `Cache.export` writes them as JSON Lines
and `Cache.import_from` adds another cache's answers (such a file, or another cache's database)
without changing any answer already here (`lceval cache export/import`, and each shard that
`lceval launch` runs).
"""

from __future__ import annotations

import gzip
import json
import os
import socket
import sqlite3
import stat
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, Literal

from lceval.engine._cache_home import default_cache_path, user_cache_path
from lceval.errors import UserError

#: how long a claim holds without being renewed; its holder renews it every RENEW_S
LEASE_S = 30.0
RENEW_S = 5.0
#: how often a process waiting for another's answer looks again
WAIT_POLL_S = 0.2
#: how long opening waits for other processes creating or upgrading the same database
OPEN_WAIT_S = 120.0


SQLITE_MAGIC = b"SQLite format 3\x00"
COLUMNS = ["key", "kind", "value", "created"]


def _locked(exc: sqlite3.Error) -> bool:
    """SQLITE_BUSY / SQLITE_LOCKED: another process holds the lock for now."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return code & 0xFF in (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED (extended codes keep them in the low byte)
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc))


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
        if _locked(exc):  # another process is creating or writing it: a live database
            return
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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


Claim = Literal["claimed", "answered", "held"]


@dataclass
class RecordedBatch:
    """A provider batch as the cache recorded it: its own id, the protocol, "sending" (recorded,
    the provider's answer not yet known) or "running" (its handle known), and its requests by key."""

    id: str
    api: str
    state: str
    handle: dict[str, Any] | None
    created: float
    requests: dict[str, dict[str, Any]]


class Cache:
    """The request cache: answers by request key in SQLite (WAL), shared by concurrent runs
    through leases, so an interrupted run resumes and two runs never pay twice."""
    #: where a command's cache is when neither --cache nor $LCEVAL_CACHE says
    default_path = staticmethod(default_cache_path)
    #: where it was by default before `$LCEVAL_DATA` moved it (a cache there is moved on first open)
    user_path = staticmethod(user_cache_path)

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        existed = self.path.exists()
        check_cache_path(self.path)
        self._lock = threading.Lock()
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self._host, self._pid = socket.gethostname(), os.getpid()
        self._held: set[str] = set()
        self._renewer: threading.Thread | None = None
        self._closed = threading.Event()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=60)
            self._initialise()
        except (OSError, sqlite3.Error) as exc:
            why = getattr(exc, "strerror", None) or str(exc)
            raise (_refuse(self.path, f"cannot open the cache: {why}") if existed
                   else _cannot_create(self.path, why)) from None

    def _initialise(self) -> None:
        """WAL mode and the tables, waiting while another process does the same: switching to
        WAL and creating tables need a lock sqlite's busy handler does not always wait for
        (it reports "database is locked" at once to avoid a deadlock), so we wait ourselves."""
        deadline = time.monotonic() + OPEN_WAIT_S
        delay = 0.01
        while True:
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.execute("BEGIN IMMEDIATE")
                self._db.execute("CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, kind TEXT NOT NULL,"
                                 " value TEXT NOT NULL, created REAL NOT NULL)")
                self._db.execute("CREATE TABLE IF NOT EXISTS leases (key TEXT PRIMARY KEY, holder TEXT NOT NULL,"
                                 " host TEXT NOT NULL, pid INTEGER NOT NULL, expires REAL NOT NULL)")
                self._db.execute("CREATE TABLE IF NOT EXISTS batches (id TEXT PRIMARY KEY, model TEXT NOT NULL,"
                                 " api TEXT NOT NULL, state TEXT NOT NULL, handle TEXT, created REAL NOT NULL,"
                                 " updated REAL NOT NULL)")
                self._db.execute("CREATE TABLE IF NOT EXISTS batch_items (batch TEXT NOT NULL, key TEXT NOT NULL,"
                                 " request TEXT NOT NULL, PRIMARY KEY (batch, key))")
                self._db.commit()
                return
            except sqlite3.Error as exc:
                if self._db.in_transaction:
                    self._db.rollback()
                if not _locked(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM entries WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, kind: str, value: dict[str, Any]) -> None:
        """Store an answer (and let go of its claim, in the same transaction)."""
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO entries (key, kind, value, created) VALUES (?, ?, ?, ?)",
                (key, kind, json.dumps(value, ensure_ascii=False), time.time()),
            )
            self._db.execute("DELETE FROM leases WHERE key = ? AND holder = ?", (key, self.holder))
            self._db.commit()
            self._held.discard(key)

    # -- claims: one process pays for a request, the others wait for its answer ----------

    def claim(self, key: str) -> Claim:
        """"claimed" (this process sends the request), "answered" (it is in the cache now) or
        "held" (another live process is asking it: wait with `wait`)."""
        now = time.time()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                if self._db.execute("SELECT 1 FROM entries WHERE key = ?", (key,)).fetchone():
                    self._db.commit()
                    return "answered"
                row = self._db.execute("SELECT holder, host, pid, expires FROM leases WHERE key = ?",
                                       (key,)).fetchone()
                if row is not None and row[0] != self.holder and not self._dead(row[1], row[2], row[3], now):
                    self._db.commit()
                    return "held"
                self._db.execute("INSERT OR REPLACE INTO leases (key, holder, host, pid, expires)"
                                 " VALUES (?, ?, ?, ?, ?)", (key, self.holder, self._host, self._pid, now + LEASE_S))
                self._db.commit()
            except BaseException:
                self._db.rollback()
                raise
            self._held.add(key)
        self._start_renewing()
        return "claimed"

    def release(self, key: str) -> None:
        """Give a claim up without an answer (the backend failed): another may ask it."""
        with self._lock:
            self._db.execute("DELETE FROM leases WHERE key = ? AND holder = ?", (key, self.holder))
            self._db.commit()
            self._held.discard(key)

    def wait(self, key: str) -> dict[str, Any] | None:
        """Wait until another process's claimed request is answered (its answer) or its claim
        ends without one (None: claim it again)."""
        while True:
            answer = self.get(key)
            if answer is not None:
                return answer
            with self._lock:
                row = self._db.execute("SELECT host, pid, expires FROM leases WHERE key = ?", (key,)).fetchone()
            if row is None or self._dead(row[0], row[1], row[2], time.time()):
                return self.get(key)
            time.sleep(WAIT_POLL_S)

    def _dead(self, host: str, pid: int, expires: float, now: float) -> bool:
        """A claim whose holder stopped renewing it, or whose process on this machine is gone."""
        return expires < now or (host == self._host and pid != self._pid and not _alive(pid))

    def _start_renewing(self) -> None:
        with self._lock:
            if self._renewer is not None:
                return
            self._renewer = threading.Thread(target=self._renew, daemon=True, name="lceval-cache-leases")
        self._renewer.start()

    def _renew(self) -> None:
        while not self._closed.wait(RENEW_S):
            with self._lock:
                if not self._held or self._closed.is_set():
                    continue
                try:
                    self._db.execute("UPDATE leases SET expires = ? WHERE holder = ?",
                                     (time.time() + LEASE_S, self.holder))
                    self._db.commit()
                except sqlite3.Error:
                    if self._db.in_transaction:
                        self._db.rollback()

    # -- provider batches: recorded before they are sent, adopted by a rerun -----------------

    def record_batch(self, batch_id: str, model: str, api: str, items: list[tuple[str, dict[str, Any]]]) -> None:
        """A batch about to be sent (state "sending"): its keys and requests, committed first."""
        now = time.time()
        with self._lock:
            self._db.execute("INSERT INTO batches (id, model, api, state, handle, created, updated)"
                             " VALUES (?, ?, ?, 'sending', NULL, ?, ?)", (batch_id, model, api, now, now))
            self._db.executemany("INSERT OR REPLACE INTO batch_items (batch, key, request) VALUES (?, ?, ?)",
                                 [(batch_id, key, json.dumps(request, ensure_ascii=False)) for key, request in items])
            self._db.commit()

    def batch_sent(self, batch_id: str, handle: dict[str, Any]) -> None:
        """The provider took the batch: its handle, to poll it (state "running")."""
        self._batch_update(batch_id, "running", handle)

    def batch_ended(self, batch_id: str, state: str) -> None:
        """Nothing more to fetch from the batch ("ended": its answers are stored; "failed":
        the provider never took it); an ended batch is never adopted again."""
        self._batch_update(batch_id, state, None)

    def _batch_update(self, batch_id: str, state: str, handle: dict[str, Any] | None) -> None:
        with self._lock:
            if handle is None:
                self._db.execute("UPDATE batches SET state = ?, updated = ? WHERE id = ?", (state, time.time(), batch_id))
            else:
                self._db.execute("UPDATE batches SET state = ?, handle = ?, updated = ? WHERE id = ?",
                                 (state, json.dumps(handle), time.time(), batch_id))
            if state not in ("sending", "running"):
                self._db.execute("DELETE FROM batch_items WHERE batch = ?", (batch_id,))
            self._db.commit()

    def open_batches(self, model: str) -> list["RecordedBatch"]:
        """The batches of `model` (its identity's hash) sent and not yet ended: a rerun's to adopt."""
        with self._lock:
            rows = self._db.execute("SELECT id, api, state, handle, created FROM batches WHERE model = ? AND state IN"
                                    " ('sending', 'running') ORDER BY created", (model,)).fetchall()
            out = []
            for batch_id, api, state, handle, created in rows:
                items = self._db.execute("SELECT key, request FROM batch_items WHERE batch = ?", (batch_id,)).fetchall()
                out.append(RecordedBatch(batch_id, api, state, json.loads(handle) if handle else None, created,
                                         {key: json.loads(request) for key, request in items}))
        return out
    # -- answers moved between caches (one per machine) ------------------------------------

    def export(self, path: Path, *, since: float | None = None) -> int:
        """Write the cache's answers (those stored at or after `since`, a time.time(), when
        given) to `path` as JSON Lines, gzip-compressed for a name ending in .gz; whole or not
        at all. Claims are not answers and are not written. Returns how many were written."""
        path = Path(path)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
        count = 0
        with self._lock:
            rows = self._db.execute("SELECT key, kind, value, created FROM entries WHERE created >= ? ORDER BY created,"
                                    " key", (since if since is not None else float("-inf"),)).fetchall()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with _open_text(tmp, "w", compressed=path.name.endswith(".gz")) as out:
                for key, kind, value, created in rows:
                    out.write(json.dumps({"key": key, "kind": kind, "value": json.loads(value), "created": created},
                                         ensure_ascii=False) + "\n")
                    count += 1
            os.replace(tmp, path)
        except OSError as exc:
            raise UserError(f"cannot write the exported answers: {exc.strerror or exc}", file=path,
                            field="FILE") from None
        finally:
            if tmp.exists():
                tmp.unlink()
        return count

    def import_from(self, path: Path) -> dict[str, int]:
        """Add the answers of `path` (a file `export` wrote, or another lceval cache database)
        that this cache lacks. An answer already here is never replaced: one with the same
        key and value counts as `same`, one with another value (a model sampled differently
        on another machine) as `kept`, so a run reads what it read before. Returns the counts
        `added`, `same` and `kept`."""
        path = Path(path)
        counts = {"added": 0, "same": 0, "kept": 0}
        batch: list[tuple[str, str, Any, float]] = []
        for entry in _read_entries(path):
            batch.append(entry)
            if len(batch) >= 1000:
                self._add_missing(batch, counts)
                batch = []
        self._add_missing(batch, counts)
        return counts

    def _add_missing(self, entries: list[tuple[str, str, Any, float]], counts: dict[str, int]) -> None:
        if not entries:
            return
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for key, kind, value, created in entries:
                    row = self._db.execute("SELECT value FROM entries WHERE key = ?", (key,)).fetchone()
                    if row is None:
                        self._db.execute("INSERT INTO entries (key, kind, value, created) VALUES (?, ?, ?, ?)",
                                         (key, kind, json.dumps(value, ensure_ascii=False), created))
                        counts["added"] += 1
                    else:
                        counts["same" if json.loads(row[0]) == value else "kept"] += 1
                self._db.commit()
            except BaseException:
                self._db.rollback()
                raise

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            try:
                if self._held:  # claims of requests this process will not finish
                    self._db.execute("DELETE FROM leases WHERE holder = ?", (self.holder,))
                    self._db.commit()
            except sqlite3.Error:
                pass
            self._held.clear()
            self._db.close()


GZIP_MAGIC = b"\x1f\x8b"


def _open_text(path: Path, mode: str, *, compressed: bool) -> IO[str]:
    if compressed:
        return gzip.open(path, mode + "t", encoding="utf-8")  # type: ignore[return-value]
    return open(path, mode, encoding="utf-8")


def _read_entries(path: Path) -> Iterable[tuple[str, str, Any, float]]:
    """(key, kind, value, created) of every answer in an exported file or a cache database;
    a line or row that is not an answer is a UserError naming the file and line."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise UserError(f"cannot read the answers: {exc.strerror or exc}", file=path, field="FILE") from None
    if head == SQLITE_MAGIC:
        yield from _database_entries(path)
        return
    try:
        with _open_text(path, "r", compressed=head.startswith(GZIP_MAGIC)) as fh:
            for number, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                yield _entry(path, number, line)
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read the answers: {getattr(exc, 'strerror', None) or exc}", file=path,
                        field="FILE", hint="Pass a file `lceval cache export` wrote, or a cache database.") from None


def _entry(path: Path, number: int, line: str) -> tuple[str, str, Any, float]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise UserError(f"not a JSON line ({exc.msg})", file=path, line=number,
                        hint="Pass a file `lceval cache export` wrote, or a cache database.") from None
    if not isinstance(record, dict) or not isinstance(record.get("key"), str) or not record["key"] \
            or not isinstance(record.get("kind"), str) or not isinstance(record.get("value"), dict):
        raise UserError("not an exported answer (it needs a text `key` and `kind` and an object `value`)",
                        file=path, line=number)
    created = record.get("created")
    return record["key"], record["kind"], record["value"], float(created) if isinstance(created, (int, float)) \
        else time.time()


def _database_entries(path: Path) -> Iterator[tuple[str, str, Any, float]]:
    """Another cache's answers, read only (its claims are not answers)."""
    try:
        check_cache_path(path)
        source = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=60)
    except UserError as exc:
        raise UserError(exc.message, file=path, field="FILE") from None
    except sqlite3.Error as exc:
        raise UserError(f"cannot open the cache to import: {exc}", file=path, field="FILE") from None
    try:
        for key, kind, value, created in source.execute("SELECT key, kind, value, created FROM entries"):
            yield key, kind, json.loads(value), created
    except sqlite3.Error as exc:
        raise UserError(f"cannot read the cache to import: {exc}", file=path, field="FILE") from None
    finally:
        source.close()
