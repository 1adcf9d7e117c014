"""SummHay pieces without the engine: prompts, haystack schema, template, budgets,
retrievers, metrics (paper 002 Fig. 2), judge-output parsing and the coverage judges."""

from __future__ import annotations

import hashlib
import importlib.util
import json

import pytest

from lceval.errors import UserError
from lceval.interfaces import JudgeContext
from lceval.types import Generation, JudgeInput
from lceval_plugins.summhay.coverage_judge import CoverageLLMJudge, CoverageOfflineJudge, parse_verdict
from lceval_plugins.retrievers.lexical import (BM25Retriever, KeywordsRetriever, OracleRetriever, RandomRetriever,
                                               bm25_tokens)
from lceval import tokens as budget
from lceval_plugins.summhay import prompts
from lceval_plugins.summhay.haystack import parse_haystack
from lceval_plugins.summhay.retrieval_report import retrieval_report, to_markdown
from lceval_plugins.summhay.scoring import (extract_citations, position_sensitivity, score_insight,
                                                  score_summary, split_bullets, words_per_bullet)
from lceval_plugins.summhay.template import template_haystack


# -- prompts: the authors' files, byte for byte (sha256 of prompts/*.txt at commit 3e2007f) --

@pytest.mark.parametrize("text,digest", [
    (prompts.SUMMARIZATION_CONV, "40edcab6efadc031a978964e90a25f5bdc37ed148ee6c5edb0e2a1de0ef9fb2c"),
    (prompts.SUMMARIZATION_NEWS, "ebc949c5a1845b83a08effc3e344b21d88619e6a1a0f059ac6b95d02e9a92b18"),
    (prompts.EVAL_SUMMHAY, "5363d87ff8a1e2a2588d5f188ccc2eacbdc22f94d1a9bb313b0d47849e5aae25"),
])
def test_prompts_are_the_authors_bytes(text, digest):
    assert hashlib.sha256(text.encode()).hexdigest() == digest


def test_summarization_prompt_asks_n_bullets_with_citations_and_word_limit():
    p = prompts.summarization_prompt("conversation", n_documents=7, n_insights=4, topic="T", participants=["A", "B"],
                                     subtopic="s", query="Q?", documents="{context}")
    assert "You are given 7 conversations" in p and "with 4 bullet points" in p and "query: Q?." in p
    assert "A, B" in p and "```\n{context}\n```" in p and "300 words" in p and '"[14]"' in p
    news = prompts.summarization_prompt("news", n_documents=3, n_insights=5, topic="T", participants=[],
                                        subtopic="sub", query="Q?", documents="D")
    assert "You are given 3 news articles" in news and "the 5 main insights" in news and '"sub"' in news


def test_coverage_prompt_numbers_bullets_from_one():
    p = prompts.coverage_prompt("An insight.", ["# Title", "- a [1]"])
    assert '"bullet_id": 1,\n   "text": "# Title"' in p and '"bullet_id": 2' in p and "An insight." in p


# -- metrics ----------------------------------------------------------------------------------

def test_figure2_example():
    """Paper 002 Fig. 2: coverage (100 + 50 + 0) / 3 = 50; citation F1 of the two covered
    insights 29 and 73 (P 50 R 20; P 80 R 67); joint (100 x .29 + 50 x .73) / 3."""
    bullets = ["- first [1][2][11][12]", "- second [1, 2, 3, 4, 20]", "- third"]
    gold = {"a": set(range(1, 11)), "b": {1, 2, 3, 4, 5, 6}, "c": {7}}
    verdicts = [{"insight_id": "a", "coverage": "FULL_COVERAGE", "bullet_id": 1},
                {"insight_id": "b", "coverage": "PARTIAL_COVERAGE", "bullet_id": 2},
                {"insight_id": "c", "coverage": "NO_COVERAGE", "bullet_id": "NA"}]
    s = score_summary("\n".join(bullets), verdicts, gold)
    a, b, c = s["per_insight"]
    assert (a["precision"], a["recall"]) == (0.5, 0.2) and a["f1"] == pytest.approx(2 / 7)
    assert (b["precision"], b["recall"]) == (0.8, pytest.approx(4 / 6)) and b["f1"] == pytest.approx(8 / 11)
    assert c["f1"] is None and c["cites"] == [] and c["bullet_id"] is None
    assert s["coverage"] == 50.0
    assert s["citation_f1"] == pytest.approx(100 * (2 / 7 + 8 / 11) / 2)  # ~51 in the figure
    assert s["joint"] == pytest.approx((100 * 2 / 7 + 50 * 8 / 11) / 3)  # ~21.8 with the rounded F1s
    assert s["words_per_bullet"] == pytest.approx(words_per_bullet(bullets))


