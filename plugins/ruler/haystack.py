"""Haystacks measured in the evaluated model's own tokens, and samples fitted to a length.

RULER (NVIDIA/RULER scripts/data/synthetic/niah.py, variable_tracking.py) grows a haystack
until the prompt reaches `max_seq_length`, re-tokenizing the whole prompt at every step of a
binary search. Here every unit of a haystack (a noise block, an essay sentence, a distractor
line) is tokenized once, with the evaluated model's tokenizer, and kept with its token count;
a sample takes the units whose counts add up to its budget (the last one cut by tokens), the
needles go between units, and the assembled prompt is counted once with the model's chat
template (`count_tokens`). The sum of unit counts is off by a few tokens where units meet,
so the budget is corrected by the measured gap and the sample rebuilt, rarely more than once.

Haystack kinds (RULER's `type_haystack`):
- ``noise``: the block "The grass is green. ..." repeated, one block per line;
- ``essay``: text the user points to (RULER ships Paul Graham's essays, which we may not
  redistribute): the ELITR-Bench transcripts of the data home, a text file, a folder of text
  files, or a field of a JSON / JSON Lines file; whitespace collapsed and cut into sentences,
  as RULER does with `re.sub(r'\\s+', " ", essay)` and nltk's `sent_tokenize` (here a
  sentence ends at `.`, `!` or `?` before a space: no nltk model to download);
- ``needle``: distractor needles of the same form as the real one, one per line.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from lceval.errors import DataMissing, UserError
from lceval.interfaces import ModelBackend
from lceval.types import Message

__all__ = ["DEPTHS", "NOISE", "EssaySource", "essay_needs", "Fitted", "LineSource", "NoiseSource", "Placed", "Tokens",
           "Calibration", "assemble", "depth_index", "fit_to_length", "read_essay_texts", "split_sentences"]

#: RULER's noise haystack (niah.py, variable_tracking.py)
NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
#: RULER's 40 needle depths, np.round(np.linspace(0, 100, num=40)).astype(int) (niah.py
#: `DEPTHS`); Python's round() rounds half to even like numpy's
DEPTHS = [round(k * 100 / 39) for k in range(40)]


def spread_order(n: int) -> list[int]:
    """The indexes 0..n-1 in an order whose every prefix spreads over the whole range: the two
    ends first, then each time the index farthest from those already taken (the smaller on a
    tie). Sample i takes depth `order[i % n]`, so `--limit 3` over five depths asks at 0, 100
    and 50 rather than at 0, 25 and 50, and every depth still gets its share of a full run."""
    if n <= 2:
        return list(range(n))
    order, rest = [0, n - 1], list(range(1, n - 1))
    while rest:
        best = max(rest, key=lambda i: (min(abs(i - j) for j in order), -i))
        order.append(best)
        rest.remove(best)
    return order

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


class Tokens:
    """The evaluated model's tokenizer, with short texts' counts remembered (needles, noise
    blocks and word lists repeat across samples)."""

    def __init__(self, backend: ModelBackend) -> None:
        self.backend = backend
        self._counts: dict[str, int] = {}
        #: haystack sources already tokenized, by what they are made of (sources.py)
        self.sources: dict[tuple[str, ...], Any] = {}
        self.tokenize_calls = 0
        self.prompt_counts = 0

    def ids(self, text: str) -> list[int]:
        self.tokenize_calls += 1
        ids = self.backend.tokenize(text)
        if ids is None:
            raise UserError(f"model {type(self.backend).__name__} lends no tokenizer", field="--model")
        return ids

    def count(self, text: str) -> int:
        n = self._counts.get(text)
        if n is None:
            n = len(self.ids(text))
            if len(text) <= 256:
                self._counts[text] = n
        return n

    def cut(self, text: str, tokens: int) -> str:
        """The first `tokens` tokens of `text` as text, without trailing whitespace."""
        if tokens <= 0:
            return ""
        ids = self.ids(text)
        if tokens >= len(ids):
            return text
        return self.backend.detokenize(ids[:tokens]).rstrip()

    def prompt(self, messages: list[Message]) -> int:
        """Tokens of the prompt after the chat template, as `generate` will send it."""
        self.prompt_counts += 1
        n = self.backend.count_tokens(messages)
        if n is None:
            raise UserError(f"model {type(self.backend).__name__} cannot count the tokens of a prompt",
                            field="--model")
        return n


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
    """RULER's noise haystack: the same block on every line."""

    def __init__(self, tokens: Tokens) -> None:
        super().__init__(tokens)
        self.block = Unit(NOISE, tokens.count(NOISE))

    def _more(self) -> Unit | None:
        return self.block


