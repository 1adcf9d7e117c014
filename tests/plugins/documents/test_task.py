"""The documents task type turns a spec and its rows into conversations: one per question or
one per document, the document kept once and placed by the context slot, questions over one
document sharing its context id, every value in the real schemas read where the spec says."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from lceval.errors import UserError
from lceval.interfaces import TaskContext
from lceval.types import CONTEXT_SLOT
from lceval_plugins.documents.task import DocumentsTaskType

from tests.conftest import complete
from tests.paths import TEST_DATA

from .conftest import write_jsonl, write_spec

TYPE = DocumentsTaskType()


def longbench_row(i: int, context: str, dataset: str = "narrativeqa", **extra) -> dict:
    """A row in LongBench's schema (THUDM/LongBench data/*.jsonl)."""
    row = {"input": f"Question {i}?", "context": context, "answers": [f"answer {i}", f"ans {i}"],
           "length": len(context.split()), "dataset": dataset, "language": "en", "all_classes": None,
           "_id": f"id{i:03d}"}
    row.update(extra)
    return row


def load(spec: Path, options: dict, **ctx):
    """The conversations of `options` (as `lceval run` loads them), with what was recorded."""
    files, sources = [], []
    context = TaskContext(spec={"name": spec.stem, "options": complete(TYPE, options)}, spec_path=spec,
                          data_home=ctx.pop("data_home", spec.parent / "home"), splits=ctx.pop("splits", None),
                          limit=ctx.pop("limit", None), record_file=files.append, record_source=sources.append,
                          **ctx)
    return TYPE.load(context), files, sources


def test_one_row_per_question_sharing_a_document(tmp_path):
    book, story = "The book. " * 30, "A story. " * 20
    write_jsonl(tmp_path / "lb.jsonl", [longbench_row(1, book), longbench_row(2, story), longbench_row(3, book)])
    options = {"source": {"data_files": "lb.jsonl", "split": "test"},
               "fields": {"id": "_id", "question": "input", "answer": "answers", "metadata": ["dataset", "length"]},
               "prompt": {"user": "Story: {{ context }}\n\nQuestion: {{ input }}\nAnswer:"}}
    convs, files, sources = load(tmp_path / "spec.yaml", options)
    assert [c.conv_id for c in convs] == ["test/id001", "test/id003", "test/id002"]  # document order, then rows
    first, third, second = convs
    assert first.context_id == third.context_id != second.context_id     # one document, one id (its sha256)
    assert first.context is third.context == book                        # the text held once
    assert first.turns[0].user == f"Story: {CONTEXT_SLOT}\n\nQuestion: Question 1?\nAnswer:"
    assert first.turns[0].question == "Question 1?"
    meta = first.turns[0].metadata
    assert meta["references"] == ["answer 1", "ans 1"] and meta["dataset"] == "narrativeqa"
    assert meta["length"] == 60 and meta["split"] == "test" and meta["document_id"] == first.context_id.split("/")[1]
    assert first.turns[0].reference == "answer 1 | ans 1"
    assert files == [tmp_path / "lb.jsonl"]
    (source,) = sources
    assert source["builder"] == "json" and source["rows"] == 3 and source["data_files"] == ["lb.jsonl"]


def test_one_record_per_document_with_its_questions_multi_turn(tmp_path):
    spec = TEST_DATA / "documents" / "notes.yaml"
    import yaml

    options = yaml.safe_load(spec.read_text())["options"]
    options["mode"] = "multi-turn"
    convs, files, _ = load(spec, options)
    assert [c.conv_id for c in convs] == ["test/harbor", "test/orchard"]
    harbor = convs[0]
    assert [t.item_id for t in harbor.turns] == ["test/harbor/q1", "test/harbor/q2", "test/harbor/q3"]
    assert CONTEXT_SLOT in harbor.turns[0].user and 'Read the minutes "The Harbor Committee"' in harbor.turns[0].user
    assert harbor.turns[1].user == "When will the first summer ferry leave?"  # prompt.next: the question alone
    assert harbor.preamble[0].content == "You answer questions about documents briefly."
    assert harbor.turns[2].metadata["type"] == "where" and harbor.turns[2].metadata["kind"] == "minutes"
    assert harbor.context.startswith("Minutes of the Harbor Committee")
    assert files == [TEST_DATA / "documents" / "notes.jsonl"]


