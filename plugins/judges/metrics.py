"""Reference-based metrics, as judges a spec names (`judge: {name: string_match, options:
{mode: all}}`): no model, deterministic, each following the code of the benchmark that
defined it, cited on the metric.

Every metric scores on 0-100 (the percent the benchmarks' own tables print) and reads the
acceptable answers of an item from `metadata["references"]` (a list of strings, set by the
task type: several needles that must all be found, several phrasings of one answer) or, when
absent, the item's single `reference`.

The metrics (each cites the file of the benchmark code it follows):

- `string_match` (here): RULER's substring match, all or any (`part`) of the references;
- `exact_match`, `f1`, `rouge_l`, `code_sim`, `classification` (`metrics_text`): SQuAD-style
  exact match and token F1 as LongBench and InfiniteBench compute them (and InfiniteBench's
  Chinese character F1), ROUGE-L with the `rouge` package as LongBench calls it or with the
  `rouge-score` package as InfiniteBench does, LongBench's code similarity and few-shot
  classification score;
- `choice` (`metrics_choice`): the letter of a multiple-choice answer, extracted with
  LongBench v2's or InfiniteBench's rules;
- `numeric`, `word_match` (`metrics_numeric`): InfiniteBench's and LongBench's number
  extraction (first, last, share of numbers, a sequence) and word-in-answer matches.

A metric judge never fails an item for its format: an answer with nothing to extract scores
0 with `details["extracted"]` None, as the benchmarks' own scripts count it. Every metric also
takes `first_line`, `references` (best or first) and `empty_answer` (score, or missing as
LongBench v2 leaves an empty answer out), and reads the answer as the model wrote it where
the benchmark's score depends on it (`metric_base`).
"""

from __future__ import annotations

import re
from typing import Any, Callable

from lceval import hookimpl
from lceval.interfaces import Judge, JudgeContext
from lceval.types import JudgeInput, Judgment

from .metric_base import references_of
from .metrics_choice import ChoiceJudge
from .metrics_numeric import NumericJudge, WordMatchJudge
from .metrics_text import ClassificationJudge, CodeSimJudge, ExactMatchJudge, F1Judge, RougeLJudge

#: RULER strips the prediction and turns every control character into a newline
#: (NVIDIA/RULER scripts/eval/evaluate.py, postprocess_pred)
_CONTROL = re.compile(r"[\x00-\x1f]")


def ruler_prediction(text: str) -> str:
    """NVIDIA/RULER scripts/eval/evaluate.py `postprocess_pred`."""
    return _CONTROL.sub("\n", text.strip()).strip()


def string_match_all(prediction: str, references: list[str]) -> float:
    """NVIDIA/RULER scripts/eval/synthetic/constants.py `string_match_all`, for one item:
    the share of the references found in the prediction (case-insensitive), x 100."""
    pred = prediction.lower()
    return 100.0 * sum(1.0 for r in references if r.lower() in pred) / len(references)


def string_match_part(prediction: str, references: list[str]) -> float:
    """NVIDIA/RULER scripts/eval/synthetic/constants.py `string_match_part`, for one item:
    100 when any reference is found in the prediction (case-insensitive), else 0."""
    pred = prediction.lower()
    return 100.0 * max(1.0 if r.lower() in pred else 0.0 for r in references)


STRING_MATCH_OPTIONS = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "mode": {"enum": ["all", "part"], "default": "all",
                 "description": "all: the share of the references found (RULER's niah, variable tracking, "
                                "word extraction); part: any reference found (RULER's qa)."},
    },
}


class StringMatchJudge(Judge):
    """RULER's string match: a task's score is the mean of these per-item scores, which is
    exactly RULER's `string_match_all` / `string_match_part` over the task's items."""

    name = "string_match"
    scale = (0.0, 100.0)

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self._score: Callable[[str, list[str]], float] = string_match_all if mode == "all" else string_match_part

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        out = []
        for item in items:
            refs = references_of(item)
            pred = ruler_prediction(item.response)
            found = [r for r in refs if r.lower() in pred.lower()]
            out.append(Judgment(item_id=item.item_id, judge=self.name, score=self._score(pred, refs),
                                raw=f"found {len(found)} of {len(refs)}",
                                details={"found": len(found), "references": len(refs)}))
        return out

    def identity(self) -> dict[str, Any]:
        return {"judge": self.name, "mode": self.mode, "version": 1}


def make_string_match(ctx: JudgeContext) -> StringMatchJudge:
    return StringMatchJudge(ctx.options["mode"])


@hookimpl
def register_judges(register: Callable[..., None]) -> None:
    register("string_match", make_string_match, options_schema=STRING_MATCH_OPTIONS)
    for cls in (ExactMatchJudge, F1Judge, RougeLJudge, CodeSimJudge, ClassificationJudge, ChoiceJudge,
                NumericJudge, WordMatchJudge):
        register(cls.name, cls, options_schema=cls.OPTIONS)
