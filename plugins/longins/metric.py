"""LongIns' score, as `eval.py` computes it (Ins-Bench/LongIns-Bench, commit cf8c59b8):

    matches = set(re.findall(r'\\[(.*?)\\]', response))      # every [...] span, once each
    result = [int(n) for m in matches for n in re.findall(r'\\d+', m)]
    f1 = calculate_f1_score(result, answer[id]['error'])

`calculate_f1_score` compares the two as sets: 0 when nothing was named or nothing is wrong
(`tp + fp == 0 or tp + fn == 0`: an exam with no wrong answer scores 0 whatever the reply), else the
F1 of precision and recall; the mean over the exams of a length is reported x 100. The spans are
found in the answer as the model wrote it; `.` does not cross a newline, so a list broken over lines
is not read, and numbers inside any bracketed text count (a quoted `[Question 20 ...]` adds 20).
"""

from __future__ import annotations

import json
import re
from typing import Any

from lceval.errors import UserError
from lceval.types import JudgeInput

from lceval_plugins.judges.metric_base import MetricJudge, metric_options

_SPAN = re.compile(r"\[(.*?)\]")
_NUMBER = re.compile(r"\d+")


def named_numbers(response: str) -> list[int]:
    """The integers inside the distinct `[...]` spans of the answer (eval.py's `result`)."""
    out: list[int] = []
    for span in set(_SPAN.findall(response)):
        out += [int(n) for n in _NUMBER.findall(span)]
    return out


def set_f1(predicted: list[int], gold: list[int]) -> tuple[float, float, float]:
    """(F1, precision, recall) of the two as sets; all 0 when either is empty (`calculate_f1_score`)."""
    pred, true = set(predicted), set(gold)
    tp, fp, fn = len(pred & true), len(pred - true), len(true - pred)
    if tp + fp == 0 or tp + fn == 0:
        return 0.0, 0.0, 0.0
    precision, recall = tp / (tp + fp), tp / (tp + fn)
    if precision + recall == 0:
        return 0.0, precision, recall
    return 2 * precision * recall / (precision + recall), precision, recall


class LongInsJudge(MetricJudge):
    """LongIns: set F1 of the question numbers named in brackets against the wrong answers x 100."""

    name = "longins"
    AS_WRITTEN = True
    OPTIONS = metric_options()

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        try:
            gold = json.loads(references[0])
        except ValueError:
            gold = None
        if not isinstance(gold, list) or not all(isinstance(x, int) for x in gold):
            raise UserError(f"sample {item.item_id}: the reference must be the JSON list of wrong questions' numbers "
                            f"(the longins dataset's `error`), got {references[0]!r:.80}", field="options.fields.answer")
        named = named_numbers(prediction)
        f1, precision, recall = set_f1(named, gold)
        return f1, {"named": sorted(set(named)), "wrong": gold, "precision": 100.0 * precision,
                    "recall": 100.0 * recall}
