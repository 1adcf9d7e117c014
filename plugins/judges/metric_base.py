"""What every reference metric shares: the acceptable answers of an item, the options every
metric takes (`first_line`, `references`, `empty_answer`), which text of the answer a metric
reads, and `MetricJudge`, the base class of the metrics in `metrics_text`, `metrics_choice`
and `metrics_numeric` (registered by `metrics`).

The answer a metric reads: the engine strips every answer once (`JudgeInput.response`) and
keeps the text as the model wrote it (`JudgeInput.raw_response`, None when the same). The
benchmarks' scripts score what the model wrote: where stripping changes a score, the metric
reads the answer as written (`MetricJudge.AS_WRITTEN`, and the first-line rule always);
everywhere else stripping changes nothing and the stripped answer is read.
"""

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


def as_written(item: JudgeInput) -> str:
    """The answer as the model wrote it (leading indentation and newlines kept)."""
    return item.raw_response if item.raw_response is not None else item.response


#: The option every metric takes: LongBench's few-shot tasks (trec, triviaqa, samsum, lsht) score
#: the first line of the answer as written (THUDM/LongBench LongBench/eval.py, `scorer`:
#: `prediction.lstrip('\n').split('\n')[0]`).
FIRST_LINE = {"type": "boolean", "default": False,
              "description": "Score the first line of the answer as written, after its leading newlines "
                             "(LongBench's few-shot tasks: trec, triviaqa, samsum)."}

REFERENCES = {"enum": ["best", "first"], "default": "best",
              "description": "best: the best score over the acceptable answers (LongBench's scorer, most of "
                             "InfiniteBench); first: the first answer only (InfiniteBench's longdialogue_qa_eng, "
                             "`label = label[0]`)."}

EMPTY_ANSWER = {"enum": ["score", "missing"], "default": "score",
                "description": "score: an empty answer is scored like any other; missing: an answer the model "
                               "left empty gets no score and stays out of the mean, counted as judge_missing "
                               "(LongBench v2's pred.py writes no row for it and retries it on the next run)."}


def metric_options(properties: dict[str, Any] | None = None) -> dict[str, Any]:
    """The typed options schema of a metric: its own options plus those every metric takes."""
    return {"type": "object", "additionalProperties": False,
            "properties": {**(properties or {}), "first_line": FIRST_LINE, "references": REFERENCES,
                           "empty_answer": EMPTY_ANSWER}}


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
    #: 2: the answer as written for the first-line rule and code similarity (issue 31)
    version = 2
    OPTIONS: dict[str, Any] = metric_options()
    #: the benchmark's score changes when the answer is stripped: read it as the model wrote it
    AS_WRITTEN = False

    def __init__(self, options: "JudgeContext | dict[str, Any]") -> None:
        """The class is its own factory: the engine calls it with a `JudgeContext`; code may
        pass the options mapping."""
        if isinstance(options, JudgeContext):
            options = options.options
        self.options = check_options(self.OPTIONS, options, what=f"judge '{self.name}'",
                                     field_prefix="judge.options.")

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        raise NotImplementedError

    def answer_of(self, item: JudgeInput) -> str:
        """The text this metric scores: the first line of the answer as written, the answer as
        written, or the stripped answer (see the module's docstring)."""
        if self.options.get("first_line"):
            return first_line(as_written(item))
        return as_written(item) if self.reads_as_written() else item.response

    def reads_as_written(self) -> bool:
        return self.AS_WRITTEN

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        out = []
        for item in items:
            if self.options.get("empty_answer") == "missing" and as_written(item) == "":
                out.append(Judgment(item_id=item.item_id, judge=self.name, score=None, parse_status="missing",
                                    raw="empty answer: no score (empty_answer: missing)",
                                    details={"empty_answer": True}))
                continue
            refs = references_of(item)
            if self.options.get("references") == "first":
                refs = refs[:1]
            value, details = self.score(self.answer_of(item), refs, item)
            out.append(Judgment(item_id=item.item_id, judge=self.name, score=100.0 * value,
                                raw=json.dumps(details, ensure_ascii=False, default=str)[:2000], details=details))
        return out

    def identity(self) -> dict[str, Any]:
        return {"judge": self.name, "version": self.version, **self.options}
