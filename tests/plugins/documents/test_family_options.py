"""The documents options SCBench and LongMemEval brought (docs/tasks/documents.md): parallel
lists beside a list of documents and their order, `json_dumps`, the first N questions of each
document, the start of the answers, the gold history as Python prints the answer, the texts of
the document's questions in templates, the answer pool - and bad values of each, refused with
exit 2 naming the spec, the option's line and the value."""

from __future__ import annotations

from pathlib import Path

import pytest

from lceval.cli import main
from lceval.types import CONTEXT_SLOT
from lceval_plugins.documents.task import DocumentsTaskType

from tests.conftest import complete
from lceval.interfaces import TaskContext

from .conftest import write_jsonl, write_spec

TYPE = DocumentsTaskType()
SESSIONS = [{"id": "h1", "sessions": [[{"role": "user", "content": "Hé", "has_answer": True}], [{"role": "user", "content": "B"}]],
             "dates": ["2023/05/02 (Tue) 08:00", "2023/05/01 (Mon) 09:00"], "question": "Q?", "answer": 3}]
SESSION_FIELDS = {"id": "id", "documents": "sessions", "document_fields": {"date": "dates"}, "document_order": "date",
                  "document_template": "#{{ index }} {{ date }} {{ document | json_dumps(drop=['has_answer']) }}",
                  "document_separator": "\n"}
TURNS = [{"id": 7, "repo": "r1", "context": "The shared context.",
          "multi_turns": [{"input": f"Ask {i}", "answer": [f"a{i}", "b"] if i == 1 else [f"a{i}"], "name": f"f{i}"}
                          for i in range(4)]},
         {"id": 8, "repo": "r1", "context": "Another context.", "multi_turns": [{"input": "Ask 9", "answer": ["a9"], "name": "f9"}]}]
TURN_FIELDS = {"questions": "multi_turns", "question": "input", "answer": "answer", "document_key": "id",
               "metadata": ["name"], "answer_pool": {"by": "repo", "keep": ["name"]}}


def load(tmp_path: Path, rows, options):
    write_jsonl(tmp_path / "rows.jsonl", rows)
    options = {"source": {"data_files": "rows.jsonl"}, **options}
    ctx = TaskContext(spec={"name": "t", "options": complete(TYPE, options)}, spec_path=tmp_path / "s.yaml",
                      data_home=tmp_path, splits=None, limit=None, record_file=lambda p: None,
                      record_source=lambda s: None)
    return TYPE.load(ctx)


def test_dated_sessions_are_sorted_numbered_and_dumped_as_python_does(tmp_path):
    (conv,) = load(tmp_path, SESSIONS, {"fields": SESSION_FIELDS})
    assert conv.context == ('#1 2023/05/01 (Mon) 09:00 [{"role": "user", "content": "B"}]\n'
                            '#2 2023/05/02 (Tue) 08:00 [{"role": "user", "content": "H\\u00e9"}]')
    assert conv.turns[0].reference == "3"


def test_first_questions_answer_prefixes_python_gold_and_the_answer_pool(tmp_path):
    options = {"fields": TURN_FIELDS, "mode": "multi-turn", "history": "gold", "gold_answer": "python",
               "max_questions": 3,
               "prompt": {"user": "{{ context }}\n\n{{ input }} of {{ document_questions | length }}",
                          "next": "{{ input }} (last: {{ document_questions[-1] }})", "next_answer_prefix": "So"}}
    first, second = load(tmp_path, TURNS, options)
    assert [t.user for t in first.turns] == [f"{CONTEXT_SLOT}\n\nAsk 0 of 3", "Ask 1 (last: Ask 2)", "Ask 2 (last: Ask 2)"]
    assert [t.assistant_prefix for t in first.turns] == ["", "So", "So"]
    assert first.turns[1].reference == "['a1', 'b']"  # str() of the list, as SCBench's history shows it
    pool = first.turns[0].metadata["answer_pool"]
    assert pool == [{"answer": "a0", "name": "f0"}, {"answer": ["a1", "b"], "name": "f1"}, {"answer": "a2", "name": "f2"},
                    {"answer": "a9", "name": "f9"}]  # every question asked over documents of repo r1
    assert second.turns[0].metadata["answer_pool"] == pool


def bad(tmp_path, capsys, rows, options, **top) -> tuple[Path, str]:
    write_jsonl(tmp_path / "rows.jsonl", rows)
    spec = write_spec(tmp_path, {"source": {"data_files": "rows.jsonl"}, **options}, **top)
    assert main(["validate", str(spec)]) == 2
    out = capsys.readouterr().out
    assert out.startswith("invalid ") and "Traceback" not in out
    return spec, out


def line(spec: Path, text: str) -> int:
    return next(n for n, ln in enumerate(spec.read_text().splitlines(), 1) if text in ln)


@pytest.mark.parametrize("change,option,needle", [
    ({"document_order": "day"}, "document_order", "document_order 'day' is no name of fields.document_fields (names: date)"),
    ({"document_fields": {"date": "id"}}, "document_fields", "field 'id' must be a list as long as 'sessions' (2 elements), got 'h1'"),
    ({"document_fields": {"date": "dayz"}}, "document_fields", "no field 'dayz'"),
    ({"document_template": "{{ document | json_dumps(drop='has_answer') }}"}, "document_template",
     "json_dumps(drop=...) takes a list of key names, got 'has_answer'"),
])
def test_bad_session_options_exit_2_naming_spec_line_and_value(change, option, needle, tmp_path, capsys):
    spec, out = bad(tmp_path, capsys, SESSIONS, {"fields": {**SESSION_FIELDS, **change}})
    assert needle in out, out
    at = {"document_fields": "date:"}.get(option, option)  # the line of the entry at fault
    assert f"{spec}:{line(spec, at)}," in out and f"options.fields.{option}" in out


@pytest.mark.parametrize("options,key,needle", [
    ({"max_questions": 0}, "max_questions", "0"),
    ({"gold_answer": "repr"}, "gold_answer", "repr"),
    ({"prompt": {"next_answer_prefix": "So"}}, "next_answer_prefix",
     "prompt.next_answer_prefix starts the later answers of a multi-turn conversation"),
    ({"fields": {**TURN_FIELDS, "answer_pool": {"by": "rep"}}}, "answer_pool", "no field 'rep'"),
    ({"fields": {**TURN_FIELDS, "answer_pool": {"keep": ["name"]}}}, "answer_pool", "'by' is a required property"),
])
def test_bad_question_options_exit_2_naming_spec_line_and_value(options, key, needle, tmp_path, capsys):
    base = {"fields": TURN_FIELDS}
    spec, out = bad(tmp_path, capsys, TURNS, {**base, **options})
    assert needle in out, out
    at = line(spec, key) + (1 if key == "answer_pool" else 0)  # a pool's fault is named at its first entry
    assert f"{spec}:{at}," in out and key in out
