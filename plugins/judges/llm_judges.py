"""`rubric` and `prometheus`: the two LLM judges of ELITR-Bench (Thonet et al., 2024a, Sec. 4 and App. D).

`rubric` is the paper's main evaluator: GPT-4 reads the question, the response and the
reference answer, writes feedback, then an integer 1-10 in `\\boxed{}` (prompt Fig. 5, rubric
Fig. 6). `prometheus` is the open alternative of App. D: the same layout with a 5-point rubric
(Figs. 7-8), answered as `[RESULT] n` and reported as 2n so both share the 1-10 scale.

Fidelity: the prompts are the bytes the authors' code sends (utter-project/ELITR-Bench,
commit c7ff430, `utils/common.py` `format_gpt_eval_prompt` / `format_prometheus_eval_prompt`),
which differ from the paper's figures in small ways (the code says "assess", Fig. 7
"assesses"); the code is what produced the published numbers, so it wins. Their scripts
(`eval/eval_gpt.py`, `eval/eval_prometheus.py`) also fix:
- the inputs are `.strip()`ed before formatting;
- GPT-4 gets FastChat's "chatgpt" conversation: a system message "You are a helpful
  assistant." then the prompt as the user turn; Prometheus gets FastChat's "llama-2"
  conversation with no system message, i.e. the prompt as the only user turn (the judge
  model's own chat template then writes `[INST] ... [/INST]`);
- nucleus sampling, temperature 0.6, top-p 0.9, at most 1024 new tokens, repetition penalty
  1.0; the seed is the run's seed (App. C.1: "the same seed is used both for the response
  generation part and the GPT-4-based evaluation part");
- the score is the first match of `\\boxed{(\\d+)}` / `\\[RESULT\\] (\\d+)`.

Where we depart from them, on purpose: the authors wrote a placeholder score 0 when the
marker was missing and checked by hand. We never invent a score: an output without the
marker, or with a score outside the rubric's range, is retried with a fresh seed, and after
`max_attempts` it is recorded as a parse failure (score None), which results.json counts.
A judge request the backend gave up on (an API error past its own retries) is no output to
parse: it is recorded as `missing` with the error, not retried here and not cached, so
running the same command again asks it again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Hashable

from lceval import hookimpl
from lceval.judging import SampledJudge, require_model, sampling_options, sha256_text
from lceval.interfaces import Judge, JudgeContext
from lceval.options import check_options
from lceval.types import GenerationParams, GenerationRequest, JudgeInput, Judgment, Message

# -- prompts (Thonet et al., 2024a, Figs. 5-8, bytes as built by the authors' utils/common.py) ----------

_TASK_HEAD = (
    "### Task description:\n"
    "You are provided below with a question, a response to evaluate, a reference answer that "
    "gets the maximum score of {max}, and a score rubric representing evaluation criteria.\n"
    "1. Write a detailed feedback that assess the quality of the response strictly based on "
    "the given score rubric, not evaluating in general.\n"
    "2. After writing a feedback, write a score that is an integer between 1 and {max}. "
    "You should refer to the score rubric.\n"
)
_TASK_TAIL = (
    "4. Please do not generate any other opening, closing, and explanations.\n\n"
    "### Question:\n{question}\n\n"
    "### Response to evaluate:\n{response}\n\n"
    "### Reference answer (score {max}):\n{reference}\n\n"
    "### Score rubric:\n"
)
_CRITERION = (
    "[Does the response to evaluate correctly address the given question based on the "
    "elements provided by the reference answer? The response should include the elements of "
    "the reference answer and should also avoid adding unnecessary elements or being too "
    "verbose.]\n"
)

#: Fig. 5 (prompt) + Fig. 6 (10-point rubric), GPT-4 evaluator.
RUBRIC_TEMPLATE = (
    _TASK_HEAD.replace("{max}", "10")
    + "3. The output format should first include the feedback and then indicate the integer "
    "score in \\boxed{}.\n"
    + _TASK_TAIL.replace("{max}", "10")
    + _CRITERION
    + "Score 1: The response to evaluate is incorrect and misses all the elements of the "
    "reference answer.\n"
    "Score 2: The response to evaluate indicates insufficient knowledge to answer the question "
    "even though the reference answer states otherwise.\n"
    "Score 3-4: The response to evaluate contains some elements vaguely related to the "
    "reference answer.\n"
    "Score 5-6: The response to evaluate is partially correct and/or covers only a part of the "
    "reference answer.\n"
    "Score 7-8: The response to evaluate contains most of the reference answer but delivers it "
    "in an indirect and/or overly verbose way.\n"
    "Score 9: The response to evaluate includes the reference answer but it is more verbose and "
    "adds unnecessary elements.\n"
    "Score 10: The response to evaluate is essentially equivalent to the reference answer.\n"
    "\n"  # the 10-point prompt has a blank line before "### Feedback:", the 5-point one none
    "### Feedback:\n"
)

#: Fig. 7 (prompt) + Fig. 8 (5-point rubric), Prometheus evaluator.
PROMETHEUS_TEMPLATE = (
    _TASK_HEAD.replace("{max}", "5")
    + '3. The output format should look as follows: "Feedback: (write the quality assessment '
    'feedback) [RESULT] (an integer number between 1 and 5)".\n'
    + _TASK_TAIL.replace("{max}", "5")
    + _CRITERION
    + "Score 1: The response to evaluate is incorrect and misses all the elements of the "
    "reference answer.\n"
    "Score 2: The response to evaluate contains some elements vaguely related to the reference "
    "answer.\n"
    "Score 3: The response to evaluate is partially correct and/or covers only a part of the "
    "reference answer.\n"
    "Score 4: The response to evaluate contains most of the reference answer but delivers it in "
    "an indirect and/or overly verbose way.\n"
    "Score 5: The response to evaluate is essentially equivalent to the reference answer.\n"
    "### Feedback:\n"
)

_SLOT = re.compile(r"\{(question|response|reference)\}")


def render(template: str, question: str, response: str, reference: str) -> str:
    """Fill the three slots in one pass, so a response that itself contains "{reference}"
    is never expanded. Inputs are stripped, as the authors' eval scripts do."""
    values = {"question": question.strip(), "response": response.strip(), "reference": reference.strip()}
    return _SLOT.sub(lambda m: values[m.group(1)], template)


