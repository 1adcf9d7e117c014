"""Requests in flight: at most `slots` calls at once, each answer handed back the moment it
exists, so a finished request frees its slot at once (no barrier at the end of a batch).

One slot means no thread at all: the call runs in the caller's thread, exactly as a
sequential backend (llama.cpp, transformers) needs, and Ctrl-C interrupts it there. With
more, each call runs on a daemon thread of its own: on Ctrl-C the process leaves at once
instead of waiting for requests in flight to time out (their answers are lost, the rest
is in the request cache already). A call runs in a copy of the submitter's context, so what
the submitter set there (the task a request's usage is counted under) holds in the call."""

from __future__ import annotations

import contextvars
import queue
import threading
from typing import Any, Callable, Generic, TypeVar

Tag = TypeVar("Tag")

_POLL_S = 0.2  # how often a waiting caller wakes up (so a signal is handled promptly)


class Dispatcher(Generic[Tag]):
    """`submit(tag, requests)` starts `call(requests)`; `next()` returns `(tag, answers)` of
    the next call to finish, in the order they finish, and re-raises a call's exception."""

    def __init__(self, call: Callable[[list[Any]], list[Any]], slots: int) -> None:
        self.call = call
        self.slots = max(1, int(slots))
        self.in_flight = 0
        self._done: queue.Queue[tuple[Any, list[Any] | None, BaseException | None]] = queue.Queue()

    def free(self) -> int:
        return self.slots - self.in_flight

    def submit(self, tag: Tag, requests: list[Any]) -> None:
        if self.in_flight >= self.slots:
            raise RuntimeError("no free slot: wait for next() first")
        self.in_flight += 1
        if self.slots == 1:
            try:
                answers = self.call(requests)
            except BaseException:
                self.in_flight -= 1
                raise
            self._done.put((tag, answers, None))
            return
        context = contextvars.copy_context()
        threading.Thread(target=context.run, args=(self._work, tag, requests), daemon=True,
                         name="lceval-request").start()

    def _work(self, tag: Tag, requests: list[Any]) -> None:
        try:
            self._done.put((tag, self.call(requests), None))
        except BaseException as exc:  # noqa: BLE001  (re-raised in the caller's thread)
            self._done.put((tag, None, exc))

    def next(self) -> tuple[Tag, list[Any]]:
        if self.in_flight == 0:
            raise RuntimeError("nothing in flight")
        while True:
            try:
                tag, answers, error = self._done.get(timeout=_POLL_S)
            except queue.Empty:
                continue
            self.in_flight -= 1
            if error is not None:
                raise error
            assert answers is not None
            return tag, answers
