"""NeedleBench V1's evaluators (open-compass/opencompass at a5acc4b,
opencompass/datasets/needlebench/), on the answer as the model wrote it:

- `origin` (NeedleBenchOriginEvaluator: single needle, and the ancestral-trace challenge): 100
  when the keyword is in the answer (case-sensitive); else 0.2 x 100 x (1 - Levenshtein distance /
  the longer length) between the answer and the needle, both without white space (`use_trim`
  false, as every config);
- `multi` (NeedleBenchMultiEvaluator: multi-needle reasoning): the share of the answer's words
  (lower-cased, split at white space) found in the lower-cased answer, x 100;
- `parallel` (NeedleBenchParallelEvaluator: multi-needle retrieval): the share of the needles'
  keywords found in the answer (case-sensitive), x 100: its mean over samples is the authors'
  `average_score` (the mean over depths of each depth's hits x 100 / samples); `details.found`
  says which needle (by depth) was found.
"""

from __future__ import annotations

import re
from typing import Any

from lceval.types import JudgeInput

from lceval_plugins.judges.metric_base import MetricJudge, metric_options
from lceval_plugins.judges.metrics_text import levenshtein

__all__ = ["NeedlebenchJudge", "levenshtein", "multi_score", "origin_score", "parallel_found"]


def origin_score(prediction: str, needle: str, keyword: str) -> tuple[float, int]:
    """(score 0-100, edit distance) of NeedleBenchOriginEvaluator.score."""
    pred, ref = re.sub(r"\s+", "", prediction), re.sub(r"\s+", "", needle)
    distance = levenshtein(pred, ref)
    longest = max(len(pred), len(ref))
    score = 100 * (1 - distance / longest) if longest != 0 else 100
    return (100.0 if keyword in prediction else 0.2 * score), distance


def multi_score(prediction: str, answer: str) -> float:
    """NeedleBenchMultiEvaluator.score of one answer (0-100)."""
    keywords = answer.lower().split()
    prediction = prediction.lower()
    if not keywords:
        return 0.0
    return sum(1 for k in keywords if k in prediction) * (100 / len(keywords))


def parallel_found(prediction: str, keywords: list[str]) -> list[bool]:
    return [k in prediction for k in keywords]


class NeedlebenchJudge(MetricJudge):
    """NeedleBench V1's score of one answer, 0-100."""

    name = "needlebench"
    AS_WRITTEN = True
    OPTIONS = metric_options({"mode": {"enum": ["origin", "multi", "parallel"], "default": "origin",
                                       "description": "origin: keyword or 0.2 x Levenshtein similarity (single "
                                                      "needle, atc); multi: share of the answer's words (multi-needle "
                                                      "reasoning); parallel: share of the needles found (multi-needle "
                                                      "retrieval)."}})

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        meta, mode = item.metadata, self.options["mode"]
        if mode == "origin":
            keyword = str(meta.get("keyword", item.reference))
            value, distance = origin_score(prediction, str(meta.get("needle", item.reference)), keyword)
            return value / 100, {"keyword_found": keyword in prediction, "edit_distance": distance}
        if mode == "multi":
            return multi_score(prediction, str(meta.get("answer", item.reference))) / 100, {}
        keywords = [str(k) for k in meta.get("keywords") or item.reference.split("*")]
        found = parallel_found(prediction, keywords)
        return sum(found) / len(found), {"found": found, "depths": meta.get("depths")}
