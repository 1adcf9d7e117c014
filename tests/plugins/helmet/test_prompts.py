"""The HELMET specs build the authors' prompts byte for byte, over rows we wrote in their files'
schema (tests/data/helmet/home): the sha256 values in tests/data/helmet/authors_prompts.json are
of the prompts that the authors' own data.py loaders (princeton-nlp/HELMET at 4526dfb) built
from the same rows - `user_template.format(**row)` (chat style) and `prompt_template` (completion
style) - in the order their sampling leaves the rows, computed by running that code outside this
repository (random.seed(42) before each loader, as eval.py's run_test)."""

from __future__ import annotations

import json

import pytest

from tests.paths import TEST_DATA

from .helpers import load, prompt, sha

AUTHORS = json.loads((TEST_DATA / "helmet" / "authors_prompts.json").read_text())

CASES = [  # (authors' run, spec, split, options)
    ("json_kv", "helmet_json_kv", "8k", {}),
    ("ruler_mk", "helmet_ruler_mk_needle", "8k", {}),
    ("ruler_mv", "helmet_ruler_mv", "8k", {}),
    ("nq", "helmet_nq", "8k", {"max_test_samples": 2}),
    ("popqa", "helmet_popqa", "8k", {}),
    ("msmarco", "helmet_msmarco", "8k", {}),
    ("asqa", "helmet_asqa", "8k", {"max_test_samples": 3}),
    ("qampari", "helmet_qampari", "8k", {"max_test_samples": 3}),
    ("trec_coarse", "helmet_trec_coarse", "8k", {}),
    ("trec_coarse_balanced", "helmet_trec_coarse", "8k", {"max_test_samples": 6}),
    ("trec_fine", "helmet_trec_fine", "8k", {}),
    ("nlu", "helmet_nlu", "8k", {}),
]


@pytest.mark.parametrize("run,spec,split,options", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("style", ["chat", "completion"])
def test_the_prompts_are_the_authors_byte_for_byte(run, spec, split, options, style):
    convs = load(spec, [split], style=style, **options)
    field = "user" if style == "chat" else "prompt"
    assert [sha(prompt(c)) for c in convs] == [r[field] for r in AUTHORS[run]]
    if f"{run}_answers" in AUTHORS:  # ICL: each text's own random label mapping
        assert [c.turns[0].reference for c in convs] == AUTHORS[f"{run}_answers"]


def test_rag_keeps_every_depth_copy_of_a_drawn_question_and_reports_by_depth():
    convs = load("helmet_nq", ["8k"], max_test_samples=2)
    keys = [c.turns[0].metadata["question_key"] for c in convs]
    assert len(convs) == 4 and sorted(keys.count(k) for k in set(keys)) == [2, 2]
    assert {c.turns[0].metadata["depth"] for c in convs} == {0.0, 0.6}
    assert all(c.turns[0].metadata["length"] == "8k" and c.conv_id.startswith("8k/") for c in convs)


def test_popqa_keeps_the_less_popular_questions_only():
    convs = load("helmet_popqa", ["8k"])
    assert sorted(c.turns[0].reference for c in convs) == ["job0", "job2", "job3"]  # s_pop 5000: log10 >= 3


def test_msmarco_carries_the_rows_graded_labels_for_ndcg():
    convs = load("helmet_msmarco", ["8k"])
    meta = convs[0].turns[0].metadata
    assert len(meta["qrels"]) == 12 and set(meta["qrels"].values()) <= {0, 1, 2, 3}
    ids = [line.split("]")[0][5:] for line in convs[0].context.split("\n\n")]
    assert set(ids) == set(meta["qrels"])


def test_alce_shows_the_lengths_documents_and_keeps_them_for_the_citation_metrics():
    (conv, *_) = load("helmet_asqa", ["8k"], max_test_samples=3)
    meta = conv.turns[0].metadata
    assert len(meta["docs"]) == 30 and meta["docs_total"] == 40 and conv.context.count("Document [") == 30
    assert meta["qa_pairs"][0]["short_answers"]
