"""BABILong's answer matching, the authors' `compare_answers` (booydar/babilong
`babilong/metrics.py` at commit 7a6efee, unchanged in logic since 58e5d20 / d7a4fb7, 2024-06),
which the leaderboard's accuracies come from (`babilong/collect_results.py`):

- the answer is lower-cased and cut at its first `.`, then at `<context>`, `<example>` and
  `Question` (the last a no-op after lower-casing, kept as the authors have it);
- the task's labels found in it as substrings, less the labels the question itself names, must be
  exactly the target (qa8's comma-joined targets longer than 3 characters: exactly its parts).

So matching is by substring ("one" is in "none": a right qa7 "none" never scores), and only the
first sentence counts. The accuracy of a task at a length is the mean x 100; an empty answer
scores 0, as the authors' `fillna('')`.
"""

from __future__ import annotations

from typing import Any

from lceval.errors import UserError
from lceval.types import JudgeInput, Judgment

from lceval_plugins.judges.metric_base import MetricJudge

#: booydar/babilong babilong/metrics.py `TASK_LABELS`
TASK_LABELS: dict[str, list[str]] = {
    "qa1": ["bathroom", "bedroom", "garden", "hallway", "kitchen", "office"],
    "qa2": ["bathroom", "bedroom", "garden", "hallway", "kitchen", "office"],
    "qa3": ["bathroom", "bedroom", "garden", "hallway", "kitchen", "office"],
    "qa4": ["bathroom", "bedroom", "garden", "hallway", "kitchen", "office"],
    "qa5": ["Bill", "Fred", "Jeff", "Mary", "apple", "football", "milk"],
    "qa6": ["no", "yes"],
    "qa7": ["none", "one", "three", "two"],
    "qa8": ["apple", "football", "milk", "nothing"],
    "qa9": ["no", "yes"],
    "qa10": ["maybe", "no", "yes"],
    "qa11": ["bathroom", "bedroom", "garden", "hallway", "kitchen", "office"],
    "qa12": ["bathroom", "bedroom", "garden", "hallway", "kitchen", "office"],
    "qa13": ["bathroom", "bedroom", "garden", "hallway", "kitchen", "office"],
    "qa14": ["bedroom", "cinema", "kitchen", "office", "park", "school"],
    "qa15": ["cat", "mouse", "sheep", "wolf"],
    "qa16": ["gray", "green", "white", "yellow"],
    "qa17": ["no", "yes"],
    "qa18": ["no", "yes"],
    "qa19": ["e,e", "e,n", "e,s", "n,e", "n,n", "n,w", "s,e", "s,s", "s,w", "w,n", "w,s", "w,w"],
    "qa20": ["bedroom", "bored", "garden", "hungry", "kitchen", "thirsty", "tired"],
}


def preprocess_output(output: str) -> str:
    """metrics.py `preprocess_output`: lower case, the first sentence, no generated examples."""
    output = output.lower()
    output = output.split(".")[0]
    output = output.split("<context>")[0]
    output = output.split("<example>")[0]
    output = output.split("Question")[0]  # after lower(): never splits, as the authors' code
    return output


def compare_answers(target: str, output: str, question: str, task_labels: list[str]) -> bool:
    """metrics.py `compare_answers`: the labels named in the answer (not in the question) are
    exactly the target."""
    output = preprocess_output(output)
    target = target.lower()
    labels = {label.lower() for label in task_labels}
    in_question = {label for label in labels if label in question.lower()}
    in_output = {label for label in labels if label in output} - in_question
    if "," in target and len(target) > 3:
        parts = target.split(",")
        return all(t in in_output for t in parts) and len(in_output) == len(parts)
    return target in in_output and len(in_output) == 1


class BabilongJudge(MetricJudge):
    """`compare_answers` x 100 against the row's target, with the labels of the sample's task
    (its `task` metadata, or `options.task`) and the sample's question."""

    name = "babilong"
    OPTIONS = {"type": "object", "additionalProperties": False, "properties": {
        "task": {"enum": [None, *TASK_LABELS], "default": None,
                 "description": "The bAbI task whose labels to match (default: each sample's `task` metadata)."},
    }}

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        out = []
        for item in items:
            task = self.options["task"] or item.metadata.get("task")
            if task not in TASK_LABELS:
                raise UserError(f"item {item.item_id} names no bAbI task qa1-qa20 (metadata 'task': {task!r})",
                                field="judge.options.task", hint="Give the task: --judge babilong,task=qa1.")
            refs = item.metadata.get("references")
            target = str(refs[0]) if isinstance(refs, (list, tuple)) and refs else item.reference
            right = compare_answers(target, item.response, item.question, TASK_LABELS[task])
            details: dict[str, Any] = {"first_sentence": preprocess_output(item.response)[:200]}
            out.append(Judgment(item_id=item.item_id, judge=self.name, score=100.0 if right else 0.0,
                                raw="match" if right else "no match", details=details))
        return out
