"""LongWriter's scores (Bai et al., 2024; THUDM/LongWriter evaluation/, commit 3fcfdff).

The length score S_l (`longwriter_length`): pred.py `count_words` counts the answer's words - CJK
Unified Ideographs (U+4E00-U+9FFF) one each, plus runs of ASCII letters between word boundaries
(`\\b[a-zA-Z]+\\b`: "café" counts 0, "don't" 2, digits and Cyrillic nothing) - and
eval_length.py `score(x, y)`, x the required length and y that count, gives
100 * max(0, 1 - (y/x - 1)/3) for an answer longer than asked (0 from 4x up) and
100 * max(0, 1 - (x/y - 1)/2) otherwise (0 at a third or less). The authors' function divides by
y: an answer with no word at all raises ZeroDivisionError there; here it scores 0, the limit.

The quality score S_q (`longwriter`): eval_quality.py asks GPT-4o (gpt-4o-2024-05-13, one user
message, temperature 0.5, at most 1,024 tokens) judge.txt with the request in place of $INST$
and the answer as written in place of $RESPONSE$ (str.replace, one after the other); it keeps
the block of a ```json fence if there is one, removes the newlines and reads the JSON, which must
hold the six dimensions; up to five tries per answer, a try whose JSON lacks a dimension other
than the last costing two (the authors' loop sets `scores = None` and then tests `dim in None`,
which raises). An answer never judged is dropped from S_q (here: a parse failure, counted, never
a score). Each dimension d maps to (d - 1) * 25 and S_q is the mean of the six (the authors
average each dimension over the answers, then the six: the same number). The paper's overall
score is (S_l + S_q) / 2, the judge's score for each answer; its details carry S_l, S_q and the
six dimensions for `report.metrics`.

Where the authors' script would stop (a dimension that is no number, JSON that is no object),
lceval counts a failed try instead.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Hashable

from lceval.errors import UserError
from lceval.interfaces import Judge, JudgeContext
from lceval.judging import SampledJudge, require_model, sampling_options, sha256_text
from lceval.options import check_options
from lceval.types import GenerationParams, GenerationRequest, JudgeInput, Judgment

JUDGE_TEMPLATE = (
    "You are an expert in evaluating text quality. Please evaluate the quality of an AI assistant's "
    "response to a user's writing request. Be as strict as possible.\n\n"
    "You need to evaluate across the following six dimensions, with scores ranging from 1 to 5. The "
    "scoring criteria from 5 to 1 for each dimension are as follows:\n\n"
    "1. Relevance: From content highly relevant and fully applicable to the user's request to completely "
    "irrelevant or inapplicable.\n\n"
    "2. Accuracy: From content completely accurate with no factual errors or misleading information to "
    "content with numerous errors and highly misleading.\n\n"
    "3. Coherence: From clear structure with smooth logical connections to disorganized structure with "
    "no coherence.\n\n"
    "4. Clarity: From clear language, rich in detail, and easy to understand to confusing expression "
    "with minimal details.\n\n"
    "5. Breadth and Depth: From both broad and deep content with a lot of information to seriously "
    "lacking breadth and depth with minimal information.\n\n"
    "6. Reading Experience: From excellent reading experience, engaging and easy to understand content "
    "to very poor reading experience, boring and hard to understand content.\n\n"
    "Please evaluate the quality of the following response to a user's request according to the above "
    "requirements.\n\n"
    "<User Request>\n\n"
    "$INST$\n\n"
    "</User Request>\n\n"
    "<Response>\n\n"
    "$RESPONSE$\n\n"
    "</Response>\n\n"
    "Please evaluate the quality of the response. You must first provide a brief analysis of its "
    "quality, then give a comprehensive analysis with scores for each dimension. The output must "
    "strictly follow the JSON format: {\"Analysis\": ..., \"Relevance\": ..., \"Accuracy\": ..., "
    "\"Coherence\": ..., \"Clarity\": ..., \"Breadth and Depth\": ..., \"Reading Experience\": ...}. You "
    "do not need to consider whether the response meets the user's length requirements in your "
    "evaluation. Ensure that only one integer between 1 and 5 is output for each dimension score."
)

#: eval_quality.py `dims`, in order; the details' names beside them
DIMS = ["Relevance", "Accuracy", "Coherence", "Clarity", "Breadth and Depth", "Reading Experience"]
DETAIL_NAMES = {d: d.lower().replace(" ", "_") for d in DIMS}
#: eval_quality.py: `while scores is None and trys < 5`
TRIES = 5

_CJK = re.compile(r"[\u4e00-\u9fff]")
_WORD = re.compile(r"\b[a-zA-Z]+\b")
_FENCE = re.compile(r"```json\n(.*?)\n```", re.DOTALL)


def count_words(text: str) -> int:
    """pred.py `count_words`: CJK characters plus ASCII-letter words."""
    return len(_CJK.findall(text)) + len(_WORD.findall(text))


def length_score(required: float, words: int) -> float:
    """eval_length.py `score(x, y)` (0-100); an answer without a word scores 0 (the authors divide by it)."""
    x, y = required, words
    if y > x:
        return 100 * max(0, 1. - (y / x - 1) / 3)
    if y == 0:
        return 0.0
    return 100 * max(0, 1. - (x / y - 1) / 2)


def required_length(item: JudgeInput, field: str) -> float:
    value = item.metadata.get(field)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise UserError(f"item {item.item_id}: the required length ({field}) must be a positive number, got "
                        f"{value!r}", field="judge.options.length_field",
                        hint="Copy the row's length into the metadata (documents: fields.metadata).")
    return value


LENGTH_FIELD = {"type": "string", "minLength": 1, "default": "length",
                "description": "The metadata field holding the required length in words (LongBench-Write's length)."}


class LongWriterLengthJudge(Judge):
    """eval_length.py's length score of each answer (no model); details: the required length and
    the answer's words."""

    name = "longwriter_length"
    scale = (0.0, 100.0)
    OPTIONS = {"type": "object", "additionalProperties": False, "properties": {"length_field": LENGTH_FIELD}}

    def __init__(self, options: "JudgeContext | dict[str, Any]") -> None:
        if isinstance(options, JudgeContext):
            options = options.options
        self.options = check_options(self.OPTIONS, options, what=f"judge '{self.name}'",
                                     field_prefix="judge.options.")

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        out = []
        for item in items:
            required = required_length(item, self.options["length_field"])
            words = count_words(item.raw_response if item.raw_response is not None else item.response)
            out.append(Judgment(item_id=item.item_id, judge=self.name, score=length_score(required, words),
                                raw=f"{words} words for {required:g}",
                                details={"required_words": required, "output_words": words}))
        return out

    def identity(self) -> dict[str, Any]:
        return {"judge": self.name, "version": 1, **self.options}


