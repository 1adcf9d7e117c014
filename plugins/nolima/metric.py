"""NoLiMa's scoring (adobe-research/NoLiMa at 7532e4e, evaluation/async_evaluate.py,
`_evaluate_response`): the gold answers are the character drawn for the needle (or the test's
`gold_answers`), matched against the answer as the model wrote it (the API's message content):

- `contains` (every run config of the paper): 1 if any gold answer is a substring of the answer,
  case-sensitive, nothing normalised;
- `EM`: the stripped answer is one of the gold answers;
- `lastline_contains`, `lastline_EM`: the same on the last line of the stripped answer (the
  chain-of-thought set's metrics).
"""

from __future__ import annotations

from typing import Any

from lceval.types import JudgeInput

from lceval_plugins.judges.metric_base import MetricJudge, metric_options

__all__ = ["NolimaJudge", "evaluate_response"]


def evaluate_response(response: str, gold: list[str], metric: str) -> int:
    """`_evaluate_response` of the authors' tester."""
    if metric == "EM":
        return int(response.strip() in gold)
    if metric == "contains":
        return int(any(g in response for g in gold))
    if metric == "lastline_EM":
        return int(response.strip().split("\n")[-1] in gold)
    return int(any(g in response.strip().split("\n")[-1] for g in gold))


class NolimaJudge(MetricJudge):
    """NoLiMa's metric x 100 (a sample scores 0 or 100; a length's score is the paper's accuracy)."""

    name = "nolima"
    AS_WRITTEN = True
    OPTIONS = metric_options({"metric": {"enum": ["contains", "EM", "lastline_contains", "lastline_EM"],
                                         "default": "contains",
                                         "description": "The authors' metric (run configs: contains)."}})

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        value = evaluate_response(prediction, references, self.options["metric"])
        return float(value), {"metric": self.options["metric"], "gold": references}
