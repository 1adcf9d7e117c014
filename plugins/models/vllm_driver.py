"""One event-loop thread that owns a vLLM engine, so that many callers' requests batch together.

Why: vLLM's `LLM.generate` runs the engine until *its* requests are done, so two callers
would wait for each other's whole batch, and its `LLMEngine` is not thread-safe. vLLM's
`AsyncLLM` (what `vllm serve` runs) takes requests at any time and streams each one's
output; it lives on one asyncio loop. This module runs that loop in a thread: callers from
any thread `submit` a request and get a `concurrent.futures.Future` completed the moment
their request finishes (not when the slowest request of a batch does). It is also the one
way to run data-parallel engine copies in one process.

Shared prefills: vLLM looks a prompt's prefix up in its cache when it schedules the request,
and a block enters the cache only once computed, so two requests on the same transcript sent
together both compute it. The driver holds a request back while an earlier one whose prompt
covers most of it (same tokens: at least one cache block and half the prompt) is still
being prefilled, and releases it when that request streams its first token: the transcript
is computed once whatever order callers use. With data parallelism each engine copy has its
own cache, so requests are pinned to a copy by their leading tokens (a transcript's
questions share them) rather than spread by load.

The engine is duck-typed (`generate(prompt, params, request_id, **kw)` an async iterator of
outputs with `finished` and `outputs[i].token_ids`; `shutdown()`), so tests drive the loop
with a fake engine.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import numpy as np

#: Leading tokens that choose a data-parallel engine copy: past an instruction preamble,
#: into the transcript, and shorter than any long context.
AFFINITY_TOKENS = 2048


@dataclass
class _Job:
    request_id: str
    tokens: np.ndarray
    prompt: Any
    params: Any
    future: "concurrent.futures.Future[Any]"
    submitted: float = field(default_factory=time.perf_counter)
    held: bool = False  # was held back for a shared prefill at least once


def shared_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the common prefix of two token arrays."""
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if len(differ) else n


def affinity_rank(tokens: np.ndarray, copies: int) -> int:
    """The engine copy a prompt goes to: the same for every prompt that shares its first
    AFFINITY_TOKENS tokens (or its first half, when shorter)."""
    head = tokens[: min(AFFINITY_TOKENS, max(1, len(tokens) // 2))]
    digest = hashlib.sha256(np.ascontiguousarray(head, dtype=np.int64).tobytes()).digest()
    return int.from_bytes(digest[:8], "big") % copies


class EngineDriver:
    """`make_engine()` is called on the loop's thread (vLLM's AsyncLLM binds its output task
    to the loop it is built on). `min_shared` is the engine's cache block: a shorter prefix
    is never reused by vLLM, so not worth waiting for. `share_prefill=False` sends every
    request at once (what a harness that ignores shared prefixes does; for comparisons)."""

    def __init__(self, make_engine: Callable[[], Any], *, min_shared: Callable[[Any], int] | int,
                 share_prefill: bool = True, copies: int = 1, name: str = "lceval-vllm") -> None:
        self._share_prefill = share_prefill
        self._copies = max(1, int(copies))
        self._ids = itertools.count()
        self._closed = False
        self._lock = threading.Lock()
        # owned by the loop's thread
        self._held: list[_Job] = []
        self._prefilling: dict[str, _Job] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.counters = {"requests": 0, "held_for_shared_prefill": 0}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()
        try:
            self.engine = self._on_loop(_built(make_engine))
        except BaseException:
            self._stop_loop()
            raise
        self._min_shared = max(1, int(min_shared(self.engine) if callable(min_shared) else min_shared))

    # -- callers' side (any thread) ------------------------------------------------------
    def submit(self, tokens: list[int], prompt: Any, params: Any) -> "concurrent.futures.Future[Any]":
        """The future's result is `(final output, seconds from submission to finish)`."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the vLLM engine was closed")
            job = _Job(f"lceval-{next(self._ids)}", np.asarray(tokens, dtype=np.int64), prompt, params, future)
            self._loop.call_soon_threadsafe(self._arrive, job)
        return future

    def call(self, fn: Callable[[Any], Awaitable[Any]]) -> Any:
        """Await `fn(engine)` on the loop (e.g. `engine.reset_prefix_cache()`); its result."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the vLLM engine was closed")
        return self._on_loop(_awaited(fn, self.engine))

    def close(self, timeout: float = 60.0) -> None:
        """Abort what is unfinished (its callers get an error), shut the engine down, stop
        the loop. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout)
        finally:
            self._stop_loop()

    def _on_loop(self, coro: Awaitable[Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()  # type: ignore[arg-type]

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        if not self._thread.is_alive():
            self._loop.close()

    # -- the loop's thread ---------------------------------------------------------------
    def _arrive(self, job: _Job) -> None:
        self._held.append(job)
        self._admit()

    def _admit(self) -> None:
        """Start every held request that need not wait for a shared prefill, in order."""
        still_held: list[_Job] = []
        for job in self._held:
            if self._share_prefill and self._waits_for(job, still_held):
                job.held = True
                still_held.append(job)
                continue
            self.counters["requests"] += 1
            self.counters["held_for_shared_prefill"] += int(job.held)
            self._prefilling[job.request_id] = job
            task = self._loop.create_task(self._run(job))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self._held = still_held

    def _waits_for(self, job: _Job, earlier_held: list[_Job]) -> bool:
        """True if a request being prefilled, or one held before this one, covers most of
        this prompt: this one then finds it in the cache once that prefill is done."""
        need = max(self._min_shared, len(job.tokens) // 2)
        for other in itertools.chain(self._prefilling.values(), earlier_held):
            if shared_prefix(other.tokens, job.tokens) >= need:
                return True
        return False

    def _prefilled(self, job: _Job) -> None:
        if self._prefilling.pop(job.request_id, None) is not None:
            self._admit()

    async def _run(self, job: _Job) -> None:
        extra = ({"data_parallel_rank": affinity_rank(job.tokens, self._copies)}
                 if self._copies > 1 else {})
        last = None
        try:
            async for out in self.engine.generate(job.prompt, job.params, job.request_id, **extra):
                if out.finished or any(len(o.token_ids) for o in out.outputs):
                    self._prefilled(job)  # its prompt is in the cache now
                last = out
            if last is None or not last.finished:
                raise RuntimeError("the vLLM engine ended the request without a final output")
            if not job.future.done():
                job.future.set_result((last, time.perf_counter() - job.submitted))
        except BaseException as exc:
            if not job.future.done():
                job.future.set_exception(exc if isinstance(exc, Exception)
                                         else RuntimeError("the vLLM engine was closed before this request finished"))
            if not isinstance(exc, Exception):
                raise
        finally:
            self._prefilled(job)

    async def _shutdown(self) -> None:
        closed = RuntimeError("the vLLM engine was closed before this request finished")
        for job in self._held:
            if not job.future.done():
                job.future.set_exception(closed)
        self._held = []
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()  # vLLM aborts a request whose generator is cancelled
        await asyncio.gather(*tasks, return_exceptions=True)
        engine, self.engine = self.engine, None  # dropped here, not at interpreter exit
        shutdown = getattr(engine, "shutdown", None)
        if shutdown is not None:
            shutdown()


async def _built(make_engine: Callable[[], Any]) -> Any:
    return make_engine()


async def _awaited(fn: Callable[[Any], Awaitable[Any]], engine: Any) -> Any:
    return await fn(engine)
