"""Number and word extraction, as InfiniteBench's and LongBench's scorers do it.

References are text (the `documents` task type turns numbers into text and a list answer
such as InfiniteBench math_calc's values into JSON); each mode reads them back as its
benchmark's label.
"""

from __future__ import annotations

import json
import re
from typing import Any

from lceval.errors import UserError
from lceval.types import JudgeInput

from .metric_base import MetricJudge, metric_options


def first_int_match(prediction: str) -> str:
    """OpenBMB/InfiniteBench src/compute_scores.py `first_int_match`: the first run of digits."""
    for item in re.split("[^0-9]", prediction):
        if item != "":
            return item
    return ""


def first_number(prediction: str, label: str) -> tuple[bool, str | None]:
    """OpenBMB/InfiniteBench src/compute_scores.py `get_score_one_math_find`: the first int or
    float of the answer, compared as the label's type (an integer label compares integers).
    Where the authors' `int()` would raise (a decimal answer to an integer label) it is wrong."""
    found = re.search(r"\d+\.\d+|\d+", prediction)
    if found is None:
        return False, None
    text = found.group(0).strip()
    if re.fullmatch(r"-?\d+", label.strip()):
        return ("." not in text and int(text) == int(label)), text
    try:
        return float(text) == float(label), text
    except ValueError:
        return False, text


def last_int(prediction: str) -> int | None:
    """OpenBMB/InfiniteBench src/compute_scores.py `get_score_one_code_run`: the last word, as
    an integer (None when it is not one)."""
    pred = prediction.strip()
    for c in ["\n", ".", "`", "'", '"', ":"]:
        pred = pred.replace(c, " ")
    words = pred.split()
    if not words:
        return None
    try:
        return int(words[-1])
    except ValueError:
        return None


def count_share(prediction: str, ground_truth: str) -> float:
    """THUDM/LongBench LongBench/metrics.py `count_score` (and, with the reference's number
    taken out first, `retrieval_score`): the share of the numbers in the answer that are the
    right one."""
    numbers = re.findall(r"\d+", prediction)
    right = sum(1 for number in numbers if str(number) == str(ground_truth))
    return 0.0 if len(numbers) == 0 else right / len(numbers)


def sequence_prefix(prediction: str, label: list[int], drop_first: bool = False) -> float:
    """OpenBMB/InfiniteBench src/compute_scores.py `get_score_one_math_calc`: how many values
    from the start are right, over the label's length; `drop_first`: the answer's first number
    is left out first, as the authors do for GPT-4 (`if model_name == "gpt4": pred_nums =
    pred_nums[1:]`: their GPT-4 prompt has it echo the expression's first number)."""
    pred_nums = [int(item) for item in re.split("[^0-9]", prediction) if item != ""]
    if drop_first:
        pred_nums = pred_nums[1:]
    cnt = 0
    for i in range(len(label)):
        if i >= len(pred_nums):
            break
        if label[i] == pred_nums[i]:
            cnt += 1
        else:
            break
    return cnt / len(label)


def _label_sequence(references: list[str], item: JudgeInput) -> list[int]:
    """math_calc's label: a JSON list (the answer field held a list of values) or the
    references themselves (one value each)."""
    first = references[0].strip()
    values: Any = None
    if first.startswith("["):
        try:
            values = json.loads(first)
        except ValueError:
            values = None
        while isinstance(values, list) and len(values) == 1 and isinstance(values[0], list):
            values = values[0]  # InfiniteBench's math_calc answer is [[v1, v2, ...]]
    else:
        values = references
    try:
        out = [int(v) for v in values]  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise UserError(f"item {item.item_id}: the reference {references[0][:60]!r} is no list of integers",
                        field="judge.options.mode") from None
    if not out:
        raise UserError(f"item {item.item_id}: the reference is an empty list", field="judge.options.mode")
    return out


