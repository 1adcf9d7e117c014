"""Score by length bin for benchmarks whose lengths come with the data (`report.length_bins`):
where a sample falls (a field's levels, a number's edges, counted tokens, one length per task),
each bin's score, n and interval, the effective length by RULER's definition (the one the
`--context-lengths` curves use), the spec's checks and a run's results.json and console."""

from __future__ import annotations

from pathlib import Path

import pytest

from lceval.engine import TaskSpec, load_spec
from lceval.errors import UserError
from lceval.results import format_table, length_bins, load_run
from lceval.types import ContextCut, Judgment, Sample

from tests.conftest import ScriptedModel, run_engine


def sample(task: str, cluster: str, score: float, tokens: int | None = None, **metadata) -> Sample:
    return Sample(task=task, item_id=f"{task}/{cluster}/{score}/{metadata}", conv_id="c", turn_index=0, seed=0,
                  metadata={"doc": cluster, **metadata}, prompt_hash="", response="r", reference="x",
                  judgments=[Judgment(item_id="i", judge="j", score=score)],
                  context_cut=ContextCut("error", tokens, tokens))


def spec(name: str, bins: dict | None, **report) -> TaskSpec:
    data = {"name": name, "type": "t", "description": "d", "judge": {"name": "j", "options": {}},
            "context": {"policy": "error"},
            "report": {"cluster_by": "doc", **({"length_bins": bins} if bins is not None else {}), **report}}
    return TaskSpec.from_manifest(name, {"spec": data}, Path("."))


def test_named_levels_are_bins_in_length_order_with_score_n_and_interval():
    bins = {"field": "length", "levels": {"short": "32k", "medium": "128k", "long": "2M"}, "threshold": 50}
    samples = [sample("t", f"d{i}", s, length=lv) for i, (s, lv) in enumerate(
        [(100, "long"), (0, "long"), (100, "short"), (80, "short"), (60, "short"), (40, "medium"), (80, "medium")])]
    curve = length_bins({"t": samples}, {"t": spec("t", bins)})["t"]
    assert [(p["label"], p["length"], p["n"]) for p in curve["points"]] == [
        ("short", 32768, 3), ("medium", 131072, 2), ("long", 2 * 1024 ** 2, 2)]
    short = curve["points"][0]
    assert short["value"] == pytest.approx(80) and short["ci"][0] <= 80 <= short["ci"][1]
    assert short["ci"][0] >= 60 and short["ci"][1] <= 100  # resamples the three documents
    assert curve["effective_length"] == 2 * 1024 ** 2  # 80, 60, 50 all reach 50
    assert curve["field"] == "length" and curve["unbinned"] == 0 and curve["tasks"] == ["t"]


def test_no_bin_reaches_the_threshold_and_a_recovery_after_a_dip_does_not_count():
    samples = [sample("t", "a", 40, length="8k"), sample("t", "b", 90, length="16k"), sample("t", "c", 20, length="4k")]
    curve = length_bins({"t": samples}, {"t": spec("t", {"field": "length", "threshold": 50})})["t"]
    assert [p["label"] for p in curve["points"]] == ["4k", "8k", "16k"]
    assert curve["effective_length"] is None  # 4k already below: none, though 16k scores 90
    dipped = [sample("t", "a", 90, length="4k"), sample("t", "b", 40, length="8k"), sample("t", "c", 95, length="16k")]
    assert length_bins({"t": dipped}, {"t": spec("t", {"field": "length", "threshold": 50})})["t"][
        "effective_length"] == 4096  # non-monotone: the effective length ends at the first bin below


def test_a_single_bin_with_one_cluster_has_no_interval_and_the_flag_wins_over_the_spec():
    samples = [sample("t", "a", 70, length="8k"), sample("t", "a", 90, length="8k")]
    specs = {"t": spec("t", {"field": "length", "threshold": 95})}
    curve = length_bins({"t": samples}, specs)["t"]
    assert len(curve["points"]) == 1 and curve["points"][0]["ci"] is None and curve["points"][0]["n"] == 2
    assert curve["effective_length"] is None
    moved = length_bins({"t": samples}, specs, threshold=75)["t"]
    assert moved["threshold"] == 75 and moved["effective_length"] == 8192
    assert length_bins({"t": samples}, {"t": spec("t", {"field": "length"})})["t"]["threshold"] is None


def test_counted_tokens_fall_in_edge_bins_and_uncounted_samples_in_none():
    bins = {"field": "tokens", "edges": ["1k", 2048]}
    samples = [sample("t", "a", 100, tokens=1024), sample("t", "b", 50, tokens=1500), sample("t", "c", 0, tokens=9000),
               sample("t", "d", 0, tokens=None)]
    curve = length_bins({"t": samples}, {"t": spec("t", bins)})["t"]
    assert [(p["label"], p["length"], p["n"]) for p in curve["points"]] == [
        ("0-1k", 1024, 1), ("1k-2k", 2048, 1), (">2k", 9000, 1)]  # the open bin: its longest sample
    assert curve["unbinned"] == 1 and curve["uncounted"] == 1


