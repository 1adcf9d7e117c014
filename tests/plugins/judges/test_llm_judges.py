"""The LLM judges `rubric` and `prometheus` (paper 000, Figs. 5-8) on a scripted judge model:
prompts byte-exact with the authors' code, parsing, retries with new seeds, parse-failure
accounting through the engine, and the cache on a rerun."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Callable

import pytest

from lceval.engine import Cache, CachedModel
from lceval.errors import UserError
from lceval.interfaces import JudgeContext, ModelBackend
from lceval.judging import RETRY_SEED_STRIDE
from lceval.types import Generation, GenerationRequest, JudgeInput
from lceval_plugins.judges.llm_judges import (
    PROMETHEUS_TEMPLATE, RUBRIC_TEMPLATE, make_prometheus, make_rubric, parse_prometheus, parse_rubric, render,
)

from tests.conftest import ScriptedModel

Script = Callable[[GenerationRequest], str]


class ScriptedJudgeModel(ModelBackend):
    """A judge model whose answers a test writes: `script(request) -> text`. Counts every
    request it really generates and every generate() call (one per batch)."""

    def __init__(self, script: Script, batch_size: int = 16) -> None:
        self.script = script
        self.batch_size = batch_size
        self.calls: list[GenerationRequest] = []
        self.batches = 0

    def identity(self) -> dict:
        return {"scheme": "scripted-judge"}

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        self.batches += 1
        self.calls.extend(requests)
        return [Generation(request_id=r.request_id, text=self.script(r), completion_tokens=7) for r in requests]


def reference_of(request: GenerationRequest) -> str:
    return re.search(r"### Reference answer \(score \d+\):\n(.*?)\n\n", request.messages[-1].content, re.S).group(1)


def judge_with(backend: ModelBackend, tmp_path: Path, make=make_rubric, seed: int = 2023, **options):
    model = CachedModel(backend, Cache(tmp_path / "judge-cache.sqlite"), "judge:x")
    return make(JudgeContext(options=options, model=model, seed=seed))


def judge_over(script: Script, tmp_path: Path, make=make_rubric, seed: int = 2023, **options):
    backend = ScriptedJudgeModel(script)
    return judge_with(backend, tmp_path, make, seed, **options), backend


ITEM = JudgeInput(item_id="q1", question="Who opened the meeting?", response="It was [PERSON1].",
                  reference="[PERSON1]")


# -- prompts: the authors' bytes --------------------------------------------------------------

# sha256 of what the authors' own functions return for ITEM (utter-project/ELITR-Bench @ c7ff430,
# utils/common.py: format_gpt_eval_prompt / format_prometheus_eval_prompt("Who opened the meeting?",
# "It was [PERSON1].", "[PERSON1]")), computed by running their code.
AUTHORS_RUBRIC_SHA256 = "08b6d23c53a7e0f6586e71eed994f78cdf353b034d279df774acaceedba43b5c"
AUTHORS_PROMETHEUS_SHA256 = "84bf8b142d0c89e65fb49bfa0bd792b46ac1404615cd42fbfe36d28375738791"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_prompts_are_the_authors_bytes():
    assert sha(render(RUBRIC_TEMPLATE, ITEM.question, ITEM.response, ITEM.reference)) == AUTHORS_RUBRIC_SHA256
    assert sha(render(PROMETHEUS_TEMPLATE, ITEM.question, ITEM.response, ITEM.reference)) == AUTHORS_PROMETHEUS_SHA256
    # inputs are stripped as in eval_gpt.py / eval_prometheus.py
    assert sha(render(RUBRIC_TEMPLATE, " Who opened the meeting?\n", "It was [PERSON1].  ", "\n[PERSON1]")) \
        == AUTHORS_RUBRIC_SHA256


def test_prompt_layout_follows_figures_5_to_8():
    rubric = render(RUBRIC_TEMPLATE, "Q?", "R.", "F.")
    assert rubric.startswith("### Task description:\nYou are provided below")
    assert "indicate the integer score in \\boxed{}.\n" in rubric
    assert "### Question:\nQ?\n\n### Response to evaluate:\nR.\n\n### Reference answer (score 10):\nF.\n\n" in rubric
    assert "Score 3-4: " in rubric and rubric.endswith("equivalent to the reference answer.\n\n### Feedback:\n")
    prom = render(PROMETHEUS_TEMPLATE, "Q?", "R.", "F.")
    assert '"Feedback: (write the quality assessment feedback) [RESULT] (an integer number between 1 and 5)"' in prom
    assert "### Reference answer (score 5):\nF.\n\n" in prom
    assert prom.endswith("equivalent to the reference answer.\n### Feedback:\n")  # no blank line, as theirs


def test_slots_are_filled_once():
    text = render(RUBRIC_TEMPLATE, "Q {response}", "says {reference}", "F")
    assert "### Question:\nQ {response}\n\n### Response to evaluate:\nsays {reference}\n\n" in text


def test_messages_as_the_authors_conversation_templates(tmp_path):
    rubric, _ = judge_over(lambda r: "\\boxed{5}", tmp_path)
    msgs = rubric.messages(ITEM)
    # FastChat "chatgpt" template -> to_openai_api_messages: system + user
    assert [(m.role, m.content) for m in msgs[:1]] == [("system", "You are a helpful assistant.")]
    assert msgs[1].role == "user" and sha(msgs[1].content) == AUTHORS_RUBRIC_SHA256
    prom, _ = judge_over(lambda r: "[RESULT] 3", tmp_path, make=make_prometheus)
    # FastChat "llama-2" template with an empty system message: the prompt is the only turn
    (only,) = prom.messages(ITEM)
    assert only.role == "user" and sha(only.content) == AUTHORS_PROMETHEUS_SHA256
    custom, _ = judge_over(lambda r: "", tmp_path, system_prompt=None)
    assert [m.role for m in custom.messages(ITEM)] == ["user"]


# -- parsing --------------------------------------------------------------------------------


@pytest.mark.parametrize("text,score,failure", [
    ("The response names the right person concisely.\n\\boxed{10}", 10.0, ""),
    ("Partially correct.\n$\\boxed{6}$", 6.0, ""),
    ("Feedback first. \\boxed{3} and later \\boxed{9}", 3.0, ""),  # first match, as re.search
    ("Too good: \\boxed{11}", None, "score 11 outside 1-10"),
    ("\\boxed{0}", None, "score 0 outside 1-10"),
    ("Score: 8", None, "no \\boxed{n} in the output"),
    ("\\boxed{ 8 }", None, "no \\boxed{n} in the output"),  # the authors' pattern takes digits only
    ("", None, "no \\boxed{n} in the output"),
])
def test_parse_rubric(text, score, failure):
    parsed = parse_rubric(text)
    assert parsed.score == score and parsed.failure == failure


def test_parse_rubric_keeps_feedback():
    assert parse_rubric("It matches.\n\\boxed{9}").feedback == "It matches."


@pytest.mark.parametrize("text,score,verdict", [
    ("Feedback: Correct and concise. [RESULT] 5", 10.0, 5),
    ("Feedback: Vague. [RESULT] 2", 4.0, 2),
    ("[RESULT] 1", 2.0, 1),
    ("Feedback: x [RESULT] 6", None, 6),
    ("Feedback: x [RESULT] 0", None, 0),
    ("Feedback: x [RESULT]4", None, None),
    ("Feedback: x\nScore: 4", None, None),
])
def test_parse_prometheus_doubles_the_5_point_verdict(text, score, verdict):
    parsed = parse_prometheus(text)
    assert parsed.score == score and parsed.verdict == verdict


def test_parse_prometheus_feedback_drops_its_label():
    assert parse_prometheus("Feedback: Correct. [RESULT] 5").feedback == "Correct."


# -- retries and seeds ----------------------------------------------------------------------


def test_defaults_are_the_papers_sampling(tmp_path):
    judge, backend = judge_over(lambda r: "ok \\boxed{7}", tmp_path, seed=2024)
    (verdict,) = judge.judge([ITEM])
    assert verdict.score == 7.0 and verdict.parse_status == "ok" and verdict.attempts == 1
    (req,) = backend.calls
    p = req.params
    assert (p.temperature, p.top_p, p.max_new_tokens, p.repeat_penalty, p.seed) == (0.6, 0.9, 1024, 1.0, 2024)


def test_first_attempt_fails_then_a_new_seed_succeeds(tmp_path):
    outputs = iter(["I think it is fine.", "Fine.\n\\boxed{8}"])
    judge, backend = judge_over(lambda r: next(outputs), tmp_path, seed=5)
    (verdict,) = judge.judge([ITEM])
    assert verdict.score == 8.0 and verdict.parse_status == "ok" and verdict.attempts == 2
    assert [r.params.seed for r in backend.calls] == [5, 5 + RETRY_SEED_STRIDE]
    assert verdict.details["attempt_outputs"] == ["I think it is fine.", "Fine.\n\\boxed{8}"]
    assert verdict.details["attempt_seeds"] == [5, 5 + RETRY_SEED_STRIDE]
    assert verdict.details["feedback"] == "Fine." and verdict.raw == "Fine.\n\\boxed{8}"


def test_every_attempt_failing_is_a_parse_failure_never_a_score(tmp_path):
    outputs = iter(["no score", "\\boxed{42}", "still \\boxed{}"])
    judge, backend = judge_over(lambda r: next(outputs), tmp_path)
    (verdict,) = judge.judge([ITEM])
    assert verdict.score is None and verdict.parse_status == "parse_failure"
    assert verdict.attempts == 3 and verdict.raw == "still \\boxed{}"
    assert verdict.details["attempt_outputs"] == ["no score", "\\boxed{42}", "still \\boxed{}"]
    assert verdict.details["failure"] == "no \\boxed{n} in the output"
    assert len({r.params.seed for r in backend.calls}) == 3


def test_each_round_is_one_batch_of_the_pending_items(tmp_path):
    items = [JudgeInput(item_id=f"q{i}", question="Q?", response=f"answer {i}", reference=f"ref {i}")
             for i in range(5)]
    seen: dict[str, int] = {}

    def script(r: GenerationRequest) -> str:
        ref = reference_of(r)
        seen[ref] = seen.get(ref, 0) + 1
        return "\\boxed{4}" if ref in ("ref 0", "ref 1") or seen[ref] == 2 else "no verdict"

    judge, backend = judge_over(script, tmp_path, max_attempts=4)
    verdicts = judge.judge(items)
    assert [v.attempts for v in verdicts] == [1, 1, 2, 2, 2]
    assert all(v.score == 4.0 for v in verdicts)
    assert backend.batches == 2 and len(backend.calls) == 5 + 3  # round 2 resends only the 3 failures
    assert [v.item_id for v in verdicts] == [i.item_id for i in items]


def test_max_attempts_option_and_greedy_has_one_attempt(tmp_path):
    judge, backend = judge_over(lambda r: "none", tmp_path, max_attempts=5)
    assert judge.judge([ITEM])[0].attempts == 5 and len(backend.calls) == 5
    # temperature 0 ignores the seed: a retry would replay the same cached text
    greedy, backend = judge_over(lambda r: "none", tmp_path / "g", temperature=0, max_attempts=5)
    assert greedy.judge([ITEM])[0].attempts == 1 and len(backend.calls) == 1


def test_rerun_replays_every_attempt_from_the_cache(tmp_path):
    outputs = iter(["nothing", "ok \\boxed{6}"])
    judge, backend = judge_over(lambda r: next(outputs), tmp_path)
    first = judge.judge([ITEM])[0]
    again, backend2 = judge_over(lambda r: pytest.fail("must come from the cache"), tmp_path)
    second = again.judge([ITEM])[0]
    assert backend2.calls == [] and again.model.usage.cache_hits == 2
    assert (second.score, second.attempts, second.details) == (first.score, first.attempts, first.details)


def test_prometheus_reports_twice_the_verdict(tmp_path):
    judge, _ = judge_over(lambda r: "Feedback: Mostly there. [RESULT] 4", tmp_path, make=make_prometheus)
    (verdict,) = judge.judge([ITEM])
    assert verdict.score == 8.0 and verdict.details["verdict"] == 4 and judge.scale == (1.0, 10.0)


# -- options, identity, errors --------------------------------------------------------------


def test_options_override_sampling(tmp_path):
    judge, backend = judge_over(lambda r: "\\boxed{2}", tmp_path, temperature="0.2", top_p=1, max_new_tokens=64,
                                system_prompt="Grade strictly.")
    judge.judge([ITEM])
    p = backend.calls[0].params
    assert (p.temperature, p.top_p, p.max_new_tokens) == (0.2, 1.0, 64)
    assert backend.calls[0].messages[0].content == "Grade strictly."


@pytest.mark.parametrize("options,field", [
    ({"temprature": 0.5}, "judge.options.temprature"),
    ({"temperature": "hot"}, "judge.options.temperature"),
    ({"top_p": 1.5}, "judge.options.top_p"),
    ({"max_attempts": 0}, "judge.options.max_attempts"),
    ({"max_new_tokens": 2.5}, "judge.options.max_new_tokens"),
    ({"system_prompt": 3}, "judge.options.system_prompt"),
])
def test_bad_options_are_user_errors(tmp_path, options, field):
    with pytest.raises(UserError) as exc:
        judge_over(lambda r: "", tmp_path, **options)
    assert exc.value.field == field


@pytest.mark.parametrize("make", [make_rubric, make_prometheus])
def test_without_a_judge_model_the_user_is_told_the_flag(make):
    with pytest.raises(UserError, match="--judge-model") as exc:
        make(JudgeContext(options={}, model=None, seed=0))
    assert exc.value.field == "--judge-model"


def test_identity_covers_template_rubric_sampling_and_judge_model(tmp_path):
    rubric, _ = judge_over(lambda r: "", tmp_path)
    ident = rubric.identity()
    assert ident["judge"] == "rubric" and ident["judge_model"] == {"scheme": "scripted-judge"}
    assert ident["template_sha256"] == sha(RUBRIC_TEMPLATE)
    assert ident["params"] == {"max_new_tokens": 1024, "temperature": 0.6, "top_p": 0.9, "repeat_penalty": 1.0}
    prom, _ = judge_over(lambda r: "", tmp_path, make=make_prometheus)
    assert prom.identity()["template_sha256"] != ident["template_sha256"]
    other, _ = judge_over(lambda r: "", tmp_path, system_prompt="Be strict.")
    assert other.identity()["system_prompt_sha256"] != ident["system_prompt_sha256"]
    json.dumps(ident)  # goes into results.json


def test_judge_cache_key_depends_on_the_text_judged(tmp_path):
    judge, backend = judge_over(lambda r: "\\boxed{5}", tmp_path)
    judge.judge([ITEM])
    judge.judge([JudgeInput(item_id="q1", question=ITEM.question, response="Someone else.", reference=ITEM.reference)])
    assert len(backend.calls) == 2


# -- through the engine ---------------------------------------------------------------------


def plugins_with_models(model: ModelBackend, judge_model: ModelBackend):
    """The installed plugins plus `scripted:` (the system) and `judge:` (the judge model)."""
    from lceval import hookimpl
    from lceval.engine import load_plugins

    class TwoModels:
        @hookimpl
        def register_models(self, register):
            register("scripted", lambda name, options: model)
            register("judge", lambda name, options: judge_model)

    return load_plugins(extra=[("scripted-two", TwoModels())])


def run_judged(judge_model: ModelBackend, home: Path, tmp_path: Path, judge: str = "rubric", **config):
    from lceval.engine import RunConfig
    from lceval.results import write_run
    from tests.conftest import execute_config

    plugins = plugins_with_models(ScriptedModel(), judge_model)
    cfg = RunConfig(tasks="elitr_qa", models=["scripted:x"], judge=judge, judge_model="judge:x", progress=False,
                    **config)
    state = execute_config(cfg, plugins, home)  # the cache at $LCEVAL_CACHE, shared by a rerun
    run_dir, results = write_run(state, plugins, tmp_path / "runs")
    return run_dir, results, state


def tiny_script(r: GenerationRequest) -> str:
    """Per reference of the tiny fixture: one never parses, one parses on the 2nd attempt."""
    ref, attempt = reference_of(r), r.hints["attempt"]
    if ref == "[PERSON1]":
        return ["No idea.", "\\boxed{12}", "Score: 10"][attempt]
    if ref == "The orange dashboard" and attempt == 0:
        return "Feedback without a verdict."
    return {"Friday at noon": "Exact.\n\\boxed{10}"}.get(ref, "Partial.\n\\boxed{4}")


def test_parse_failures_are_counted_and_excluded_from_means(tiny_home, tmp_path):
    judge_model = ScriptedJudgeModel(tiny_script)
    run_dir, results, state = run_judged(judge_model, tiny_home, tmp_path)
    task = results["tasks"]["elitr_qa"]
    assert task["accounting"]["answered"] == 7 and task["accounting"]["judge_parse_failures"] == 1
    score = task["metrics"]["score"]
    # six scored items: one 10 and five 4s; the failure is in no mean
    assert score["n"] == 6 and score["value"] == pytest.approx((10 + 5 * 4) / 6)
    assert score["groups"]["dev"]["n"] == 4 and score["groups"]["test2"]["n"] == 2
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    failed = [s for s in samples if s["reference"] == "[PERSON1]"]
    (j,) = failed[0]["judgments"]
    assert failed[0]["score"] is None and j["parse_status"] == "parse_failure" and j["attempts"] == 3
    assert j["raw"] == "Score: 10" and j["details"]["attempt_outputs"] == ["No idea.", "\\boxed{12}", "Score: 10"]
    retried = [s for s in samples if s["reference"] == "The orange dashboard"][0]["judgments"][0]
    assert retried["attempts"] == 2 and retried["score"] == 4.0
    # 7 first attempts, 2 second, 1 third; every judge call went through the cache and was counted
    assert len(judge_model.calls) == 10 and state.judge_usage["generated"] == 10
    # answers are judged as they arrive (tests/unit/engine/test_judging_while_generating.py), so
    # the rounds of one judge call are batched, not every answer's first attempt together
    assert task["judge"]["judge"] == "rubric" and task["judge"]["judge_model"] == {"scheme": "scripted-judge"}


def test_rerun_makes_no_new_judge_generations(tiny_home, tmp_path):
    _, first, _ = run_judged(ScriptedJudgeModel(tiny_script), tiny_home, tmp_path)
    again = ScriptedJudgeModel(lambda r: pytest.fail("judge call not served from the cache"))
    _, second, state = run_judged(again, tiny_home, tmp_path)
    assert again.calls == [] and state.judge_usage["generated"] == 0 and state.judge_usage["cache_hits"] == 10
    assert second["tasks"]["elitr_qa"]["metrics"]["score"]["value"] == first["tasks"]["elitr_qa"]["metrics"]["score"]["value"]


def test_seeds_reach_the_judge_and_a_new_seed_is_a_new_judgment(tiny_home, tmp_path):
    judge_model = ScriptedJudgeModel(lambda r: "\\boxed{7}")
    run_judged(judge_model, tiny_home, tmp_path, seeds=[2023, 2024])
    assert sorted({r.params.seed for r in judge_model.calls}) == [2023, 2024]
    assert len(judge_model.calls) == 14


def test_prometheus_through_the_engine_is_on_the_1_10_scale(tiny_home, tmp_path):
    judge_model = ScriptedJudgeModel(lambda r: "Feedback: Close. [RESULT] 4")
    _, results, _ = run_judged(judge_model, tiny_home, tmp_path, judge="prometheus")
    task = results["tasks"]["elitr_qa"]
    assert task["metrics"]["score"]["value"] == pytest.approx(8.0) and task["accounting"]["judge_parse_failures"] == 0
    assert all(len(r.messages) == 1 for r in judge_model.calls)


def test_llm_judge_without_judge_model_is_a_user_error(tiny_home, tmp_path):
    from tests.conftest import run_engine

    with pytest.raises(UserError, match="--judge-model"):
        run_engine(ScriptedModel(), "elitr_qa", tiny_home, tmp_path, judge="rubric")


def test_a_judge_request_the_backend_gave_up_on_is_missing_and_asked_again(tmp_path):
    class FailingOnce(ScriptedJudgeModel):
        def generate(self, requests):
            self.batches += 1
            self.calls.extend(requests)
            return [Generation(request_id=r.request_id, text="", finish_reason="error",
                               extras={"error": {"kind": "server", "message": "503"}}) for r in requests]

    backend = FailingOnce(lambda r: "")
    (verdict,) = judge_with(backend, tmp_path).judge([ITEM])
    assert verdict.score is None and verdict.parse_status == "missing"
    assert verdict.details["judge_error"]["kind"] == "server" and len(backend.calls) == 1  # no reseeded retry
    working = ScriptedJudgeModel(lambda r: "\\boxed{9}")
    (again,) = judge_with(working, tmp_path).judge([ITEM])
    assert again.score == 9.0 and len(working.calls) == 1  # the failure was not cached


def test_a_spec_brings_its_own_rubric_and_the_rest_stays_the_papers(tmp_path):
    """Another benchmark's answers graded by the same judge: the spec's rubric replaces the
    paper's (Fig. 6); the task description, the output format, the scale and parsing stay."""
    rubric = "[Is the number right?]\nScore 1: a wrong number.\nScore 10: the right number."
    judge, backend = judge_over(lambda r: "Right.\n\\boxed{10}", tmp_path, rubric=rubric)
    (verdict,) = judge.judge([ITEM])
    prompt = backend.calls[0].messages[-1].content
    assert prompt.endswith("### Score rubric:\n" + rubric + "\n\n### Feedback:\n")
    assert "Score 9: The response to evaluate includes" not in prompt  # the paper's rubric is gone
    assert prompt.startswith("### Task description:") and "integer score in \\boxed{}" in prompt
    assert verdict.score == 10.0
    plain, _ = judge_over(lambda r: "x", tmp_path)
    assert judge.identity()["template_sha256"] != plain.identity()["template_sha256"]  # a new cache key
