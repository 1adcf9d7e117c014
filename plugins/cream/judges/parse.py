"""Reading the CREAM judges' answers back: the JSON list after "ANSWER:", then scores.

Tolerant of what judge models really write (the list in ``` fences, prose around it, a
trailing comma, single quotes, keys in any case or spacing, line numbers as 2, "2" or "[2]"),
strict about what would change a score: no list, an empty list, an object without a fact,
or a verdict that is neither yes nor no is a failure (retried, then recorded as
parse_failure); we never guess a score. Line numbers outside the summary are dropped and
counted (`invalid_lines`), not a failure: the rest of the answer is still usable.

Scores, as FineSurE (Gong et al., 2024, ref. [10]; Sec. 3.1 "Metrics") defines them, per summary X:
    completeness_X = (# key facts X supports) / (# key facts)
    conciseness_X  = (# distinct sentences of X aligned to at least one key fact) / (# sentences of X)
A summary with no sentence at all scores 0 on both: it supports no fact, and calling it
perfectly concise would let an empty summary win every conciseness comparison.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any

from .prompts import ANSWER_MARKER, REASONING_MARKER


class ParseError(ValueError):
    """The output holds no usable answer (the message says why; it goes into details)."""


_FENCE = re.compile(r"```[a-zA-Z]*")
_TRAILING_COMMA = re.compile(r",(\s*[\]}])")
_DIGITS = re.compile(r"\d+")


def _matching_bracket(text: str, start: int) -> int:
    """Index of the "]" closing the "[" at `start`, skipping brackets inside strings."""
    depth, quote, escaped = 0, "", False
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
            continue
        if ch in "\"'":
            # an apostrophe inside a word ("Northgate's") is no string delimiter
            if ch == "'" and i > 0 and text[i - 1].isalnum():
                continue
            quote = ch
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _load(candidate: str) -> Any:
    """json, then json without trailing commas, then a Python literal (single quotes)."""
    for text in (candidate, _TRAILING_COMMA.sub(r"\1", candidate)):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            pass
    try:
        return ast.literal_eval(_TRAILING_COMMA.sub(r"\1", candidate))
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        raise ParseError("the answer is not valid JSON") from None


def _lists_in(text: str) -> list[str]:
    out = []
    for match in re.finditer(r"\[", text):
        end = _matching_bracket(text, match.start())
        if end > 0:
            out.append(text[match.start():end + 1])
    return out


def extract_answer(text: str) -> tuple[list[Any], str]:
    """(the answer list, the reasoning before it). The list is the first one after the last
    "ANSWER:"; without the marker, the first top-level list of objects or strings that loads."""
    cut = text.upper().rfind(ANSWER_MARKER)
    if cut >= 0:
        reasoning, tail = text[:cut], _FENCE.sub("", text[cut + len(ANSWER_MARKER):])
        start = tail.find("[")
        if start < 0:
            raise ParseError(f"no JSON list after {ANSWER_MARKER}")
        end = _matching_bracket(tail, start)
        if end < 0:
            raise ParseError("the JSON list is not closed (output cut short?)")
        value = _load(tail[start:end + 1])
    else:
        body = _FENCE.sub("", text)
        value, reasoning = None, ""
        for candidate in _lists_in(body):
            if not re.match(r"\[\s*[{\"']", candidate):
                continue  # "[1]" in the reasoning is a line reference, not the answer
            try:
                value = _load(candidate)
            except ParseError:
                continue
            reasoning = body[:body.find(candidate)]
            break
        if value is None:
            raise ParseError(f"no {ANSWER_MARKER} marker and no JSON list in the output")
    if not isinstance(value, list):
        raise ParseError("the answer is not a JSON list")
    if not value:
        raise ParseError("the answer lists no key fact")
    reasoning = reasoning.strip()
    if reasoning.upper().startswith(REASONING_MARKER):
        reasoning = reasoning[len(REASONING_MARKER):].strip()
    return value, reasoning


def _norm_key(key: Any) -> str:
    return re.sub(r"[^a-z]", "", str(key).lower())


def _field(obj: dict[str, Any], *names: str) -> tuple[bool, Any]:
    """(found, value) of the first key whose letters match one of `names` (case and spacing
    ignored: "Summary A lines", "summary_a_lines", "summaryALines" are the same key)."""
    keys = {_norm_key(k): v for k, v in obj.items()}
    for name in names:
        if name in keys:
            return True, keys[name]
    return False, None


def parse_lines(value: Any) -> list[int]:
    """Line numbers as the judge wrote them: [1, 2], ["[1]", "2"], "1, 3", 4, None."""
    if value is None:
        return []
    if isinstance(value, bool):
        raise ParseError(f"line numbers must be numbers, got {value!r}")
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not value.is_integer():
            raise ParseError(f"line number {value!r} is not an integer")
        return [int(value)]
    if isinstance(value, str):
        return [int(d) for d in _DIGITS.findall(value)]
    if isinstance(value, (list, tuple)):
        out: list[int] = []
        for v in value:
            out.extend(parse_lines(v))
        return out
    raise ParseError(f"cannot read line numbers from {value!r}")


def _fact_text(obj: Any, index: int) -> str:
    if isinstance(obj, str):
        fact = obj
    elif isinstance(obj, dict):
        found, fact = _field(obj, "keyfact", "fact", "keyfacts")
        if not found:
            raise ParseError(f"key fact {index}: no 'key fact' field")
    else:
        raise ParseError(f"key fact {index} is neither an object nor a string: {obj!r}")
    if not isinstance(fact, str) or not fact.strip():
        raise ParseError(f"key fact {index} is empty")
    return fact.strip()


@dataclass
class Side:
    """One summary's alignment: valid lines per fact, and what was dropped."""

    n_sentences: int
    lines: list[list[int]] = field(default_factory=list)  # per fact, valid, sorted, distinct
    supported: list[bool] = field(default_factory=list)
    invalid_lines: int = 0

    def add(self, raw_lines: list[int], supported: bool | None = None) -> None:
        valid = sorted({n for n in raw_lines if 1 <= n <= self.n_sentences})
        self.invalid_lines += sum(1 for n in raw_lines if not 1 <= n <= self.n_sentences)
        self.lines.append(valid)
        self.supported.append(bool(valid) if supported is None else supported)

    def completeness(self) -> float:
        return sum(self.supported) / len(self.supported) if self.supported else 0.0

    def aligned_lines(self) -> list[int]:
        """Distinct sentences aligned to a supported fact."""
        return sorted({n for ok, lines in zip(self.supported, self.lines) if ok for n in lines})

    def conciseness(self) -> float:
        return len(self.aligned_lines()) / self.n_sentences if self.n_sentences else 0.0

    def scores(self) -> dict[str, float]:
        return {"completeness": self.completeness(), "conciseness": self.conciseness()}


