"""HELMET's LongQA and Summ rows: documents measured and cut in the authors' Llama-2 tokens (here a
word-level stand-in, tests/plugins/helmet/helpers.py `make_tokenizer`), and the questions of a
document asked over one shared context. tests/data/helmet/authors_infbench.json holds the sha256
of the prompts the authors' data.py `load_infbench` built from the same rows with the same
tokenizer (princeton-nlp/HELMET at 4526dfb, run outside this repository), in their order."""

from __future__ import annotations

import json

import pytest


from tests.paths import TEST_DATA
from tests.plugins.documents.conftest import put_in_hub_cache

from .helpers import infbench_rows, load, make_tokenizer, multi_lexsum_rows, narrativeqa_rows, prompt, sha

AUTHORS = json.loads((TEST_DATA / "helmet" / "authors_infbench.json").read_text())
IB = ("xinrongzhang2022/InfiniteBench", "90f0394333616266d9fe85824ceaf505093cbaa5")


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return str(make_tokenizer(tmp_path_factory.mktemp("tok")))


@pytest.fixture
def infbench(_isolated_hf):
    rows = "".join(json.dumps(r) + "\n" for r in infbench_rows()).encode()
    put_in_hub_cache(_isolated_hf / "hub", *IB, {"longbook_qa_eng.jsonl": rows})


@pytest.mark.parametrize("length", ["8k", "32k"])
def test_infbench_prompts_and_cut_are_the_authors(length, infbench, tokenizer):
    convs = load("helmet_infbench_qa", [length], pretruncate_tokenizer=tokenizer)
    assert [(c.turns[0].metadata["id"], sha(prompt(c))) for c in convs] == \
        [(r["id"], r["user"]) for r in AUTHORS[length]]
    assert all(c.context.endswith(" ... [the rest of the text is omitted]") for c in convs)


def test_questions_about_one_book_share_its_context(infbench, tokenizer):
    convs = load("helmet_infbench_qa", ["8k"], pretruncate_tokenizer=tokenizer)
    by_book: dict[str, set] = {}
    for c in convs:
        by_book.setdefault(c.context_id, set()).add(c.turns[0].metadata["id"])
    assert sorted(map(sorted, by_book.values())) == [[0, 1], [3, 4]]  # book 2 (1,000 words) is too short


def test_a_tokenizer_that_cannot_load_is_a_clear_error(infbench):
    from lceval.errors import UserError

    with pytest.raises(UserError, match="pretruncate_tokenizer|tokenizer"):
        load("helmet_infbench_qa", ["8k"], pretruncate_tokenizer="/nonexistent/tokenizer")


LONGDOC = json.loads((TEST_DATA / "helmet" / "authors_longdoc.json").read_text())


def write_rows(path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize("length", ["8k", "64k"])
def test_narrativeqa_keeps_long_stories_and_cuts_them_as_the_authors(length, tmp_path, tokenizer):
    rows = narrativeqa_rows(3, 2, 132_000)
    rows[4] = {**rows[4], "document": {**rows[4]["document"], "text": rows[4]["document"]["text"][:5000]}}
    write_rows(tmp_path / "helmet/hub/narrativeqa/test.jsonl", rows)
    convs = load("helmet_narrativeqa", [length], home=tmp_path, shots=0, pretruncate_tokenizer=tokenizer)
    assert [sha(prompt(c)) for c in convs] == LONGDOC[f"narrativeqa_{length}"]


def test_multi_lexsum_as_the_authors_with_key_points_for_the_judge(tmp_path, tokenizer):
    write_rows(tmp_path / "helmet/data/multi_lexsum/multi_lexsum_val.jsonl", multi_lexsum_rows())
    convs = load("helmet_multi_lexsum", ["8k"], home=tmp_path, shots=0, pretruncate_tokenizer=tokenizer)
    assert [[c.turns[0].metadata["id"], sha(prompt(c))] for c in convs] == LONGDOC["multi_lexsum_8k"]
    meta = convs[0].turns[0].metadata
    assert meta["keypoints"] and meta["expert_summary"].startswith("Long summary")
