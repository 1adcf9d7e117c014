"""HELMET's LongQA and Summ rows: documents measured and cut in the authors' Llama-2 tokens (here a
word-level stand-in, tests/plugins/helmet/helpers.py `make_tokenizer`), and the questions of a
document asked over one shared context. tests/data/helmet/authors_infbench.json holds the sha256
of the prompts the authors' data.py `load_infbench` built from the same rows with the same
tokenizer (princeton-nlp/HELMET at 4526dfb, run outside this repository), in their order."""

from __future__ import annotations

import json

import pytest

from lceval.interfaces import JudgeContext
from lceval.types import Generation, JudgeInput

from tests.paths import TEST_DATA
from tests.plugins.documents.conftest import put_in_hub_cache

from .helpers import infbench_rows, load, make_tokenizer, prompt, sha

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
