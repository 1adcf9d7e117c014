"""The `summhay` task type through the engine, on the template haystack, with the scripted
model: full context, every retriever, every document order, the no-document baseline."""

from __future__ import annotations

import json

import pytest

from lceval.errors import UserError
from lceval_plugins.summhay.haystack import load_haystack
from lceval_plugins.summhay.template import write_template

from tests.conftest import ScriptedModel, run_engine

N_DOCS = 12


@pytest.fixture
def haystack_dir(tmp_path):
    folder = tmp_path / "haystacks"
    write_template(folder / "template.json", n_subtopics=3, insights_per_subtopic=3, n_documents=N_DOCS, copies=3)
    return folder


def run(task, haystack_dir, tmp_path, **options):
    overrides = {"options.haystack": str(haystack_dir), "options.budget_tokenizer": "words"}
    overrides.update({f"options.{k}": v for k, v in options.items()})
    model = ScriptedModel(window=8192)
    run_dir, results, state = run_engine(model, task, tmp_path / "data", tmp_path / task, overrides=overrides)
    return model, state.tasks[0].samples, results, run_dir


def docs_shown(request) -> list[int]:
    text = request.messages[0].content
    return [int(line.split()[1].rstrip(":")) for line in text.splitlines() if line.startswith("Conversation ")]


def test_full_context_one_summary_per_subtopic(haystack_dir, tmp_path):
    model, samples, results, run_dir = run("summhay_full", haystack_dir, tmp_path)
    hay = load_haystack(haystack_dir / "template.json")
    assert len(samples) == 3 and len(model.calls) == 3
    for sample, req, sub in zip(samples, model.calls, hay.subtopics):
        prompt = req.messages[0].content
        assert docs_shown(req) == list(range(1, N_DOCS + 1))
        assert f"with {len(sub.insights)} bullet points" in prompt and f"query: {sub.query}." in prompt
        assert "You are given 12 conversations" in prompt and "{context}" not in prompt
        assert sample.metadata["insights"][0]["gold"] == sorted(hay.gold_cites()[sub.insights[0].insight_id])
        (j,) = sample.judgments
        assert j.parse_status == "ok" and j.score == 0.0  # the scripted answers cite nothing
        assert set(j.details) >= {"coverage", "citation_f1", "joint", "words_per_bullet", "per_insight"}
    # the three subtopics share one document list: one context, requests back to back
    assert len({s.metadata["documents_in_context"] == list(range(1, 13)) for s in samples}) == 1
    lines = (run_dir / "samples.jsonl").read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[0])["metadata"]["retriever"] == "full"
    assert results["tasks"]["summhay_full"]["n_samples"] == 3


@pytest.mark.parametrize("retriever", ["random", "keywords", "bm25", "embedding", "oracle"])
def test_every_retriever_keeps_a_budget_in_rank_order(retriever, haystack_dir, tmp_path):
    task = f"summhay_rag_{retriever}"
    model, samples, _, _ = run(task, haystack_dir, tmp_path, budget_tokens=200)
    hay = load_haystack(haystack_dir / "template.json")
    assert len(samples) == 3
    for sample, req, sub in zip(samples, model.calls, hay.subtopics):
        shown = docs_shown(req)
        assert shown == sample.metadata["documents_in_context"]
        assert 0 < len(shown) < N_DOCS and len(set(shown)) == len(shown)
        assert sample.metadata["budget_tokens"] == 200 and sample.metadata["budget_tokenizer"] == "words"
        assert f"You are given {len(shown)} conversations" in req.messages[0].content
        if retriever == "oracle":
            rel = hay.relevance(sub)
            counts = [rel[n - 1] for n in shown]
            assert counts == sorted(counts, reverse=True) and counts[0] == max(rel)


def test_stored_scores_and_retriever_errors(haystack_dir, tmp_path):
    with pytest.raises(UserError, match="stored 'vector'"):
        run("summhay_rag_random", haystack_dir, tmp_path, retriever="stored:vector")
    with pytest.raises(UserError, match="unknown retriever 'nope'"):
        run("summhay_rag_random", haystack_dir, tmp_path, retriever="nope")


@pytest.mark.parametrize("order", ["random", "top", "bottom"])
def test_document_orders(order, haystack_dir, tmp_path):
    model, samples, _, _ = run(f"summhay_order_{order}", haystack_dir, tmp_path)
    hay = load_haystack(haystack_dir / "template.json")
    for req, sub in zip(model.calls, hay.subtopics):
        shown = docs_shown(req)
        assert sorted(shown) == list(range(1, N_DOCS + 1))
        rel = [hay.relevance(sub)[n - 1] for n in shown]
        if order == "top":
            assert rel == sorted(rel, reverse=True)
        elif order == "bottom":
            assert rel == sorted(rel)
        else:
            assert shown != sorted(shown)
    if order == "random":  # one shuffle per haystack: every subtopic sees the same order
        assert len({tuple(docs_shown(r)) for r in model.calls}) == 1