def test_a_list_of_speaker_turns_is_joined_into_the_context(tmp_path):
    rows = [{"meeting": "m1", "turns": [{"speaker": "ANA", "text": "We start."}, {"speaker": "LI", "text": "Fine."}],
             "q": "Who starts?", "a": "ANA"}]
    write_jsonl(tmp_path / "m.jsonl", rows)
    options = {"source": {"data_files": "m.jsonl"},
               "fields": {"documents": "turns", "document_template": "({{ index }}) {{ document.speaker }}: "
                          "{{ document.text }}", "document_separator": "\n", "question": "q", "answer": "a",
                          "document_key": "meeting"},
               "prompt": {"user": "{{ context }}\n\n{{ question }}"}}
    (conv,), _, _ = load(tmp_path / "s.yaml", options)
    assert conv.context == "(1) ANA: We start.\n(2) LI: Fine."
    assert conv.context_id == "train/m1" and conv.turns[0].item_id == "train/0"


def test_chain_of_thought_then_answer_in_one_conversation(tmp_path):
    write_jsonl(tmp_path / "d.jsonl", [longbench_row(1, "Text one. " * 5)])
    options = {"source": {"data_files": "d.jsonl"}, "fields": {"id": "_id", "question": "input", "answer": "answers"},
               "prompt": {"user": "{{ context }}\n{{ question }}\nLet's think step by step:", "step": "reasoning",
                          "followups": [{"name": "answer", "user": "So the answer to {{ question }} is?"}]}}
    (conv,), _, _ = load(tmp_path / "s.yaml", options)
    assert [t.item_id for t in conv.turns] == ["train/id001", "train/id001/answer"]
    assert [t.metadata["step"] for t in conv.turns] == ["reasoning", "answer"]
    assert conv.turns[1].user == "So the answer to Question 1? is?" and CONTEXT_SLOT not in conv.turns[1].user


def test_limits_and_context_selection_stop_reading_early(tmp_path):
    docs = ["Doc A. " * 5, "Doc B. " * 5, "Doc C. " * 5]
    rows = [longbench_row(i, docs[i % 3]) for i in range(9)]
    rows.append(longbench_row(99, "   "))  # an empty context: reached only by reading everything
    write_jsonl(tmp_path / "d.jsonl", rows)
    options = {"source": {"data_files": "d.jsonl"}, "fields": {"id": "_id", "question": "input", "answer": "answers"}}
    convs, _, _ = load(tmp_path / "s.yaml", options, limit=4)
    assert len(convs) == 4  # the 4 first questions; the bad row after them is never read
    convs, _, _ = load(tmp_path / "s.yaml", options, limit=3, limit_per_context=1)
    assert len(convs) == 3 and len({c.context_id for c in convs}) == 3
    asked: list[str] = []
    keep = {r["_id"] for r in rows[:9] if r["context"] == docs[1]}

    def choose(cid):
        asked.append(cid)
        return len(asked) == 2  # the second document met (Doc B)

    convs, _, _ = load(tmp_path / "s.yaml", options, limit=2, select_context=choose)
    assert {c.conv_id.split("/")[1] for c in convs} <= keep and len(convs) == 2
    with pytest.raises(UserError, match="the context is empty"):
        load(tmp_path / "s.yaml", options)


def test_one_file_of_a_zip_and_the_rows_where_a_field_has_a_value(tmp_path):
    archive = tmp_path / "data.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for name in ("narrativeqa", "trec"):
            classes = ["Location", "Person"] if name == "trec" else None
            zf.writestr(f"data/{name}.jsonl", "".join(json.dumps(longbench_row(i, f"{name} text {i}. " * 3, name,
                                                                              all_classes=classes)) + "\n"
                                                      for i in range(3)))
    one = {"source": {"data_files": "zip://data/trec.jsonl::data.zip"},
           "fields": {"id": "_id", "question": "input", "answer": "answers", "metadata": ["all_classes"]}}
    convs, files, _ = load(tmp_path / "s.yaml", one)
    assert len(convs) == 3 and files == [archive]
    assert convs[0].turns[0].metadata["all_classes"] == ["Location", "Person"]
    mixed = [longbench_row(i, f"{name} text {i}. " * 3, name) for i, name in enumerate(["narrativeqa", "qasper"] * 3)]
    write_jsonl(tmp_path / "mixed.jsonl", mixed)
    both = {**one, "source": {"data_files": "mixed.jsonl", "where": {"dataset": ["narrativeqa"]}},
            "fields": {"id": "_id", "question": "input", "answer": "answers"}}
    convs, _, _ = load(tmp_path / "s.yaml", both)
    assert len(convs) == 3 and all(c.context.startswith("narrativeqa") for c in convs)


