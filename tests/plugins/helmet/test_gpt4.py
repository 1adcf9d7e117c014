"""HELMET's GPT-4o judges send the authors' prompts byte for byte and turn the verdicts into the
authors' scores: tests/data/helmet/authors_gpt4.json holds our answers, the sha256 of the prompts
scripts/eval_gpt4_longqa.py and scripts/eval_gpt4_summ.py built for them, and the scores their
`check_metrics` computed from a scripted judge's verdicts (the `script` below, the same rule on
both sides), run outside this repository (princeton-nlp/HELMET at 4526dfb)."""

from __future__ import annotations

import json

import pytest

from lceval.interfaces import JudgeContext
from lceval.types import Generation, GenerationRequest, JudgeInput

from tests.paths import TEST_DATA

from .helpers import PLUGINS, sha

AUTHORS = json.loads((TEST_DATA / "helmet" / "authors_gpt4.json").read_text())


def script(p: str) -> str:
    """The scripted judge's verdict for a prompt."""
    if "evaluate the fluency" in p:
        return 'Fine. {"fluency": 0}' if "gibberish gibberish" in p.split('Text: "')[-1] else '{"fluency": 1}'
    if "Key points:" in p and "recall score" in p.split("Now, read")[0] and "Now, read the provided summary and key points" in p:
        s = p.split('Summary: "')[-1]
        return f'Reasoning...\nOutput: {{"recall": {sum(w in s for w in ("alpha", "beta", "gamma"))}}}'
    if "Provided summary:" in p or "provided summary" in p.lower():
        s = p.split("Provided summary: <start of summary>")[-1]
        return '```json\n{"precision": %d, "sentence_count": %d}\n```' % (s.count("supported"), max(1, s.count(".")))
    if "correct answers" in p:
        ans = p.split("\nAnswer: ")[-1]
        if "unparsable" in ans:
            return "I cannot decide."
        return '{"fluency": 1, "correctness": %d}' % (3 if "right" in ans else 1 if "partly" in ans else 0)
    raise ValueError(p[:200])


class Scripted:
    identity = {"scheme": "scripted-judge"}

    def __init__(self) -> None:
        self.calls: list[GenerationRequest] = []

    def generate(self, requests):
        self.calls += requests
        return [Generation(request_id=r.request_id, text=script(r.messages[-1].content)) for r in requests]


def test_narrativeqa_judge():
    model = Scripted()
    judge = PLUGINS.judges["helmet_longqa_gpt4"](JudgeContext(options={}, model=model, seed=42))
    items = [JudgeInput(item_id=f"8k/{i}", question=q, response=o.strip(), reference=a[0],
                        metadata={"references": a, "style": "chat"}, raw_response=o)
             for i, (q, a, o) in enumerate(AUTHORS["longqa_inputs"])]
    out = judge.judge(items)
    first_round = [sha(r.messages[-1].content) for r in model.calls[:len(items)]]
    assert first_round == AUTHORS["longqa_prompts"] and all(len(r.messages) == 1 for r in model.calls)
    want = [None if s is None else s["fluency"] * s["correctness"] * 100 / 3 for s in AUTHORS["longqa_scores"]]
    assert [j.score for j in out] == pytest.approx(want)
    assert out[2].parse_status == "parse_failure" and out[2].attempts == 3  # retried with new seeds, then left out
    scored = [j.score for j in out if j.score is not None]
    assert sum(scored) / len(scored) == pytest.approx(AUTHORS["longqa_mean"] * 100 / 3)


@pytest.mark.parametrize("variant", ["book", "legal"])
def test_summary_judge(variant):
    model = Scripted()
    judge = PLUGINS.judges["helmet_summ_gpt4"](JudgeContext(options={"variant": variant}, model=model, seed=42))
    items = [JudgeInput(item_id=f"8k/{i}", question="", response=o.strip(), reference=ex,
                        metadata={"references": ["short"], "keypoints": kp, "expert_summary": ex, "style": "chat"})
             for i, o, kp, ex in AUTHORS["summ_inputs"]]
    out = judge.judge(items)
    sent = {r.request_id: sha(r.messages[-1].content) for r in model.calls}
    for it, prompts in zip(items, AUTHORS[f"summ_{variant}_prompts"]):
        assert [sent[f"{it.item_id}#{step}"] for step in ("fluency", "recall", "precision")] == prompts
    assert [j.score for j in out] == pytest.approx([100 * f for f in AUTHORS[f"summ_{variant}"]])


def test_the_judges_need_a_judge_model():
    from lceval.errors import UserError

    with pytest.raises(UserError, match="judge-model"):
        PLUGINS.judges["helmet_summ_gpt4"](JudgeContext(options={}, model=None))
