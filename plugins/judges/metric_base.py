"""What every reference metric shares: the acceptable answers of an item, the `first_line`
option, and `MetricJudge`, the base class of the metrics in `metrics_text`, `metrics_choice` and
`metrics_numeric` (registered by `metrics`)."""

from __future__ import annotations

import json
from typing import Any

from lceval.interfaces import Judge, JudgeContext
from lceval.options import check_options
from lceval.types import JudgeInput, Judgment


def references_of(item: JudgeInput) -> list[str]:
    """The item's acceptable answers: `metadata["references"]`, else `[reference]`."""
    refs = item.metadata.get("references")
    if isinstance(refs, (list, tuple)) and refs:
        return [str(r) for r in refs]
    return [item.reference]


#: The option every metric takes: LongBench's few-shot tasks (trec, triviaqa, samsum, lsht) score
#: the first line of the answer only (THUDM/LongBench LongBench/eval.py, `scorer`:
#: `prediction.lstrip('\n').split('\n')[0]`).
FIRST_LINE = {"type": "boolean", "default": False,
              "description": "Score the answer's first line only (LongBench's few-shot tasks: trec, triviaqa, "
                             "samsum)."}


def metric_options(properties: dict[str, Any] | None = None) -> dict[str, Any]:
    """The typed options schema of a metric: its own options plus `first_line`."""
    return {"type": "object", "additionalProperties": False,
            "properties": {**(properties or {}), "first_line": FIRST_LINE}}


def first_line(text: str) -> str:
    """THUDM/LongBench LongBench/eval.py: `prediction.lstrip('\n').split('\n')[0]`."""
    return text.lstrip("\n").split("\n")[0]


class MetricJudge(Judge):
    """A reference metric: `score(prediction, references, item)` gives a 0-1 value (as the
    benchmark's own function does) and what explains it; the judge reports it x 100. Options
    are checked (and defaulted) by the engine against `OPTIONS` before the class is built, and
    again here (a no-op on checked options), so building one directly checks them too."""

    name = "metric"
    scale = (0.0, 100.0)
    version = 1
    OPTIONS: dict[str, Any] = metric_options()

    def __init__(self, options: "JudgeContext | dict[str, Any]") -> None:
        """The class is its own factory: the engine calls it with a `JudgeContext`; code may
        pass the options mapping."""
        if isinstance(options, JudgeContext):
            options = options.options
        self.options = check_options(self.OPTIONS, options, what=f"judge '{self.name}'",
                                     field_prefix="judge.options.")

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        raise NotImplementedError

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        out = []
        for item in items:
            prediction = first_line(item.response) if self.options.get("first_line") else item.response
            value, details = self.score(prediction, references_of(item), item)
            out.append(Judgment(item_id=item.item_id, judge=self.name, score=100.0 * value,
                                raw=json.dumps(details, ensure_ascii=False, default=str)[:2000], details=details))
        return out

    def identity(self) -> dict[str, Any]:
        return {"judge": self.name, "version": self.version, **self.options}
