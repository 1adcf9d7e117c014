"""BAMBOO's metrics, as `evaluate.py` computes them (RUCAIBox/BAMBOO, commit f230f206), item by item:

- `bamboo_qa` (meetingqa, paperqa: `qa_accuracy`): the **first character** of the answer's first
  line (after stripping) decides: `a`/`A` is A ... `d`/`D` is D, anything else F; right iff it is the
  gold letter. "Answer: B" reads as A, as in the authors' code. An empty answer makes their code
  raise; here it is wrong.
- `bamboo_exact` (altqa: `altqa_accuracy`, the whole answer; meetingpred, showspred:
  `pred_accuracy`, `first_line: true`, the text before the first newline of the answer as written):
  equal to the gold after `strip().strip(".").lower()` on both.
- `bamboo_hallucination` (senhallu, abshallu): the answer says yes iff "yes" is in its first three
  characters (stripped, lower case). The authors report scikit-learn's F1 over the whole file with
  "the hypothesis holds" (True) as the positive class; that is no mean of per-item scores, so each
  item scores its accuracy and its `true_positive`, `false_positive` and `false_negative` (100 or 0)
  are reported beside it (`report.metrics`): F1 = 2 TP / (2 TP + FP + FN) of those means.
- `bamboo_concordance` (reportsumsort, showssort: `concordinary_index`): the integers of the answer
  (`re.findall(r"\\d+")`, as `run_for_transformers.py` keeps the prediction), shifted to 0-based
  when their minimum is 1; the share of the gold order's pairs (i before j) that the answer orders the
  same way; an answer with another number of items than the gold is a format error and scores 0.
"""

from __future__ import annotations

import json
import re
from typing import Any

from lceval.errors import UserError
from lceval.types import JudgeInput

from lceval_plugins.judges.metric_base import MetricJudge, as_written, metric_options

_INT = re.compile(r"\d+")


def qa_letter(prediction: str) -> str:
    """`qa_accuracy`'s reading of an answer: A-D from its first character, else F ("" if empty)."""
    line = prediction.strip().split("\n")[0].strip(" ")
    if not line:
        return ""
    first = line[0]
    for letter in "ABCD":
        if f"[{letter}" in first or first.lower().startswith(letter.lower()):
            return letter
    return "F"


def normalized(text: str) -> str:
    return text.strip().strip(".").lower()


def says_yes(prediction: str) -> bool:
    return "yes" in prediction.strip()[:3].lower()


def concordance(pred: list[int], right: list[int]) -> tuple[float, bool]:
    """`concordinary_index`: (share of the gold's ordered pairs the prediction has, format error)."""
    pred_pairs: set[tuple[int, int]] = set()
    for i in range(len(pred) - 1):
        shift = 1 if min(pred) == 1 else 0
        for j in range(i + 1, len(pred)):
            pred_pairs.add((pred[i] - shift, pred[j] - shift))
    right_pairs = {(right[i], right[j]) for i in range(len(right) - 1) for j in range(i + 1, len(right))}
    return len(right_pairs & pred_pairs) / len(right_pairs), len(pred) != len(right)


class QAJudge(MetricJudge):
    """BAMBOO meetingqa / paperqa: the first character of the answer as the letter, accuracy x 100."""

    name = "bamboo_qa"
    OPTIONS = metric_options()

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        letter = qa_letter(prediction)
        gold = item.metadata.get("answer_letter") or references[0]
        return float(letter == gold), {"letter": letter or None}


class ExactJudge(MetricJudge):
    """BAMBOO altqa, meetingpred, showspred: exact match after strip, strip('.') and lower case."""

    name = "bamboo_exact"
    AS_WRITTEN = True
    OPTIONS = metric_options()

    def answer_of(self, item: JudgeInput) -> str:
        text = as_written(item)
        # pred_accuracy's `pred.split('\n')[0]`: no newline stripped first (metric_base's first_line strips them)
        return text.split("\n")[0] if self.options.get("first_line") else text

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        return float(any(normalized(prediction) == normalized(r) for r in references)), {}


class HallucinationJudge(MetricJudge):
    """BAMBOO senhallu / abshallu: yes iff "yes" opens the answer; accuracy x 100, with the counts
    the authors' F1 is made of in the details."""

    name = "bamboo_hallucination"
    OPTIONS = metric_options()

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        gold = references[0].strip().lower()
        if gold not in ("true", "false"):
            raise UserError(f"sample {item.item_id}: the reference must be True or False (whether the hypothesis "
                            f"holds), got {references[0]!r}", field="options.fields.answer")
        yes, holds = says_yes(prediction), gold == "true"
        return float(yes == holds), {"says_yes": yes, "true_positive": 100.0 * (yes and holds),
                                     "false_positive": 100.0 * (yes and not holds),
                                     "false_negative": 100.0 * (not yes and holds)}


class ConcordanceJudge(MetricJudge):
    """BAMBOO reportsumsort / showssort: the concordance index of the answer's order x 100."""

    name = "bamboo_concordance"
    OPTIONS = metric_options()

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        try:
            right = json.loads(references[0])
        except ValueError:
            right = None
        if not isinstance(right, list) or len(right) < 2:
            raise UserError(f"sample {item.item_id}: the reference must be the JSON list of the original order, got "
                            f"{references[0]!r:.80}", field="options.fields.answer")
        pred = [int(n) for n in _INT.findall(prediction)]
        value, error = concordance(pred, right)
        return (0.0 if error else value), {"order": pred, "format_error": error}
