"""L-CiteEval's answer quality, as `script/eval_correct.py` computes it (ZetangForward/L-CITEEVAL,
commit 6e493267), one item at a time, x 100:

- `kind: qa` (narrativeqa, natural_questions, hotpotqa, 2wikimultihopqa, locomo, dialsim): the
  answer stripped, up to its first newline, citations removed; SQuAD's normalisation and token F1,
  precision or recall (`value`), each the best over a list of acceptable answers independently;
- `kind: summary` (gov_report, multi_news, qmsum): when "summary" is in the first 100 characters
  (lower case), everything up to the first `:` goes (no `:` at all: the item scores 0); then the
  first line, citations removed; an empty answer scores 0; ROUGE-L F of the `rouge` package (1.0.1)
  against the summary;
- `kind: niah`: the first line, citations removed; ROUGE-1 **recall** of the `rouge` package;
- `kind: counting_stars`: the JSON object from the first `{` to the first `}`; of its
  `little_penguin` list (cut to the number of counts), the share of values that are among the
  counts in the passages (each value counted, duplicates too); no JSON: 0.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Any

from lceval.types import JudgeInput

from lceval_plugins.judges.metric_base import MetricJudge, as_written, metric_options

from .citation import first_json_object, remove_citations


def normalize_answer(s: str) -> str:
    """SQuAD's normalisation: lower case, punctuation and articles removed, white space collapsed."""
    s = "".join(ch for ch in s.lower() if ch not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", s).split())


def token_scores(prediction: str, truth: str) -> tuple[float, float, float]:
    """(F1, precision, recall) of the normalised tokens (`qa_f1_score`)."""
    pred, gold = normalize_answer(prediction).split(), normalize_answer(truth).split()
    same = sum((Counter(pred) & Counter(gold)).values())
    if same == 0:
        return 0.0, 0.0, 0.0
    precision, recall = same / len(pred), same / len(gold)
    return 2 * precision * recall / (precision + recall), precision, recall


def first_line(text: str) -> str:
    text = text.strip()
    return text[:text.index("\n")] if "\n" in text else text


def rouge(prediction: str, reference: str, which: str, part: str) -> float:
    """The `rouge` package's score as `rouge_score` gets it (0 where the package raises)."""
    from rouge import Rouge

    try:
        return float(Rouge().get_scores([prediction], [reference], avg=True)[which][part])
    except Exception:  # noqa: BLE001 - the authors' bare except around get_scores (empty texts ...)
        return 0.0


class AnswerJudge(MetricJudge):
    """L-CiteEval answer quality: token F1 / precision / recall, ROUGE-L, ROUGE-1 recall or the
    counting accuracy, x 100."""

    name = "l_citeeval_answer"
    AS_WRITTEN = True
    OPTIONS = metric_options({
        "kind": {"enum": ["qa", "summary", "niah", "counting_stars"], "default": "qa",
                 "description": "qa: token F1 of the first line; summary: ROUGE-L F; niah: ROUGE-1 recall; "
                                "counting_stars: share of the counts found."},
        "value": {"enum": ["f1", "precision", "recall"], "default": "f1",
                  "description": "kind qa: which of the token scores (the paper reports precision and recall)."},
    })

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        kind, text = self.options["kind"], as_written(item)
        if kind == "qa":
            answer = remove_citations(first_line(text))
            best = [0.0, 0.0, 0.0]
            for ref in references:
                best = [max(a, b) for a, b in zip(best, token_scores(answer, ref))]
            f1, precision, recall = best
            value = {"f1": f1, "precision": precision, "recall": recall}[self.options["value"]]
            return value, {"f1": 100 * f1, "precision": 100 * precision, "recall": 100 * recall}
        if kind == "counting_stars":
            counts = [int(c) for c in item.metadata.get("gold_counts") or []]
            parsed = first_json_object(text)
            found = parsed.get("little_penguin") if isinstance(parsed, dict) else None
            if not counts or not isinstance(found, list):
                return 0.0, {"parsed": isinstance(parsed, dict)}
            right = sum(1 for v in found[:len(counts)] if v in counts)
            return right / len(counts), {"parsed": True, "counted": found[:len(counts)]}
        answer = text.strip()
        if kind == "summary" and "summary" in answer[:100].lower():
            if ":" not in answer:
                return 0.0, {"no_colon": True}
            answer = answer[answer.index(":") + 1:].strip()
        answer = remove_citations(first_line(answer))
        if kind == "summary" and answer == "":
            return 0.0, {"empty": True}
        which, part = ("rouge-l", "f") if kind == "summary" else ("rouge-1", "r")
        return max(rouge(answer, ref, which, part) for ref in references), {}
