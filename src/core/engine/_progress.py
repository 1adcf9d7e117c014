"""What a run says while it works, so a user can tell work from a hang: the phase (reading
data, loading the model), per task the transcript being prefilled and its size as the model
gets it (after the context policy's cut), the tokens prefilled so far, answers and verdicts
with their counts, the time elapsed, and an ETA computed from the work still to do — the
tokens still to prefill (each transcript's kept tokens once, then each question's own part)
and to generate — at the rates this run has measured so far (prefill and decoding cost
differently: a long transcript takes minutes, a question seconds). A resumed run says how
many answers came from the cache.

On a terminal it is a progress line on stderr, redrawn every second, so the clock moves even
while one transcript is prefilled for minutes; elsewhere it is quiet. The same events go to
the `lceval` logger (INFO for phases, DEBUG for each request and each status, with the ETA
as `record.progress`), which `-v` / `--log-level` show, on a terminal or not.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from tqdm import tqdm

log = logging.getLogger("lceval")

#: what an answer is assumed to cost in generated tokens before any was measured (of max_new_tokens)
FIRST_GUESS_SHARE = 0.25
#: seconds between two redraws of the line on a terminal
TICK_S = 1.0


def _duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


@dataclass
class _Rates:
    """Seconds per prefilled token and per generated token, fitted to the requests this run
    generated (least squares on seconds = a * prefilled + b * generated)."""

    rows: list[tuple[float, float, float]] = field(default_factory=list)

    def add(self, prefilled: int | None, completion: int, seconds: float) -> None:
        if prefilled is not None and seconds > 0:
            self.rows.append((float(prefilled), float(completion), float(seconds)))

    def per_token(self) -> tuple[float, float] | None:
        if not self.rows:
            return None
        spp = sum(p * p for p, _, _ in self.rows)
        sgg = sum(g * g for _, g, _ in self.rows)
        spg = sum(p * g for p, g, _ in self.rows)
        sps = sum(p * s for p, _, s in self.rows)
        sgs = sum(g * s for _, g, s in self.rows)
        det = spp * sgg - spg * spg
        if len(self.rows) >= 3 and det > 1e-9 * max(spp * sgg, 1.0):
            a, b = (sps * sgg - sgs * spg) / det, (sgs * spp - sps * spg) / det
            if a >= 0 and b >= 0:
                return a, b
        tokens = sum(p + g for p, g, _ in self.rows)  # one rate for both: the fit is not there yet
        rate = sum(s for _, _, s in self.rows) / tokens if tokens else 0.0
        return rate, rate


@dataclass
class _Group:
    """One context (a transcript) of a task: its tokens as prefilled, its answers to come."""

    tokens: int
    left: int  # answers not given yet (generated, from the cache or skipped)
    started: bool = False


class _Text:
    """A line's status as tqdm's `postfix`: tqdm starts a string postfix with ', ' (the stray
    comma the line used to begin with); an object it prints as it is."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __format__(self, spec: str) -> str:
        return format(self.text, spec)

    def __str__(self) -> str:
        return self.text


