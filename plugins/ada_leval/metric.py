"""Ada-LEval's answer extraction and accuracy, as `StackSelect.evaluate` and `TextSort.evaluate`
compute them (open-compass/Ada-LEval `ada_leval/dataset.py`, commit 2154258d, last changed in 7e56779).

BestAnswer: the designation is the **highest-numbered** `A<k>` (k <= the number of answers) found
anywhere in the answer as a substring; failing that, the highest bare number `k` found anywhere
(`"A" + k`); failing that `???`. Right iff it equals the gold designation (`"A3"`).

TSort: the text after the first `Answer:` (stripped) parsed as JSON; if that fails, the one
permutation of 1-4 whose digits occur in that order in the text (a character subsequence), if
exactly one does; else `[0, 0, 0, 0]`. Right iff every position that `zip(answer, extracted)`
pairs agrees - so a shorter list that matches the gold's beginning (even `[]`) counts as right, as
in the authors' loop. A JSON value that is no list (`1234`, `null`) makes the authors' `zip` raise
and their evaluation stop; here it counts as wrong (LOOM-Scope's reading). `compare: exact` asks
for the whole list to be equal (LOOM-Scope's `extracted != answers`).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from lceval.errors import UserError
from lceval.types import JudgeInput

from lceval_plugins.judges.metric_base import MetricJudge, metric_options

#: the 24 orders of four segments, as digit strings ("1234" ...), in itertools' order
PERMUTATIONS = ["".join(str(x) for x in p) for p in itertools.permutations(range(1, 5))]


def extract_designation(prediction: str, num_choice: int) -> str:
    """`StackSelect.evaluate`'s `extract`: the highest `A<k>`, else the highest bare `k`, else `???`."""
    for template in ("A{}", "{}"):
        for k in range(num_choice, 0, -1):
            if prediction.find(template.format(k)) >= 0:
                return f"A{k}"
    return "???"


def is_subseq(needle: str, haystack: str) -> bool:
    """The characters of `needle` occur in `haystack` in order (`TextSort.evaluate`'s `is_subseq`)."""
    position = 0
    for c in needle:
        position = haystack.find(c, position) + 1
        if position == 0:
            return False
    return True


def extract_order(prediction: str) -> Any:
    """`TextSort.evaluate`'s `extract`: JSON after the first `Answer:`, else the one permutation of
    1-4 that is a subsequence of the text, else [0, 0, 0, 0]."""
    pred = prediction
    if "Answer:" in pred:
        pred = pred.split("Answer:")[1].strip()
    try:
        return json.loads(pred)
    except (ValueError, RecursionError):  # the authors' bare `except:` around json.loads
        found = [p for p in PERMUTATIONS if is_subseq(p, pred)]
        return [int(c) for c in found[0]] if len(found) == 1 else [0, 0, 0, 0]


def order_matches(answer: list[Any], extracted: Any, compare: str = "zip") -> bool:
    """The authors' check: every pair of `zip(answer, extracted)` equal (`compare: exact`: the
    whole lists equal). A value `zip` cannot pair (a number, null) is wrong."""
    if compare == "exact":
        return extracted == answer
    try:
        pairs = list(zip(answer, extracted))
    except TypeError:
        return False
    return all(a == e for a, e in pairs)


class BestAnswerJudge(MetricJudge):
    """Ada-LEval BestAnswer: accuracy of the extracted designation (`A<k>`) x 100."""

    name = "ada_leval_bestanswer"
    OPTIONS = metric_options({
        "num_choice_field": {"type": "string", "minLength": 1, "default": "num_choice",
                             "description": "The metadata field holding the number of candidate answers (the "
                                            "authors' `num_choice = len(all_answers)`)."}})

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        field = self.options["num_choice_field"]
        n = item.metadata.get(field)
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise UserError(f"sample {item.item_id} has no number of answers in metadata field {field!r} (got {n!r}): "
                            "the ada_leval dataset's rows carry it as num_choice", field="judge.options.num_choice_field")
        extracted = extract_designation(prediction, n)
        return float(extracted in references), {"extracted": extracted, "num_choice": n}


class TSortJudge(MetricJudge):
    """Ada-LEval TSort: accuracy of the extracted order of the four segments x 100."""

    name = "ada_leval_tsort"
    OPTIONS = metric_options({
        "compare": {"enum": ["zip", "exact"], "default": "zip",
                    "description": "zip: the authors' check (the positions zip pairs agree; a shorter list matching "
                                   "the start is right); exact: the whole list equal (LOOM-Scope)."}})

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        extracted = extract_order(prediction)
        gold = [json.loads(r) if isinstance(r, str) else r for r in references]
        right = any(order_matches(g, extracted, self.options["compare"]) for g in gold)
        return float(right), {"extracted": extracted}
