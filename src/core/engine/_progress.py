"""What a run says while it works, so a user can tell work from a hang: the phase (reading
data, loading the model), per task the transcript being prefilled and its size, answers and
verdicts with their counts, and an ETA computed from the tokens still to prefill and to
generate, at the rates this run has measured so far (prefill and decoding cost differently:
a long transcript takes minutes, a question seconds). A resumed run says how many answers
came from the cache.

On a terminal it is a progress bar on stderr; elsewhere it is quiet. The same events go to
the `lceval` logger (INFO for phases, DEBUG for each request), which `-v` / `--log-level`
show, on a terminal or not.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

log = logging.getLogger("lceval")

#: what an answer is assumed to cost in generated tokens before any was measured (of max_new_tokens)
FIRST_GUESS_SHARE = 0.25


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


class TaskProgress:
    """One task variant and seed: a bar of answers with verdicts, the current transcript and
    an ETA in tokens."""

    def __init__(self, run: "RunProgress", label: str, answers: int, groups: dict[str, int],
                 max_new_tokens: int) -> None:
        self.run, self.label = run, label
        self.answers, self.answered, self.from_cache, self.judged = answers, 0, 0, 0
        self.groups = groups  # context id -> tokens of its transcript, in task order
        self.order = {key: i for i, key in enumerate(groups)}
        self.started: set[str] = set()
        self.prefilling: str | None = None
        self.max_new_tokens = max_new_tokens
        self.rates = _Rates()
        self.generated_tokens = 0
        self.generated = 0
        self.t0 = time.monotonic()
        self.bar = tqdm(total=answers, desc=label, unit="answer", leave=False, disable=not run.show or None,
                        file=sys.stderr, bar_format="{desc}: {n_fmt}/{total_fmt} answers |{bar:20}| {postfix}")
        log.info("%s: %d answers to give about %d contexts (%s tokens)", label, answers, len(groups),
                 f"{sum(groups.values()):,}")

    def resumed(self, cached: int) -> None:
        if cached:
            self.run.say(f"{self.label}: resumed: {cached} of {self.answers} answers from the cache")

    def request_started(self, context_id: str) -> None:
        if context_id not in self.started:
            self.started.add(context_id)
            self.prefilling = context_id
            text = (f"prefilling transcript {self.order.get(context_id, 0) + 1}/{len(self.groups)} "
                    f"({self.groups.get(context_id, 0):,} tokens)")
            log.debug("%s: %s", self.label, text)
            self._show(text)

    def answer(self, context_id: str, gen: Any) -> None:
        self.answered += 1
        if context_id == self.prefilling:
            self.prefilling = None
        if getattr(gen, "cached", False):
            self.from_cache += 1
        elif gen is not None:
            self.generated += 1
            self.generated_tokens += int(gen.completion_tokens or 0)
            self.rates.add(gen.prefilled_tokens, int(gen.completion_tokens or 0), float(gen.seconds or 0.0))
        self.bar.update(1)
        self._show()

    def skipped(self, n: int) -> None:
        self.answered += n
        self.bar.update(n)
        self._show()

    def judged_some(self, n: int) -> None:
        self.judged += n
        self._show()

    def eta(self) -> float | None:
        """Seconds still to go: the transcripts not yet started, prefilled whole, plus the
        answers still to come, each at the mean length generated so far."""
        rates = self.rates.per_token()
        if rates is None:
            return None
        per_prefill, per_generated = rates
        to_prefill = sum(tokens for key, tokens in self.groups.items() if key not in self.started)
        mean_answer = self.generated_tokens / self.generated if self.generated else \
            self.max_new_tokens * FIRST_GUESS_SHARE
        return to_prefill * per_prefill + (self.answers - self.answered) * mean_answer * per_generated

    def _show(self, doing: str | None = None) -> None:
        if not self.run.show:
            return
        parts = [f"judged {self.judged}/{self.answered}"] if self.run.judging else []
        if self.from_cache:
            parts.append(f"{self.from_cache} from cache")
        if doing or self.prefilling:
            parts.append(doing or f"prefilling transcript {self.order.get(self.prefilling, 0) + 1}/{len(self.groups)}")
        eta = self.eta()
        if eta is not None and self.answered < self.answers:
            parts.append(f"ETA {_duration(eta)}")
        self.bar.set_postfix_str(" · ".join(parts), refresh=True)

    def close(self) -> None:
        self.bar.close()
        log.info("%s: %d answers (%d from the cache) in %s", self.label, self.answered, self.from_cache,
                 _duration(time.monotonic() - self.t0))


class RunProgress:
    """The run's phases, and a `TaskProgress` per task variant and seed."""

    def __init__(self, show: bool) -> None:
        self.show = bool(show) and sys.stderr.isatty()
        self.judging = False

    def say(self, text: str) -> None:
        """A line the user should see (on a terminal) and the log keeps."""
        log.info(text)
        if self.show and not log.isEnabledFor(logging.INFO):
            tqdm.write(f"lceval: {text}", file=sys.stderr)

    def phase(self, text: str) -> None:
        self.say(text)

    def task(self, label: str, answers: int, groups: dict[str, int], max_new_tokens: int) -> TaskProgress:
        return TaskProgress(self, label, answers, groups, max_new_tokens)