# -- parsing -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Parsed:
    score: float | None  # on the 1-10 scale
    verdict: int | None  # the integer the judge wrote
    feedback: str
    failure: str = ""  # why it is not a score


def _parser(pattern: str, low: int, high: int, multiplier: int, label: str) -> Callable[[str], Parsed]:
    regex = re.compile(pattern)

    def parse(text: str) -> Parsed:
        match = regex.search(text)  # first occurrence, as the authors' re.search
        if match is None:
            return Parsed(None, None, text.strip(), f"no {label} in the output")
        feedback = text[:match.start()].strip()
        if feedback.startswith("Feedback:"):
            feedback = feedback[len("Feedback:"):].strip()
        value = int(match.group(1))
        if not low <= value <= high:
            return Parsed(None, value, feedback, f"score {value} outside {low}-{high}")
        return Parsed(float(value * multiplier), value, feedback)

    return parse


#: The authors' patterns, verbatim (eval_gpt.py, eval_prometheus.py).
parse_rubric = _parser(r"\\boxed{(\d+)}", 1, 10, 1, "\\boxed{n}")
parse_prometheus = _parser(r"\[RESULT\] (\d+)", 1, 5, 2, "[RESULT] n")


# -- the judges --------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgeDef:
    """What distinguishes the two judges; everything else is shared."""

    name: str
    template: str
    system_prompt: str | None  # None: no system message at all
    parse: Callable[[str], Parsed]
    scale_note: str
    #: the template up to its "### Score rubric:" heading: where a spec's own rubric goes
    head: str = ""

    @property
    def options(self) -> dict[str, Any]:
        """Typed options; defaults are the authors' eval scripts' (Thonet et al., 2024a, App. B.2 / C.1)."""
        rubric = {"rubric": {"type": ["string", "null"], "default": None,
                             "description": "The score rubric (criterion and what each score means) in place of "
                                            "the paper's, for another benchmark's answers; the task description, "
                                            "the output format and the scale stay (null: the paper's rubric)."},
                  "see_reasoning": {"type": "boolean", "default": False,
                                    "description": "Show the judge a reasoning model's thinking before its answer "
                                                   "(default: the answer alone, as the papers judged answers)."}}
        return sampling_options(temperature=0.6, top_p=0.9, max_new_tokens=1024, repeat_penalty=1.0,
                                max_attempts=3, system_prompt=self.system_prompt, extra=rubric)

    def with_rubric(self, rubric: str | None) -> "JudgeDef":
        """This judge with a spec's rubric in place of the paper's (the rest of the prompt and
        the parsing unchanged)."""
        if rubric is None:
            return self
        return replace(self, template=self.head + rubric.strip("\n") + "\n\n### Feedback:\n")


