"""Substitution rules learnt from an aligned ASR corpus (Thonet et al., 2024b, App. A).

The paper's rules map a token to "a probability distribution over similar tokens (or an empty
character) that can plausibly replace it", e.g. `"earlier": {"early": 0.4651, ...}`, learnt
from RED-ACE with the ASR error simulator (pe-trik/asr-errors-simulator). Ours are the same
object with its evidence kept:

- `rules[token]`: `seen` (occurrences in the corpus references), `counts` (replacement -> how
  often the recogniser produced it, `""` = deleted) and `p` (the same, normalised: the
  paper's distribution). Only tokens the recogniser got wrong at least once have a rule; the
  token itself never appears among its replacements.
- insertions, as the simulator keeps them (a rule for the empty reference token): words the
  recogniser produced where the reference had none, with their counts, and the corpus's
  insertion rate per reference word.
- `counts`: reference words, correct, substituted, deleted and inserted words of the whole
  corpus (its WER is their ratio), which set the mix of error kinds when noise is injected.

Words are normalised as WER scoring sees them (`text.normalize`), both sides alike.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lceval.io import write_text_atomic
from lceval.io import sha256_file
from lceval.errors import UserError
from lceval.io import read_text

from .align import align
from .corpus import Corpus
from .text import words

FORMAT = "lceval-asr-rules"
VERSION = 1


def build_rules(corpus: Corpus) -> dict[str, Any]:
    """Align every pair and tally, per reference word, what the recogniser made of it."""
    seen: Counter[str] = Counter()
    errors: dict[str, Counter[str]] = defaultdict(Counter)
    inserted: Counter[str] = Counter()
    totals = {"reference_words": 0, "correct": 0, "substitutions": 0, "deletions": 0, "insertions": 0}
    kinds = {"match": "correct", "substitution": "substitutions", "deletion": "deletions", "insertion": "insertions"}
    for ref_text, hyp_text in corpus.pairs:
        for edit in align(words(ref_text), words(hyp_text)):
            totals[kinds[edit.kind]] += 1
            if edit.ref is None:
                inserted[edit.hyp or ""] += 1
                continue
            totals["reference_words"] += 1
            seen[edit.ref] += 1
            if edit.ref != edit.hyp:
                errors[edit.ref][edit.hyp or ""] += 1
    n = totals["reference_words"]
    wrong = totals["substitutions"] + totals["deletions"] + totals["insertions"]
    rules = {}
    for token in sorted(errors):
        counts = dict(sorted(errors[token].items()))
        total = sum(counts.values())
        rules[token] = {"seen": seen[token], "counts": counts,
                        "p": {k: round(v / total, 6) for k, v in counts.items()}}
    total_ins = sum(inserted.values())
    return {
        "format": FORMAT,
        "version": VERSION,
        "corpus": {"source": corpus.source, "sha256": corpus.sha256, "sha256_of": corpus.sha256_of,
                   "pairs": len(corpus.pairs), "reference_types": len(seen)},
        "normalisation": "lower case, Unicode punctuation (category P*) removed, split on whitespace",
        "alignment": "word-level Levenshtein (minimum edits), ties toward similar spellings",
        "counts": totals,
        "wer": round(wrong / n, 6) if n else None,
        "insertions": {"rate": round(totals["insertions"] / n, 6) if n else 0.0,
                       "counts": dict(sorted(inserted.items())),
                       "p": {k: round(v / total_ins, 6) for k, v in sorted(inserted.items())}},
        "rules": rules,
    }


def write_rules(rules: dict[str, Any], path: Path) -> Path:
    return write_text_atomic(path, json.dumps(rules, ensure_ascii=False, indent=1, sort_keys=False) + "\n")


@dataclass(frozen=True)
class Choice:
    """A categorical distribution from counts, sampled exactly (integers, no float drift)."""

    values: tuple[str, ...]
    cumulative: tuple[int, ...]

    @classmethod
    def of(cls, counts: dict[str, int]) -> "Choice":
        values, cum, total = [], [], 0
        for value, count in sorted(counts.items()):
            if count > 0:
                total += count
                values.append(value)
                cum.append(total)
        return cls(tuple(values), tuple(cum))

    def __bool__(self) -> bool:
        return bool(self.values)

    def draw(self, u: float) -> str:
        """The value at uniform draw u in [0, 1)."""
        return self.values[bisect_right(self.cumulative, u * self.cumulative[-1])]


@dataclass
class Rules:
    """A rules file ready for sampling."""

    path: Path
    sha256: str
    counts: dict[str, int]
    table: dict[str, Choice]  # token -> replacements ("" = deletion)
    substitutes: dict[str, Choice]  # token -> replacements other than deletion
    insertions: Choice
    vocabulary: tuple[str, ...]  # every word a rule produced: stand-ins for unknown words
    corpus: dict[str, Any]

    @property
    def n_rules(self) -> int:
        return len(self.table)


def _bad(path: Path, field: str, message: str) -> UserError:
    return UserError(message, file=path, field=field,
                     hint="Build rules with: lceval noise rules CORPUS -o RULES.json")


def _counts(value: Any, path: Path, field: str) -> dict[str, int]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, int) and v >= 0
                                              for k, v in value.items()):
        raise _bad(path, field, "expected a mapping of words to non-negative integer counts")
    return value


def load_rules(path: Path) -> Rules:
    path = Path(path)
    if not path.is_file():
        raise _bad(path, "rules", "rules file not found")
    try:
        data = json.loads(read_text(path, what="rules file"))
    except (json.JSONDecodeError, RecursionError) as exc:
        raise _bad(path, "rules", f"not a JSON rules file: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise _bad(path, "format", f"not an lceval rules file (expected format '{FORMAT}')")
    if data.get("version") != VERSION:
        raise _bad(path, "version", f"unsupported rules version {data.get('version')!r} (this lceval reads {VERSION})")
    counts = _counts(data.get("counts"), path, "counts")
    for key in ("reference_words", "substitutions", "deletions", "insertions"):
        if key not in counts:
            raise _bad(path, f"counts.{key}", "missing")
    rules = data.get("rules")
    if not isinstance(rules, dict):
        raise _bad(path, "rules", "expected a mapping of tokens to rules")
    table, substitutes = {}, {}
    for token, rule in rules.items():
        if not isinstance(rule, dict):
            raise _bad(path, f"rules.{token}", "expected an object with 'counts'")
        counts_t = _counts(rule.get("counts"), path, f"rules.{token}.counts")
        choice = Choice.of(counts_t)
        if token in choice.values:
            raise _bad(path, f"rules.{token}.counts", "a token cannot be its own replacement")
        if choice:
            table[token] = choice
        subs = Choice.of({k: v for k, v in counts_t.items() if k})
        if subs:
            substitutes[token] = subs
    ins = data.get("insertions") or {}
    insertions = Choice.of(_counts(ins.get("counts", {}), path, "insertions.counts"))
    vocabulary = tuple(sorted({v for c in table.values() for v in c.values if v}))
    return Rules(path=path, sha256=sha256_file(path), counts=counts, table=table, substitutes=substitutes,
                 insertions=insertions,
                 vocabulary=vocabulary, corpus=dict(data.get("corpus") or {}))
