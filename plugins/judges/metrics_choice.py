"""Multiple-choice accuracy: the letter the answer gives, extracted as the benchmark's own
code extracts it, compared with the correct one.

The correct letter comes from the item's metadata: `answer_letter` (the `documents` task
type sets it from the answer and the choices), else the reference itself when it is one
letter (LongBench v2's `answer` is "A".."D"), else the position of the reference among
`metadata["choices"]`.
"""

from __future__ import annotations

import re
from typing import Any

from lceval.errors import UserError
from lceval.types import JudgeInput

from .metric_base import MetricJudge, metric_options

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def extract_longbench_v2(response: str) -> str | None:
    """THUDM/LongBench pred.py `extract_answer` (LongBench v2), verbatim: asterisks removed,
    then "The correct answer is (X)", then "The correct answer is X"."""
    response = response.replace("*", "")
    match = re.search(r"The correct answer is \(([A-D])\)", response)
    if match:
        return match.group(1)
    match = re.search(r"The correct answer is ([A-D])", response)
    if match:
        return match.group(1)
    return None


def infinitebench_choice(pred: str, label: list[str]) -> bool:
    """OpenBMB/InfiniteBench src/compute_scores.py `get_score_one_longbook_choice_eng`,
    verbatim; `label` is [the correct option's text, its letter] (`get_answer`)."""
    pred = pred.strip()
    if pred == "":
        return False
    if pred[0] in "ABCD":
        return pred[0] in label
    if pred in label:
        return True
    for c in ["\n", '"', "'", ".", ",", "?", "!", "{", "}"]:
        pred = pred.replace(c, " ")
    while "  " in pred:
        pred = pred.replace("  ", " ")
    ans_prefixes = ["answer is:", "answer:", "answer is", "option is"]
    for prefix in ans_prefixes:
        idx = pred.find(prefix)
        if idx == -1:
            continue
        if len(pred) < idx + len(prefix) + 1:
            return False
        after_prefix = pred[idx + len(prefix) + 1:]
        for s in label:
            if after_prefix.startswith(s):
                return True
        return False
    words = pred.split()
    for word in words:
        if word in "ABCD":
            return word in label
    return False


def infinitebench_code_debug(pred: str, label: list[str]) -> bool:
    """OpenBMB/InfiniteBench src/compute_scores.py `get_score_one_code_debug`, verbatim;
    `label` is [the function's name, its letter]."""
    pred = pred.strip()
    label_c = label[1]
    fn_name = label[0]
    if pred[:2] in [f"{label_c}.", f"{label_c}:"]:
        return True
    ans_prefixes = ["answer is:", "is:", "answer:", "correct option is:"]
    pred = pred.strip()
    for c in ["\n", "`", "'", '"', "-", "*", "Option", "option"]:
        pred = pred.replace(c, " ")
    while "  " in pred:
        pred = pred.replace("  ", " ")
    for prefix in ans_prefixes:
        idx = pred.find(prefix)
        if idx == -1:
            continue
        if len(pred) < idx + len(prefix) + 1:
            return False
        pred = pred[idx + len(prefix) + 1:]
        for s in [label_c, fn_name]:
            if pred.startswith(s):
                return True
        return False
    return False


def correct_letter(item: JudgeInput, references: list[str]) -> tuple[str, str | None]:
    """(letter, the correct option's text when the choices are known) of an item."""
    choices = item.metadata.get("choices")
    choices = [str(c) for c in choices] if isinstance(choices, (list, tuple)) else None
    letter = item.metadata.get("answer_letter")
    ref = references[0].strip()
    if not isinstance(letter, str) or len(letter) != 1:
        if re.fullmatch(r"[A-Z]", ref):
            letter = ref
        elif choices and references[0] in choices:
            letter = LETTERS[choices.index(references[0])]
        else:
            raise UserError(f"item {item.item_id}: cannot tell the correct letter: the reference "
                            f"{references[0][:60]!r} is no letter and no choice", field="judge.name",
                            hint="A choice task needs the choices in metadata['choices'] or a letter as reference "
                                 "(documents: fields.choices).")
    text = choices[LETTERS.index(letter)] if choices and LETTERS.index(letter) < len(choices) else None
    return letter, text


class ChoiceJudge(MetricJudge):
    """Accuracy of a multiple-choice answer. `style: longbench_v2` extracts the letter with
    THUDM/LongBench pred.py `extract_answer` (no letter found scores 0, as the authors count
    it); `infinitebench` is OpenBMB/InfiniteBench `get_score_one_longbook_choice_eng` (first
    letter, the option's text, "answer is ...", the first lone A-D); `infinitebench_code_debug`
    is its `get_score_one_code_debug` (the letter or the function's name after "answer is:")."""

    name = "choice"
    OPTIONS = metric_options({
        "style": {"enum": ["longbench_v2", "infinitebench", "infinitebench_code_debug"], "default": "longbench_v2",
                  "description": "Whose extraction rules: LongBench v2's pred.py, InfiniteBench's longbook_choice_eng "
                                 "or code_debug scorer."},
    })

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        letter, text = correct_letter(item, references)
        style = self.options["style"]
        if style == "longbench_v2":
            found = extract_longbench_v2(prediction)
            return (1.0 if found == letter else 0.0), {"extracted": found, "correct": letter}
        label = [text if text is not None else references[0], letter]
        rule = infinitebench_choice if style == "infinitebench" else infinitebench_code_debug
        ok = rule(prediction, label)
        return (1.0 if ok else 0.0), {"correct": letter}