def test_multiple_choice_letters_from_a_letter_or_from_the_option_text(tmp_path):
    lb2 = json.loads((TEST_DATA / "documents" / "longbench_v2_sample.json").read_text())
    (tmp_path / "v2.json").write_text(json.dumps(lb2[:1]))
    options = {"source": {"data_files": "v2.json"},
               "fields": {"id": "_id", "answer": "answer", "choices": ["choice_A", "choice_B", "choice_C", "choice_D"]}}
    (conv,), _, _ = load(tmp_path / "s.yaml", options)
    meta = conv.turns[0].metadata
    assert meta["answer_letter"] == "B" and meta["choices"][1] == "1.42 euros per cubic metre"
    infinite = [{"id": 0, "context": "A book. " * 4, "input": "Who?", "answer": ["Bob"], "options": ["Al", "Bob", "Cy", "Di"]}]
    write_jsonl(tmp_path / "mc.jsonl", infinite)
    options = {"source": {"data_files": "mc.jsonl"}, "fields": {"id": "id", "question": "input", "choices": "options"}}
    (conv,), _, _ = load(tmp_path / "s.yaml", options)
    assert conv.turns[0].metadata["answer_letter"] == "B" and conv.turns[0].metadata["references"] == ["Bob"]


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_csv_and_parquet_files_read_like_json(tmp_path, fmt):
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    table = pa.table({"id": ["a", "b"], "context": ["First doc. " * 3, "Second doc. " * 3],
                      "question": ["Q1?", "Q2?"], "answer": ["x", "y"]})
    path = tmp_path / "sub" / f"rows.{fmt}"
    path.parent.mkdir()
    (pacsv.write_csv if fmt == "csv" else pq.write_table)(table, path)
    options = {"source": {"data_files": "sub/*." + fmt}, "fields": {"id": "id"}}
    convs, files, sources = load(tmp_path / "s.yaml", options)
    assert [c.conv_id for c in convs] == ["train/a", "train/b"] and files == [path]
    assert sources[0]["builder"] == fmt


def test_data_files_are_found_next_to_the_spec_then_in_the_data_home(tmp_path):
    home = tmp_path / "home"
    write_jsonl(home / "mybench" / "q.jsonl", [longbench_row(1, "In the home. " * 3)])
    options = {"source": {"data_files": "mybench/q.jsonl"}, "fields": {"id": "_id", "question": "input",
                                                                      "answer": "answers"}}
    (conv,), files, _ = load(tmp_path / "specs" / "s.yaml", options, data_home=home)
    assert files == [home / "mybench" / "q.jsonl"]
    write_jsonl(tmp_path / "specs" / "mybench" / "q.jsonl", [longbench_row(1, "Next to the spec. " * 3)])
    (conv,), files, _ = load(tmp_path / "specs" / "s.yaml", options, data_home=home)
    assert conv.context.startswith("Next to the spec") and files == [tmp_path / "specs" / "mybench" / "q.jsonl"]


def test_the_spec_runs_through_the_engine_with_breakdowns_by_document(tmp_path):
    from tests.conftest import ScriptedModel, run_engine

    spec = write_spec(tmp_path, {"source": {"data_files": str(TEST_DATA / "documents" / "notes.jsonl"), "split": "test"},
                                 "fields": {"id": "id", "context": "text", "questions": "questions",
                                            "answer": "answers", "document_key": "id", "metadata": ["type"]},
                                 "prompt": {"user": "{{ context }}\n\nQuestion: {{ question }}"}},
                      judge={"name": "f1"}, report={"cluster_by": "document_id", "breakdowns": ["type"]})
    run_dir, results, state = run_engine(ScriptedModel(window=4096), str(spec), tmp_path / "home", tmp_path)
    task = results["tasks"]["docs_task"]
    assert task["n_samples"] == 6 and task["cluster_by"] == "document_id"
    score = task["metrics"]["score"]
    assert score["spread"]["clusters"] == 2  # intervals resample the two documents
    assert set(score["breakdowns"]["type"]) == {"who", "when", "where", "howmany", "what"}
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["data_sources"]["docs_task"][0]["split"] == "test"
    assert any(p.endswith("notes.jsonl") for p in manifest["data_files"])


def test_a_document_repeated_over_many_rows_is_held_once(tmp_path):
    """1,000 rows of a parquet file, 100 documents of 10 questions each, the rows shuffled:
    100 texts are held (not 1,000), and each document's questions share its context id."""
    import random

    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(0)
    order = [(d, q) for d in range(100) for q in range(10)]
    rng.shuffle(order)
    pq.write_table(pa.table({"_id": [f"r{i}" for i in range(len(order))],
                             "context": [f"Document {d}. " * 200 for d, _ in order],
                             "input": [f"Q{q}?" for _, q in order], "answers": [["a"] for _ in order]}),
                   tmp_path / "rows.parquet")
    options = {"source": {"data_files": "rows.parquet"}, "fields": {"id": "_id", "question": "input", "answer": "answers"}}
    convs, _, _ = load(tmp_path / "s.yaml", options)
    assert len(convs) == 1000
    assert len({id(c.context) for c in convs}) == 100 == len({c.context_id for c in convs})
    assert all(sum(1 for c in convs if c.context_id == cid) == 10 for cid in {c.context_id for c in convs[:5]})
