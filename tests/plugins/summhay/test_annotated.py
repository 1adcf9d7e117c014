"""Re-judging annotated SummHay summaries: the `summhay_annotated` task replayed by
`summhay-replay:annotated`, judged, and lined up with the recorded verdicts item for item."""

from __future__ import annotations

import json

import pytest

from tests import cli as commands
from lceval.errors import UserError
from lceval.interfaces import ModelBackend
from lceval.types import Generation, GenerationRequest
from lceval_plugins.summhay.annotated import make_backend

SUMMARY = ["## Title line", "* The budget rose to 40 million dollars in 2021. [3]",
           "* Maria Lopez leads the new Berlin office. [5][7]"]
INSIGHTS = [{"insight_id": "i1", "insight": "The budget rose to 40 million dollars in 2021."},
            {"insight_id": "i2", "insight": "Maria Lopez leads the Berlin office."},
            {"insight_id": "i3", "insight": "The Tokyo launch slipped to March 2023."}]


def entry(summkey: str) -> dict:
    # human candidate_id is the 0-based line, the evaluator's bullet_id the 1-based one
    return {"topic_fn": "data/t.json", "topic": "t", "subtopic_id": "s1", "subtopic": "plans",
            "summkey": summkey, "summary": SUMMARY, "reference_insights": INSIGHTS,
            "annotation": [{"insight_id": "i1", "coverage": "fully_covered", "candidate_id": "1"},
                           {"insight_id": "i2", "coverage": "partially_covered", "candidate_id": "2"},
                           {"insight_id": "i3", "coverage": "not_covered", "candidate_id": "no_selection"}],
            "predictions_prompted_gpt-4o": [
                {"coverage": "FULL_COVERAGE", "bullet_id": 2, "insight_id": "i1"},
                {"coverage": "PARTIAL_COVERAGE", "bullet_id": 1, "insight_id": "i2"},
                {"coverage": "NO_COVERAGE", "bullet_id": "NA", "insight_id": "i3"}]}


@pytest.fixture
def annotated(tmp_path):
    path = tmp_path / "eval_benchmark_data.json"
    path.write_text(json.dumps([entry("summary_subtopic_a"), entry("summary_subtopic_rag/b")]))
    return path


def test_replayed_run_lines_up_with_every_annotated_insight(annotated, tmp_path):
    (run_dir, _), = commands.run(tasks="summhay_annotated", models=["summhay-replay:annotated"],
                                 judge="summhay-coverage-offline", output=tmp_path / "runs",
                                 overrides={"options.annotations": str(annotated)}, progress=False)
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert [s["item_id"] for s in samples] == ["s1/summary_subtopic_a", "s1/summary_subtopic_rag/b"]
    assert samples[0]["response"] == "\n".join(SUMMARY)
    rep = json.loads(commands.judge_agreement([str(run_dir), str(annotated)], fmt="json", n_boot=20))
    pairs = {(p["a"], p["b"]): p for p in rep["pairs"]}
    mine = pairs[("summhay-coverage-offline", "human")]
    assert mine["matched"] == 6  # 2 summaries x 3 insights, every one matched
    assert rep["items_in_all_sources"] == 6
    # the offline judge links i1 to line 2 and i2 to line 3, as the annotator (0-based 1, 2)
    assert mine["label_agreement"] == {"n": 4, "share": 1.0}
    # GPT-4o linked i2 to the title line: one of its four linked insights differs
    assert pairs[("human", "prompted_gpt-4o")]["label_agreement"] == {"n": 4, "share": 0.5}


def test_second_run_is_served_from_the_cache(annotated, tmp_path):
    usage = []
    for n in range(2):
        (run_dir, _), = commands.run(
            tasks="summhay_annotated", models=["summhay-replay:annotated"], output=tmp_path / f"runs{n}",
            overrides={"options.annotations": str(annotated)}, progress=False)
        usage.append(json.loads((run_dir / "manifest.json").read_text())["usage"])
    # the two summaries of one subtopic are two cache entries (the request names the summary)
    assert (usage[0]["generated"], usage[0]["cache_hits"]) == (2, 0)
    assert (usage[1]["generated"], usage[1]["cache_hits"]) == (0, 2)


def test_backend_refuses_other_models_and_requests_without_a_summary():
    with pytest.raises(UserError):
        make_backend("gpt-4o", {})
    from lceval.types import GenerationParams, GenerationRequest, Message

    with pytest.raises(UserError, match="source: annotated"):
        make_backend("annotated", {}).generate([GenerationRequest("x", [Message("user", "hi")], GenerationParams())])


