"""`lceval rank` and its reference check on real ELITR-Bench minutes and transcripts, with no
model (benchmarks/cream_reference_check.py): another annotator's minutes must rank above
extractive transcript baselines on completeness, for the reference judge and for the
offline pairwise judge alike."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from lceval.analysis import RankOptions

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("cream_reference_check",
                                                  REPO / "benchmarks" / "cream_reference_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_human_minutes_rank_first_on_completeness(bench, shared_datasets):
    ranking = bench.check(shared_datasets / "elitr-bench", 16, RankOptions(n_orders=200, n_boot=300))
    rep = ranking.report
    # the 9 meetings several people wrote minutes of, 3 systems, 3 pairs each, both orders
    assert rep["accounting"] == {"ordered_judgments": 54, "ok": 54, "parse_failures": 0, "missing": 0,
                                 "pairs": 27, "pairs_ranked": 27, "pairs_unjudged": 0, "units": 9}
    comp = rep["rankings"]["completeness"]
    assert comp["order"][0] == "human/minutes"
    assert comp["reference"]["order"][0] == "human/minutes"
    minutes = comp["elo"]["human/minutes"]
    others = [comp["elo"][s] for s in ("human/lead", "human/middle")]
    assert all(minutes["ci_low"] > o["rating"] for o in others)
    # every sample was judged against the other annotators' minutes, never its own
    samples = ranking.judgments
    assert {r["unit"] for r in samples} == {f"{u.split('_')[2]}/{u}" for u in (
        "meeting_en_dev_002", "meeting_en_dev_003", "meeting_en_dev_004", "meeting_en_dev_005",
        "meeting_en_dev_006", "meeting_en_dev_008", "meeting_en_dev_010", "meeting_en_test2_004",
        "meeting_en_test2_007")}
    # the lexical judge's cap favours the summary shown first a little; swapping measures it
    bias = comp["position_bias"]
    assert bias["pairs_both_orders"] == 27 and abs(bias["first_minus_second"]) < 0.05