def test_nothing_covered_has_no_citation_score():
    s = score_summary("- x [1]", [{"insight_id": "a", "coverage": "NO_COVERAGE", "bullet_id": "NA"}], {"a": {1}})
    assert s["coverage"] == 0 and s["joint"] == 0 and s["citation_f1"] is None


def test_covered_with_unknown_bullet_keeps_coverage_but_cites_nothing():
    s = score_insight("a", "FULL_COVERAGE", 9, ["- x [1]"], {1})
    assert s.coverage == 100 and s.cites == [] and s.f1 == 0.0 and s.joint == 0.0


@pytest.mark.parametrize("bullet,cites", [
    ("a [1][4]", [1, 4]), ("a [1, 4]", [1, 4]), ("a [12] b [3]", [12, 3]), ("a [x] [ ]", []), ("none", []),
])
def test_extract_citations(bullet, cites):
    assert extract_citations(bullet) == cites


def test_bullets_are_nonempty_stripped_lines_and_words_per_bullet():
    assert split_bullets("# T\n\n - a b [1]\n  \n- c") == ["# T", "- a b [1]", "- c"]
    # Eval_Benchmarking.calc_num_words: spaces of the "\n"-joined text + 1, per line; the
    # authors count spaces only, so a line break does not separate words: (3 + 1) / 2
    assert words_per_bullet(["a b", "c  d e"]) == pytest.approx(4 / 2)


def test_position_sensitivity_is_max_gap_to_random():
    # Table 3, GPT-4o: Top 13.8, Bottom 24.1, Random 11.4 -> 12.7 (the table prints 12.6)
    assert position_sensitivity({"top": 13.8, "bottom": 24.1, "random": 11.4}) == pytest.approx(12.7)
    assert position_sensitivity({"top": 47.1, "bottom": 38.9, "random": 37.9}) == pytest.approx(9.2)
    with pytest.raises(ValueError):
        position_sensitivity({"top": 1.0})


# -- judge output parsing ------------------------------------------------------------------------

@pytest.mark.parametrize("text,verdict", [
    ('{"coverage": "FULL_COVERAGE", "bullet_id": 3}', {"coverage": "FULL_COVERAGE", "bullet_id": 3}),
    ('```json\n{"coverage": "PARTIAL_COVERAGE", "bullet_id": "2"}\n```', {"coverage": "PARTIAL_COVERAGE", "bullet_id": 2}),
    ('{"coverage": "NO_COVERAGE", "bullet_id": "NA"}', {"coverage": "NO_COVERAGE", "bullet_id": None}),
    ('Sure! {"coverage": "FULL", "bullet_id": 1} done', {"coverage": "FULL_COVERAGE", "bullet_id": 1}),
    ('{"coverage": "NO"}', {"coverage": "NO_COVERAGE", "bullet_id": None}),
])
def test_parse_verdict_accepts(text, verdict):
    assert parse_verdict(text, 3) == (verdict, "")


