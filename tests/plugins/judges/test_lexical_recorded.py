"""Offline judges: the lexical mapping and recorded scores."""

from __future__ import annotations

import pytest

from lceval.errors import UserError
from lceval.interfaces import JudgeContext
from lceval.types import JudgeInput
from lceval_plugins.judges.lexical import content_words, lexical_score, make_lexical
from lceval_plugins.judges.recorded import make_recorded


def test_content_words_normalise_placeholders_numbers_and_plurals():
    assert content_words("[PERSON3] and PERSON5 made three slides") == {"person3", "person5", "made", "3", "slide"}


@pytest.mark.parametrize("response,reference,expected", [
    ("It was PERSON3.", "[PERSON3]", 10.0),
    ("Nobody knows.", "[PERSON3]", 1.0),
    ("The orange one", "The orange dashboard", 5.5),  # 1 of 2 content words: 1 + 9 * 0.5
    ("There were 3 subsets", "three subsets", 10.0),
])
def test_lexical_mapping(response, reference, expected):
    assert lexical_score(response, reference)[0] == pytest.approx(expected)


def test_lexical_judge_rejects_options():
    with pytest.raises(UserError):
        make_lexical(JudgeContext(options={"x": 1}))


def test_recorded_judge_reads_replay_extras_and_reports_missing():
    judge = make_recorded(JudgeContext(options={"source": "gold-human-eval"}))
    items = [
        JudgeInput("a", "q", "r", "ref", generation_extras={"recorded_scores": {"gold-human-eval": 7.0}}),
        JudgeInput("b", "q", "r", "ref", generation_extras={"recorded_scores": {"gpt-4-eval": 9.0}}),
    ]
    a, b = judge.judge(items)
    assert a.score == 7.0 and a.parse_status == "ok"
    assert b.score is None and b.parse_status == "missing" and "gpt-4-eval" in b.raw