def judge_prompt(request: str, response: str) -> str:
    """eval_quality.py: `prompt_template.replace('$INST$', ...).replace('$RESPONSE$', ...)`."""
    return JUDGE_TEMPLATE.replace("$INST$", request).replace("$RESPONSE$", response)


def parse_verdict(output: str) -> tuple[dict[str, float] | None, int, str]:
    """One try of eval_quality.py's loop: (the six ratings or None, the tries it cost, why not)."""
    text: str | None = output
    if "```json" in text:
        text = (m.group(1) if (m := _FENCE.search(text)) else None)
        if text is None:
            return None, 1, "a ```json fence without its closing fence"
    try:
        scores = json.loads(text.replace("\n", ""))
    except ValueError as exc:
        return None, 1, f"no JSON ({exc})"
    if not isinstance(scores, dict):
        return None, 1, f"JSON that is no object ({type(scores).__name__})"
    missing = [d for d in DIMS if d not in scores]
    if missing:
        # the authors' loop: scores = None at the first missing dimension, then `dim in None`
        # raises on the next one (none follows the last)
        return None, (1 if DIMS.index(missing[0]) == len(DIMS) - 1 else 2), f"no {', '.join(missing)}"
    ratings = {}
    for d in DIMS:
        value = scores[d]
        try:
            ratings[d] = float(value)  # the authors' aggregate: float(score[dim])
        except (TypeError, ValueError):
            return None, 1, f"{d} is no number ({value!r})"
    return ratings, 0, ""