@pytest.mark.parametrize("text,why", [
    ("The insight is covered by bullet 2.", "no JSON verdict"),
    ('{"coverage": "MAYBE", "bullet_id": 1}', "unknown coverage"),
    ('{"coverage": "FULL_COVERAGE", "bullet_id": 7}', "outside 1..3"),
    ('{"coverage": "PARTIAL_COVERAGE", "bullet_id": "NA"}', "without a bullet number"),
])
def test_parse_verdict_refuses(text, why):
    verdict, reason = parse_verdict(text, 3)
    assert verdict is None and why in reason


class CannedJudgeModel:
    """A CachedModel stand-in: answers each request from a list of texts, recording seeds."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.requests = []
        self.identity = {"scheme": "canned"}

    def generate(self, requests):
        self.requests.extend(requests)
        return [Generation(request_id=r.request_id, text=self.answers.pop(0)) for r in requests]


def _item(response: str) -> JudgeInput:
    insights = [{"insight_id": "i1", "insight": "A student runs 30 minutes at 6 pm.", "gold": [2, 5]},
                {"insight_id": "i2", "insight": "The exam is on June 14.", "gold": [3]}]
    return JudgeInput("t/s", "Q?", response, "ref", metadata={"insights": insights})


def test_llm_coverage_judge_scores_and_retries_with_new_seeds():
    model = CannedJudgeModel(['{"coverage": "FULL_COVERAGE", "bullet_id": 1}', "I think bullet 2",
                              '{"coverage": "PARTIAL_COVERAGE", "bullet_id": 2}'])
    judge = CoverageLLMJudge(JudgeContext(model=model, seed=7))
    (j,) = judge.judge([_item("- runs at 6 pm [2][5]\n- exam in June [3][4]")])
    assert j.parse_status == "ok" and j.attempts == 2
    assert [r.params.seed for r in model.requests] == [7, 7, 7 + 1_000_003]
    assert [r.params.temperature for r in model.requests] == [0.0, 0.0, 0.7]
    assert model.requests[0].messages[0].role == "user" and len(model.requests[0].messages) == 1
    d = j.details
    assert d["coverage"] == 75.0 and d["per_insight"][0]["f1"] == 1.0
    assert d["per_insight"][1]["precision"] == 0.5 and d["per_insight"][1]["recall"] == 1.0
    assert j.score == pytest.approx((100 * 1.0 + 50 * 2 / 3) / 2)
    assert d["subitems"] == [{"id": "i1", "score": 100.0, "label": "1"}, {"id": "i2", "score": 50.0, "label": "2"}]


def test_llm_coverage_judge_records_parse_failure_without_score():
    model = CannedJudgeModel(['{"coverage": "FULL_COVERAGE", "bullet_id": 1}', "nope", "still no", "no"])
    judge = CoverageLLMJudge(JudgeContext(model=model, options={"max_attempts": 3}))
    (j,) = judge.judge([_item("- a [1]")])
    assert j.score is None and j.parse_status == "parse_failure" and j.attempts == 3
    assert j.details["failures"][0]["insight_id"] == "i2"
    assert j.details["judge_outputs"][1]["outputs"] == ["nope", "still no", "no"]


def test_llm_coverage_judge_needs_a_model():
    with pytest.raises(UserError):
        CoverageLLMJudge(JudgeContext())


def test_llm_coverage_judge_records_a_judge_api_failure_as_missing_not_parsed():
    class GivesUp(CannedJudgeModel):
        def generate(self, requests):
            out = super().generate(requests)
            out[1] = Generation(request_id=out[1].request_id, text="", finish_reason="error",
                                extras={"error": "RateLimitError after 6 retries"})
            return out

    model = GivesUp(['{"coverage": "FULL_COVERAGE", "bullet_id": 1}', "unused"])
    judge = CoverageLLMJudge(JudgeContext(model=model, options={"max_attempts": 3}))
    (j,) = judge.judge([_item("- a [1]")])
    # not retried as if unparseable, and no score: asked again by the next run
    assert len(model.requests) == 2 and j.score is None and j.parse_status == "missing"
    assert j.details["judge_error"] == [{"insight_id": "i2", "error": "RateLimitError after 6 retries"}]


@pytest.mark.parametrize("judge, options, field", [
    (CoverageLLMJudge, {"max_attempts": 2.5}, "judge.options.max_attempts"),
    (CoverageLLMJudge, {"temperature": -1}, "judge.options.temperature"),
    (CoverageOfflineJudge, {"full": "abc"}, "judge.options.full"),
    (CoverageOfflineJudge, {"partial": 2}, "judge.options.partial"),
    (CoverageOfflineJudge, {"embeddings": "maybe"}, "judge.options.embeddings"),
])
def test_coverage_judge_options_are_checked(judge, options, field):
    with pytest.raises(UserError) as err:
        judge(JudgeContext(model=CannedJudgeModel([]), options=options))
    assert err.value.field == field


def test_offline_judge_gives_a_perfect_summary_full_marks_and_nonsense_zero():
    judge = CoverageOfflineJudge(JudgeContext(options={"embeddings": False}))
    perfect, nonsense = judge.judge([
        _item("## Summary\n- A student runs 30 minutes at 6 pm. [2][5]\n- The exam is on June 14. [3]"),
        _item("- answer: the the the"),
    ])
    assert perfect.score == 100.0 and perfect.details["coverage"] == 100.0
    assert [p["bullet_id"] for p in perfect.details["per_insight"]] == [2, 3]
    assert nonsense.score == 0.0 and nonsense.details["coverage"] == 0.0


# -- haystack, template, budgets -------------------------------------------------------------------

def test_template_is_deterministic_and_places_every_insight_copies_times():
    a = template_haystack(n_subtopics=3, insights_per_subtopic=4, n_documents=15, copies=3, seed=2)
    assert json.dumps(a) == json.dumps(template_haystack(n_subtopics=3, insights_per_subtopic=4, n_documents=15,
                                                         copies=3, seed=2))
    assert json.dumps(a) != json.dumps(template_haystack(seed=3))
    hay = parse_haystack(a)
    gold = hay.gold_cites()
    assert len(gold) == 12 and all(len(v) == 3 for v in gold.values())
    for doc in hay.documents:  # each listed insight's sentence is in the document's text
        texts = {i.insight_id: i.text for s in hay.subtopics for i in s.insights}
        assert all(texts[i] in doc.text for i in doc.insights_included)
    assert hay.domain == "conversation" and hay.participants


def test_schema_errors_name_the_field(tmp_path):
    data = template_haystack()
    del data["subtopics"][1]["query"]
    with pytest.raises(UserError, match="subtopics\\[1\\].query"):
        parse_haystack(data, tmp_path / "h.json")
    data = template_haystack()
    data["documents"][0]["insights_included"] = ["nope"]
    with pytest.raises(UserError, match="documents\\[0\\].insights_included"):
        parse_haystack(data)


def test_words_budget_counts_four_tokens_per_three_words_and_cuts_the_last_document():
    count = budget.counter("words")
    assert len(count.encode("a b c")) == 4 and len(count.encode("a b c d")) == 6
    texts = ["a b c", "d e f", "g h i"]  # 4 tokens each
    kept = budget.fill_budget(texts, [2, 0, 1], 10, count)
    assert [(k.index, k.text, k.cut) for k in kept] == [(2, "g h i", False), (0, "a b c", False), (1, "d", True)]
    assert [k.index for k in budget.fill_budget(texts, [1, 0, 2], None, count)] == [1, 0, 2]
    with pytest.raises(UserError):
        budget.counter("gpt2")


# -- retrievers ---------------------------------------------------------------------------------

DOCS = ["the cat sat on the mat", "dogs and cats play in the park", "stock markets fell sharply",
        "a cat and a dog", ""]


def test_random_retriever_is_seeded_and_ranks_everything():
    a = RandomRetriever(seed=1).rank("q", DOCS)
    assert sorted(a) == list(range(5)) and a == RandomRetriever(seed=1).rank("q", DOCS)
    assert any(RandomRetriever(seed=s).rank("q", DOCS) != a for s in range(2, 6))


def test_keywords_score_is_share_of_query_keywords_in_document():
    r = KeywordsRetriever()
    assert r.scores("the cat and the dog", DOCS) == [0.5, 0.0, 0.0, 1.0, 0.0]  # keywords: cat, dog
    assert r.rank("the cat and the dog", DOCS)[:2] == [3, 0]


def test_bm25_matches_rank_bm25_okapi():
    if importlib.util.find_spec("rank_bm25") is None:
        pytest.skip("rank_bm25 not installed")
    from rank_bm25 import BM25Okapi

    docs = DOCS[:4] + ["cat cat cat cat market"]
    ref = BM25Okapi([bm25_tokens(d) for d in docs]).get_scores(bm25_tokens("cat market"))
    assert BM25Retriever().scores("cat market", docs) == pytest.approx(list(ref))


def test_bm25_indexes_a_haystack_once_for_all_its_queries():
    r = BM25Retriever()
    queries = ["cat market", "the dog", "cat cat", "nothing here"]
    got = [r.scores(q, list(DOCS)) for q in queries]  # a new list of the same texts each time
    assert r.index_builds == 1
    assert got == [BM25Retriever().scores(q, DOCS) for q in queries]  # a fresh index gives the same
    other = DOCS[:3]
    assert r.scores("cat", other) == BM25Retriever().scores("cat", other) and r.index_builds == 2


def test_oracle_needs_relevance_and_sorts_by_it_stably():
    with pytest.raises(UserError):
        OracleRetriever().rank("q", DOCS)
    assert OracleRetriever().rank("q", DOCS, relevance=[0, 2, 0, 2, 1]) == [1, 3, 4, 0, 2]


# -- retrieval-only report -------------------------------------------------------------------------

def test_retrieval_report_oracle_reaches_every_source_with_a_large_budget():
    hay = parse_haystack(template_haystack(n_subtopics=2, insights_per_subtopic=3, n_documents=10, copies=2))
    rep = retrieval_report(hay, ["oracle", "random"], [20, 100000], tokenizer="words")
    rows = {(r["retriever"], r["budget"]): r for r in rep["rows"]}
    assert rows[("oracle", 100000)]["best_citation_f1"] == 1.0 and rows[("oracle", 100000)]["reachable"] == 1.0
    assert rows[("random", 100000)]["source_share"] == 1.0  # everything fits
    small = rows[("oracle", 20)]
    assert 0 < small["source_share"] < 1 and small["documents_kept"] < 10
    shares = [i["in_context"] / i["sources"] for s in small["subtopics"] for i in s["insights"]]
    assert small["best_citation_f1"] == pytest.approx(sum(2 * r / (1 + r) for r in shares) / len(shares))
    md = to_markdown(rep)
    assert "| oracle | 20 |" in md and "words" in md


def test_retrieval_report_reads_stored_scores():
    data = template_haystack(n_subtopics=1, insights_per_subtopic=2, n_documents=4, copies=1)
    sub = data["subtopics"][0]
    sub["retriever"] = {"vector": {d["document_id"]: float(i) for i, d in enumerate(data["documents"])}}
    rep = retrieval_report(parse_haystack(data), ["stored:vector"], [1], tokenizer="words")
    (sub_row,) = rep["rows"][0]["subtopics"]
    assert sub_row["documents_kept"] == 1  # the last document (highest stored score), cut to 1 token
    with pytest.raises(UserError):
        retrieval_report(parse_haystack(data), ["stored:rerank3"], [1], tokenizer="words")


def test_auto_budget_tokenizer_never_downloads(tmp_path, monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))

    def no_network():
        raise AssertionError("auto must not try tiktoken without its cached file")

    monkeypatch.setattr(budget, "_tiktoken", no_network)
    assert budget.counter("auto").name == "words"
