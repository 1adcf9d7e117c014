"""Judging while generating: each answer is handed to its judge the moment it exists, so a
run with a slow judge (an API model: the papers' GPT-4 rubric, CREAM's, SummHay's coverage
judge) takes about max(generation, judging) instead of their sum.

Each judge gets its own slots: one for a judge that calls no model (a judge is not required
to be thread-safe, so its calls never overlap), the judge model's `max_in_flight` for one
that does (its calls go through the same request cache, so an interrupted run resumes them
for free). Answers waiting for a slot are judged together in the judge's next call (at most
`BATCH` at once), so a judge that works best on many items still gets them when it is the
slower side. Verdicts are collected by item; the runner writes samples in the conversations'
order whatever order the verdicts came in.

A judge whose model sends its requests through a provider's batch API (`--batch`) is better
asked about many answers at once than soon: its calls *linger* (up to the batch's
`max_wait`, or until a batch's worth waits) before taking every waiting answer, so answers
that trickle in from a model still generating go out in few, large batches, and a handful of
threads carries the whole run. Once the run's generation is over (`wait`), nothing lingers.
Each call counts its judge model's usage under the task it judges (`usage_scope`).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from lceval.engine._spending import usage_scope
from lceval.interfaces import Judge
from lceval.types import JudgeInput, Judgment

#: most items in one judge call (a judge call with many items blocks its slot meanwhile)
BATCH = 16


@dataclass
class _Queue:
    judge: Judge
    slots: int
    waiting: deque[JudgeInput] = field(default_factory=deque)
    running: int = 0
    verdicts: dict[str, Judgment] = field(default_factory=dict)
    on_judged: Callable[[int], None] = lambda n: None
    #: the task whose usage the judge's calls count under
    label: str | None = None
    #: most items in one call, and seconds a call waits for more before it takes them
    batch: int = BATCH
    linger: float = 0.0
    #: when the oldest waiting item arrived
    since: float = 0.0
    #: calls waiting for more items (one is enough: it takes them all)
    lingering: int = 0


class JudgingPool:
    """Judges answers in background threads as they are submitted; `wait()` returns when
    everything submitted is judged, and re-raises the first error a judge raised."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._queues: dict[int, _Queue] = {}
        self._error: BaseException | None = None
        self._submitted = 0
        self._judged = 0
        self._flushing = False

    def add_judge(self, judge: Judge, slots: int, on_judged: Callable[[int], None] = lambda n: None, *,
                  label: str | None = None, batch: int = BATCH, linger: float = 0.0) -> dict[str, Judgment]:
        """Register a judge (`slots`: the calls of a model-calling judge that may overlap) and
        what to tell when some of its answers are judged; returns the dict its verdicts land in.
        `label` names the task its usage counts under; `batch` and `linger` are a batching
        judge model's call size and wait (see the module's docstring)."""
        with self._lock:
            queue = self._queues.setdefault(
                id(judge), _Queue(judge, max(1, slots if judge.uses_model else 1), on_judged=on_judged,
                                  label=label, batch=max(1, batch) if judge.uses_model else BATCH,
                                  linger=linger if judge.uses_model else 0.0))
            return queue.verdicts

    def submit(self, judge: Judge, item: JudgeInput) -> None:
        self.raise_error()
        with self._lock:
            queue = self._queues[id(judge)]
            if not queue.waiting:
                queue.since = time.monotonic()
            queue.waiting.append(item)
            self._submitted += 1
            if queue.running < queue.slots and not queue.lingering:
                queue.running += 1
                threading.Thread(target=self._drain, args=(queue,), daemon=True, name="lceval-judge").start()

    def _drain(self, queue: _Queue) -> None:
        while True:
            with self._lock:
                queue.lingering += 1
                while (queue.linger and queue.waiting and self._error is None and not self._flushing
                       and len(queue.waiting) < queue.batch and time.monotonic() - queue.since < queue.linger):
                    self._lock.wait(timeout=min(0.5, queue.since + queue.linger - time.monotonic()))
                queue.lingering -= 1
                if not queue.waiting or self._error is not None:
                    queue.running -= 1
                    self._lock.notify_all()
                    return
                batch = [queue.waiting.popleft() for _ in range(min(queue.batch, len(queue.waiting)))]
                queue.since = time.monotonic()
            try:
                with usage_scope(queue.label):
                    verdicts = queue.judge.judge(batch)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the run's thread
                with self._lock:
                    self._error = self._error or exc
                    queue.running -= 1
                    self._lock.notify_all()
                return
            with self._lock:
                for verdict in verdicts:
                    queue.verdicts[verdict.item_id] = verdict
                self._judged += len(batch)
                self._lock.notify_all()
            queue.on_judged(len(batch))

    @property
    def pending(self) -> int:
        with self._lock:
            return self._submitted - self._judged

    def raise_error(self) -> None:
        """The first error a judge raised, in the caller's thread (a run stops on it)."""
        with self._lock:
            if self._error is not None:
                raise self._error

    def wait(self, timeout: float | None = None) -> bool:
        """Until everything submitted is judged (True), or `timeout` seconds (False)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            self._flushing = True  # nothing more comes: no call lingers for more
            self._lock.notify_all()
            while self._error is None and (self._judged < self._submitted
                                           or any(q.running for q in self._queues.values())):
                left = 0.2 if deadline is None else min(0.2, deadline - time.monotonic())
                if left <= 0:
                    return False
                self._lock.wait(timeout=left)
        self.raise_error()
        return True