def _head(template: str) -> str:
    return template[:template.index("### Score rubric:\n") + len("### Score rubric:\n")]


RUBRIC = JudgeDef("rubric", RUBRIC_TEMPLATE, "You are a helpful assistant.", parse_rubric,
                  "integer 1-10 in \\boxed{}", head=_head(RUBRIC_TEMPLATE))
PROMETHEUS = JudgeDef("prometheus", PROMETHEUS_TEMPLATE, None, parse_prometheus,
                      "[RESULT] 1-5, reported x2", head=_head(PROMETHEUS_TEMPLATE))


class LLMJudge(SampledJudge, Judge):
    """Asks the `--judge-model` to grade each answer against the reference, retrying
    unparseable or out-of-range verdicts with a new seed (all through the request cache)."""

    uses_model = True
    scale = (1.0, 10.0)

    def __init__(self, definition: JudgeDef, ctx: JudgeContext) -> None:
        options = check_options(definition.options, ctx.options, what=f"judge '{definition.name}'",
                                field_prefix="judge.options.")
        model = require_model(ctx, definition.name, "Pass --judge-model SPEC (e.g. --judge-model "
                              "litellm:openai/gpt-4-0613, or --judge-model smollm2 to try it offline).")
        self.definition = definition.with_rubric(options.get("rubric"))
        self.see_reasoning = bool(options.get("see_reasoning"))
        self.name = definition.name
        self.configure_sampling(model, ctx.seed, options)

    def messages(self, item: JudgeInput) -> list[Message]:
        response = item.response
        if self.see_reasoning and item.reasoning:
            response = f"[The model's reasoning before its answer]\n{item.reasoning.strip()}\n\n[Its answer]\n{response.strip()}"
        return self.chat(render(self.definition.template, item.question, response, item.reference))

    def _parse(self, _key: Hashable, text: str) -> tuple[Parsed, str | None]:
        parsed = self.definition.parse(text)
        return parsed, (parsed.failure if parsed.score is None else None)

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        messages = [self.messages(item) for item in items]

        def request(i: Any, params: GenerationParams, attempt: int) -> GenerationRequest:
            return GenerationRequest(request_id=items[i].item_id, messages=messages[i], params=params,
                                     hints={"item_id": items[i].item_id, "judge": self.name, "attempt": attempt})

        rounds = self.ask(range(len(items)), request, self._parse)
        return [self._judgment(item, rounds.results.get(i), rounds.raws[i], rounds.errors.get(i))
                for i, item in enumerate(items)]

    def _judgment(self, item: JudgeInput, result: Parsed | None, raws: list[str], error: Any) -> Judgment:
        if error is not None or result is None:
            return Judgment(item_id=item.item_id, judge=self.name, score=None, parse_status="missing",
                            raw=raws[-1] if raws else "", attempts=len(raws) + 1,
                            details={"judge_error": error, "attempt_outputs": list(raws),
                                     "attempt_seeds": self.attempt_seeds(len(raws) + 1)})
        details: dict[str, Any] = {
            "feedback": result.feedback,
            "verdict": result.verdict,
            "attempt_outputs": list(raws),
            "attempt_seeds": self.attempt_seeds(len(raws)),
        }
        if result.score is None:
            details["failure"] = result.failure
            return Judgment(item_id=item.item_id, judge=self.name, score=None, parse_status="parse_failure",
                            raw=raws[-1], attempts=len(raws), details=details)
        return Judgment(item_id=item.item_id, judge=self.name, score=result.score, raw=raws[-1],
                        attempts=len(raws), details=details)

    def identity(self) -> dict[str, Any]:
        return {
            "judge": self.name,
            "version": 1,
            "template_sha256": sha256_text(self.definition.template),
            "system_prompt_sha256": self.system_prompt_identity(),
            "output": self.definition.scale_note,
            **self.sampling_identity(),
            **({"see_reasoning": True} if self.see_reasoning else {}),
        }


# -- registration ------------------------------------------------------------------------


def make_rubric(ctx: JudgeContext) -> LLMJudge:
    return LLMJudge(RUBRIC, ctx)


def make_prometheus(ctx: JudgeContext) -> LLMJudge:
    return LLMJudge(PROMETHEUS, ctx)


@hookimpl
def register_judges(register):
    register("rubric", make_rubric, options_schema=RUBRIC.options)
    register("prometheus", make_prometheus, options_schema=PROMETHEUS.options)
