"""`--batch`: one model's requests sent through its provider's batch API (`BatchAPI`, which
the backend gives), at the provider's batch price, answered within hours.

Callers (the scheduler's request slots, a judge's rounds) ask as they would ask the backend
and wait; the `Batcher` gathers what they ask into chunks (sent once `max_requests` are in,
once no request joined for `quiet` seconds, or once the oldest waited `max_wait`), polls each
sent batch with backoff (`poll`, doubled up to `poll_max`), and the moment a batch ends stores
each answer in the request cache and hands it to whoever waits for it.

Nothing is paid twice: a chunk's keys and requests are recorded in the cache before it is
sent, its handle as soon as the provider gives it. The first ask of a run adopts the batches
a crashed or interrupted run of the same model left open: their answers are stored when they
end, and a request one of them holds is waited for, never sent again. A batch whose handle
was never recorded (the process died while the provider answered the submission) is looked
for with `BatchAPI.find`. A request the provider failed inside a batch is sent again in a
later batch (`retries` times, then returned as failed, so the cache never stores it and the
next run asks it again), unless its kind is one the same request meets again
(`lceval.errors.NOT_RETRIED`: a 400, a content filter): returned as failed at once; what an expired or cancelled batch did not finish is sent again.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from lceval.engine._cache import Cache
from lceval.engine._spending import BatchSettings
from lceval.errors import NOT_RETRIED, UserError
from lceval.interfaces import BatchAPI
from lceval.types import Generation, GenerationRequest

log = logging.getLogger("lceval.batch")

#: how often a waiting caller wakes up (so Ctrl-C is handled promptly)
_WAKE_S = 0.2
#: times a chunk whose submission failed (the provider never took it) is tried again
SUBMIT_TRIES = 4


def request_record(request: GenerationRequest) -> dict[str, Any]:
    """A request as the cache records it with its batch."""
    return {"request_id": request.request_id, "messages": [{"role": m.role, "content": m.content}
                                                           for m in request.messages],
            "params": request.params.as_dict()}


def batch_id_of(key: str) -> str:
    """The id a request is submitted under: its cache key (64 hex characters), which both
    providers accept as a custom id and which names the answer's place in the cache."""
    return key[:64]


@dataclass
class _Slot:
    done: threading.Event = field(default_factory=threading.Event)
    gen: Generation | None = None


@dataclass
class _Sent:
    id: str
    handle: dict[str, Any] | None
    keys: list[str]
    created: float
    next_poll: float
    delay: float
    adopted: bool = False


