"""A backend seen through the request cache: the cache key of a request (the model's identity
without secrets, the messages, the sampling parameters), what a model cost a run, and
`CachedModel`, which answers from the cache or asks the backend and stores each answer the
moment it exists. The runner and model-calling judges both use it."""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass
from typing import Any, Iterable

from lceval.engine._cache import Cache
from lceval.engine._dispatch import Dispatcher
from lceval.interfaces import ModelBackend
from lceval.io import canonical_hash
from lceval.types import Generation, GenerationRequest, Message

SECRET_MARKERS = ("key", "token", "secret", "password", "authorization")


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
    #: the prompt and answer tokens of the answers served from the cache: the work this run did
    #: not redo (a rerun's prompt_tokens is 0 because nothing was sent, not because nothing was asked)
    cached_prompt_tokens: int = 0
    cached_completion_tokens: int = 0

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
        return self._hit(request, hit)

    def _hit(self, request: GenerationRequest, record: dict[str, Any]) -> Generation:
        gen = Generation(**{**record, "request_id": request.request_id, "cached": True})
        with self._lock:
            self.usage.cached_prompt_tokens += int(gen.prompt_tokens or 0)
            self.usage.cached_completion_tokens += int(gen.completion_tokens or 0)
        return gen

    def call(self, requests: list[GenerationRequest]) -> list[Generation]:
        """Ask the backend (no cache lookup) and store each answer at once. Each request is
        claimed in the cache first: one another process is asking already is not asked
        again, its answer is awaited (and counted as a cache hit). A request the backend gave
        up on (finish_reason "error", an API past its retries) is no answer: never stored, so
        the same command run again asks it again."""
        keys = [self.key(r) for r in requests]
        outs: list[Generation | None] = [None] * len(requests)
        mine, theirs = [], []
        for i, key in enumerate(keys):
            claim = self.cache.claim(key)
            if claim == "claimed":
                mine.append(i)
            elif claim == "answered" and (record := self.cache.get(key)) is not None:
                outs[i] = self._served(requests[i], record)
            else:
                theirs.append(i)
        if mine:
            for i, gen in zip(mine, self._ask([requests[i] for i in mine], [keys[i] for i in mine])):
                outs[i] = gen
        for i in theirs:
            while outs[i] is None:
                record = self.cache.wait(keys[i])
                if record is not None:
                    outs[i] = self._served(requests[i], record)
                elif self.cache.claim(keys[i]) == "claimed":  # its claimer gave up or died: ours now
                    outs[i] = self._ask([requests[i]], [keys[i]])[0]
        return [gen for gen in outs if gen is not None]

    def _served(self, request: GenerationRequest, record: dict[str, Any]) -> Generation:
        """An answer another process generated while this one looked: a cache hit."""
        with self._lock:
            self.usage.cache_hits += 1
        return self._hit(request, record)

    def _ask(self, requests: list[GenerationRequest], keys: list[str]) -> list[Generation]:
        with self._lock:
            if self._busy == 0:
                self._busy_since = time.perf_counter()
            self._busy += len(requests)
            self.usage.peak_in_flight = max(self.usage.peak_in_flight, self._busy)
        try:
            outs = self.backend.generate(requests)
        except BaseException:
            for key in keys:  # another process may ask them now
                self.cache.release(key)
            raise
        finally:
            with self._lock:
                self._busy -= len(requests)
                if self._busy == 0:
                    self.usage.seconds += time.perf_counter() - self._busy_since
        if len(outs) != len(requests):
            raise RuntimeError(f"backend returned {len(outs)} answers for {len(requests)} requests")
        for key, gen in zip(keys, outs):
            if gen.finish_reason != "error":
                record = asdict(gen)
                record.pop("cached", None)
                self.cache.put(key, "generate", record)
            else:
                self.cache.release(key)
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
