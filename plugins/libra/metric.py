"""LIBRA's score of one answer (ai-forever/LIBRA eval.py and evaluation/metrics.py).

eval.py, per answer: the metric of the task (configs/datasets_config.json `metric`) against each
positive output, the best of them; then, when the row has negative outputs, the number of them
found in the answer (a raw substring test): all of them found scores 0, else the score loses
1/len(negatives) for each one found, floored at 0. The metrics (`metric`):

- `em` (`exact_match_score`): 1 when the positive output is a substring of the answer;
- `count_score`: the share of the numbers in the answer that equal the positive output;
- `f1` (`qa_f1_score`): token F1 of the normalised texts split on white space.

`normalize: none` is the main branch (commit 94dcac0, the code of the paper's time): SQuAD's
lower case and punctuation removal for F1, nothing at all for `em` (case counts). `normalize:
lemmas` is the branch new-normalizer (commit ab4d829), which LOOM-Scope and
lm-evaluation-harness copy: every word lower-cased, stripped of all but `a-z а-я й 0-9 _`
(so "ё" goes) and replaced by pymorphy2's first lemma, for `em` and `f1` both (pymorphy3 here:
the same API and dictionaries; pymorphy2 does not import on Python 3.11).

The answer is read as the model wrote it (the authors score the decoded text unstripped).
"""

from __future__ import annotations

import re
import string
from typing import Any

from lceval.errors import PackageMissing, UserError
from lceval.types import JudgeInput

from lceval_plugins.judges.metric_base import MetricJudge, metric_options
from lceval_plugins.judges.metrics_text import token_f1

_PUNCTUATION = set(string.punctuation)
_NOT_KEPT = re.compile(r"[^a-zа-яй0-9_]+")
_NUMBER = re.compile(r"\d+")
_MORPH: Any = None


def normalize_answer(s: str) -> str:
    """main's metrics.py `normalize_answer`: lower case, ASCII punctuation removed, white space
    collapsed (no article removal)."""
    return " ".join("".join(ch for ch in s.lower() if ch not in _PUNCTUATION).split())


def _morph() -> Any:
    global _MORPH
    if _MORPH is None:
        try:
            import pymorphy3
        except ImportError:
            raise PackageMissing("normalize: lemmas lemmatises Russian words with pymorphy3, which is not installed",
                                 field="judge.options.normalize", hint="pip install 'lceval[russian]'") from None
        _MORPH = pymorphy3.MorphAnalyzer()
    return _MORPH


def lemmatize(sentence: str) -> str:
    """new-normalizer's metrics.py `normalize_answer`: each word's kept characters, lemmatised."""
    morph = _morph()
    words = []
    for word in sentence.split():
        token = _NOT_KEPT.sub("", word.lower())
        words.append(morph.parse(token)[0].normal_form.lower())
    return " ".join(words)


def exact_match_score(prediction: str, ground_truth: str, lemmas: bool) -> float:
    if lemmas:
        return 1.0 if lemmatize(ground_truth) in lemmatize(prediction) else 0.0
    return 1.0 if ground_truth in prediction else 0.0


def count_score(prediction: str, ground_truth: str, lemmas: bool = False) -> float:
    numbers = _NUMBER.findall(prediction)
    right = sum(1 for n in numbers if str(n) == str(ground_truth))
    return 0.0 if not numbers else right / len(numbers)


def qa_f1_score(prediction: str, ground_truth: str, lemmas: bool) -> float:
    norm = lemmatize if lemmas else normalize_answer
    return token_f1(norm(prediction).split(), norm(ground_truth).split())


METRICS = {"em": exact_match_score, "count_score": count_score, "f1": qa_f1_score}


def with_negatives(score: float, prediction: str, negatives: list[str]) -> tuple[float, int]:
    """eval.py's penalty: (the score, the negatives found)."""
    if not negatives:
        return score, 0
    found = sum(1 for n in negatives if n in prediction)
    if found == len(negatives):
        return 0.0, found
    return max(0.0, score - (1.0 / len(negatives)) * found), found


class LibraJudge(MetricJudge):
    """LIBRA's eval.py on one answer: the task's metric, the best over the positive outputs,
    less the negative outputs found."""

    name = "libra"
    version = 1
    AS_WRITTEN = True
    OPTIONS = metric_options({
        "metric": {"enum": sorted(METRICS),
                   "description": "configs/datasets_config.json's metric of the task: em (a positive output is a "
                                  "substring of the answer), count_score (ru_sci_passage_count), f1 (ru_qasper)."},
        "normalize": {"enum": ["none", "lemmas"], "default": "none",
                      "description": "none: the main branch (94dcac0; em compares the raw text); lemmas: the "
                                     "new-normalizer branch (ab4d829) that LOOM-Scope and lm-evaluation-harness use, "
                                     "pymorphy's lemmas (pip install 'lceval[russian]')."},
        "negatives_field": {"type": "string", "minLength": 1, "default": "negative_outputs",
                            "description": "The metadata field listing the row's negative outputs (absent or "
                                           "empty: no penalty)."},
    })
    OPTIONS["required"] = ["metric"]

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        lemmas = self.options["normalize"] == "lemmas"
        function = METRICS[self.options["metric"]]
        scores = [function(prediction, r, lemmas) for r in references]
        best = max(range(len(scores)), key=lambda i: scores[i])
        negatives = item.metadata.get(self.options["negatives_field"]) or []
        if not isinstance(negatives, (list, tuple)):
            raise UserError(f"item {item.item_id}: the negative outputs ({self.options['negatives_field']}) must be a "
                            f"list, got {negatives!r}", field="judge.options.negatives_field")
        value, found = with_negatives(scores[best], prediction, [str(n) for n in negatives])
        return value, {"best_reference": best, "positive_score": scores[best], "negatives_found": found}