def test_missing_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="not found"):
        commands.run(tasks="summhay_annotated", models=["summhay-replay:annotated"], output=tmp_path / "runs",
                     overrides={"options.annotations": str(tmp_path / "nope.json")}, progress=False)


class VerdictModel(ModelBackend):
    """A judge model that links every insight to the summary's second line, fully."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def identity(self) -> dict:
        return {"scheme": "verdicts"}

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        self.prompts += [r.messages[0].content for r in requests]
        return [Generation(request_id=r.request_id, text='{"coverage": "FULL_COVERAGE", "bullet_id": 2}')
                for r in requests]


def test_an_llm_coverage_judge_on_the_replayed_summaries(annotated, tmp_path):
    """Any judge: the LLM coverage judge (Appendix A.2 prompt) through a scripted judge model."""
    from lceval.engine import RunConfig
    from lceval.results import write_run
    from tests.conftest import execute_config, plugins_with_model

    judge_model = VerdictModel()
    plugins = plugins_with_model(judge_model)
    cfg = RunConfig(tasks="summhay_annotated", models=["summhay-replay:annotated"], judge="summhay-coverage",
                    judge_model="scripted:x", overrides={"options.annotations": str(annotated)}, progress=False,
                    cache_path=tmp_path / "cache.sqlite")
    state = execute_config(cfg, plugins, tmp_path / "data")
    run_dir, _ = write_run(state, plugins, tmp_path / "runs")
    # six insight prompts, three of them repeated word for word by the second summary: each is
    # paid once (answers are judged as they arrive, so a repeat finds the first in the cache)
    assert state.judge_usage["requests"] == 6 and len(judge_model.prompts) == len(set(judge_model.prompts)) == 3
    assert SUMMARY[1] in judge_model.prompts[0]
    rep = json.loads(commands.judge_agreement([str(run_dir), str(annotated)], fmt="json", n_boot=20))
    pair = next(p for p in rep["pairs"] if {p["a"], p["b"]} == {"summhay-coverage", "human"})
    assert pair["matched"] == 6
    # line 2 is the annotators' candidate 1 for i1 only: 2 of the 4 insights both link agree
    assert pair["label_agreement"] == {"n": 4, "share": 0.5}


def test_each_summary_is_labelled_with_its_domain(tmp_path):
    from lceval_plugins.summhay.annotated import annotated_conversations

    news = {**entry("summary_subtopic_gpt-4o"), "topic_id": "t9"}
    del news["topic_fn"]
    path = tmp_path / "eval.json"
    path.write_text(json.dumps([entry("summary_subtopic_a"), news, {**news, "domain": "conversation"}]))
    convs = annotated_conversations(path)
    assert [c.metadata["domain"] for c in convs] == ["conversation", "news", "conversation"]
    assert [c.turns[0].metadata["domain"] for c in convs] == ["conversation", "news", "conversation"]


def test_evaluator_bias_by_summarizer_and_length(tmp_path):
    """Paper 002 Table 6 on a hand-checkable file: two summarizers, one evaluator."""
    from lceval_plugins.summhay.bias import evaluator_bias, format_bias, summarizer_of

    assert summarizer_of("summary_subtopic_dwzhu/e5-base-4k_gpt-4o") == "gpt-4o"
    assert summarizer_of("summary_subtopic_claude3-opus") == "claude3-opus"
    first = entry("summary_subtopic_oracle_m1")  # auto 1, 0.5, 0 vs human 1, 0.5, 0: delta 0
    second = entry("summary_subtopic_m2")
    second["predictions_prompted_gpt-4o"] = [{"coverage": "FULL_COVERAGE", "bullet_id": 2, "insight_id": i}
                                             for i in ("i1", "i2", "i3")]  # 1 vs 0.5: delta +0.5
    third = {**entry("summary_subtopic_random_m2"), "summary": SUMMARY + ["* one more line of four words"]}
    path = tmp_path / "eval.json"
    path.write_text(json.dumps([first, second, third]))
    rep = evaluator_bias(path)
    assert rep["evaluators"] == ["prompted_gpt-4o"]
    assert rep["summarizer_bias"] == {"m1": {"prompted_gpt-4o": 0.0}, "m2": {"prompted_gpt-4o": 0.25}}
    assert rep["average"]["prompted_gpt-4o"] == pytest.approx(0.125)
    assert rep["length_to_score"]["prompted_gpt-4o"] is not None
    assert "| m2 | 2 | 0.250 |" in format_bias(rep)
    with pytest.raises(UserError, match="no predictions of evaluator"):
        evaluator_bias(path, ["prompted_nobody"])
