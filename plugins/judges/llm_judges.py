"""`rubric` and `prometheus`: the two LLM judges of ELITR-Bench (paper 000, Sec. 4 and App. D).

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
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterable

from lceval import hookimpl
from lceval.cache import RETRY_SEED_STRIDE, retry_seed, sha256_text
from lceval.errors import UserError
from lceval.interfaces import Judge, JudgeContext, ModelBackend
from lceval.types import GenerationParams, GenerationRequest, JudgeInput, Judgment, Message

# -- prompts (paper 000 Figs. 5-8, bytes as built by the authors' utils/common.py) ----------

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


# -- what the model-calling judges share ---------------------------------------------------
# (`rubric`, `prometheus` here; `cream`, `keyfacts` in judges/cream; `summhay-coverage`)


@dataclass
class Rounds:
    """What asking in rounds left, per key: every output, the parse of the last one (whatever
    the parse returned, also for an unusable output), why the last one was unusable (absent
    once one parsed) and the error of a request the backend gave up on."""

    raws: dict[Hashable, list[str]]
    results: dict[Hashable, Any] = field(default_factory=dict)
    why: dict[Hashable, str] = field(default_factory=dict)
    errors: dict[Hashable, Any] = field(default_factory=dict)


def ask_in_rounds(model: ModelBackend, keys: Iterable[Hashable], attempts: int,
                  params: Callable[[int], GenerationParams],
                  request: Callable[[Hashable, GenerationParams, int], GenerationRequest],
                  parse: Callable[[Hashable, str], tuple[Any, str | None]]) -> Rounds:
    """Ask every key's prompt, then again, with attempt k's params, those whose output
    `parse` called unusable (it returns (result, None) or (result, why)), `attempts` rounds
    at most. One generate call per round: batched backends answer these concurrently.

    A request the backend gave up on (finish_reason "error", after its own retries) is no
    output to parse: it goes to `errors` and is not asked again here; it is not cached, so the
    same command run again asks it again."""
    rounds = Rounds(raws={key: [] for key in keys})
    pending = list(rounds.raws)
    for attempt in range(attempts):
        if not pending:
            break
        round_params = params(attempt)
        outputs = model.generate([request(key, round_params, attempt) for key in pending])
        still = []
        for key, gen in zip(pending, outputs):
            if gen.finish_reason == "error":
                rounds.errors[key] = gen.extras.get("error") or "judge model returned no answer"
                continue
            rounds.raws[key].append(gen.text)
            rounds.results[key], why = parse(key, gen.text)
            if why is None:
                rounds.why.pop(key, None)
            else:
                rounds.why[key] = why
                still.append(key)
        pending = still
    return rounds


class SampledJudge:
    """The judge model, sampling, optional system prompt and seeded retries of the judges
    whose options `resolve_sampling` reads; the subclass sets the attributes below."""

    name: str
    model: Any
    seed: int
    max_attempts: int
    system_prompt: str | None
    params: GenerationParams

    def attempts_allowed(self) -> int:
        # greedy decoding ignores the seed: a retry would replay the same text from the cache
        return 1 if self.params.temperature == 0 else self.max_attempts

    def attempt_params(self, attempt: int) -> GenerationParams:
        return GenerationParams(**{**self.params.as_dict(), "stop": tuple(self.params.stop),
                                   "seed": retry_seed(self.seed, attempt)})

    def attempt_seeds(self, n: int) -> list[int]:
        return [retry_seed(self.seed, k) for k in range(n)]

    def chat(self, prompt: str) -> list[Message]:
        head = [Message("system", self.system_prompt)] if self.system_prompt is not None else []
        return head + [Message("user", prompt)]

    def ask(self, keys: Iterable[Hashable], request: Callable[[Hashable, GenerationParams, int], GenerationRequest],
            parse: Callable[[Hashable, str], tuple[Any, str | None]]) -> Rounds:
        return ask_in_rounds(self.model, keys, self.attempts_allowed(), self.attempt_params, request, parse)

    def system_prompt_identity(self) -> str | None:
        return sha256_text(self.system_prompt) if self.system_prompt is not None else None

    def sampling_identity(self) -> dict[str, Any]:
        """The identity fields after the judge's own ones (their order is part of the cache key)."""
        return {
            "params": {k: v for k, v in self.params.as_dict().items() if k not in ("seed", "stop")},
            "seed": self.seed,
            "max_attempts": self.max_attempts,
            "retry_seed_stride": RETRY_SEED_STRIDE,
            "judge_model": self.model.identity,
        }


# -- the judges --------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgeDef:
    """What distinguishes the two judges; everything else is shared."""

    name: str
    template: str
    system_prompt: str | None  # None: no system message at all
    parse: Callable[[str], Parsed]
    scale_note: str