@dataclass
class PairParse:
    facts: list[str]
    a: Side
    b: Side
    reasoning: str
    facts_over_cap: int  # facts listed beyond max_key_facts, dropped


def parse_pair(text: str, n_a: int, n_b: int, max_key_facts: int) -> PairParse:
    """The CREAM answer: [{"key fact", "summary A lines", "summary B lines"}, ...]."""
    items, reasoning = extract_answer(text)
    over = max(0, len(items) - max_key_facts)
    items = items[:max_key_facts]
    a, b, facts = Side(n_a), Side(n_b), []
    for i, obj in enumerate(items, 1):
        facts.append(_fact_text(obj, i))
        if not isinstance(obj, dict):
            raise ParseError(f"key fact {i} has no line numbers")
        found_a, lines_a = _field(obj, "summaryalines", "summarya", "alines", "linesa", "summaryalinenumbers")
        found_b, lines_b = _field(obj, "summaryblines", "summaryb", "blines", "linesb", "summaryblinenumbers")
        if not (found_a and found_b):
            raise ParseError(f"key fact {i}: the 'summary A lines' and 'summary B lines' fields are required")
        a.add(parse_lines(lines_a))
        b.add(parse_lines(lines_b))
    return PairParse(facts, a, b, reasoning, over)


def parse_facts(text: str, max_key_facts: int) -> tuple[list[str], str, int]:
    """Step (a) of the reference check: (facts, reasoning, facts_over_cap)."""
    items, reasoning = extract_answer(text)
    facts = [_fact_text(obj, i) for i, obj in enumerate(items, 1)]
    return facts[:max_key_facts], reasoning, max(0, len(facts) - max_key_facts)


_YES = {"yes", "y", "true", "supported"}
_NO = {"no", "n", "false", "notsupported", "unsupported"}


def parse_alignment(text: str, n_facts: int, n_sentences: int) -> tuple[Side, str]:
    """Step (b): [{"key fact", "response": "Yes"|"No", "line numbers": [...]}], one per fact in
    order. Completeness counts "Yes" (as FineSurE); lines given with a "No" are ignored."""
    items, reasoning = extract_answer(text)
    if len(items) != n_facts:
        raise ParseError(f"the answer has {len(items)} entries for {n_facts} key facts")
    side = Side(n_sentences)
    for i, obj in enumerate(items, 1):
        if not isinstance(obj, dict):
            raise ParseError(f"entry {i} is not an object")
        found, verdict = _field(obj, "response", "supported", "answer")
        lines = parse_lines(_field(obj, "linenumbers", "lines", "linenumber", "line")[1])
        if isinstance(verdict, bool):
            supported = verdict
        elif found and _norm_key(verdict) in _YES:
            supported = True
        elif found and _norm_key(verdict) in _NO:
            supported = False
        else:
            raise ParseError(f"entry {i}: 'response' must be Yes or No, got {verdict!r}")
        side.add(lines, supported)
    return side, reasoning
