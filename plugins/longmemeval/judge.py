"""The `longmemeval` judge: LongMemEval's answer check, the authors' prompt chosen per question.

Follows xiaowu0162/LongMemEval, commit 9e0b455f4ef0e2ab8f2e582289761153549043fc,
src/evaluation/evaluate_qa.py: `get_anscheck_prompt` picks one of five prompts by the
question's type (single-session-user, single-session-assistant and multi-session share one;
temporal-reasoning forgives off-by-one day counts; knowledge-update accepts earlier facts beside
the updated one; single-session-preference reads the answer as a rubric), and for an abstention
question (its id contains "_abs", whatever its type) the unanswerable-question prompt. The
prompt is `template.format(question, answer, response)`: the three filled in as they are (the
response stripped, as run_generation.py strips its hypothesis). It goes to the judge model as
the only user message, temperature 0, at most 10 tokens; the verdict is `'yes' in
reply.strip().lower()` (100 for yes, 0 for no). The paper's judge is gpt-4o-2024-08-06
(`--judge-model litellm:openai/gpt-4o-2024-08-06`); print_qa_metrics.py refuses any other.
Every reply is a verdict (no yes is a no), so nothing is retried or counted as unparseable; a
request the backend gave up on is recorded as missing.
"""

from __future__ import annotations

from typing import Any, Hashable

from lceval.errors import UserError
from lceval.interfaces import Judge, JudgeContext
from lceval.judging import SampledJudge, require_model, sampling_options, sha256_text
from lceval.options import check_options
from lceval.types import GenerationParams, GenerationRequest, JudgeInput, Judgment

_HEAD = ("I will give you a question, a correct answer, and a response from a model. Please answer yes if the response "
         "contains the correct answer. Otherwise, answer no. ")
_STEPS = ("If the response is equivalent to the correct answer or contains all the intermediate steps to get the correct "
          "answer, you should also answer yes. If the response only contains a subset of the information required by "
          "the answer, answer no. ")
_SLOTS = "\n\nQuestion: {}\n\nCorrect Answer: {}\n\nModel Response: {}\n\nIs the model response correct? Answer yes or no only."

#: evaluate_qa.py `get_anscheck_prompt`, by question type (byte for byte, the trailing spaces included)
TEMPLATES: dict[str, str] = {
    "single-session-user": _HEAD + _STEPS + _SLOTS,
    "single-session-assistant": _HEAD + _STEPS + _SLOTS,
    "multi-session": _HEAD + _STEPS + _SLOTS,
    "temporal-reasoning": _HEAD + _STEPS + (
        "In addition, do not penalize off-by-one errors for the number of days. If the question asks for the number of "
        "days/weeks/months, etc., and the model makes off-by-one errors (e.g., predicting 19 days when the answer is "
        "18), the model's response is still correct. ") + _SLOTS,
    "knowledge-update": _HEAD + (
        "If the response contains some previous information along with an updated answer, the response should be "
        "considered as correct as long as the updated answer is the required answer.") + _SLOTS,
    "single-session-preference": (
        "I will give you a question, a rubric for desired personalized response, and a response from a model. Please "
        "answer yes if the response satisfies the desired response. Otherwise, answer no. The model does not need to "
        "reflect all the points in the rubric. The response is correct as long as it recalls and utilizes the user's "
        "personal information correctly.\n\nQuestion: {}\n\nRubric: {}\n\nModel Response: {}\n\nIs the model response "
        "correct? Answer yes or no only."),
}
ABSTENTION = (
    "I will give you an unanswerable question, an explanation, and a response from a model. Please answer yes if the "
    "model correctly identifies the question as unanswerable. The model could say that the information is incomplete, "
    "or some other information is given but the asked information is not.\n\nQuestion: {}\n\nExplanation: {}\n\nModel "
    "Response: {}\n\nDoes the model correctly identify the question as unanswerable? Answer yes or no only.")

