"""Reference metrics against the benchmarks' own formulas (RULER's string match)."""

from __future__ import annotations

import pytest

from lceval.engine import load_plugins
from lceval.errors import UserError
from lceval.interfaces import JudgeContext
from lceval.types import JudgeInput
from lceval_plugins.judges.metrics import string_match_all, string_match_part


def ruler_all(preds, refs):  # NVIDIA/RULER scripts/eval/synthetic/constants.py, verbatim
    score = sum([sum([1.0 if r.lower() in pred.lower() else 0.0 for r in ref]) / len(ref)
                 for pred, ref in zip(preds, refs)]) / len(preds) * 100
    return round(score, 2)


def ruler_part(preds, refs):
    score = sum([max([1.0 if r.lower() in pred.lower() else 0.0 for r in ref]) for pred, ref in zip(preds, refs)]) \
        / len(preds) * 100
    return round(score, 2)


PREDS = ["The magic numbers are 123 and 456.", "none", "8841 2206", "Answer: PARIS"]
REFS = [["123", "456", "789"], ["1"], ["8841", "2206"], ["paris", "london"]]


@pytest.mark.parametrize("mode,reference", [("all", ruler_all), ("part", ruler_part)])
def test_the_mean_of_item_scores_is_rulers_task_score(mode, reference):
    judge = load_plugins().judges["string_match"](JudgeContext(options={"mode": mode}))
    items = [JudgeInput(item_id=str(i), question="q", response=p, reference=r[0], metadata={"references": r})
             for i, (p, r) in enumerate(zip(PREDS, REFS))]
    scores = [j.score for j in judge.judge(items)]
    assert round(sum(scores) / len(scores), 2) == reference(PREDS, REFS)
    assert judge.identity() == {"judge": "string_match", "mode": mode, "version": 1}


def test_one_reference_and_control_characters():
    assert string_match_all("\x00 Paris\x07", ["paris"]) == 100.0
    assert string_match_part("berlin", ["paris", "rome"]) == 0.0
    judge = load_plugins().judges["string_match"](JudgeContext(options={}))  # mode defaults to all
    (j,) = judge.judge([JudgeInput(item_id="a", question="q", response="it is 42", reference="42")])
    assert j.score == 100.0 and j.details == {"found": 1, "references": 1}


def test_a_bad_mode_is_refused_naming_the_option():
    with pytest.raises(UserError, match="mode"):
        load_plugins().judges["string_match"](JudgeContext(options={"mode": "any"}))
