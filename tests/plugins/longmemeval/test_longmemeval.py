"""LongMemEval's specs on questions WE wrote in its schema (tests/data/longmemeval), laid out as the
Hub's cache holds the paper's release at the pinned commit: the prompt each question sends is byte
for byte what the authors' run_generation.py `prepare_prompt` builds (sessions sorted by date and
numbered after sorting, json.dumps of each without `has_answer`, non-ASCII escaped), and the judge
model is asked exactly what evaluate_qa.py `get_anscheck_prompt` asks for the question's type (the
abstention prompt for an `_abs` id), its 'yes' read as the authors read it. Expected texts come
from running their functions on the same rows in a scratch folder (authors_prompts.json)."""

from __future__ import annotations

import json

import pytest

from lceval.engine import RunConfig, load_catalog, load_plugins
from lceval.errors import UserError
from lceval.interfaces import JudgeContext
from lceval.types import Generation, JudgeInput

from lceval_plugins.longmemeval.judge import LongMemEvalJudge
from tests.conftest import ScriptedModel, execute_config, plugins_with_model
from tests.paths import TEST_DATA
from tests.plugins.documents.conftest import put_in_hub_cache

REPO, COMMIT = "xiaowu0162/longmemeval", "d8673c8819c3e42833f9b1849300ab94c12bbb6a"
SAMPLE = TEST_DATA / "longmemeval" / "longmemeval_sample.json"
AUTHORS = json.loads((TEST_DATA / "longmemeval" / "authors_prompts.json").read_text(encoding="utf-8"))
CATALOG = load_catalog(load_plugins())
SPECS = ["longmemeval_m", "longmemeval_oracle", "longmemeval_s"]
RESPONSES = {"q_user_1": "The answer is 17 days.", "q_temp_1": "  I don't know.  "}


@pytest.fixture
def hub(tmp_path_factory, monkeypatch):
    import datasets
    from huggingface_hub import constants

    base = tmp_path_factory.mktemp("hf")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(base / "datasets"))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", base / "datasets")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(base / "hub"))
    put_in_hub_cache(base / "hub", REPO, COMMIT, {n: SAMPLE for n in ("longmemeval_s", "longmemeval_m", "longmemeval_oracle")})
    return base


class Reader(ScriptedModel):
    """Answers the questions (RESPONSES, else a fixed text) and, as the judge model, says "Yes." to
    every check of an answer that mentions 17 days, "No" otherwise; records what it was asked."""

    def generate(self, requests):
        out = []
        for r in requests:
            self.calls.append(r)
            if r.hints.get("judge"):
                text = "Yes." if "Model Response: The answer is 17 days." in r.messages[-1].content else "No"
            else:
                text = RESPONSES.get(r.request_id.removeprefix("test/"), "The answer is 17 days.")
            out.append(Generation(request_id=r.request_id, text=text, prompt_tokens=1, completion_tokens=1))
        return out


def test_the_family_ships_s_m_and_oracle_in_one_suite():
    assert sorted(n for n in CATALOG.specs if n.startswith("longmemeval_")) == SPECS
    assert set(CATALOG.suites["longmemeval"]) == set(SPECS)
    for name in SPECS:
        spec = CATALOG.spec(name)
        assert spec.data["family"] == "longmemeval" and "Wu et al." in spec.data["citation"]
        assert spec.data["options"]["source"]["revision"] == COMMIT and spec.judge.name == "longmemeval"


@pytest.mark.parametrize("name", SPECS)
def test_prompts_and_judge_prompts_are_the_authors(name, hub, tmp_path):
    model = Reader(window=None)
    config = RunConfig(tasks=name, models=["scripted:x"], judge_model="scripted:judge", progress=False)
    state = execute_config(config, plugins_with_model(model), tmp_path / "home")
    asked = {r.request_id.removeprefix("test/"): r.messages for r in model.calls if not r.hints.get("judge")}
    assert asked.keys() == AUTHORS["prompts"].keys()
    for qid, messages in asked.items():
        assert [m.role for m in messages] == ["user"]  # one user message, no system message
        assert messages[0].content == AUTHORS["prompts"][qid], qid
    judged = {r.request_id.removeprefix("test/"): r for r in model.calls if r.hints.get("judge")}
    assert judged.keys() == asked.keys()
    for qid, request in judged.items():
        response = RESPONSES.get(qid, "The answer is 17 days.")
        assert [m.role for m in request.messages] == ["user"]
        assert request.messages[0].content == AUTHORS["judge_prompts"][f"{qid}|{response}"], qid
        assert request.params.temperature == 0 and request.params.max_new_tokens == 10
    (task,) = state.tasks
    scores = {s.item_id.removeprefix("test/"): s.judgments[0].score for s in task.samples}
    assert scores == {qid: (0.0 if qid == "q_temp_1" else 100.0) for qid in AUTHORS["prompts"]}
    types = {s.metadata["question_type"] for s in task.samples}
    assert types == {"single-session-user", "single-session-assistant", "single-session-preference",
                     "temporal-reasoning", "knowledge-update", "multi-session"}


def test_the_verdict_is_a_yes_anywhere_in_the_reply_and_an_unknown_type_is_refused():
    class Fixed(ScriptedModel):
        def __init__(self, reply):
            super().__init__()
            self.reply = reply

        def generate(self, requests):
            return [Generation(request_id=r.request_id, text=self.reply) for r in requests]

    def verdict(reply, qtype="multi-session", qid="q1"):
        judge = LongMemEvalJudge(JudgeContext(options={}, model=Fixed(reply)))
        item = JudgeInput(item_id="i", question="q", response="r", reference="a",
                          metadata={"question_type": qtype, "question_id": qid})
        return judge.judge([item])[0]

    assert verdict("Yes").score == 100.0 and verdict(" eyes ").score == 100.0  # 'yes' in reply.lower()
    assert verdict("No.").score == 0.0 and verdict("").score == 0.0
    assert verdict("yes", qtype="anything", qid="q1_abs").details["abstention"] is True
    with pytest.raises(UserError, match="no judge prompt for the question type 'anything'"):
        verdict("yes", qtype="anything")
    with pytest.raises(UserError, match="asks a language model"):
        LongMemEvalJudge(JudgeContext(options={}))