class TaskProgress:
    """One task variant and seed: a line of answers with verdicts, the transcript being
    prefilled, the tokens prefilled so far, the time elapsed and an ETA in tokens."""

    def __init__(self, run: "RunProgress", label: str, answers: int, groups: dict[str, int],
                 max_new_tokens: int) -> None:
        self.run, self.label = run, label
        self.clock = run.clock
        self.answers, self.answered, self.from_cache, self.judged = answers, 0, 0, 0
        self.max_new_tokens = max_new_tokens
        self.rates = _Rates()
        self.generated_tokens = self.generated = 0
        self.prefilled_tokens = 0
        #: what a question adds to its transcript's prefill: the first request's own part, and
        #: what a later request of the same transcript prefills (its question; the transcript is cached)
        self.own_parts: list[int] = []
        self.follow_ups: list[int] = []
        self.groups: dict[str, _Group] = {}
        self.order: dict[str, int] = {}
        self.plan(groups, None)
        self.in_flight: dict[str, deque[tuple[float, bool]]] = {}
        self.prefilling: str | None = None
        self.t0 = self.clock()
        run.clear_phase()  # one line on the terminal: the phase's goes before the task's is drawn
        self.bar = tqdm(total=answers, desc=label, unit="answer", leave=False, disable=not run.show or None,
                        file=run.stream, bar_format="{desc} {n_fmt}/{total_fmt} |{bar:12}| {postfix}")
        run.showing(self)

    def plan(self, tokens: dict[str, int], turns: dict[str, int] | None) -> None:
        """Each context's tokens as the model will prefill them (after the context policy's
        cut) and its number of questions: what the sizes shown and the ETA count."""
        for key, n in tokens.items():
            group = self.groups.get(key)
            left = (turns or {}).get(key)
            if group is None:
                self.groups[key] = _Group(tokens=int(n), left=left if left is not None else 0)
            else:
                group.tokens = int(n)
                if left is not None:
                    group.left = left
            self.order.setdefault(key, len(self.order))
        if turns is None and self.groups:  # questions per context not known yet: spread evenly
            per, extra = divmod(self.answers, len(self.groups))
            for i, group in enumerate(self.groups.values()):
                group.left = per + (i < extra)
        else:
            log.info("%s: %d answers to give about %d contexts (%s tokens as prefilled, after the context policy)",
                     self.label, self.answers, len(tokens), f"{sum(tokens.values()):,}")

    def resumed(self, cached: int) -> None:
        if cached:
            self.run.say(f"{self.label}: resumed: {cached} of {self.answers} answers from the cache")

    def request_started(self, context_id: str) -> None:
        with self.run.lock:  # the ticker thread reads what this changes
            group = self.groups.setdefault(context_id, _Group(tokens=0, left=1))
            first = not group.started
            self.in_flight.setdefault(context_id, deque()).append((self.clock(), first))
            if first:
                group.started = True
                self.prefilling = context_id
                log.debug("%s: prefilling transcript %d/%d (%s tokens)", self.label, self.order.get(context_id, 0) + 1,
                          len(self.groups), f"{group.tokens:,}")
            self._show(event="start")

    def answer(self, context_id: str, gen: Any) -> None:
        with self.run.lock:  # the ticker thread reads what this changes
            self.answered += 1
            group = self.groups.get(context_id)
            if group is not None:
                group.left = max(0, group.left - 1)
            started = self.in_flight.get(context_id)
            first = started.popleft()[1] if started else False
            if context_id == self.prefilling and first:
                self.prefilling = None
            if getattr(gen, "cached", False):
                self.from_cache += 1
            elif gen is not None:
                completion = int(gen.completion_tokens or 0)
                self.generated += 1
                self.generated_tokens += completion
                prefilled = gen.prefilled_tokens
                if prefilled is not None:
                    self.prefilled_tokens += int(prefilled)
                    if first and group is not None:
                        self.own_parts.append(max(0, int(prefilled) - group.tokens))
                    elif not first:
                        self.follow_ups.append(int(prefilled))
                self.rates.add(prefilled, completion, float(gen.seconds or 0.0))
            self.bar.update(1)
            self._show(event="answer")

    def skipped(self, n: int, context_id: str | None = None) -> None:
        with self.run.lock:  # the ticker thread reads what this changes
            self.answered += n
            group = self.groups.get(context_id) if context_id is not None else None
            if group is not None:
                group.left = max(0, group.left - n)
            self.bar.update(n)
            self._show(event="skipped")

    def judged_some(self, n: int) -> None:
        with self.run.lock:  # the ticker thread reads what this changes
            self.judged += n
            self._show()

    def eta(self, now: float | None = None) -> float | None:
        """Seconds still to go, at the rates measured so far: each transcript not started
        yet prefilled once at its size after the cut (plus its first question's own part), each
        later question's own part, every answer still to come at the mean length generated so
        far, and what the requests in flight still need beyond the time they have had."""
        rates = self.rates.per_token()
        if rates is None:
            return None
        per_prefill, per_generated = rates
        now = self.clock() if now is None else now
        own = sum(self.own_parts) / len(self.own_parts) if self.own_parts else 0.0
        follow = sum(self.follow_ups) / len(self.follow_ups) if self.follow_ups else own
        answer = (self.generated_tokens / self.generated if self.generated
                  else self.max_new_tokens * FIRST_GUESS_SHARE) * per_generated
        seconds = 0.0
        for key, group in self.groups.items():
            flying = self.in_flight.get(key) or ()
            waiting = max(0, group.left - len(flying))
            for started_at, first in flying:
                prefill = (group.tokens + own if first else follow) * per_prefill
                had = now - started_at
                # past the mean answer it is writing a longer one: at most max_new_tokens
                longest = prefill + self.max_new_tokens * per_generated
                seconds += prefill + answer - had if had < prefill + answer else max(0.0, longest - had)
            if waiting:
                firsts = 0 if group.started else 1
                seconds += firsts * (group.tokens + own) * per_prefill + (waiting - firsts) * follow * per_prefill
                seconds += waiting * answer
        return seconds

    def status(self, now: float | None = None) -> str:
        """The line's words, most needed first (a narrow terminal cuts the end): the run's
        clock, the ETA, the transcript being prefilled (its size as prefilled, how long so
        far), tokens prefilled so far, verdicts, cache hits."""
        now = self.clock() if now is None else now
        parts = [_duration(now - self.run.t0)]
        if self.answered < self.answers:
            eta = self.eta(now)
            parts.append(f"ETA {_duration(eta)}" if eta is not None else "ETA after the 1st answer")
        if self.prefilling is not None:
            group = self.groups.get(self.prefilling)
            flying = self.in_flight.get(self.prefilling) or ()
            since = next((now - t for t, first in flying if first), 0.0)
            parts.append(f"prefilling {self.order.get(self.prefilling, 0) + 1}/{len(self.groups)} "
                         f"({group.tokens if group else 0:,} tok, {_duration(since)})")
        parts.append(f"{self.prefilled_tokens:,} tok prefilled")
        if self.run.judging and self.answered:
            parts.append(f"judged {self.judged}/{self.answered}")
        if self.from_cache:
            parts.append(f"{self.from_cache} cached")
        return " · ".join(parts)

    def _show(self, event: str | None = None) -> None:
        """Redraw the line; on an event (a request sent, an answer, skipped turns) also log it
        at DEBUG with the numbers as `record.progress`."""
        now = self.clock()
        text = self.status(now)
        if event and log.isEnabledFor(logging.DEBUG):
            eta = self.eta(now) if self.answered < self.answers else 0.0
            log.debug("%s: %s", self.label, text, extra={"progress": {
                "event": event, "task": self.label, "answered": self.answered, "answers": self.answers, "eta_s": eta,
                "prefilled_tokens": self.prefilled_tokens, "elapsed_s": now - self.t0,
                "contexts": {key: g.tokens for key, g in self.groups.items()}}})
        if self.run.show:
            with self.run.lock:
                self.bar.postfix = _Text(text)
                self.bar.refresh()

    def close(self) -> None:
        self.run.showing(None)
        self.bar.close()
        log.info("%s: %d answers (%d from the cache) in %s", self.label, self.answered, self.from_cache,
                 _duration(self.clock() - self.t0))