RUBRIC = JudgeDef("rubric", RUBRIC_TEMPLATE, "You are a helpful assistant.", parse_rubric,
                  "integer 1-10 in \\boxed{}")
PROMETHEUS = JudgeDef("prometheus", PROMETHEUS_TEMPLATE, None, parse_prometheus,
                      "[RESULT] 1-5, reported x2")

#: The authors' eval scripts' defaults (paper 000, App. B.2 / C.1).
DEFAULTS: dict[str, Any] = {"temperature": 0.6, "top_p": 0.9, "max_new_tokens": 1024,
                            "repeat_penalty": 1.0, "max_attempts": 3}


class LLMJudge(SampledJudge, Judge):
    """Asks the `--judge-model` to grade each answer against the reference, retrying
    unparseable or out-of-range verdicts with a new seed (all through the request cache)."""

    uses_model = True
    scale = (1.0, 10.0)

    def __init__(self, definition: JudgeDef, ctx: JudgeContext, options: dict[str, Any]) -> None:
        if ctx.model is None:
            raise UserError(f"judge '{definition.name}' grades with a language model and none was given",
                            field="--judge-model",
                            hint="Pass --judge-model SPEC (e.g. --judge-model litellm:openai/gpt-4-0613, "
                            "or --judge-model smollm2 to try it offline).")
        self.definition = definition
        self.name = definition.name
        self.model = ctx.model
        self.seed = int(ctx.seed)
        self.system_prompt = options["system_prompt"]
        self.max_attempts = options["max_attempts"]
        self.params = GenerationParams(max_new_tokens=options["max_new_tokens"],
                                       temperature=options["temperature"], top_p=options["top_p"],
                                       repeat_penalty=options["repeat_penalty"], seed=self.seed)

    def messages(self, item: JudgeInput) -> list[Message]:
        return self.chat(render(self.definition.template, item.question, item.response, item.reference))

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
        }


# -- options and registration --------------------------------------------------------------


def check_number(name: str, value: Any, kind: type, low: float, high: float | None, judge: str) -> Any:
    try:
        if isinstance(value, bool) or (kind is int and isinstance(value, float) and not value.is_integer()):
            raise ValueError
        number = kind(value)
    except (TypeError, ValueError):
        raise UserError(f"judge '{judge}' option '{name}' must be a{'n integer' if kind is int else ' number'}, "
                        f"got {value!r}", field=f"judge.options.{name}") from None
    if number < low or (high is not None and number > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise UserError(f"judge '{judge}' option '{name}' must be {bound}, got {value!r}",
                        field=f"judge.options.{name}")
    return number


#: The rubric judges' numeric options: (type, lowest, highest or None), in checking order.
RANGES: dict[str, tuple[type, float, float | None]] = {
    "temperature": (float, 0.0, None), "top_p": (float, 0.0, 1.0), "max_new_tokens": (int, 1, None),
    "repeat_penalty": (float, 0.0, None), "max_attempts": (int, 1, None)}


def resolve_sampling(judge: str, given: dict[str, Any], defaults: dict[str, Any],
                     ranges: dict[str, tuple[type, float, float | None]]) -> dict[str, Any]:
    """`defaults` overlaid with the preset's options, the numbers checked against `ranges`
    (top_p above 0), `system_prompt` text or null; unknown names are refused."""
    known = [*ranges, "system_prompt"]
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise UserError(f"unknown option(s) {', '.join(unknown)} for judge '{judge}' "
                        f"(known: {', '.join(known)})", field="judge.options")
    value = {**defaults, **given}
    out: dict[str, Any] = {name: check_number(name, value[name], kind, low, high, judge)
                           for name, (kind, low, high) in ranges.items()}
    if out["top_p"] == 0:
        raise UserError(f"judge '{judge}' option 'top_p' must be above 0", field="judge.options.top_p")
    system = value["system_prompt"]
    if system is not None and not isinstance(system, str):
        raise UserError(f"judge '{judge}' option 'system_prompt' must be text or null, got {system!r}",
                        field="judge.options.system_prompt")
    out["system_prompt"] = system
    return out


def resolve_options(definition: JudgeDef, given: dict[str, Any]) -> dict[str, Any]:
    """Defaults overlaid with the preset's options, each checked; unknown names are refused."""
    return resolve_sampling(definition.name, given, {**DEFAULTS, "system_prompt": definition.system_prompt},
                            RANGES)


def make_rubric(ctx: JudgeContext) -> LLMJudge:
    return LLMJudge(RUBRIC, ctx, resolve_options(RUBRIC, dict(ctx.options)))


def make_prometheus(ctx: JudgeContext) -> LLMJudge:
    return LLMJudge(PROMETHEUS, ctx, resolve_options(PROMETHEUS, dict(ctx.options)))


@hookimpl
def register_judges(register):
    register("rubric", make_rubric)
    register("prometheus", make_prometheus)