def test_no_document_baseline(haystack_dir, tmp_path):
    model, samples, _, _ = run("summhay_nodoc", haystack_dir, tmp_path)
    prompt = model.calls[0].messages[0].content
    assert "Imagine 12 conversations" in prompt and "Conversation 1:" not in prompt
    assert samples[0].metadata["documents_in_context"] == [] and samples[0].metadata["retriever"] == "none"


def test_limit_and_bad_options(haystack_dir, tmp_path):
    model = ScriptedModel(window=8192)
    _, _, state = run_engine(model, "summhay_full", tmp_path / "d", tmp_path / "l", limit=2,
                             overrides={"options.haystack": str(haystack_dir)})
    assert len(state.tasks[0].samples) == 2
    with pytest.raises(UserError, match="order 'rank' needs a retriever"):
        run("summhay_full", haystack_dir, tmp_path, order="rank")
    with pytest.raises(UserError, match="haystack"):
        run("summhay_full", tmp_path / "missing", tmp_path)


def test_retriever_flag_third_party_retriever_and_reported_metrics(haystack_dir, tmp_path):
    """--retriever overrides the spec; a retriever from any plugin is used like a built-in;
    coverage and citation F1 are reported beside the joint score (report.metrics)."""
    from lceval import hookimpl
    from lceval.engine import RunConfig, load_plugins
    from lceval.interfaces import Retriever
    from tests.conftest import execute_config

    class Reverse(Retriever):
        name = "reverse"

        def rank(self, query, documents):
            return list(range(len(documents)))[::-1]

    model = ScriptedModel(window=8192)

    class Extra:
        @hookimpl
        def register_models(self, register):
            register("scripted", lambda name, options: model)

        @hookimpl
        def register_retrievers(self, register):
            register("reverse", lambda options: Reverse())

    plugins = load_plugins(extra=[("extra", Extra())])
    cfg = RunConfig(tasks="summhay_full", models=["scripted:x"], progress=False, retriever="reverse",
                    overrides={"options.haystack": str(haystack_dir), "options.budget_tokenizer": "words",
                               "options.budget_tokens": 100, "options.order": "rank"})
    state = execute_config(cfg, plugins, tmp_path / "data")
    samples = state.tasks[0].samples
    assert all(s.metadata["retriever"] == "reverse" for s in samples)
    shown = docs_shown(model.calls[0])
    assert shown == list(range(N_DOCS, N_DOCS - len(shown), -1)) and len(shown) < N_DOCS
    from lceval.results import score_task

    res = score_task(samples, state.tasks[0].spec, {})
    assert {"score", "coverage", "citation_f1", "words_per_bullet"} <= set(res["metrics"])
    assert res["metrics"]["coverage"]["value"] == 0.0


def test_news_domain_asks_for_the_insights_present_in_documents(tmp_path):
    """populate_summaries: the news prompt asks for as many bullets as the subtopic has
    insights present in some document; scoring still covers every insight (§4.1)."""
    from lceval_plugins.summhay.template import template_haystack

    data = template_haystack(n_subtopics=1, insights_per_subtopic=3, n_documents=6, copies=2, domain="news")
    missing = data["subtopics"][0]["insights"][2]["insight_id"]
    for doc in data["documents"]:
        doc["insights_included"] = [i for i in doc["insights_included"] if i != missing]
    folder = tmp_path / "news"
    folder.mkdir()
    (folder / "news.json").write_text(json.dumps(data))
    model, samples, _, _ = run("summhay_full", folder, tmp_path)
    prompt = model.calls[0].messages[0].content
    assert prompt.startswith("You are given 6 news articles") and "Article 1:\n" in prompt
    assert "summarize the 2 main insights" in prompt
    assert samples[0].metadata["n_bullets_asked"] == 2 and len(samples[0].metadata["insights"]) == 3
    assert samples[0].metadata["insights"][2]["gold"] == []
    model, _, _, _ = run("summhay_full", folder, tmp_path / "s", **{"domain": "conversation"})
    assert "conversations within the following scenario" in model.calls[0].messages[0].content
    with pytest.raises(UserError, match="no haystack of the selected domains"):
        run_engine(ScriptedModel(window=8192), "summhay_full", tmp_path / "d", tmp_path / "x",
                   splits=["conversation"], overrides={"options.haystack": str(folder)})