class LongWriterJudge(SampledJudge, Judge):
    """The paper's overall score of each answer, (S_l + S_q) / 2, S_q from eval_quality.py's judge."""

    name = "longwriter"
    uses_model = True
    scale = (0.0, 100.0)
    OPTIONS = sampling_options(temperature=0.5, top_p=1.0, max_new_tokens=1024, max_attempts=TRIES,
                               extra={"length_field": LENGTH_FIELD})

    def __init__(self, ctx: JudgeContext) -> None:
        options = check_options(self.OPTIONS, ctx.options, what=f"judge '{self.name}'", field_prefix="judge.options.")
        model = require_model(ctx, self.name, "Pass --judge-model SPEC (the authors asked gpt-4o-2024-05-13: "
                                              "--judge-model litellm:openai/gpt-4o-2024-05-13).")
        self.length_field = options["length_field"]
        self.configure_sampling(model, ctx.seed, options)

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        prompts = [judge_prompt(item.question, item.raw_response if item.raw_response is not None else item.response)
                   for item in items]
        tries = [0] * len(items)
        why: dict[int, str] = {}

        def request(i: Any, params: GenerationParams, attempt: int) -> GenerationRequest:
            return GenerationRequest(request_id=items[i].item_id, messages=self.chat(prompts[i]), params=params,
                                     hints={"item_id": items[i].item_id, "judge": self.name, "attempt": attempt})

        def parse(i: Hashable, text: str) -> tuple[Any, str | None]:
            ratings, cost, reason = parse_verdict(text)
            if ratings is not None:
                return ratings, None
            tries[i] += cost  # type: ignore[index]
            why[i] = reason  # type: ignore[index]
            return None, (reason if tries[i] < TRIES else None)  # type: ignore[index]  # out of tries: stop asking

        rounds = self.ask(range(len(items)), request, parse)
        out = []
        for i, item in enumerate(items):
            raws = rounds.raws[i]
            ratings = rounds.results.get(i)
            base = {"attempt_outputs": list(raws), "attempt_seeds": self.attempt_seeds(len(raws))}
            if i in rounds.errors:
                out.append(Judgment(item_id=item.item_id, judge=self.name, score=None, parse_status="missing",
                                    raw=raws[-1] if raws else "", attempts=len(raws) + 1,
                                    details={**base, "judge_error": rounds.errors[i]}))
                continue
            if ratings is None:
                out.append(Judgment(item_id=item.item_id, judge=self.name, score=None, parse_status="parse_failure",
                                    raw=raws[-1] if raws else "", attempts=len(raws),
                                    details={**base, "failure": why.get(i, "no verdict"), "tries": tries[i]}))
                continue
            dims = {DETAIL_NAMES[d]: (ratings[d] - 1) * 25 for d in DIMS}
            quality = sum(dims.values()) / len(dims)
            required = required_length(item, self.length_field)
            words = count_words(item.raw_response if item.raw_response is not None else item.response)
            s_l = length_score(required, words)
            out.append(Judgment(item_id=item.item_id, judge=self.name, score=(s_l + quality) / 2, raw=raws[-1],
                                attempts=len(raws),
                                details={"quality_score": quality, "length_score": s_l, **dims,
                                         "ratings": ratings, "output_words": words, **base}))
        return out

    def identity(self) -> dict[str, Any]:
        return {"judge": self.name, "version": 1, "template_sha256": sha256_text(JUDGE_TEMPLATE),
                "length_field": self.length_field, **self.sampling_identity()}
