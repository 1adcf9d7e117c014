"""Counting-Stars' scoring (nick7nlp/Counting-Stars at 32e16f2, `viz.ipynb`, `get_data_EN` /
`get_data_ZH`, `reduce_duplicate`, `get_reasoning_score`), on the answer as the model wrote it:

- the list under "little_penguin" (EN) or "小企鹅" (ZH) of the answer read as JSON: an answer
  holding ``` loses its fences and the word "json" and is read with `json_repair`; otherwise EN is
  read with `json.loads`, ZH with `json_repair` (an answer the authors' notebook cannot read stops
  it; here it scores 0, `parsed: false`);
- its first m entries, duplicates dropped (order no longer matters);
- searching (acquisition): star t scores 1 when its count is in the list; reasoning: 1 when only
  the right count is, 0.5 when both the right and the wrong one are, 0.25 when only the wrong one;
- a row scores the mean over its m stars, x 100 (the authors' accuracy is the mean over the
  star x length grid, every row holding m stars: the mean of the rows); `details.stars` keeps each
  star's score for the star x length heatmap.

`json_repair` (PyPI `json-repair`, a dependency of lceval) reads the answers the notebook reads
with it, so a fenced answer in single or curly quotes scores as it does there; `details.repair`
says which reader read the answer (`json`, `json_repair`, `none`).
"""

from __future__ import annotations

import json
from typing import Any

from lceval.errors import PackageMissing, UserError
from lceval.types import JudgeInput

from lceval_plugins.judges.metric_base import MetricJudge, metric_options

__all__ = ["CountingStarsJudge", "parse_answer", "score_row"]

KEYS = {"EN": "little_penguin", "ZH": "小企鹅"}


def _repair_loads(text: str) -> Any:
    """`json_repair.loads`, as the notebook reads fenced answers and every ZH answer."""
    try:
        import json_repair
    except ImportError:
        raise PackageMissing("Counting-Stars reads answers with json_repair, as its authors do, which is not installed",
                             field="judge.name", hint="pip install 'json-repair>=0.30,<1'") from None
    return json_repair.loads(text)


def parse_answer(answer: str, language: str) -> tuple[Any, bool, str]:
    """(the list under the language's key, whether it was read, which reader)."""
    key = KEYS[language]
    try:
        if "```" in answer:
            value, how = _repair_loads(answer.replace("```", "").replace("json", "").strip()), "json_repair"
        elif language == "EN":
            value, how = json.loads(answer), "json"
        else:
            value, how = _repair_loads(answer), "json_repair"
        return value[key], True, how
    except (ValueError, TypeError, KeyError, IndexError):
        return [], False, "none"


def reduce_duplicate(predicted: Any, m: int) -> set:
    if not isinstance(predicted, list):
        raise TypeError("not a list")
    return set(predicted[:m])


def score_row(predicted: Any, a: list[int], r: list[int], task: str) -> list[float]:
    """Each star's score."""
    m = len(a)
    try:
        found = reduce_duplicate(predicted, m)
    except TypeError:  # not a list, or unhashable entries: the authors' notebook stops
        found = set()
    out = []
    for t in range(m):
        if task == "searching":
            out.append(1.0 if a[t] in found else 0.0)
        else:
            right, wrong = a[t] in found, r[t] in found
            out.append(0.5 if right and wrong else 1.0 if right else 0.25 if wrong else 0.0)
    return out


class CountingStarsJudge(MetricJudge):
    """Counting-Stars' accuracy of one row (its m stars), x 100."""

    name = "counting_stars"
    AS_WRITTEN = True
    OPTIONS = metric_options({
        "task": {"enum": ["searching", "reasoning"], "default": "searching",
                 "description": "searching (acquisition: the count is listed) or reasoning (the right count, not the wrong one)."},
        "language": {"enum": ["EN", "ZH"], "default": "EN",
                     "description": "EN reads key little_penguin (json.loads), ZH key 小企鹅 (json_repair)."},
    })

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        a = [int(x) for x in item.metadata.get("stars") or json.loads(item.reference)]
        r = [int(x) for x in item.metadata.get("wrong_stars") or [0] * len(a)]
        predicted, parsed, how = parse_answer(prediction, self.options["language"])
        stars = score_row(predicted, a, r, self.options["task"])
        return sum(stars) / len(stars), {"stars": stars, "parsed": parsed, "repair": how}
