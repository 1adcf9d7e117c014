"""`--limit-per-context` is described the same way wherever the docs describe it, and as the
code does it (issue 30): ELITR-Bench spreads the questions over a meeting, the `documents`
task type (like every other) takes each context's first K."""

from __future__ import annotations

import json
import re

from lceval.engine import RunConfig

from tests.conftest import ScriptedModel, execute_config, plugins_with_model
from tests.paths import REPO

SENTENCE = re.compile(r"`--limit-per-context K`\s+asks at most K\s+questions about each context:.*?first K\.", re.S)


def _said(page: str) -> str:
    text = (REPO / page).read_text(encoding="utf-8")
    found = SENTENCE.search(text)
    assert found, f"{page} does not describe --limit-per-context with the shared sentence"
    return " ".join(found.group(0).split())


def test_getting_started_and_documents_say_the_same():
    assert _said("docs/getting-started.md") == _said("docs/tasks/documents.md")


def test_the_code_does_what_the_pages_say(tiny_home, tmp_path):
    rows = [{"id": "d1", "text": "A short note about the river.", "questions": [
        {"id": f"q{i}", "question": f"Question {i}?", "answers": ["a"]} for i in range(5)]}]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "d.yaml").write_text("name: d\ndescription: d\ntype: documents\noptions:\n  source: {data_files: d.jsonl}\n"
                                     "  fields: {context: text, questions: questions, id: id, answer: answers, "
                                     "document_key: id}\njudge: {name: f1}\n")
    plugins = plugins_with_model(ScriptedModel(window=4096))
    documents = execute_config(RunConfig(tasks=str(tmp_path / "d.yaml"), models=["scripted:x"], progress=False,
                                         limit_per_context=2), plugins, tmp_path / "home")
    assert [s.item_id for s in documents.tasks[0].samples] == ["train/d1/q0", "train/d1/q1"]  # the first K
    elitr = execute_config(RunConfig(tasks="elitr_qa", models=["scripted:x"], progress=False, limit_per_context=2,
                                     splits=["dev"]), plugins, tiny_home)
    ids = [s.item_id for s in elitr.tasks[0].samples if "901" in s.item_id]
    assert ids == ["dev/meeting_en_dev_901/1", "dev/meeting_en_dev_901/3"]  # spread: the first and the last
