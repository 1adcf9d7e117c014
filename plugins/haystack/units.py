"""Haystacks of units measured in the evaluated model's own tokens, and samples fitted to a length.

RULER (NVIDIA/RULER scripts/data/synthetic/niah.py, variable_tracking.py) grows a haystack
until the prompt reaches `max_seq_length`, re-tokenizing the whole prompt at every step of a
binary search. Here every unit of a haystack (a noise block, an essay sentence, a distractor
line) is tokenized once, with the evaluated model's tokenizer, and kept with its token count;
a sample takes the units whose counts add up to its budget (the last one cut by tokens), the
needles go between units, and the assembled prompt is counted once with the model's chat
template (`count_tokens`). The sum of unit counts is off by a few tokens where units meet,
so the budget is corrected by the measured gap and the sample rebuilt, rarely more than once.

Sources (RULER's `type_haystack`):
- `NoiseSource`: one block repeated, one block per line;
- `EssaySource`: sentences of the user's text (texts.py), joined by a space;
- `LineSource`: lines made on demand (distractor needles of the same form as the real one).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, Callable

from .tokens import Tokens

__all__ = ["Calibration", "EssaySource", "Fitted", "LineSource", "NoiseSource", "Placed", "Unit", "assemble",
           "fit_to_length"]


@dataclass
class Unit:
    text: str
    tokens: int


class _Source:
    """Units in order with their token counts, tokenized lazily and once."""

    joiner = "\n"

    def __init__(self, tokens: Tokens) -> None:
        self.tokens = tokens
        self.units: list[Unit] = []
        self.cum: list[int] = [0]  # cum[k]: tokens of the first k units and the joiners between them
        self.joiner_tokens = tokens.count(self.joiner) if self.joiner.strip() else 0

    def _more(self) -> Unit | None:
        raise NotImplementedError

    def _extend(self, budget: int) -> None:
        while self.cum[-1] < budget:
            unit = self._more()
            if unit is None:
                return
            self.units.append(unit)
            self.cum.append(self.cum[-1] + unit.tokens + (self.joiner_tokens if len(self.units) > 1 else 0))

    def available(self, budget: int) -> int:
        """Tokens the source holds, up to `budget` (less when it runs out)."""
        self._extend(budget)
        return min(self.cum[-1], budget)

    def take(self, budget: int) -> list[Unit]:
        """The first units, about `budget` tokens in all: whole units, then the next one cut
        by tokens to what is left (RULER's essay haystack is the first N words, so it ends
        mid-sentence too)."""
        self._extend(budget)
        k = bisect.bisect_right(self.cum, budget) - 1
        out = list(self.units[:k])
        left = budget - self.cum[k] - (self.joiner_tokens if k else 0)
        if k < len(self.units) and left > 0:
            text = self.tokens.cut(self.units[k].text, left)
            if text:
                out.append(Unit(text, left))
        return out


class NoiseSource(_Source):
    """A noise haystack: the same block on every line (RULER's "The grass is green. ...")."""

    def __init__(self, tokens: Tokens, block: str) -> None:
        super().__init__(tokens)
        self.block = Unit(block, tokens.count(block))

    def _more(self) -> Unit | None:
        return self.block


class EssaySource(_Source):
    """Sentences of the user's text, joined by a space (niah.py joins them with " "); with
    `repeat`, the text again from its start once it runs out (niah.py: "Repeat haystack as many
    times as needed"), each sentence tokenized once."""

    joiner = " "

    def __init__(self, tokens: Tokens, sentences: list[str], name: str, repeat: bool = False) -> None:
        super().__init__(tokens)
        self.sentences = sentences
        self.name = name
        self.repeat = repeat

    def _more(self) -> Unit | None:
        i = len(self.units)
        if i >= len(self.sentences):
            if not self.repeat or not self.sentences:
                return None
            return Unit(self.sentences[i % len(self.sentences)], self.units[i % len(self.sentences)].tokens)
        return Unit(self.sentences[i], len(self.tokens.ids(self.sentences[i])))

    def passes(self, units: int) -> int:
        """How many times the first `units` units read the text (2: it was repeated once)."""
        return max(1, -(-units // max(1, len(self.sentences))))


class LineSource(_Source):
    """Lines made on demand (RULER's `needle` haystack: distractor needles, one a line)."""

    def __init__(self, tokens: Tokens, make_line: Callable[[], str]) -> None:
        super().__init__(tokens)
        self.make_line = make_line

    def _more(self) -> Unit | None:
        line = self.make_line()
        return Unit(line, len(self.tokens.ids(line)))


@dataclass
class Placed:
    """The haystack with its inserts, and where each insert landed."""

    context: str
    #: per insert (in the order given): the share of the haystack's tokens before it, in percent
    achieved: list[float]
    haystack_tokens: int


def assemble(units: list[Unit], inserts: list[tuple[str, int]], joiner: str) -> Placed:
    """Put each insert (text, unit index) before that unit (an index past the end: after the
    last one) and join everything with `joiner`, as RULER's essay branch joins sentences and
    needles, and its noise branch lines (`"\\n".join(sentences)`). Inserts at the same index
    keep their order."""
    cum = [0]
    for u in units:
        cum.append(cum[-1] + u.tokens)
    total = cum[-1] or 1
    at: dict[int, list[str]] = {}
    for text, index in inserts:
        at.setdefault(min(max(index, 0), len(units)), []).append(text)
    parts: list[str] = []
    for i in range(len(units) + 1):
        parts.extend(at.get(i, []))
        if i < len(units):
            parts.append(units[i].text)
    achieved = [100.0 * cum[min(max(index, 0), len(units))] / total for _, index in inserts]
    return Placed(joiner.join(p for p in parts if p), achieved, cum[-1])


@dataclass
class Fitted:
    value: Any
    prompt_tokens: int
    rounds: int


class Calibration:
    """How far the sum of unit counts missed the measured prompt on the last sample: the
    miss comes from where units meet and from the chat template, so it repeats from one
    sample to the next, and the next first guess starts corrected (one count, not two)."""

    def __init__(self) -> None:
        self.shift = 0


def fit_to_length(make: Callable[[int], tuple[Any, int]], target: int, first_budget: int, close: int,
                  rounds: int = 6, calibration: Calibration | None = None) -> Fitted | None:
    """Build with a haystack budget, measure the prompt, and correct the budget by the gap
    until the prompt is at most `target` tokens and within `close` of it. `make(budget)`
    returns (the sample, its prompt tokens). Returns the longest sample that fits, or None
    when none does (the caller says why)."""
    shift = calibration.shift if calibration is not None else 0
    budget = max(first_budget + shift, 0)
    best: Fitted | None = None
    tried: set[int] = set()
    for r in range(1, rounds + 1):
        value, n = make(budget)
        if r == 1 and calibration is not None:
            calibration.shift = shift + (target - n)
        if n <= target and (best is None or n > best.prompt_tokens):
            best = Fitted(value, n, r)
        gap = target - n
        if 0 <= gap <= close:
            break
        tried.add(budget)
        # overshoot: step back by the excess and one more, so rounding cannot loop
        nxt = budget + gap if gap > 0 else budget + gap - 1
        if nxt < 0 or nxt in tried:
            break
        budget = nxt
    return best
