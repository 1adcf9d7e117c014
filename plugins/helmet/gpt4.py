"""HELMET's model-based metrics, through lceval's judge model (princeton-nlp/HELMET at commit
4526dfb; the authors' judge is gpt-4o-2024-05-13, temperature 0.1, top-p 0.9, seed 42, one user
message, no system message):

- `helmet_longqa_gpt4` (NarrativeQA, scripts/eval_gpt4_longqa.py): fluency (0/1) and correctness
  (0-3) of the answer's first `Answer:` segment against the Python repr of the answer list; the
  item's score is fluency x correctness x 100/3 (collect_results.py's rescaling);
- `helmet_summ_gpt4` (InfiniteBench En.Sum and Multi-LexSum, scripts/eval_gpt4_summ.py): three
  calls per summary - fluency (0/1), recall (key points present / key points), precision
  (supported sentences / sentences, both counted by the judge) - and the item's score
  fluency x F1(recall, precision) x 100.

The prompts are the authors' bytes (plugins/helmet/prompts/, Python format strings). The judge's
JSON is the last `{...}` of its output (`parse_json`; the summary judge also tries a ```json
block). An output without it - or, for NarrativeQA, without both keys (the authors' script then
stops with a KeyError) - is retried with a new seed and then recorded as a parse failure, left out
of the mean as the authors leave unparsed items out.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any, Hashable

from lceval.interfaces import Judge, JudgeContext
from lceval.judging import SampledJudge, require_model, sampling_options, sha256_text
from lceval.options import check_options
from lceval.types import GenerationParams, GenerationRequest, JudgeInput, Judgment

from .metrics import helmet_answer
from .text import fill, parse_output


def prompt(name: str) -> str:
    return resources.files("lceval_plugins.helmet").joinpath("prompts", f"{name}.txt").read_text(encoding="utf-8")


def parse_json_longqa(text: str) -> dict[str, Any] | None:
    """eval_gpt4_longqa.py `parse_json`: the last non-greedy `{...}`, as JSON."""
    matches = re.findall(r"\{.*?\}", text, re.DOTALL)
    if not matches:
        return None
    try:
        out = json.loads(matches[-1])
    except ValueError:
        return None
    return out if isinstance(out, dict) else None


def parse_json_summ(text: str) -> dict[str, Any] | None:
    """eval_gpt4_summ.py `parse_json`: the last `{...}`, else the last ```json block."""
    matches = re.findall(r"\{.*?\}", text, re.DOTALL)
    if not matches:
        return None
    try:
        out = json.loads(matches[-1])
    except ValueError:
        blocks = re.findall(r"(?:```json)(.+)(?:```)", text, re.DOTALL)
        try:
            out = json.loads(blocks[-1])
        except (ValueError, IndexError):
            return None
    return out if isinstance(out, dict) else None


def longqa_prompt(question: str, answers: list[str], output: str) -> str:
    """The judge prompt of one answer: the answer list as Python prints it, the answer's first
    `Answer:` segment with its newlines made spaces (eval_gpt4_longqa.py `parse_output`)."""
    parsed = parse_output(output.replace("\n", " "))
    return fill(prompt("longqa_prompt"), {"question": question, "correct_answers": repr(list(answers)),
                                          "parsed_output": parsed}, "helmet_longqa_gpt4")


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class _Base(SampledJudge, Judge):
    uses_model = True
    scale = (0.0, 100.0)
    name = "helmet_gpt4"
    OPTIONS = sampling_options(temperature=0.1, top_p=0.9, max_new_tokens=2048, max_attempts=3)

    def __init__(self, ctx: JudgeContext) -> None:
        options = check_options(self.OPTIONS, ctx.options, what=f"judge '{self.name}'", field_prefix="judge.options.")
        model = require_model(ctx, self.name, "Pass --judge-model SPEC (HELMET's judge: "
                                              "--judge-model litellm:openai/gpt-4o-2024-05-13).")
        self.options = options
        self.configure_sampling(model, ctx.seed if ctx.seed else 42, options)

    def _ask(self, prompts: dict[Hashable, str], parse: Any) -> Any:
        def request(key: Any, params: GenerationParams, attempt: int) -> GenerationRequest:
            return GenerationRequest(request_id=f"{key[0]}#{key[1]}", messages=self.chat(prompts[key]), params=params,
                                     hints={"item_id": key[0], "judge": self.name, "attempt": attempt})

        return self.ask(list(prompts), request, parse)

    def identity(self) -> dict[str, Any]:
        return {"judge": self.name, "version": 1, "template_sha256": self.template_identity(),
                **self.sampling_identity()}

    def template_identity(self) -> str:
        raise NotImplementedError


class HelmetLongQAJudge(_Base):
    """NarrativeQA's GPT-4o judge: fluency x correctness, x 100/3."""

    name = "helmet_longqa_gpt4"

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        prompts = {(item.item_id, "qa"): longqa_prompt(item.question, item.metadata.get("references") or
                                                       [item.reference], helmet_answer(item)) for item in items}

        def parse(_key: Hashable, text: str) -> tuple[Any, str | None]:
            scores = parse_json_longqa(text)
            if scores is None:
                return None, "no JSON object in the output"
            fluency, correctness = _number(scores.get("fluency")), _number(scores.get("correctness"))
            if fluency is None or correctness is None:
                return None, "the JSON lacks fluency or correctness"
            return (fluency, correctness), None

        rounds = self._ask(prompts, parse)
        out = []
        for item in items:
            key = (item.item_id, "qa")
            raws = rounds.raws[key]
            if key in rounds.errors:
                out.append(Judgment(item.item_id, self.name, None, "missing", details={"judge_error": rounds.errors[key]}))
            elif key in rounds.why:
                out.append(Judgment(item.item_id, self.name, None, "parse_failure", raw=raws[-1] if raws else "",
                                    attempts=len(raws), details={"failure": rounds.why[key], "attempt_outputs": raws}))
            else:
                fluency, correctness = rounds.results[key]
                out.append(Judgment(item.item_id, self.name, fluency * correctness * 100.0 / 3.0, raw=raws[-1],
                                    attempts=len(raws), details={"fluency": fluency, "correctness": correctness}))
        return out

    def template_identity(self) -> str:
        return sha256_text(prompt("longqa_prompt"))


SUMM_VARIANTS = {"book": ("fluency_prompt_book", "recall_prompt_book", "precision_prompt_book"),
                 "legal": ("fluency_prompt", "recall_prompt", "precision_prompt")}
_SUMM_KEYS = {"fluency": ("fluency",), "recall": ("recall",), "precision": ("precision", "sentence_count")}


class HelmetSummJudge(_Base):
    """The summaries' GPT-4o judge: fluency x F1 of key-point recall and sentence precision, x 100."""

    name = "helmet_summ_gpt4"
    OPTIONS = sampling_options(temperature=0.1, top_p=0.9, max_new_tokens=4096, max_attempts=3, extra={
        "variant": {"enum": ["book", "legal"], "default": "book",
                    "description": "book: InfiniteBench En.Sum's prompts; legal: Multi-LexSum's."}})

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        names = SUMM_VARIANTS[self.options["variant"]]
        prompts: dict[Hashable, str] = {}
        for item in items:
            summary = helmet_answer(item).strip()
            keypoints = item.metadata.get("keypoints") or []
            prompts[(item.item_id, "fluency")] = fill(prompt(names[0]), {"text": summary}, "fluency")
            prompts[(item.item_id, "recall")] = fill(prompt(names[1]), {
                "keypoints": "\n".join(f"{i + 1}. {kp}" for i, kp in enumerate(keypoints)), "summary": summary}, "recall")
            prompts[(item.item_id, "precision")] = fill(prompt(names[2]), {
                "expert_summary": item.metadata.get("expert_summary", item.reference), "summary": summary}, "precision")

        def parse(key: Any, text: str) -> tuple[Any, str | None]:
            found = parse_json_summ(text)
            if found is None:
                return None, "no JSON object in the output"
            values = [_number(found.get(k)) for k in _SUMM_KEYS[key[1]]]
            if any(v is None for v in values):
                return None, f"the JSON lacks {' or '.join(_SUMM_KEYS[key[1]])}"
            return values, None

        rounds = self._ask(prompts, parse)
        out = []
        for item in items:
            keys = [(item.item_id, step) for step in ("fluency", "recall", "precision")]
            raws = {k[1]: rounds.raws[k] for k in keys}
            errors = [rounds.errors[k] for k in keys if k in rounds.errors]
            if errors:
                out.append(Judgment(item.item_id, self.name, None, "missing", details={"judge_error": errors[0]}))
                continue
            failed = {k[1]: rounds.why[k] for k in keys if k in rounds.why}
            if failed:
                out.append(Judgment(item.item_id, self.name, None, "parse_failure", raw=json.dumps(failed),
                                    details={"failure": failed, "attempt_outputs": raws}))
                continue
            (fluency,), (found,), (supported, count) = (rounds.results[k] for k in keys)
            n_keypoints = len(item.metadata.get("keypoints") or [])
            rec = found / n_keypoints if n_keypoints > 0 else 0.0
            prec = supported / count if count > 0 else 0.0
            f1 = fluency * 2 * rec * prec / (rec + prec) if rec + prec > 0 else 0.0
            details = {"fluency": fluency, "recall_found": found, "recall_total": n_keypoints, "precision_found": supported,
                       "precision_total": count, "recall": rec, "precision": prec, "f1": f1}
            out.append(Judgment(item.item_id, self.name, 100.0 * f1, raw=json.dumps(details), details=details))
        return out

    def template_identity(self) -> str:
        return sha256_text("".join(prompt(n) for n in SUMM_VARIANTS[self.options["variant"]]))
