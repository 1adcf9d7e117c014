"""A spec that departs on purpose from the protocol behind the paper's numbers says why
(`report.differs_from_paper`, issue 31): results.json carries the sentence, and the console
table, the paper tables (markdown, LaTeX, CSV's column) and the HTML report mark the task's
number with a dagger and say why, so it is never set beside the paper's as the same
measurement. A spec that says nothing gets no mark."""

from __future__ import annotations

import json

import pytest

from lceval.engine import RunConfig
from lceval.errors import UserError

from tests import cli as commands
from tests.conftest import ScriptedModel, plugins_with_model

from .conftest import write_jsonl, write_spec

WHY = "the answer is read from the whole reply, where the authors read its first line"
MARK = "\u2020"


def _spec(tmp_path, name: str, report: dict | None):
    write_jsonl(tmp_path / f"{name}.jsonl", [{"id": f"d{i}", "text": f"Document {i} says the code is {i}.",
                                              "question": "What is the code?", "answer": str(i)}
                                             for i in range(4)])
    fields = {"id": "id", "context": "text", "question": "question", "answer": "answer"}
    return write_spec(tmp_path, {"source": {"data_files": f"{name}.jsonl"}, "fields": fields,
                                 "prompt": {"user": "{{ context }}\n\nQuestion: {{ question }}"}},
                      name=name, generation={"max_new_tokens": 8}, judge={"name": "exact_match"},
                      **({"report": report} if report else {}))


def _run(tmp_path, *specs):
    config = RunConfig(tasks=",".join(str(s) for s in specs), models=["scripted:x"], progress=False,
                       output=tmp_path / "runs", cache_path=tmp_path / "cache.sqlite", data_home=tmp_path / "home")
    ((run_dir, console),) = commands.run(config, plugins=plugins_with_model(ScriptedModel()))
    return run_dir, console


def test_the_sentence_is_in_results_and_every_table_marks_the_task(tmp_path):
    marked = _spec(tmp_path, "marked_task", {"differs_from_paper": WHY})
    plain = _spec(tmp_path, "plain_task", None)
    run_dir, console = _run(tmp_path, marked, plain)

    tasks = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))["tasks"]
    assert tasks["marked_task"]["differs_from_paper"] == WHY
    assert "differs_from_paper" not in tasks["plain_task"]

    rows = [line.split() for line in console.splitlines()]
    assert any(r and r[0] == f"marked_task{MARK}" for r in rows)
    assert any(r and r[0] == "plain_task" for r in rows) and f"plain_task{MARK}" not in console
    assert f"{MARK} marked_task: not comparable with the paper's number: {WHY}" in console

    markdown = commands.report([run_dir], "markdown")
    assert f"marked_task{MARK}" in markdown and WHY in markdown and f"plain_task{MARK}" not in markdown
    latex = commands.report([run_dir], "latex")
    assert f"marked\\_task{MARK}" in latex and WHY in latex
    header = commands.report([run_dir], "csv").splitlines()[0]
    assert f"marked_task{MARK}/all" in header and "plain_task/all" in header

    page = commands.report_html([run_dir], tmp_path / "report.html").read_text(encoding="utf-8")
    assert f"marked_task{MARK} · score" in page and f"plain_task{MARK}" not in page
    assert page.count(f"not comparable with the paper's number: {WHY}") == 1  # the overview's note
    assert f"Not comparable with the paper's number: {WHY}" in page  # the task's own section


def test_an_empty_sentence_is_refused_with_its_field(tmp_path):
    spec = _spec(tmp_path, "bad_task", {"differs_from_paper": ""})
    with pytest.raises(UserError) as err:
        _run(tmp_path, spec)
    assert "differs_from_paper" in f"{err.value.message} {err.value.field}"
