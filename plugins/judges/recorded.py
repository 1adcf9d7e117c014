"""`recorded` judge: the scores stored beside replayed responses.

Re-scoring published generations with the scores their authors recorded (GPT-4 judge,
Prometheus, expert and crowd humans for ELITR-Bench) lets a user check that lceval's
aggregation reproduces the paper's tables, and compare any other judge against them.
"""

from __future__ import annotations

from lceval import hookimpl
from lceval.interfaces import Judge, JudgeContext
from lceval.options import check_options
from lceval.types import JudgeInput, Judgment


class RecordedJudge(Judge):
    def __init__(self, source: str = "gpt-4-eval", scale: float = 1.0) -> None:
        self.source = source
        self.multiplier = scale
        self.name = f"recorded:{source}"

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        out = []
        for item in items:
            scores = item.generation_extras.get("recorded_scores") or {}
            value = scores.get(self.source)
            if value is None:
                out.append(Judgment(item_id=item.item_id, judge=self.name, score=None,
                                    parse_status="missing",
                                    raw=f"no recorded '{self.source}' score (have: {', '.join(sorted(scores)) or 'none'})"))
            else:
                out.append(Judgment(item_id=item.item_id, judge=self.name,
                                    score=float(value) * self.multiplier, raw=str(value)))
        return out

    def identity(self) -> dict:
        return {"judge": "recorded", "source": self.source, "multiplier": self.multiplier}


OPTIONS = {"type": "object", "additionalProperties": False, "properties": {
    "source": {"type": "string", "minLength": 1, "default": "gpt-4-eval",
               "description": "Which recorded score (e.g. gpt-4-eval, prometheus-eval, gold-human-eval)."},
    "multiplier": {"type": "number", "default": 1.0, "description": "Factor applied to the recorded score."},
}}


def make_recorded(ctx: JudgeContext) -> RecordedJudge:
    opts = check_options(OPTIONS, ctx.options, what="judge 'recorded'", field_prefix="judge.options.")
    return RecordedJudge(opts["source"], opts["multiplier"])


@hookimpl
def register_judges(register):
    register("recorded", make_recorded, options_schema=OPTIONS)