class NumericJudge(MetricJudge):
    """Numeric match. Modes: `first_int` (InfiniteBench passkey, number_string:
    `first_int_match` equals the label), `first_number` (math_find), `last_int` (code_run),
    `share` (LongBench passage_count `count_score`; with `reference_pattern: 'Paragraph
    (\\d+)'`, passage_retrieval_en `retrieval_score`), `sequence` (math_calc: values right from
    the start; `drop_first_number` for the GPT-4 route). Several references score the best of
    them (one for `sequence`)."""

    name = "numeric"
    OPTIONS = metric_options({
        "mode": {"enum": ["first_int", "first_number", "last_int", "share", "sequence"], "default": "first_int",
                 "description": "first_int / first_number / last_int: that number of the answer equals the "
                                "reference; share: the share of the answer's numbers that equal it; sequence: "
                                "the share of a list of values right from the start."},
        "reference_pattern": {"type": ["string", "null"], "default": None,
                              "description": "A regular expression whose first group takes the number out of the "
                                             "reference (LongBench's 'Paragraph (\\d+)')."},
        "drop_first_number": {"type": "boolean", "default": False,
                              "description": "sequence only: leave the answer's first number out (InfiniteBench's "
                                             "math_calc scored for GPT-4, whose prompt has it echo the first "
                                             "operand)."},
    })

    def __init__(self, options: Any) -> None:
        super().__init__(options)
        pattern = self.options["reference_pattern"]
        try:
            self._pattern = re.compile(pattern) if pattern else None
        except re.error as exc:
            raise UserError(f"reference_pattern {pattern!r} is no regular expression: {exc}",
                            field="judge.options.reference_pattern") from None
        if self._pattern is not None and self._pattern.groups < 1:
            raise UserError(f"reference_pattern {pattern!r} needs a group ( ... ) around the number",
                            field="judge.options.reference_pattern")

    def _reference(self, ref: str, item: JudgeInput) -> str:
        if self._pattern is None:
            return ref.strip()
        found = self._pattern.findall(ref)
        if not found:
            raise UserError(f"item {item.item_id}: reference_pattern finds nothing in the reference {ref[:60]!r}",
                            field="judge.options.reference_pattern")
        first = found[0]
        return first[0] if isinstance(first, tuple) else first

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        mode = self.options["mode"]
        if mode == "sequence":
            label = _label_sequence(references, item)
            return sequence_prefix(prediction, label, self.options["drop_first_number"]), {"values": len(label)}
        best, extracted = 0.0, None
        for raw in references:
            ref = self._reference(raw, item)
            if mode == "first_int":
                extracted = first_int_match(prediction)
                value = 1.0 if extracted == ref else 0.0
            elif mode == "first_number":
                ok, extracted = first_number(prediction, ref)
                value = 1.0 if ok else 0.0
            elif mode == "last_int":
                found = last_int(prediction)
                extracted = None if found is None else str(found)
                value = 1.0 if found is not None and re.fullmatch(r"-?\d+", ref) and found == int(ref) else 0.0
            else:
                value = count_share(prediction, ref)
                extracted = ",".join(re.findall(r"\d+", prediction))[:200]
            best = max(best, value)
        return best, {"extracted": extracted or None}


_PUNCT = ["\n", ":", '"', "'", ".", ",", "?", "!", "{", "}"]


def answer_words(prediction: str, upper: bool) -> list[str]:
    """OpenBMB/InfiniteBench src/compute_scores.py `get_score_one_kv_retrieval` and
    `get_score_one_longdialogue_qa_eng`: punctuation to spaces, split (upper-cased for the
    dialogue task)."""
    pred = prediction.strip() if upper else prediction
    for c in _PUNCT:
        pred = pred.replace(c, " ")
    words = pred.split()
    return [w.upper() for w in words] if upper else words


class WordMatchJudge(MetricJudge):
    """1 when a reference is one of the answer's words: InfiniteBench kv_retrieval
    (`get_score_one_kv_retrieval`) and, with `upper: true` and `references: first`,
    longdialogue_qa_eng (`get_score_one_longdialogue_qa_eng`: the words upper-cased, only the
    first label `label[0]`, as given: a label with a space never matches)."""

    name = "word_match"
    OPTIONS = metric_options({
        "upper": {"type": "boolean", "default": False,
                  "description": "Upper-case the answer's words (InfiniteBench's dialogue task; its labels are "
                                 "upper-case names)."},
    })

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        words = answer_words(prediction, self.options["upper"])
        hit = next((r for r in references if r in words), None)
        return (1.0 if hit is not None else 0.0), {"matched": hit}
