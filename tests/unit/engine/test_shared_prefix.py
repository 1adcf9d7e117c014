"""What the engine tells a backend its requests about one context share (`GenerationRequest.
shared`, which an API backend marks for its provider's prompt cache): the system message, the
instructions, the document and what every question of it repeats after it, up to where the
question starts; less where the prompts already differ before the document; nothing for a
document asked once."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from lceval.engine import RunConfig
from tests.conftest import ScriptedModel, execute_config, plugins_with_model
from tests.paths import TEST_DATA

SPEC = """\
name: notes_shared
description: "the worked example's notes"
type: documents
options:
  source: {data_files: notes.jsonl}
  fields: {id: id, context: text, questions: questions, question: question, answer: answers, document_key: id}
  prompt:
    system: "You read committee minutes."
    user: "USER"
"""


def requests(tmp_path: Path, user: str, rows: Path | None = None) -> list:
    shutil.copy(rows or TEST_DATA / "documents" / "notes.jsonl", tmp_path / "notes.jsonl")
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.replace('"USER"', json.dumps(user)))
    model = ScriptedModel()
    execute_config(RunConfig(tasks=str(spec), models=["scripted:x"], progress=False,
                             cache_path=tmp_path / "c.sqlite"), plugins_with_model(model), tmp_path)
    return model.calls


def test_a_documents_questions_share_it_up_to_the_question(tmp_path: Path) -> None:
    """The words after the document that every question repeats ("Question: ") are shared too:
    the breakpoint is where the question starts (Anthropic's docs), not where the document ends."""
    calls = requests(tmp_path, "Read the minutes.\n\n{{ context }}\n\nQuestion: {{ question }}")
    rows = (TEST_DATA / "documents" / "notes.jsonl").read_text().splitlines()
    documents = [json.loads(line)["text"] for line in rows]
    assert len(calls) == 6
    for call in calls:
        head = call.shared.head(call.messages)
        assert [m.role for m in head] == ["system", "user"] and head[0] == call.messages[0]
        assert head[1].content in ["Read the minutes.\n\n" + text + "\n\nQuestion: " for text in documents]
        rest = call.messages[1].content[len(head[1].content):]
        assert rest and rest[0].isupper() and rest.endswith("?")  # the question, whole: not shared
        assert call.shared.requests == 3 and call.shared.reuse_within_s > 0
    assert len({c.shared.group for c in calls}) == 2  # one part per document


def test_a_question_before_the_document_leaves_only_what_precedes_it(tmp_path: Path) -> None:
    calls = requests(tmp_path, "Question: {{ question }}\n\n{{ context }}")
    for call in calls:
        head = call.shared.head(call.messages)
        assert "Minutes of" not in head[-1].content and len(head[-1].content) < len("Question: How many tonnes")


def test_a_document_asked_once_shares_nothing(tmp_path: Path) -> None:
    rows = tmp_path / "one.jsonl"
    row = json.loads((TEST_DATA / "documents" / "notes.jsonl").read_text().splitlines()[0])
    rows.write_text(json.dumps({**row, "questions": row["questions"][:1]}) + "\n")
    (call,) = requests(tmp_path, "{{ context }}\n\n{{ question }}", rows)
    assert call.shared is None