OPTIONS = sampling_options(temperature=0.0, top_p=1.0, max_new_tokens=10, max_attempts=1, system_prompt=None, extra={
    "type_field": {"type": "string", "minLength": 1, "default": "question_type",
                   "description": "The metadata field holding the question's type (the spec's fields.metadata)."},
    "id_field": {"type": "string", "minLength": 1, "default": "question_id",
                 "description": "The metadata field holding the question's id; an id containing \"_abs\" is an "
                                "abstention question."},
})


def anscheck_prompt(question_type: str, question: str, answer: str, response: str, abstention: bool) -> str:
    """evaluate_qa.py `get_anscheck_prompt`."""
    if abstention:
        return ABSTENTION.format(question, answer, response)
    if question_type not in TEMPLATES:
        raise UserError(f"LongMemEval has no judge prompt for the question type {question_type!r} (known: "
                        f"{', '.join(TEMPLATES)})", field="judge.options.type_field")
    return TEMPLATES[question_type].format(question, answer, response)


class LongMemEvalJudge(SampledJudge, Judge):
    """LongMemEval's yes/no answer check by a judge model (0 or 100 per question)."""

    name = "longmemeval"
    scale = (0.0, 100.0)
    uses_model = True

    def __init__(self, ctx: JudgeContext) -> None:
        options = check_options(OPTIONS, ctx.options, what="judge 'longmemeval'", field_prefix="judge.options.")
        model = require_model(ctx, self.name, "Pass --judge-model SPEC: the paper's judge is "
                              "litellm:openai/gpt-4o-2024-08-06.")
        self.type_field, self.id_field = options["type_field"], options["id_field"]
        self.configure_sampling(model, ctx.seed, options)

    def prompt(self, item: JudgeInput) -> str:
        qtype = item.metadata.get(self.type_field)
        qid = item.metadata.get(self.id_field)
        if not isinstance(qtype, str) or not isinstance(qid, str):
            raise UserError(f"item {item.item_id}: the longmemeval judge reads the question's type and id from the "
                            f"metadata fields {self.type_field!r} and {self.id_field!r}; got {qtype!r} and {qid!r}",
                            field="judge.options.type_field", hint="List them in the spec's fields.metadata.")
        return anscheck_prompt(qtype, item.question, item.reference, item.response, "_abs" in qid)

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        messages = [self.chat(self.prompt(item)) for item in items]

        def request(i: Any, params: GenerationParams, attempt: int) -> GenerationRequest:
            return GenerationRequest(request_id=items[i].item_id, messages=messages[i], params=params,
                                     hints={"item_id": items[i].item_id, "judge": self.name, "attempt": attempt})

        def parse(_key: Hashable, text: str) -> tuple[bool, None]:
            return "yes" in text.strip().lower(), None  # evaluate_qa.py: `label = 'yes' in eval_response.lower()`

        rounds = self.ask(range(len(items)), request, parse)
        out = []
        for i, item in enumerate(items):
            raws = rounds.raws[i]
            if i in rounds.errors or i not in rounds.results:
                out.append(Judgment(item_id=item.item_id, judge=self.name, score=None, parse_status="missing",
                                    raw=raws[-1] if raws else "", details={"judge_error": rounds.errors.get(i)}))
                continue
            label = rounds.results[i]
            out.append(Judgment(item_id=item.item_id, judge=self.name, score=100.0 if label else 0.0, raw=raws[-1],
                                details={"label": label, "abstention": "_abs" in str(item.metadata.get(self.id_field))}))
        return out

    def identity(self) -> dict[str, Any]:
        return {"judge": self.name, "version": 1,
                "templates_sha256": sha256_text("\n".join([*TEMPLATES.values(), ABSTENTION])),
                "type_field": self.type_field, "id_field": self.id_field,
                "system_prompt_sha256": self.system_prompt_identity(), **self.sampling_identity()}


def make_judge(ctx: JudgeContext) -> LongMemEvalJudge:
    return LongMemEvalJudge(ctx)
