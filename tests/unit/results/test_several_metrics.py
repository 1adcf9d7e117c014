"""Several metrics per task (issue 26, item 11): a spec lists its metrics, one the headline;
each is judged on the same answers and reported with its groups, breakdowns and interval;
`lceval score RUN --add-metric` adds one to a finished run in place."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lceval.engine import RunConfig, load_spec
from lceval.errors import UserError
from lceval.results import load_run, score_task
from tests.cli import call, lceval
from tests.conftest import ScriptedModel, execute_config, plugins_with_model, serve_scripted
from tests.paths import TEST_DATA

SPEC = """\
name: notes_mm
description: "the worked example's notes, scored three ways"
type: documents
options:
  source: {data_files: notes.jsonl}
  fields: {id: id, context: text, questions: questions, question: question, answer: answers, document_key: id}
metrics:
  - {name: exact_match}
  - {name: f1, headline: true}
  - {name: rouge_l, label: rougeL}
report:
  cluster_by: document_id
"""


@pytest.fixture()
def spec(tmp_path: Path) -> Path:
    shutil.copy(TEST_DATA / "documents" / "notes.jsonl", tmp_path / "notes.jsonl")
    path = tmp_path / "mm.yaml"
    path.write_text(SPEC)
    return path


def test_each_metric_is_judged_and_reported_the_headline_is_the_score(spec: Path, tmp_path: Path) -> None:
    state = execute_config(RunConfig(tasks=str(spec), models=["scripted:x"], progress=False,
                                     cache_path=tmp_path / "c.sqlite"), plugins_with_model(ScriptedModel()), tmp_path)
    task = state.tasks[0]
    assert all([j.judge for j in s.judgments] == ["f1", "exact_match", "rouge_l"] for s in task.samples)
    results = score_task(task.samples, task.spec, task.judge_identity, metric_identities=task.metric_identities)
    assert results["headline"] == "f1" and set(results["metric_judges"]) == {"exact_match", "rougeL"}
    assert set(results["metrics"]) == {"score", "exact_match", "rougeL"}
    f1 = [s.judgments[0].score for s in task.samples]
    assert results["metrics"]["score"]["value"] == pytest.approx(sum(f1) / len(f1))
    em = [s.judgments[1].score for s in task.samples]
    assert results["metrics"]["exact_match"]["value"] == pytest.approx(sum(em) / len(em))
    assert "spread" in results["metrics"]["rougeL"]  # each with its interval


def test_the_console_table_has_a_row_per_metric(spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    serve_scripted(monkeypatch)
    out = lceval("run", "--tasks", spec, "--model", "scripted:x", "--output", tmp_path / "runs", "--no-progress",
                 "--data-home", tmp_path)
    rows = [line.split()[:2] for line in out.splitlines() if line.startswith("notes_mm")]
    assert ["notes_mm", "exact_match"] in rows and ["notes_mm", "rougeL"] in rows


def test_a_metric_is_added_to_a_finished_run_in_place(spec: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    serve_scripted(monkeypatch)
    single = tmp_path / "single.yaml"  # the same task with one metric: its judge
    single.write_text(SPEC.split("metrics:\n")[0] + "judge: {name: f1}\nreport:\n  cluster_by: document_id\n")
    lceval("run", "--tasks", single, "--model", "scripted:x", "--output", tmp_path / "runs",
           "--no-progress", "--data-home", tmp_path)
    (run_dir,) = list((tmp_path / "runs").iterdir())
    before = load_run(run_dir)
    assert set(before.results["tasks"]["notes_mm"]["metrics"]) == {"score"}
    code, _, err = call("score", run_dir, "--add-metric", "rouge_l,variant=rouge9")
    assert code == 2 and "--add-metric" in err and "rouge9" in err  # a bad option: refused, the run untouched
    assert load_run(run_dir).results == before.results
    lceval("score", run_dir, "--add-metric", "exact_match", "--add-metric", "rouge_l,variant=rougeLsum")
    after = load_run(run_dir)
    block = after.results["tasks"]["notes_mm"]
    assert set(block["metrics"]) == {"score", "exact_match", "rouge_l"} and block["headline"] == "f1"
    assert block["metrics"]["score"] == before.results["tasks"]["notes_mm"]["metrics"]["score"]  # untouched
    assert all(s.response == b.response for s, b in zip(after.samples, before.samples))
    assert [m["name"] for m in after.task_spec("notes_mm")["metrics"]][1:] == ["exact_match", "rouge_l"]
    assert list((tmp_path / "runs").iterdir()) == [run_dir]  # in place: no second run folder
    # the same metric again is refused, naming the flag
    code, _, err = call("score", run_dir, "--add-metric", "exact_match")
    assert code == 2 and "--add-metric" in err


@pytest.mark.parametrize("bad, field", [
    ("  - {name: f1, headline: true}\n  - {name: exact_match, headline: true}\n", "metrics.1.headline"),
    ("  - {name: f1}\n  - {name: f1}\n", "metrics.1"),
])
def test_bad_metric_lists_name_the_field(tmp_path: Path, bad: str, field: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(SPEC.split("metrics:\n")[0] + "metrics:\n" + bad)
    with pytest.raises(UserError) as err:
        load_spec(path)
    assert err.value.field == field and err.value.line is not None
