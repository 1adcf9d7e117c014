"""GraphWalks' grader: the node list of the answer's last line against the gold node set, F1.

Follows the grader of the dataset card (Hugging Face `openai/graphwalks`, README.md at revision
be6cc6ecf9b4d495b07d1ff53d2a16598e90fed7, the one tasks/graphwalks/ pins):

- the answer's very last line (`response.split("\\n")[-1]`: an answer that ends with a newline
  has an empty last line) must contain `Final Answer:`, else the answer is unparsed;
- the list is the first `[` to the last `]` of that line (`re.search(r"\\[.*\\]", line)`),
  brackets stripped, split at commas, items stripped, empty items dropped; no brackets:
  unparsed;
- unparsed scores 0; an empty answer set against an empty gold set scores 1; otherwise the
  F1 of the answer set against the gold set (0 when nothing overlaps).

The card's first version (2025-04, `grader: card_2025`) searched `Final Answer: ?\\[.*\\]`, so
the match began with "Final Answer:" and `.strip("[]")` could not remove the list's opening
bracket: the first node of every answer was lost (a right one-node answer scored 0), and it
had no rule for unparsed or empty sets (F1 0 where nothing overlaps, an empty gold set 0). It
is kept to reproduce numbers computed with it, not as a choice.

The answer is scored as the model wrote it (`JudgeInput.raw_response`), as the card's runner
scores the API's message content; `strip: true` scores it stripped of surrounding white space
(not the card's rule: a trailing newline then no longer fails an answer).
"""

from __future__ import annotations

import re
from typing import Any

from lceval.types import JudgeInput, Judgment

from lceval_plugins.judges.metric_base import MetricJudge

_LIST = re.compile(r"\[.*\]")
_LIST_2025 = re.compile(r"Final Answer: ?\[.*\]")


def get_list(response: str, grader: str = "be6cc6ec") -> tuple[list[str], bool]:
    """(the answer's nodes, failed to parse), as the card's `get_list`."""
    line = response.split("\n")[-1]
    if "Final Answer:" not in line:
        return [], True
    match = (_LIST if grader == "be6cc6ec" else _LIST_2025).search(line)
    if not match:
        return [], True
    items = match.group(0).strip("[]").split(",")
    return [item.strip() for item in items if item.strip()], False


def set_scores(sampled: list[str], failed: bool, gold: list[str], grader: str = "be6cc6ec") -> dict[str, float]:
    """F1, precision and recall (0-1) of the answer's node set against the gold set."""
    sampled_set, truth_set = set(sampled), set(gold)
    n_golden, n_sampled = len(truth_set), len(sampled_set)
    if grader == "be6cc6ec" and failed:
        return {"f1": 0.0, "precision": 0.0, "recall": 0.0}
    if grader == "be6cc6ec" and n_golden == n_sampled == 0:
        return {"f1": 1.0, "precision": 1.0, "recall": 1.0}
    n_overlap = len(sampled_set & truth_set)
    recall = n_overlap / n_golden if n_golden > 0 else 0.0
    precision = n_overlap / n_sampled if n_sampled > 0 else 0.0
    f1 = 2 * (recall * precision) / (recall + precision) if recall + precision > 0 else 0.0
    return {"f1": f1, "precision": precision, "recall": recall}


class GraphWalksJudge(MetricJudge):
    """The card's set F1 of the answer's `Final Answer: [...]` nodes against `answer_nodes`
    (the sample's `references`, which may be empty), x 100; precision, recall and whether the
    answer parsed are in the details (`report.metrics: [precision, recall]` reports them)."""

    name = "graphwalks"
    OPTIONS = {"type": "object", "additionalProperties": False, "properties": {
        "grader": {"enum": ["be6cc6ec", "card_2025"], "default": "be6cc6ec",
                   "description": "be6cc6ec: the card's grader at that revision (list between brackets; unparsed 0, "
                                  "two empty sets 1); card_2025: its first version, which loses each answer's first "
                                  "node (to reproduce numbers made with it)."},
        "strip": {"type": "boolean", "default": False,
                  "description": "Score the answer stripped of surrounding white space (default: as written, as "
                                 "the card scores the API's text: a trailing newline leaves an empty last line)."},
    }}

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        grader = self.options["grader"]
        out = []
        for item in items:
            text = item.response if self.options["strip"] else (item.raw_response or item.response)
            gold = item.metadata.get("references")
            gold = [str(g) for g in gold] if isinstance(gold, (list, tuple)) else [item.reference]
            sampled, failed = get_list(text, grader)
            scores = set_scores(sampled, failed, gold, grader)
            details: dict[str, Any] = {"precision": 100.0 * scores["precision"], "recall": 100.0 * scores["recall"],
                                       "parsed": not failed, "answer_nodes": len(set(sampled)),
                                       "gold_nodes": len(set(gold))}
            out.append(Judgment(item_id=item.item_id, judge=self.name, score=100.0 * scores["f1"],
                                raw=f"f1 {scores['f1']:.4f} ({'parsed' if not failed else 'no Final Answer list'})",
                                details=details))
        return out