@dataclass
class BatchCounters:
    """What the batch API did for one model during a command."""

    batches_sent: int = 0
    batches_adopted: int = 0
    batches_ended: int = 0
    requests_sent: int = 0
    #: answers stored from batches (this run's and adopted ones)
    answers: int = 0
    #: answers of adopted batches that no request of this run waited for (stored for the next)
    answers_unasked: int = 0
    #: requests the provider failed inside a batch and that were sent again
    retried: int = 0
    #: requests an expired or cancelled batch left unfinished and that were sent again
    resubmitted: int = 0
    failed: int = 0
    polls: int = 0
    submit_errors: int = 0
    poll_errors: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Batcher:
    """The batches of one model in one command; thread-safe. `ask` blocks until the answers
    of its requests exist (already stored in the cache) or the batch API gave up on them."""

    def __init__(self, api: BatchAPI, cache: Cache, model: str, settings: BatchSettings) -> None:
        self.api = api
        self.cache = cache
        #: the model's identity hash: batches are adopted only by the same model
        self.model = model
        self.settings = settings
        self.counters = BatchCounters()
        self._cond = threading.Condition()
        self._waiting: dict[str, list[_Slot]] = {}
        self._requests: dict[str, GenerationRequest] = {}
        self._failures: dict[str, int] = {}
        self._open: dict[str, None] = {}  # the chunk being filled, in order (a dict: an ordered set)
        self._open_bytes = 0
        self._first_add = self._last_add = 0.0
        self._holder: dict[str, str] = {}  # key -> id of the batch that holds it
        self._sent: dict[str, _Sent] = {}
        self._retry_at: dict[str, float] = {}
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()
        self._adopted = False
        #: hears of every answer a batch stored that no caller of this run waited for (its cost)
        self.on_unasked: Any = lambda gen: None

    # -- what callers see ------------------------------------------------------------------
    def adopts(self, key: str) -> bool:
        """Whether a batch already sent (this run's or an adopted one) holds `key`: asking it
        costs nothing new."""
        self._adopt()
        with self._cond:
            return key in self._holder

    def ask(self, items: list[tuple[str, GenerationRequest]]) -> list[Generation]:
        """The answers to `items` ((cache key, request)), in order, each stored in the cache
        before it is returned; a request the batch API gave up on comes back with
        `finish_reason="error"` (not stored)."""
        self._adopt()
        slots = []
        with self._cond:
            self._raise()
            for key, request in items:
                slot = _Slot()
                slots.append(slot)
                self._waiting.setdefault(key, []).append(slot)
                self._requests[key] = request
                if key not in self._holder and key not in self._retry_at:
                    self._enqueue(key)
            self._cond.notify_all()
        self._start()
        for slot in slots:
            while not slot.done.wait(_WAKE_S):
                with self._cond:
                    self._raise()
        with self._cond:
            self._raise()
        return [slot.gen for slot in slots]  # type: ignore[misc]

    def close(self) -> None:
        """Stop polling. Batches still running are left to the provider: the next run adopts them."""
        self._closed.set()
        with self._cond:
            if self._waiting and self._error is None:
                self._error = RuntimeError("the batches were closed while answers were awaited")
            for slots in self._waiting.values():
                for slot in slots:
                    slot.done.set()
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    # -- adopting a crashed run's batches -------------------------------------------------
    def _adopt(self) -> None:
        with self._cond:
            if self._adopted:
                return
            self._adopted = True
            recorded = self.cache.open_batches(self.model)
            now = time.monotonic()
            for rec in recorded:
                sent = _Sent(rec.id, rec.handle, list(rec.requests), rec.created, next_poll=now, delay=self.settings.poll,
                             adopted=True)
                self._sent[rec.id] = sent
                for key in sent.keys:
                    self._holder[key] = rec.id
                self.counters.batches_adopted += 1
            if recorded:
                log.info("adopting %d batch(es) an earlier run left open (%d requests)", len(recorded),
                         sum(len(r.requests) for r in recorded))
        if recorded:
            self._start()

    # -- the chunk being filled ------------------------------------------------------------
    def _enqueue(self, key: str) -> None:
        """Put `key` into the open chunk (the lock is held)."""
        if key in self._open:
            return
        now = time.monotonic()
        if not self._open:
            self._first_add = now
        self._open[key] = None
        self._open_bytes += _size(self._requests[key])
        self._last_add = now

    def _chunk_due(self, now: float) -> bool:
        s = self.settings
        if not self._open:
            return False
        return (len(self._open) >= s.max_requests or self._open_bytes >= s.max_bytes
                or now - self._last_add >= s.quiet or now - self._first_add >= s.max_wait)

    def _take_chunk(self) -> list[str]:
        """The requests of the next batch, out of the open chunk (the lock is held); they are
        held by the batch from now, so a second ask for one of them waits instead of sending it."""
        s = self.settings
        chunk: list[str] = []
        size = 0
        for key in self._open:
            extra = _size(self._requests[key])
            if len(chunk) >= s.max_requests or (chunk and size + extra > s.max_bytes):
                break
            chunk.append(key)
            size += extra
        for key in chunk:
            del self._open[key]
        self._open_bytes = sum(_size(self._requests[k]) for k in self._open)
        self._first_add = self._last_add = time.monotonic()
        local_id = f"lceval-{uuid.uuid4().hex}"
        for key in chunk:
            self._holder[key] = local_id
        return chunk

    # -- the loop: send, poll, store --------------------------------------------------------
    def _start(self) -> None:
        with self._cond:
            if self._thread is not None or self._closed.is_set():
                return
            self._thread = threading.Thread(target=self._loop, daemon=True, name="lceval-batches")
        self._thread.start()

    def _loop(self) -> None:
        try:
            while not self._closed.is_set():
                chunk, polls = self._next_work()
                if chunk:
                    self._send(chunk)
                for sent in polls:
                    if self._closed.is_set():
                        return
                    self._poll(sent)
        except BaseException as exc:  # noqa: BLE001 - handed to every caller, in its own thread
            with self._cond:
                self._error = exc
                for slots in self._waiting.values():
                    for slot in slots:
                        slot.done.set()
                self._cond.notify_all()

    def _next_work(self) -> tuple[list[str], list[_Sent]]:
        with self._cond:
            while not self._closed.is_set():
                now = time.monotonic()
                for key, at in list(self._retry_at.items()):
                    if at <= now:
                        del self._retry_at[key]
                        if self._waiting.get(key) and key not in self._holder:
                            self._enqueue(key)
                chunk = self._take_chunk() if self._chunk_due(now) else []
                polls = [s for s in self._sent.values() if s.next_poll <= now]
                if chunk or polls:
                    return chunk, polls
                wake = [s.next_poll for s in self._sent.values()] + list(self._retry_at.values())
                if self._open:
                    wake += [self._last_add + self.settings.quiet, self._first_add + self.settings.max_wait]
                self._cond.wait(timeout=max(0.01, min(wake) - now) if wake else None)
            return [], []

    def _send(self, keys: list[str]) -> None:
        """Record the batch in the cache, then send it; its handle is recorded as soon as the
        provider gives it. A submission that failed may still have reached the provider: the
        batch is looked for there before its requests go into a new one."""
        with self._cond:
            local_id = self._holder[keys[0]]
            items = [(batch_id_of(k), self._requests[k]) for k in keys]
        self.cache.record_batch(local_id, self.model, self.api.name,
                                [(k, request_record(request)) for k, (_, request) in zip(keys, items)])
        created = time.time()
        try:
            handle = self.api.submit(local_id, items)
        except UserError:
            self.cache.batch_ended(local_id, "failed")
            raise
        except Exception as exc:  # noqa: BLE001 - maybe sent: the provider may hold it anyway
            self.counters.submit_errors += 1
            handle = self._find(local_id, [cid for cid, _ in items], created)
            if handle is None:
                self.cache.batch_ended(local_id, "failed")
                self._submit_failed(keys, local_id, exc)
                return
        self.cache.batch_sent(local_id, handle)
        log.info("sent batch %s: %d requests", local_id, len(keys))
        with self._cond:
            self.counters.batches_sent += 1
            self.counters.requests_sent += len(keys)
            self._sent[local_id] = _Sent(local_id, handle, list(keys), created,
                                         next_poll=time.monotonic() + self.settings.poll, delay=self.settings.poll)

    def _find(self, local_id: str, ids: list[str], since: float) -> dict[str, Any] | None:
        try:
            return self.api.find_batch(local_id, ids, since - 60.0)
        except UserError:
            raise
        except Exception:  # noqa: BLE001 - cannot tell: treated as not sent
            return None

    def _submit_failed(self, keys: list[str], local_id: str, exc: BaseException) -> None:
        with self._cond:
            for key in keys:
                self._holder.pop(key, None)
                tries = self._failures[key] = self._failures.get(key, 0) + 1
                if tries >= SUBMIT_TRIES:
                    self._resolve(key, self._error_gen(key, "batch_submit", f"{type(exc).__name__}: {exc}"[:500]))
                else:
                    self._retry_at[key] = time.monotonic() + min(self.settings.poll_max, self.settings.poll * 2 ** tries)
            self._cond.notify_all()

    def _poll(self, sent: _Sent) -> None:
        if sent.handle is None:  # recorded but its handle never was: did the provider take it?
            sent.handle = self._find(sent.id, [batch_id_of(k) for k in sent.keys], sent.created)
            if sent.handle is None:
                self.cache.batch_ended(sent.id, "failed")
                self._unfinished(sent)
                return
            self.cache.batch_sent(sent.id, sent.handle)
        try:
            status = self.api.poll(sent.handle)
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failed ask: asked again later
            self.counters.poll_errors += 1
            log.info("polling batch %s failed (%s); asking again later", sent.id, exc)
            self._backoff(sent)
            return
        self.counters.polls += 1
        if not status.ended:
            self._backoff(sent)
            return
        self._ended(sent, status.results, status.state, status.error)

    def _backoff(self, sent: _Sent) -> None:
        with self._cond:
            sent.delay = min(self.settings.poll_max, sent.delay * 2)
            sent.next_poll = time.monotonic() + sent.delay

    def _ended(self, sent: _Sent, results: dict[str, Generation], state: str, error: str | None = None) -> None:
        """Store every answer at once, then tell the callers; send again what failed or was left."""
        stored: list[tuple[str, Generation]] = []
        for key in sent.keys:
            gen = results.get(batch_id_of(key))
            if gen is not None and gen.finish_reason != "error":
                gen = replace(gen, extras={**gen.extras, "batch": (sent.handle or {}).get("id") or sent.id})
                record = asdict(gen)
                record.pop("cached", None)
                self.cache.put(key, "generate", record)
                stored.append((key, gen))
        self.cache.batch_ended(sent.id, "ended")
        log.info("batch %s %s: %d answers", sent.id, state, len(stored))
        with self._cond:
            self.counters.batches_ended += 1
            self.counters.answers += len(stored)
            del self._sent[sent.id]
            for key, gen in stored:
                self._holder.pop(key, None)
                if self._waiting.get(key):
                    self._resolve(key, gen)
                else:
                    self.counters.answers_unasked += 1
                    self.on_unasked(gen)
            for key in sent.keys:
                if self._holder.get(key) != sent.id:
                    continue
                del self._holder[key]
                gen = results.get(batch_id_of(key))
                if not self._waiting.get(key):
                    continue  # an adopted request no caller of this run asks: dropped
                if gen is None and error is not None:  # the whole batch failed
                    gen = self._error_gen(key, "batch_failed", error[:500])
                if gen is None:  # the batch expired or was cancelled before it
                    self.counters.resubmitted += 1
                    self._enqueue(key)
                    continue
                tries = self._failures[key] = self._failures.get(key, 0) + 1
                kind = (gen.extras.get("error") or {}).get("kind")
                if tries > self.settings.retries or kind in NOT_RETRIED:  # a refusal is met again
                    self.counters.failed += 1
                    self._resolve(key, replace(gen, request_id=self._requests[key].request_id))
                else:
                    self.counters.retried += 1
                    self._enqueue(key)
            self._cond.notify_all()

    def _unfinished(self, sent: _Sent) -> None:
        """A recorded batch the provider never took: its requests go into a new one."""
        with self._cond:
            self._sent.pop(sent.id, None)
            for key in sent.keys:
                if self._holder.get(key) == sent.id:
                    del self._holder[key]
                    if self._waiting.get(key):
                        self._enqueue(key)
            self._cond.notify_all()

    def _resolve(self, key: str, gen: Generation) -> None:
        """Hand `gen` to every caller waiting for `key` (the lock is held)."""
        request = self._requests.pop(key, None)
        for slot in self._waiting.pop(key, []):
            slot.gen = replace(gen, request_id=request.request_id) if request is not None else gen
            slot.done.set()
        self._failures.pop(key, None)

    def _error_gen(self, key: str, kind: str, message: str) -> Generation:
        request = self._requests[key]
        return Generation(request_id=request.request_id, text="", finish_reason="error",
                          extras={"error": {"kind": kind, "message": message}})


def _size(request: GenerationRequest) -> int:
    """About the bytes a request takes in a batch's input file."""
    return sum(len(m.content.encode("utf-8")) + 32 for m in request.messages) + 256
