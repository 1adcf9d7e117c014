"""The stages after generation: `score` (re-judge), `compare` (paired test), `report` (paper
tables), `judge-agreement`, and plugin-contributed commands and score sources."""

from __future__ import annotations

import json
from itertools import product

import numpy as np
import pytest

from lceval.cli import main
from lceval.analysis import paired_bootstrap, paired_permutation_p
from lceval.errors import UserError

from tests.conftest import ScriptedModel, run_engine


class EchoModel(ScriptedModel):
    """Answers with the reference-like text for some items, so two models differ per item."""

    def __init__(self, good: set[str]) -> None:
        super().__init__()
        self.good = good

    def identity(self) -> dict:
        return {"scheme": "echo", "good": sorted(self.good)}

    def generate(self, requests):
        gens = super().generate(requests)
        for g, r in zip(gens, requests):
            if r.request_id in self.good:
                g.text = "They chose the orange dashboard; the microphone cable; Friday at noon; three; " \
                         "[PERSON1] [PERSON2]; travel budget exhausted"
        return gens


def _samples(run_dir):
    return [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]


def test_score_rejudges_without_generating_and_keeps_the_source(tiny_home, tmp_path, capsys):
    run_dir, results, _ = run_engine(ScriptedModel(), "elitr_qa", tiny_home, tmp_path)
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    code = main(["score", str(run_dir), "--judge", "gpt4-recorded", "--output", str(tmp_path / "scored")])
    assert code == 0
    out = capsys.readouterr().out
    new_dir = tmp_path / "scored" / out.strip().splitlines()[-1].split("/")[-1]
    assert new_dir.is_dir() and new_dir != run_dir
    assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before  # source untouched
    manifest = json.loads((new_dir / "manifest.json").read_text())
    assert manifest["source_run"]["run_id"] == results["run_id"]
    assert manifest["usage"]["generated"] == 0
    samples = _samples(new_dir)
    assert len(samples) == len(_samples(run_dir))
    # the scripted model has no recorded scores: every judgment is "missing", never a number
    assert {s["judgments"][0]["parse_status"] for s in samples} == {"missing"}
    assert all(s["score"] is None for s in samples)
    new_results = json.loads((new_dir / "results.json").read_text())
    acc = new_results["tasks"]["elitr_qa"]["accounting"]
    assert acc["judge_missing"] == len(samples) and acc["judge_parse_failures"] == 0
    # the same answers re-judged by the lexical judge give the original run's numbers back
    assert main(["score", str(run_dir), "--judge", "lexical", "--output", str(tmp_path / "again")]) == 0
    again = next((tmp_path / "again").iterdir())
    assert json.loads((again / "results.json").read_text())["tasks"]["elitr_qa"]["metrics"]["score"]["value"] \
        == pytest.approx(results["tasks"]["elitr_qa"]["metrics"]["score"]["value"])


