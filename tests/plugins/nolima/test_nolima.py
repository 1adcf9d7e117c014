"""NoLiMa (Modarressi et al., 2025): every prompt is the authors' byte for byte, the metric is
theirs, lengths are splits, and bad input names its option.

The expected digests are those of the prompts the authors' own code builds from our needle sets
and books (tests/data/nolima: invented needles in the authors' schema, our own text): their
`run_tests.py` test building and `NoLiMa_Tester.evaluate` loop (adobe-research/NoLiMa at 7532e4e;
seeds, character draws, distractor depths) around their `data/book_haystack.py`, with the API call
replaced by recording the prompt, the same word-and-punctuation tokenizer on both sides, run
outside this repository (books in sorted order, as lceval reads them)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from lceval.errors import UserError
from lceval.interfaces import TaskContext
from lceval.types import CONTEXT_SLOT, JudgeInput
from lceval_plugins.nolima.metric import NolimaJudge
from lceval_plugins.nolima.task import NolimaTaskType

from tests.conftest import complete, run_engine
from tests.paths import TEST_DATA
from tests.plugins.niah.test_niah import RegexModel

DATA = TEST_DATA / "nolima"
#: sha256 of json.dumps(sorted([item, system, user message, gold answers])) of the authors' code
#: at lengths 250, 500 and 1000 over both books, 26 depths
AUTHORS = {
    "needlesets/needle_set.json": ("7ddafb0a8bc7b3e04020a88800a8cc02af69d02518c1fecd5e8205fca0a8dc14", 936),
    "needlesets/needle_set_w_Distractor.json": ("a0808a8101e6798235ecdcbef645e8f5a6b195ce02ba88dceaf234f8a1b00351", 156),
}


def load(options: dict | None = None, splits=("250",), model=None, limit=None, context_length=None, files=None):
    task_type = NolimaTaskType()
    spec = {"name": "nolima", "type": "nolima", "splits": list(splits), "generation": {"max_new_tokens": 192},
            "options": complete(task_type, {"data": str(DATA), "haystack": "haystack", **(options or {})})}
    model = model if model is not None else RegexModel(window=None)
    ctx = TaskContext(spec=spec, spec_path=Path("nolima.yaml"), data_home=Path("/nonexistent"), splits=list(splits),
                      limit=limit, record_file=(files if files is not None else []).append,
                      model_tokenizer=lambda: model, context_length=context_length)
    return task_type.load(ctx)


def prompt_of(conv) -> list:
    turn = conv.turns[0]
    system = conv.preamble[0].content if conv.preamble else ""
    return [turn.item_id, system, turn.user.replace(CONTEXT_SLOT, conv.context), turn.metadata["references"]]


@pytest.mark.parametrize("needle_set", sorted(AUTHORS))
def test_every_prompt_is_the_authors_byte_for_byte(needle_set):
    convs = load({"needle_set": needle_set}, splits=("250", "500", "1K"))
    records = sorted(prompt_of(c) for c in convs)
    digest, n = AUTHORS[needle_set]
    assert len(records) == n
    assert hashlib.sha256(json.dumps(records).encode()).hexdigest() == digest


def test_the_samples_and_their_fields():
    files: list = []
    convs = load(files=files)
    assert sorted(p.name for p in files) == ["book_a.txt", "book_b.txt", "needle_set.json"]   # every file recorded
    assert len(convs) == 6 * 2 * 26                                 # tests x books x depths
    conv = next(c for c in convs if c.turns[0].item_id == "250/0401_T01_C01_twohop/b1/d13")
    meta = conv.turns[0].metadata
    assert meta["depth"] == 52 and meta["length"] == "250" and meta["book"] == "book_b.txt"
    assert meta["question_type"] == "twohop" and meta["reasoning_type"] == "world_knowledge"
    assert conv.turns[0].question == "Which character has been to Saxony?"
    assert f" Actually, {meta['references'][0]} lives next to the Semper Opera House.\n" in conv.context
    assert [m.content for m in conv.preamble] == ["You are a helpful assistant"]
    # the record's system prompt when options.system is null (the authors' Claude route)
    keeper = next(c for c in load({"system": None}) if c.turns[0].metadata["exp_id"] == "0512")
    assert [m.content for m in keeper.preamble] == ["Answer with a name only."]
    assert keeper.turns[0].metadata["references"] == ["the keeper", "The keeper"]


def test_limit_spans_the_depths_of_one_test_and_book():
    convs = load(limit=3, splits=("250", "500"))
    assert len(convs) == 6
    assert sorted({c.turns[0].metadata["depth"] for c in convs}) == [0, 48, 100]
    assert {c.turns[0].metadata["test"] for c in convs} == {"0401_T01_C01_onehop"}


@pytest.mark.parametrize("options,splits,kw,field,words", [
    ({"data": "/nonexistent/nolima"}, ("250",), {}, "options.data", "no file or folder"),
    ({"needle_set": "needlesets/missing.json"}, ("250",), {}, "options.needle_set", "no file or folder"),
    ({}, ("250", "12Q"), {}, "--split", "not a length"),
    ({}, ("1K",), {"model": RegexModel(window=512)}, "--split", "past the model's window"),
    ({}, ("32K",), {}, "options.haystack", "too short"),
    ({}, ("250",), {"context_length": 4096}, "--context-lengths", "choose them with --split"),
])
def test_bad_input_names_the_option(options, splits, kw, field, words):
    with pytest.raises(UserError) as err:
        load(options, splits=splits, **kw)
    assert err.value.field == field and words in str(err.value)


def test_a_needle_set_not_in_the_authors_schema_is_refused(tmp_path):
    bad = tmp_path / "set.json"
    bad.write_text(json.dumps([{"id": "x401", "needle": "n", "questions": {}, "tests": {}}]))
    with pytest.raises(UserError) as err:
        load({"needle_set": str(bad)})
    assert err.value.field == "options.needle_set" and "4 digits" in str(err.value)


#: the authors' `_evaluate_response` (async_evaluate.py at 7532e4e) run outside this repository on
#: these answers with gold ["Ilse"]: contains, EM, lastline_contains, lastline_EM
METRIC_CASES = [
    ("Ilse", (1, 1, 1, 1)),
    ("  Ilse\n", (1, 1, 1, 1)),
    ("ilse", (0, 0, 0, 0)),
    ("The character is Ilse.", (1, 0, 1, 0)),
    ("Ilse lives there.\nAnswer: Tomasz", (1, 0, 0, 0)),
    ("Let me think.\nIlse", (1, 0, 1, 1)),
    ("", (0, 0, 0, 0)),
]


@pytest.mark.parametrize("answer,expected", METRIC_CASES)
def test_the_metric_is_the_authors(answer, expected):
    for metric, want in zip(("contains", "EM", "lastline_contains", "lastline_EM"), expected):
        judge = NolimaJudge({"metric": metric})
        (j,) = judge.judge([JudgeInput(item_id="1", question="q", response=answer.strip(), reference="Ilse",
                                       raw_response=answer if answer != answer.strip() else None,
                                       metadata={"references": ["Ilse"]})])
        assert j.score == 100.0 * want, (metric, answer)


def test_a_run_scores_per_length_and_draws_the_heatmap(tmp_path):
    from tests.cli import lceval

    model = RegexModel(window=None, answer="It is Odalys.")
    run_dir, results, _ = run_engine(model, "nolima", tmp_path / "home", tmp_path, splits=["250", "500"], limit=4,
                                   overrides={"options.data": str(DATA), "options.haystack": "haystack"})
    block = results["tasks"]["nolima"]["metrics"]["score"]
    assert set(block["groups"]) == {"250", "500"} and len(model.calls) == 8
    assert set(block["breakdowns"]["depth"]) == {"0", "24", "48", "100"}    # --limit 4 spans the depths
    points = results["length_bins"]["nolima"]["points"]
    assert [(p["label"], p["length"], p["n"]) for p in points] == [("250", 250, 4), ("500", 500, 4)]
    lceval("report", str(run_dir), "--format", "html", "-o", str(tmp_path / "report.html"))
    assert "nolima: score by depth x length" in (tmp_path / "report.html").read_text()


def test_every_generated_sample_is_pinned():
    """samples_digest of every sample, distractors included (issue 40: the shared haystack
    builder changes none)."""
    from tests.plugins.samples_digest import samples_digest

    convs = load({"needle_set": "needlesets/needle_set_w_Distractor.json"}, splits=("250", "500", "1K"))
    assert samples_digest(convs) == "b4b5babba5e78a49f15153a6eee18d5ceb0764055340b097b333f1034b68c494"