def test_tasks_of_one_curve_are_its_bins_and_a_level_mapped_to_null_is_in_none():
    specs = {"x_16k": spec("x_16k", {"length": "16k", "curve": "x"}), "x_32k": spec("x_32k", {"length": "32k", "curve": "x"}),
             "m": spec("m", {"field": "bin", "levels": {"<4k": None}})}
    samples = {"x_16k": [sample("x_16k", "a", 60), sample("x_16k", "b", 80)], "x_32k": [sample("x_32k", "a", 10)],
               "m": [sample("m", "a", 1, bin="<4k"), sample("m", "b", 1, bin="8k")]}
    out = length_bins(samples, specs)
    assert [(p["label"], p["task"], p["value"]) for p in out["x"]["points"]] == [("16k", "x_16k", 70), ("32k", "x_32k", 10)]
    assert out["x"]["tasks"] == ["x_16k", "x_32k"] and out["x"]["field"] is None
    assert out["m"]["unbinned"] == 1 and [p["label"] for p in out["m"]["points"]] == ["8k"]
    assert length_bins(samples, {"m": spec("m", None)}) == {}  # no declaration, no block
    swept = spec("x_16k", {"length": "16k", "curve": "x"})
    swept.data["context"]["max_tokens"] = 4096  # a --context-lengths variant is not pooled with the uncut task
    out = length_bins({**samples, "x_16k@4k": [sample("x_16k@4k", "a", 0)]}, {**specs, "x_16k@4k": swept})
    assert out["x"]["points"][0]["value"] == 70 and out["x@4k"]["tasks"] == ["x_16k@4k"]


def test_under_kilo_1000_the_authors_4k_is_4000_tokens_in_fields_edges_and_lengths():
    # NeedleBench's and Counting-Stars' splits: 4K is 4,000 tokens, so a "4K" and a "4000" are one length
    named = spec("t", {"field": "length", "kilo": 1000})
    samples = [sample("t", "a", 100, length="4K"), sample("t", "b", 50, length="1M"), sample("t", "c", 0, length=500)]
    curve = length_bins({"t": samples}, {"t": named})["t"]
    assert [(p["label"], p["length"]) for p in curve["points"]] == [("500", 500), ("4K", 4000), ("1M", 1_000_000)]
    edged = spec("e", {"field": "n", "edges": ["4K", 8000], "kilo": 1000}).report.length_bins
    assert edged.edges == (4000, 8000) and edged.bin_names() == ["0-4K", "4K-8K", ">8K"]
    assert edged.place({"n": "4K"}, None) == ("0-4K", 4000) and edged.place({"n": 4001}, None) == ("4K-8K", 8000)
    assert spec("x", {"length": "16K", "curve": "x", "kilo": 1000}).report.length_bins.place({}, None) == ("16K", 16000)
    assert spec("y", {"field": "length"}).report.length_bins.place({"length": "4K"}, None) == ("4K", 4096)  # default


@pytest.mark.parametrize("bins,field", [
    ({"field": "length", "length": "8k"}, "report.length_bins"),
    ({"curve": "x"}, "report.length_bins"),
    ({"field": "tokens", "levels": {"a": 1}}, "report.length_bins.levels"),
    ({"field": "n", "levels": {"a": "8x"}}, "report.length_bins.levels.a"),
    ({"field": "n", "levels": {"a": 1}, "edges": [2]}, "report.length_bins.edges"),
    ({"field": "n", "kilo": 1001}, "report.length_bins.kilo"),
])
def test_a_bad_declaration_names_its_field_and_line(tmp_path, bins, field):
    import yaml

    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({"name": "t", "type": "documents", "description": "d",
                                    "report": {"length_bins": bins}}))
    with pytest.raises(UserError) as err:
        load_spec(path)
    assert err.value.field == field and err.value.file == str(path) and err.value.line


def test_a_value_that_is_no_length_says_what_is_accepted():
    bins = spec("t", {"field": "length", "levels": {"short": "32k"}}).report.length_bins
    with pytest.raises(UserError) as err:
        bins.place({"length": "huge"}, None)
    text = err.value.render()
    assert err.value.field == "report.length_bins.field" and "'huge'" in text and "short" in text and "16k" in text


def test_a_run_whose_data_lacks_the_field_stops_before_asking_anything(tiny_home, tmp_path):
    model = ScriptedModel(window=4096)
    with pytest.raises(UserError) as err:
        run_engine(model, "elitr_qa", tiny_home, tmp_path, overrides={"report.length_bins": {"field": "length"}})
    assert err.value.field == "report.length_bins.field" and "'length'" in err.value.message
    assert "question_type" in err.value.message and "tokens" in err.value.hint  # the fields it has, what is accepted
    assert model.calls == []
    _, results, _ = run_engine(model, "elitr_qa", tiny_home, tmp_path, overrides={"report.length_bins": None})
    assert "length_bins" not in results  # `--set report.length_bins=`: the task without bins


def test_a_run_writes_counted_bins_to_results_and_console(tiny_home, tmp_path):
    bins = {"field": "tokens", "edges": [300, 100000], "threshold": 0}
    # a model with a tokenizer and no window: nothing is cut, and each context is still counted
    run_dir, results, _ = run_engine(ScriptedModel(), "elitr_qa", tiny_home, tmp_path,
                                     overrides={"report.length_bins": bins}, effective_threshold=0.0)
    curve = results["length_bins"]["elitr_qa"]
    assert curve["field"] == "tokens" and curve["points"] and curve["unbinned"] == 0
    assert sum(p["n"] for p in curve["points"]) == results["tasks"]["elitr_qa"]["metrics"]["score"]["n"]
    assert curve["effective_length"] == curve["points"][-1]["length"]  # every score >= 0
    assert '"length_bins"' in (run_dir / "results.json").read_text()
    table = format_table(results)
    assert "length bins" in table and "effective length" in table and f"({'>='} 0)" in table
    from lceval.report import from_run_dir, paper_tables

    markdown = paper_tables([from_run_dir(load_run(run_dir))], "markdown")  # `lceval report`'s tables
    assert "elitr_qa: score by length bin" in markdown and "effective length" in markdown
    assert all(p["label"] in markdown for p in curve["points"])
