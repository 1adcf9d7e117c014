"""What failed in a run, said out loud at its end: the answers that could not be generated and
the verdicts that could not be given, by kind (`lceval.errors.FAILURE_KINDS`: the backend's
classification of the HTTP status and the provider's error type), each kind with its count,
its first message and what to do about it where the backend knew (`error["hint"]`).

`lceval run` and `lceval score` print it on stderr after the table; a run in which nothing
could be generated, or nothing judged, exits with a code of its own (docs/errors.md). Where
the failures are recorded is said too: samples.jsonl, each failed answer's
`generation_extras.generation_failed.error`, each failed verdict's
`judgments[].details.judge_error`; neither is cached, so the same command asks them again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lceval.engine import RunState
from lceval.types import Sample

#: the engine's own kind for a question a cost limit kept back: not sent, so no failure
NOT_SENT = "cost_limit"
#: longest first message shown per kind (the whole one is in samples.jsonl)
SHOWN = 300


@dataclass
class KindCount:
    """Failures of one kind: how many, the first one's message and its hint."""

    count: int = 0
    first: str = ""
    hint: str | None = None


@dataclass
class Failures:
    """A run's failures. `asked`: answers asked of the model (not skipped, not kept back by a
    cost limit); `generated`: of them, those it gave. `to_judge`: verdicts asked of the judges
    (a judgment per judge and answer); `judged`: of them, those given (a verdict the judge
    gave but that could not be parsed counts as given: the judge answered)."""

    asked: int = 0
    generated: int = 0
    generation: dict[str, KindCount] = field(default_factory=dict)
    to_judge: int = 0
    judged: int = 0
    judging: dict[str, KindCount] = field(default_factory=dict)

    @property
    def nothing_generated(self) -> bool:
        return self.asked > 0 and self.generated == 0

    @property
    def nothing_judged(self) -> bool:
        return self.to_judge > 0 and self.judged == 0 and bool(self.judging)

    @property
    def nothing_done(self) -> bool:
        """No answer was generated, or none could be judged: the run measured nothing."""
        return self.nothing_generated or self.nothing_judged


def _records(value: Any) -> list[dict[str, Any]]:
    """The error records in a failure's value: an error dict (`kind`, `message`, `hint`), a
    dict holding one under `error`, a list of them (a judge asking several calls per verdict),
    or a bare message."""
    if isinstance(value, list):
        return [r for v in value for r in _records(v)]
    if isinstance(value, dict):
        if "kind" in value or "message" in value:
            return [value]
        return _records(value.get("error"))
    if value is None:
        return []
    return [{"kind": "error", "message": str(value)}]


def _count(table: dict[str, KindCount], records: list[dict[str, Any]], unsaid: str) -> None:
    """One failure, of its first record's kind (a verdict whose several calls failed is one);
    `unsaid`: the message of one whose backend recorded no error."""
    if not records:
        records = [{"kind": "error", "message": unsaid}]
    first = records[0]
    entry = table.setdefault(str(first.get("kind") or "error"), KindCount())
    entry.count += 1
    if entry.count == 1:
        entry.first = " ".join(str(first.get("message") or "").split())
    if entry.hint is None:
        entry.hint = next((str(r["hint"]) for r in records if r.get("hint")), None)


def _not_sent(records: list[dict[str, Any]]) -> bool:
    return bool(records) and all(r.get("kind") == NOT_SENT for r in records)


def failures_of(samples: list[Sample]) -> Failures:
    """The failures of a run's samples (every task's)."""
    out = Failures()
    for sample in samples:
        failed = sample.generation_extras.get("generation_failed")
        records = _records(failed)
        if _not_sent(records):
            continue
        answered = sample.response is not None or bool(sample.generation_extras.get("unclosed_thinking"))
        if answered:
            out.asked += 1
            out.generated += 1
        elif failed is not None:
            out.asked += 1
            _count(out.generation, records, "the backend gave no answer and recorded no error")
        for judgment in sample.judgments if sample.response is not None else []:
            error = (judgment.details or {}).get("judge_error")
            if _not_sent(_records(error)):
                continue
            out.to_judge += 1
            if judgment.parse_status != "missing":
                out.judged += 1
            elif "judge_error" in (judgment.details or {}):
                _count(out.judging, _records(error), "the judge gave no verdict and recorded no error")
    return out


def run_failures(state: RunState) -> Failures:
    return failures_of([s for task in state.tasks for s in task.samples])


def _kinds(table: dict[str, KindCount]) -> list[str]:
    lines = []
    width = max(len(k) for k in table)
    for kind, entry in sorted(table.items(), key=lambda kv: -kv[1].count):
        first = entry.first if len(entry.first) <= SHOWN else entry.first[:SHOWN - 3] + "..."
        lines.append(f"  {kind:<{width}}  {entry.count}  first: {first}")
        if entry.hint:
            lines.append(f"  {'':<{width}}  hint: {entry.hint}")
    return lines


def format_failures(failures: Failures, run_dir: Path | str) -> str:
    """The failure summary `lceval run` and `lceval score` print on stderr ("" when nothing
    failed)."""
    where = Path(run_dir) / "samples.jsonl"
    lines: list[str] = []
    failed = sum(e.count for e in failures.generation.values())
    if failed:
        lines.append(f"lceval: {failed} of {failures.asked} answer(s) could not be generated, by kind (recorded in "
                     f"{where}, generation_extras.generation_failed; not cached: the same command asks them again):")
        lines += _kinds(failures.generation)
    failed = sum(e.count for e in failures.judging.values())
    if failed:
        lines.append(f"lceval: {failed} of {failures.to_judge} verdict(s) could not be given, by kind (recorded in "
                     f"{where}, judgments[].details.judge_error; not cached: the same command asks them again):")
        lines += _kinds(failures.judging)
    if failures.nothing_generated:
        lines.append("lceval: no answer was generated: the run measured nothing.")
    elif failures.nothing_judged:
        lines.append("lceval: no answer could be judged: the run measured nothing.")
    return "\n".join(lines)