def test_score_refuses_old_runs_without_questions(tiny_home, tmp_path, capsys):
    run_dir, _, _ = run_engine(ScriptedModel(), "elitr_qa", tiny_home, tmp_path)
    lines = _samples(run_dir)
    for rec in lines:
        rec.pop("question")
    (run_dir / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert main(["score", str(run_dir), "--judge", "lexical", "--output", str(tmp_path / "x")]) == 2
    assert "no stored question" in capsys.readouterr().err
    assert main(["score", str(tmp_path / "nope"), "--judge", "lexical"]) == 2


def test_permutation_p_matches_hand_enumeration():
    diffs = np.array([1.0, 2.0, -0.5, 3.0])
    # all 16 sign patterns: count |sum| >= 5.5 (observed 1 + 2 - 0.5 + 3)
    sums = [abs(sum(s * d for s, d in zip(signs, diffs))) for signs in product([-1, 1], repeat=4)]
    expected = sum(1 for v in sums if v >= 5.5 - 1e-12) / 16
    assert paired_permutation_p(diffs, 1000, 0) == pytest.approx(expected)
    assert expected == pytest.approx(4 / 16)
    assert paired_permutation_p(np.zeros(3), 1000, 0) == 1.0
    # many pairs all in A's favour: Monte Carlo p is tiny but never 0
    p = paired_permutation_p(np.ones(40), 2000, 0)
    assert 0 < p < 0.001


def test_paired_bootstrap_resamples_clusters():
    diffs = np.array([1.0, 1.0, 3.0, 3.0])
    low, high = paired_bootstrap(diffs, ["a", "a", "b", "b"], 2000, 0.95, 0)
    assert low == pytest.approx(1.0) and high == pytest.approx(3.0)  # only 3 distinct means exist
    assert paired_bootstrap(diffs, ["a"] * 4, 100, 0.95, 0) == (None, None)


def test_compare_is_paired_on_items(tiny_home, tmp_path, capsys):
    good = {"dev/meeting_en_dev_901/2", "dev/meeting_en_dev_902/2", "test2/meeting_en_test2_901/2"}
    a_dir, a_res, _ = run_engine(EchoModel(good), "elitr_qa", tiny_home, tmp_path / "a")
    b_dir, b_res, _ = run_engine(ScriptedModel(), "elitr_qa", tiny_home, tmp_path / "b")
    assert main(["compare", str(a_dir), str(b_dir), "--format", "json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    (row,) = rep["comparisons"]
    a = {s["item_id"]: s["score"] for s in _samples(a_dir)}
    b = {s["item_id"]: s["score"] for s in _samples(b_dir)}
    diffs = [a[k] - b[k] for k in a]
    assert row["n_pairs"] == 7 and row["diff"] == pytest.approx(sum(diffs) / 7)
    assert row["wins"] == sum(d > 0 for d in diffs) and row["losses"] == sum(d < 0 for d in diffs)
    assert row["p_value"] == pytest.approx(paired_permutation_p(np.array(diffs), 20000, 0))
    assert row["ci_low"] <= row["diff"] <= row["ci_high"]
    assert main(["compare", str(a_dir), str(b_dir), "--task", "elitr_conv"]) == 2


def test_report_paper_tables_in_three_formats(tiny_home, tmp_path, capsys):
    a_dir, a_res, _ = run_engine(EchoModel({"dev/meeting_en_dev_901/2"}), "elitr_qa", tiny_home, tmp_path / "a")
    b_dir, _, _ = run_engine(ScriptedModel(), "elitr_qa", tiny_home, tmp_path / "b")
    assert main(["report", str(a_dir), str(b_dir), "--format", "csv"]) == 0
    import csv
    import io

    text = capsys.readouterr().out
    rows = list(csv.reader(io.StringIO(text)))
    header = rows[0]
    assert header[:2] == ["table", "model"]
    assert "QA single-turn/dev" in header and "QA single-turn/mean" in header
    first = rows[1]
    metric = a_res["tasks"]["elitr_qa"]["metrics"]["score"]
    assert float(first[header.index("QA single-turn/dev")]) == pytest.approx(metric["groups"]["dev"]["value"], rel=1e-5)
    assert float(first[header.index("QA single-turn/mean")]) == pytest.approx(metric["mean_of_groups"], rel=1e-5)
    assert any(r[0].startswith("elitr_qa, dev: breakdowns") for r in rows[1:])
    assert main(["report", str(a_dir), str(b_dir), "--format", "latex"]) == 0
    tex = capsys.readouterr().out
    assert "\\multicolumn{3}{c}{QA single-turn}" in tex and "\\begin{tabular}" in tex
    assert "lost\\_in\\_the\\_middle p" in tex


def test_judge_agreement_between_runs(tiny_home, tmp_path, capsys):
    run_dir, _, _ = run_engine(EchoModel({"dev/meeting_en_dev_901/2"}), "elitr_qa", tiny_home, tmp_path)
    assert main(["score", str(run_dir), "--judge", "lexical", "--output", str(tmp_path / "s")]) == 0
    capsys.readouterr()
    rescored = next((tmp_path / "s").iterdir())
    assert main(["judge-agreement", f"first={run_dir}", f"second={rescored}", "--format", "json",
                 "--n-boot", "50"]) == 0
    rep = json.loads(capsys.readouterr().out)
    (pair,) = rep["pairs"]
    assert pair["matched"] == 7 and rep["matched_by"] == "item and response text"
    assert pair["item"]["pearson"]["value"] == pytest.approx(1.0)  # same deterministic judge twice
    from tests.cli import judge_agreement

    with pytest.raises(UserError):
        judge_agreement([str(run_dir)])  # one source is not an agreement


def test_plugin_commands_and_score_sources_register_through_hooks(tmp_path, capsys, monkeypatch):
    from lceval import hookimpl
    from lceval.interfaces import Command
    from lceval.types import ScoredItem, ScoreSource

    class Hello(Command):
        help = "say hello"

        def add_arguments(self, parser):
            parser.add_argument("--name", default="world")

        def run(self, args):
            return f"hello {args.name}"

    def reader(path):
        if path.suffix != ".scores":
            return None
        rows = [line.split() for line in path.read_text().splitlines()]
        return [ScoreSource(name=col, items=[ScoredItem(item_id=r[0], system="m", score=float(r[i + 1]),
                                                        cluster=r[0][0]) for r in rows])
                for i, col in enumerate(["x", "y"])]

    class Plugin:
        @hookimpl
        def register_commands(self, register):
            register("hello", Hello())

        @hookimpl
        def register_score_sources(self, register):
            register("two-columns", reader)

    import lceval.engine

    real = lceval.engine.load_plugins
    patched = lambda disabled=(), extra=(), overrides=(): real(disabled, [("demo", Plugin())], overrides)  # noqa: E731
    monkeypatch.setattr(lceval.engine, "load_plugins", patched)  # what `lceval.cli.main` loads the plugins with
    assert main(["hello", "--name", "lceval"]) == 0
    assert capsys.readouterr().out.strip() == "hello lceval"
    f = tmp_path / "t.scores"
    f.write_text("a1 1 2\na2 2 4\nb1 3 6.5\nb2 4 8\n")
    assert main(["judge-agreement", str(f), "--format", "json", "--n-boot", "20"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["matched_by"] == "item and system"
    assert rep["pairs"][0]["item"]["spearman"]["value"] == pytest.approx(1.0)
    assert [b["bin"] for b in rep["bins"]["y"]] == [1, 2, 3, 4]
    assert "demo" in {i.name for i in lceval.engine.load_plugins().infos}
    assert main(["judge-agreement", str(tmp_path / "nothing.txt")]) == 2


def test_report_metrics_aggregate_numbers_from_judgment_details():
    from lceval.results import score_task
    from lceval.types import ContextCut, Judgment, Sample

    def sample(i, split, score, coverage, status="ok"):
        return Sample(task="t", item_id=f"i{i}", conv_id=f"c{i}", turn_index=0, seed=0,
                      metadata={"split": split, "doc": f"d{i % 2}"}, prompt_hash="", response="r",
                      reference="", context_cut=ContextCut("error", 1, 1),
                      judgments=[Judgment(item_id=f"i{i}", judge="j", score=score if status == "ok" else None,
                                          parse_status=status, details={"coverage": coverage})])

    samples = [sample(0, "a", 10, 50.0), sample(1, "a", 20, 100.0), sample(2, "b", 30, 0.0),
               sample(3, "b", 99, 77.0, status="parse_failure")]
    spec = {"name": "task", "type": "x", "description": "a task", "context": {"policy": "error"}, "judge": {"name": "j", "options": {}},
            "report": {"group_by": "split", "cluster_by": "doc", "metrics": ["coverage"]}}  # a resolved spec
    res = score_task(samples, spec, {"judge": "j"})
    cov = res["metrics"]["coverage"]
    assert cov["value"] == pytest.approx(50.0) and cov["n"] == 3  # the failed judgment is excluded
    assert cov["groups"]["a"]["value"] == pytest.approx(75.0) and cov["mean_of_groups"] == pytest.approx(37.5)
    assert res["metrics"]["score"]["value"] == pytest.approx(20.0)


class FlakyModel(ScriptedModel):
    """Gives up (finish_reason "error", as an API backend does past its retries) on one item."""

    def __init__(self, bad: str) -> None:
        super().__init__()
        self.bad = bad

    def generate(self, requests):
        gens = super().generate(requests)
        for g in gens:
            if g.request_id == self.bad:
                g.text, g.finish_reason, g.extras = "", "error", {"error": "HTTP 503 after 6 attempts"}
        return gens


def test_failed_generations_are_counted_not_judged_and_asked_again(tiny_home, tmp_path):
    bad = "dev/meeting_en_dev_902/1"
    model = FlakyModel(bad)
    run_dir, results, state = run_engine(model, "elitr_qa", tiny_home, tmp_path / "one")
    acc = results["tasks"]["elitr_qa"]["accounting"]
    assert acc["generation_failures"] == 1 and acc["unanswered"] == 1
    assert results["tasks"]["elitr_qa"]["metrics"]["score"]["n"] == 6
    rec = next(s for s in _samples(run_dir) if s["item_id"] == bad)
    assert rec["response"] is None and rec["judgments"] == []
    assert rec["generation_extras"]["generation_failed"]["error"].startswith("HTTP 503")
    assert state.usage["failed"] == 1
    again = FlakyModel("none")
    run_engine(again, "elitr_qa", tiny_home, tmp_path / "two")
    assert [r.request_id for r in again.calls] == [bad]  # only the failed one is asked again


def test_judge_flag_takes_options_and_bad_ones_blame_the_flag(tiny_home, tmp_path):
    from lceval.options import parse_judge_flag

    assert parse_judge_flag("rubric,max_attempts=5,system_prompt=null") == \
        ("rubric", {"max_attempts": 5, "system_prompt": None})
    with pytest.raises(UserError) as err:
        parse_judge_flag("rubric,oops")
    assert err.value.field == "--judge"
    with pytest.raises(UserError) as err:
        run_engine(ScriptedModel(), "elitr_qa", tiny_home, tmp_path, judge="lexical,foo=1")
    assert err.value.field == "--judge" and "foo" in err.value.message


def test_a_judge_that_cannot_be_built_fails_before_the_model_loads(tiny_home, tmp_path):
    loads = []

    class CountingModel(ScriptedModel):
        def __init__(self):
            super().__init__()
            loads.append(1)

    from lceval import hookimpl
    from lceval.engine import RunConfig, load_plugins
    from tests.conftest import execute_config

    class Plugin:
        @hookimpl
        def register_models(self, register):
            register("counting", lambda name, options: CountingModel())

    plugins = load_plugins(extra=[("counting", Plugin())])
    cfg = RunConfig(tasks="elitr_qa", models=["counting:x"], judge="rubric", progress=False,
                    cache_path=tmp_path / "c.sqlite")
    with pytest.raises(UserError) as err:
        execute_config(cfg, plugins, tiny_home)
    assert err.value.field == "--judge-model" and loads == []