class RunProgress:
    """The run's phases, and a `TaskProgress` per task variant and seed. On a terminal a
    thread redraws what is shown every `TICK_S`: the task's line, or the phase and its clock
    (loading a large model takes minutes too)."""

    def __init__(self, show: bool, clock: Callable[[], float] = time.monotonic) -> None:
        self.show = bool(show) and sys.stderr.isatty()
        #: the terminal, through a descriptor of our own: a backend that silences the C
        #: library's output by pointing fd 2 at /dev/null while it generates (llama.cpp's)
        #: would otherwise swallow every redraw made meanwhile, and the line would freeze
        self.stream: Any = _own_stream(sys.stderr) if self.show else sys.stderr
        self.judging = False
        self.clock = clock
        self.t0 = clock()
        self.lock = threading.RLock()
        self._task: TaskProgress | None = None
        self._phase: tuple[str, float] | None = None
        self._phase_line: Any = None
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def say(self, text: str) -> None:
        """A line the user should see (on a terminal) and the log keeps."""
        log.info(text)
        if self.show and not log.isEnabledFor(logging.INFO):
            with self.lock:
                tqdm.write(f"lceval: {text}", file=self.stream)

    def phase(self, text: str) -> None:
        self.say(text)
        with self.lock:
            self._phase = (text, self.clock())
        self._tick()

    def task(self, label: str, answers: int, groups: dict[str, int], max_new_tokens: int) -> TaskProgress:
        return TaskProgress(self, label, answers, groups, max_new_tokens)

    def clear_phase(self) -> None:
        """The phase is over (a task starts): its line is cleared."""
        with self.lock:
            self._phase = None
            self._close_phase_line()

    def showing(self, task: TaskProgress | None) -> None:
        """The task whose line is drawn now (None: its line closed; the phase is drawn)."""
        with self.lock:
            self._task = task
            if task is not None:
                self.clear_phase()
        if self.show and self._ticker is None:
            self._ticker = threading.Thread(target=self._run_ticker, name="lceval-progress", daemon=True)
            self._ticker.start()

    def _close_phase_line(self) -> None:
        if self._phase_line is not None:
            self._phase_line.close()
            self._phase_line = None

    def _tick(self) -> None:
        """Redraw: the task's line with its clock and ETA, else the phase and how long it has lasted."""
        if not self.show:
            return
        with self.lock:
            if self._task is not None:
                self._task._show()
            elif self._phase is not None:
                text, since = self._phase
                if self._phase_line is None:
                    self._phase_line = tqdm(total=None, leave=False, file=self.stream, bar_format="lceval: {postfix}")
                now = self.clock()
                self._phase_line.postfix = _Text(f"{text} · {_duration(now - since)} (run: {_duration(now - self.t0)})")
                self._phase_line.refresh()
        if self._ticker is None:
            self._ticker = threading.Thread(target=self._run_ticker, name="lceval-progress", daemon=True)
            self._ticker.start()

    def _run_ticker(self) -> None:
        while not self._stop.wait(TICK_S):
            self._tick()

    def close(self) -> None:
        """Stop redrawing and clear the phase line (the task lines close themselves)."""
        self._stop.set()
        with self.lock:
            self._phase = None
            self._close_phase_line()
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join(timeout=2 * TICK_S)
        if self.stream is not sys.stderr and not getattr(self.stream, "closed", True):
            with self.lock:
                self.stream.close()


def _own_stream(stream: Any) -> Any:
    """A text stream on a duplicate of `stream`'s descriptor (the terminal), or `stream` itself
    when it has no descriptor (a test's)."""
    import os

    try:
        fd = os.dup(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return stream
    return os.fdopen(fd, "w", buffering=1, encoding=getattr(stream, "encoding", None) or "utf-8", errors="replace")
