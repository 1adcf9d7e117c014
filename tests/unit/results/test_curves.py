"""A `--context-lengths` sweep as curves: each point is the variant's headline with an interval
from resampling its clusters, the effective length follows RULER's definition, and tasks swept
over the same lengths get a mean curve."""

from __future__ import annotations

from pathlib import Path

import pytest

from lceval.engine import TaskSpec
from lceval.results import effective_length, format_table, length_curves, score_task
from lceval.types import ContextCut, Judgment, Sample

from tests.conftest import ScriptedModel, run_engine


def test_a_sweep_writes_its_curve_with_the_headline_of_each_variant(tiny_home, tmp_path):
    _, results, _ = run_engine(ScriptedModel(window=4096), "elitr_qa", tiny_home, tmp_path,
                               context_lengths=[10, 20, None], overrides={"report.effective_length_threshold": 1.0})
    curve = results["length_curves"]["elitr_qa"]
    assert [p["label"] for p in curve["points"]] == ["10", "20", "full"]
    assert [p["task"] for p in curve["points"]] == ["elitr_qa@10", "elitr_qa@20", "elitr_qa"]
    for point in curve["points"]:
        score = results["tasks"][point["task"]]["metrics"]["score"]
        assert point["value"] == pytest.approx(score["mean_of_groups"])  # the number the table prints
        assert point["n"] == score["n"]
    assert curve["threshold"] == 1.0 and curve["effective_length"] == 20  # every scripted score is >= 1
    assert "mean" not in results["length_curves"]  # one task: no mean curve
    table = format_table(results)
    assert "effective length" in table and "20 (>= 1)" in table


def test_no_sweep_no_curve(tiny_home, tmp_path):
    _, results, _ = run_engine(ScriptedModel(window=4096), "elitr_qa", tiny_home, tmp_path)
    assert "length_curves" not in results and "effective length" not in format_table(results)


def sample(task: str, cluster: str, score: float, group: str = "all") -> Sample:
    return Sample(task=task, item_id=f"{task}/{cluster}/{score}", conv_id="c", turn_index=0, seed=0,
                  metadata={"doc": cluster, "split": group}, prompt_hash="", response="r", reference="x",
                  judgments=[Judgment(item_id="i", judge="j", score=score)], context_cut=ContextCut("error", 1, 1))


def task_spec(name: str, report: dict, max_tokens: int | None = None) -> TaskSpec:
    """A resolved spec as a run records it (`TaskSpec.from_manifest`): the report section and,
    for a variant of a sweep, the budget its context was cut to."""
    data = {"name": name, "type": "t", "description": "d", "report": report, "judge": {"name": "j", "options": {}},
            "context": {"policy": "error", **({"max_tokens": max_tokens} if max_tokens else {})}}
    return TaskSpec.from_manifest(name, {"spec": data}, Path("."))


def results_for(tasks: dict[str, list[Sample]], reports: dict) -> tuple[dict, dict[str, TaskSpec]]:
    """Each variant scored as a run scores it (its headline and interval come from there), and
    the spec of each variant."""
    out, specs = {}, {}
    for name, samples in tasks.items():
        base, _, budget = name.partition("@")
        specs[name] = task_spec(base, reports[name], int(budget) if budget else None)
        out[name] = score_task(samples, specs[name], {"judge": "j"})
    return out, specs


def test_intervals_resample_clusters_within_groups_and_tasks_average():
    report = {"cluster_by": "doc", "group_by": "split", "effective_length_threshold": 60}
    tasks = {
        "a@1024": [sample("a@1024", c, s, g) for c, s, g in [("d1", 100, "dev"), ("d2", 80, "dev"), ("d3", 60, "test")]],
        "a@2048": [sample("a@2048", c, s, g) for c, s, g in [("d1", 50, "dev"), ("d2", 70, "dev"), ("d3", 40, "test")]],
        "b@1024": [sample("b@1024", c, s) for c, s in [("d1", 90), ("d2", 70)]],
        "b@2048": [sample("b@2048", c, s) for c, s in [("d1", 80), ("d2", 60)]],
    }
    reports = {name: report if name.startswith("a") else {"cluster_by": "doc"} for name in tasks}
    reports["b@1024"] = {**reports["b@1024"], "effective_length_threshold": 60}
    results, specs = results_for(tasks, reports)
    curves = length_curves(results, tasks, specs)
    a = {p["length"]: p for p in curves["a"]["points"]}
    assert a[1024]["value"] == pytest.approx(((100 + 80) / 2 + 60) / 2)  # the mean of the groups' means
    lo, hi = a[1024]["ci"]
    assert lo <= a[1024]["value"] <= hi and lo >= 60 and hi <= 100
    assert curves["a"]["effective_length"] == 1024  # 2048 scores (60 + 40) / 2 = 50 < 60
    assert curves["b"]["effective_length"] == 2048
    mean = curves["mean"]
    assert mean["tasks"] == ["a", "b"] and mean["threshold"] == 60
    assert mean["points"][0]["value"] == pytest.approx((a[1024]["value"] + 80) / 2)
    assert mean["effective_length"] == 2048  # (50 + 70) / 2 = 60 reaches the threshold


@pytest.mark.parametrize("values,threshold,expected", [
    ([90, 88, 70, 95], 85.6, 2048),  # stops at the first length below: 8k's 95 does not count
    ([80, 90], 85.6, None),
    ([90, 90], None, None),
])
def test_effective_length_is_the_longest_length_before_the_first_failure(values, threshold, expected):
    points = [{"length": 1024 << i, "value": v} for i, v in enumerate(values)] + [{"length": None, "value": 99}]
    assert effective_length(points, threshold) == expected


def test_an_unscored_turn_is_kept_but_never_counted():
    """A reasoning step (`metadata["scored"] is False`) is in the samples but not in the results."""
    kept = [sample("t", "d1", 100.0), sample("t", "d2", 0.0)]
    reasoning = sample("t", "d1", 0.0)
    reasoning.metadata["scored"] = False
    block = score_task(kept + [reasoning], task_spec("t", {"cluster_by": "doc"}), {"judge": "j"})
    assert block["n_samples"] == 2 and block["metrics"]["score"]["value"] == 50.0
