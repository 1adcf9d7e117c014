"""Question lists in the shapes L-Eval and LooGLE publish them: parallel lists of instructions and
outputs (zipped into records), a list held as text of a Python literal (read with
ast.literal_eval, never eval), a document's default ids counting on across the rows that repeat
it, and the reference's word count for a length instruction (`answer_words`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lceval.cli import main
from lceval.interfaces import TaskContext
from lceval.types import CONTEXT_SLOT
from lceval_plugins.documents.task import DocumentsTaskType

from tests.conftest import complete

from .conftest import write_jsonl, write_spec

TYPE = DocumentsTaskType()


def load(spec: Path, options: dict):
    context = TaskContext(spec={"name": spec.stem, "options": complete(TYPE, options)}, spec_path=spec,
                          data_home=spec.parent / "home", splits=None, limit=None, record_file=lambda p: None,
                          record_source=lambda r: None)
    return TYPE.load(context)


def test_parallel_lists_are_zipped_and_the_answer_length_reaches_the_template(tmp_path):
    rows = [{"input": "The lecture. " * 20, "instructions": ["Summarize it.", "Who speaks?"],
             "outputs": ["A talk about marmots and their burrows.", "B"], "source": "toefl", "evaluation": "exam"}]
    write_jsonl(tmp_path / "rows.jsonl", rows)
    options = {"source": {"data_files": "rows.jsonl"},
               "fields": {"context": "input", "questions": ["instructions", "outputs"], "question": "instructions",
                          "answer": "outputs", "metadata": ["source"]},
               "prompt": {"user": "Document is as follows. {{ context }} Instruction: {{ question }} The suggested "
                                  "output length is around {{ answer_words }} words. Output: "}}
    convs = load(tmp_path / "spec.yaml", options)
    assert [c.turns[0].reference for c in convs] == ["A talk about marmots and their burrows.", "B"]
    assert convs[0].turns[0].user == (f"Document is as follows. {CONTEXT_SLOT} Instruction: Summarize it. The "
                                      "suggested output length is around 7 words. Output: ")
    assert "around 1 words" in convs[1].turns[0].user
    assert [c.turns[0].metadata["question_id"] for c in convs] == ["0", "1"]
    assert convs[0].context_id == convs[1].context_id and convs[1].turns[0].metadata["source"] == "toefl"


def test_rows_repeating_a_document_count_its_ids_on(tmp_path):
    """L-Eval's gsm100: 100 rows, each one instruction, all over the same 16-shot context."""
    shots = "Question: 1+1?\nThe answer is 2\n\n" * 10
    rows = [{"input": shots, "instructions": [f"Question: {i}+1?"], "outputs": [str(i + 1)]} for i in range(3)]
    write_jsonl(tmp_path / "rows.jsonl", rows)
    options = {"source": {"data_files": "rows.jsonl"},
               "fields": {"context": "input", "questions": ["instructions", "outputs"], "question": "instructions",
                          "answer": "outputs"}}
    convs = load(tmp_path / "spec.yaml", options)
    assert len({c.context_id for c in convs}) == 1
    assert [c.turns[0].metadata["question_id"] for c in convs] == ["0", "1", "2"]
    assert [c.turns[0].reference for c in convs] == ["1", "2", "3"]


def test_a_question_list_as_text_of_a_python_literal(tmp_path):
    """LooGLE's qa_pairs: a Python literal with single quotes, one string per document."""
    qa = repr([{"Q": "Where was he born?", "A": "In Jerez.", "S": "He was born in Jerez."},
               {"Q": "When?\n1. 1919\n2. 1920", "A": "1", "type": "computation", "S": ["x", "y"]}])
    rows = [{"input": "Early life. He was born in Jerez in 1919. " * 5, "title": "José", "qa_pairs": qa,
             "output": "None"}]
    write_jsonl(tmp_path / "rows.jsonl", rows)
    options = {"source": {"data_files": "rows.jsonl"},
               "fields": {"context": "input", "questions": "qa_pairs", "question": "Q", "answer": "A",
                          "metadata": ["title"]},
               "prompt": {"user": "Please answer. \n{{ context }}\nQuestion: {{ Q }}\nAnswer: "}}
    convs = load(tmp_path / "spec.yaml", options)
    assert [c.turns[0].question for c in convs] == ["Where was he born?", "When?\n1. 1919\n2. 1920"]
    assert convs[1].turns[0].user == f"Please answer. \n{CONTEXT_SLOT}\nQuestion: When?\n1. 1919\n2. 1920\nAnswer: "
    assert convs[0].turns[0].metadata["title"] == "José"


@pytest.mark.parametrize("value, says", [
    ("__import__('os').system('echo no')", "must be a non-empty list of question records"),
    ("[{'Q': 'a'}, ", "must be a non-empty list of question records"),
])
def test_text_that_is_no_literal_list_exits_2(tmp_path, capsys, value, says):
    write_jsonl(tmp_path / "rows.jsonl", [{"input": "A document. " * 5, "qa_pairs": value}])
    spec = write_spec(tmp_path, {"source": {"data_files": "rows.jsonl"},
                                 "fields": {"context": "input", "questions": "qa_pairs", "question": "Q",
                                            "answer": "A"}})
    assert main(["validate", str(spec)]) == 2
    out = capsys.readouterr().out
    assert str(spec) in out and "options.fields.questions" in out and says in out, out


def test_parallel_lists_of_different_lengths_exit_2(tmp_path, capsys):
    write_jsonl(tmp_path / "rows.jsonl", [{"input": "A document. " * 5, "instructions": ["a?", "b?"],
                                           "outputs": ["A"]}])
    spec = write_spec(tmp_path, {"source": {"data_files": "rows.jsonl"},
                                 "fields": {"context": "input", "questions": ["instructions", "outputs"],
                                            "question": "instructions", "answer": "outputs"}})
    assert main(["validate", str(spec)]) == 2
    out = capsys.readouterr().out
    assert str(spec) in out and "options.fields.questions" in out and "'instructions' 2, 'outputs' 1" in out, out


def test_a_parallel_list_that_is_no_column_exits_2(tmp_path, capsys):
    write_jsonl(tmp_path / "rows.jsonl", [{"input": "A document. " * 5, "instructions": ["a?"], "outputs": ["A"]}])
    spec = write_spec(tmp_path, {"source": {"data_files": "rows.jsonl"},
                                 "fields": {"context": "input", "questions": ["instructions", "output"],
                                            "question": "instructions", "answer": "output"}})
    assert main(["validate", str(spec)]) == 2
    out = capsys.readouterr().out
    assert "options.fields.questions" in out and "'output'" in out and "did you mean 'outputs'" in out, out