class EssaySource(_Source):
    """Sentences of the user's text, joined by a space (niah.py joins them with " ")."""

    joiner = " "

    def __init__(self, tokens: Tokens, sentences: list[str], name: str) -> None:
        super().__init__(tokens)
        self.sentences = sentences
        self.name = name

    def _more(self) -> Unit | None:
        i = len(self.units)
        if i >= len(self.sentences):
            return None
        return Unit(self.sentences[i], len(self.tokens.ids(self.sentences[i])))


class LineSource(_Source):
    """Lines made on demand (RULER's `needle` haystack: distractor needles, one a line)."""

    def __init__(self, tokens: Tokens, make_line: Callable[[], str]) -> None:
        super().__init__(tokens)
        self.make_line = make_line

    def _more(self) -> Unit | None:
        line = self.make_line()
        return Unit(line, len(self.tokens.ids(line)))


def split_sentences(text: str) -> list[str]:
    """Whitespace collapsed (niah.py: `re.sub(r'\\s+', " ", essay)`), then sentences."""
    flat = re.sub(r"\s+", " ", text).strip()
    return [s for s in _SENTENCE_END.split(flat) if s]


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


def depth_index(units: int, depth: float) -> int:
    """RULER's insertion point for a depth: `int(len(document_sents) * (depth / 100))`."""
    return int(units * (depth / 100))


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


def essay_needs(options: dict[str, Any], ctx: Any) -> list[Any]:
    """What an essay haystack reads from the data home: `elitr` is the ELITR-Bench transcripts
    (the elitr-bench dataset); a file or folder the user names is theirs."""
    from lceval.io import DataHomePath

    if options.get("essay") != "elitr":
        return []
    return [DataHomePath("elitr-bench/transcripts", ctx.data_home, "the ELITR-Bench transcripts")]


def read_essay_texts(value: str, field: str, home: Path, record: Callable[[Path], None]) -> tuple[list[str], str]:
    """The texts an `essay` option names, and a readable name for them: ``elitr`` (the
    ELITR-Bench transcripts of the data home), a text file, a folder of ``.txt``/``.md``
    files, or a ``.json`` / ``.jsonl`` file whose records' `field` holds the text."""
    from lceval.io import read_json, read_json_lines, read_text

    if value == "elitr":
        folder = home / "elitr-bench" / "transcripts"
        paths = sorted(folder.glob("*.txt")) if folder.is_dir() else []
        if not paths:
            raise DataMissing(f"essay 'elitr' reads the ELITR-Bench transcripts, and {folder} has none",
                              field="options.essay", command="lceval data fetch elitr-bench",
                              hint="Run: lceval data fetch elitr-bench [--from DIR], or point options.essay "
                                   "at a file or folder of text.")
        name = "ELITR-Bench transcripts"
    else:
        path = Path(value).expanduser()
        if path.is_dir():
            paths = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in (".txt", ".md"))
            if not paths:
                raise UserError(f"folder '{value}' holds no .txt or .md file", field="options.essay")
        elif path.is_file():
            paths = [path]
        else:
            raise UserError(f"no file or folder '{value}'", field="options.essay",
                            hint="Give a text file, a folder of .txt/.md files, a .json/.jsonl file with "
                                 "options.essay_field, or 'elitr'.")
        name = path.name
    texts: list[str] = []
    for p in paths:
        record(p)
        if p.suffix.lower() == ".jsonl":
            texts += [_field(rec, field, p, line) for line, rec in read_json_lines(p, what="essay file")]
        elif p.suffix.lower() == ".json":
            data = read_json(p, what="essay file")
            records = data if isinstance(data, list) else [data]
            texts += [_field(rec, field, p, None) for rec in records]
        else:
            texts.append(read_text(p, what="essay file"))
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise UserError(f"essay '{value}' holds no text", field="options.essay")
    return texts, name


def _field(record: Any, field: str, path: Path, line: int | None) -> str:
    if isinstance(record, str):
        return record
    if not isinstance(record, dict) or not isinstance(record.get(field), str):
        raise UserError(f"a record has no text field '{field}'", file=path, line=line,
                        field="options.essay_field", hint="Name the field that holds the text.")
    return record[field]
