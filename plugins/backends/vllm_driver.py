"""One event-loop thread that owns a vLLM engine, so that many callers' requests batch together.

Why: vLLM's `LLM.generate` runs the engine until *its* requests are done, so two callers
would wait for each other's whole batch, and its `LLMEngine` is not thread-safe. vLLM's
`AsyncLLM` (what `vllm serve` runs) takes requests at any time and streams each one's
output; it lives on one asyncio loop. This module runs that loop in a thread: callers from
any thread `submit` a request and get a `concurrent.futures.Future` completed the moment
their request finishes (not when the slowest request of a batch does). It is also the one
way to run data-parallel engine copies in one process.

Requests on one transcript need no holding back here: vLLM (V1) enters a block into its
prefix cache when it allocates it, before computing it, so a request scheduled with (or
after) another on the same transcript reuses those blocks instead of computing them again
(measured: all of a meeting's questions sent at once prefill it once). With data
parallelism each engine copy has its own cache, so a transcript's requests are pinned to one
copy (by the engine's `prefix_group` hint, else by their leading tokens) rather than spread
by load.

The engine is duck-typed (`generate(prompt, params, request_id, **kw)` an async iterator of
outputs with `finished`; `shutdown()`), so tests drive the loop with a fake engine.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import itertools
import threading
import time
from typing import Any, Awaitable, Callable

import numpy as np

#: Leading tokens that choose a data-parallel engine copy when the engine names no group:
#: past an instruction preamble, into the transcript, and shorter than any long context.
AFFINITY_TOKENS = 2048


def affinity_rank(key: str | list[int], copies: int) -> int:
    """The engine copy a request goes to. `key` is the engine's transcript group, or the
    prompt's tokens: then their first AFFINITY_TOKENS, or for a shorter prompt the largest
    power of two within its first half, so the questions about one transcript (prompts of
    nearly equal length) hash the same head."""
    if isinstance(key, str):
        data = key.encode("utf-8")
    else:
        n = min(AFFINITY_TOKENS, max(1, len(key) // 2))
        data = np.asarray(key[: 1 << (n.bit_length() - 1)], dtype=np.int64).tobytes()
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big") % copies


class EngineDriver:
    """`make_engine()` is called on the loop's thread (vLLM's AsyncLLM binds its output task
    to the loop it is built on); `copies` is the engine's data-parallel size."""

    def __init__(self, make_engine: Callable[[], Any], *, copies: int = 1, name: str = "lceval-vllm") -> None:
        self._copies = max(1, int(copies))
        self._ids = itertools.count()
        self._closed = False
        self._lock = threading.Lock()
        self._tasks: set[asyncio.Task[None]] = set()  # touched on the loop's thread only
        self.counters = {"requests": 0}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()
        try:
            self.engine = self._on_loop(_built(make_engine))
        except BaseException:
            self._stop_loop()
            raise

    # -- callers' side (any thread) ------------------------------------------------------
    def submit(self, tokens: list[int], prompt: Any, params: Any,
               group: str | None = None) -> "concurrent.futures.Future[Any]":
        """The future's result is `(final output, seconds from submission to finish)`;
        `group` names the transcript the request is about, when the caller knows it."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the vLLM engine was closed")
            rank = affinity_rank(group or tokens, self._copies) if self._copies > 1 else None
            request_id = f"lceval-{next(self._ids)}"
            self._loop.call_soon_threadsafe(self._start, request_id, prompt, params, rank, future)
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
    def _start(self, request_id: str, prompt: Any, params: Any, rank: int | None,
               future: "concurrent.futures.Future[Any]") -> None:
        self.counters["requests"] += 1
        task = self._loop.create_task(self._run(request_id, prompt, params, rank, future))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, request_id: str, prompt: Any, params: Any, rank: int | None,
                   future: "concurrent.futures.Future[Any]") -> None:
        started = time.perf_counter()
        extra = {"data_parallel_rank": rank} if rank is not None else {}
        last = None
        try:
            async for out in self.engine.generate(prompt, params, request_id, **extra):
                last = out
            if last is None or not last.finished:
                raise RuntimeError("the vLLM engine ended the request without a final output")
            if not future.done():
                future.set_result((last, time.perf_counter() - started))
        except BaseException as exc:
            if not future.done():
                future.set_exception(exc if isinstance(exc, Exception) else
                                     RuntimeError("the vLLM engine was closed before this request finished"))
            if not isinstance(exc, Exception):
                raise

    async def _shutdown(self) -> None:
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
