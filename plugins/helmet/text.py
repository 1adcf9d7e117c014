"""HELMET's text helpers, rewritten from the authors' code (princeton-nlp/HELMET at commit
4526dfbdc512bd9ff721da336bff4e3e75ecfd27, MIT): the templates are Python format strings filled
with a row's fields (`data.py`), answers are parsed after a prefix (`utils.py` `parse_output`),
normalised as SQuAD / DensePhrases do (`normalize_answer`) and scored by exact match, token F1,
substring exact match and ROUGE-L (`calculate_metrics`); re-ranking answers are parsed into a
ranking (`parse_rankings`) scored by trec_eval's NDCG@k (`calculate_retrieval_metrics`, through
pytrec_eval there, computed here).

Nothing here is the authors' code: each function follows the one named in its docstring, and
tests/plugins/helmet check them against the authors' functions on our own inputs.
"""

from __future__ import annotations

import hashlib
import math
import re
import string
from collections import Counter
from string import Formatter
from typing import Any, Mapping

from lceval.errors import UserError

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def fill(template: str, values: Mapping[str, Any], field: str) -> str:
    """`template.format(**values)` as the authors' loaders call it, limited to plain field names
    (`{question}`; `{{` and `}}` for braces): no attribute or index lookups, no conversions or
    format specs, so a spec's template cannot reach into Python objects."""
    out: list[str] = []
    try:
        parsed = list(Formatter().parse(template))
    except ValueError as exc:
        raise UserError(f"template is no Python format string: {exc}", field=field) from None
    for literal, name, spec, conversion in parsed:
        out.append(literal)
        if name is None:
            continue
        if not name.isidentifier() or spec or conversion:
            raise UserError(f"template field {{{name}{'!' + conversion if conversion else ''}"
                            f"{':' + spec if spec else ''}}} is not a plain field name", field=field)
        if name not in values:
            raise UserError(f"template uses {{{name}}}, which is no field here (fields: "
                            f"{', '.join(sorted(values))})", field=field)
        out.append(str(values[name]))
    return "".join(out)


def template_names(template: str) -> list[str]:
    """The field names a format string uses."""
    return [name for _, name, _, _ in Formatter().parse(template) if name is not None]


def hashed_seed(text: str, offset: int = 0) -> int:
    """data.py's per-question seed: `int(sha256(text).hexdigest(), 16)` (+ the run's seed for
    ICL) modulo 2**31."""
    return (int(hashlib.sha256(text.encode("utf-8")).hexdigest(), 16) + offset) % 2**31


def permutation(n: int, seed: int) -> list[int]:
    """The order `datasets.Dataset.shuffle(seed=seed)` puts n rows in
    (`np.random.default_rng(seed).permutation(n)`)."""
    import numpy as np

    return [int(i) for i in np.random.default_rng(seed).permutation(n)]


# -- utils.py: normalisation and the QA metrics ------------------------------------------------------


def normalize_answer(s: str) -> str:
    """utils.py `normalize_answer`: lower case, punctuation removed, articles removed, white space
    collapsed (in that order)."""
    s = "".join(ch for ch in s.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def f1_score(prediction: str, ground_truth: str) -> float:
    """utils.py `f1_score` (its F1): token F1 after normalisation; yes/no/noanswer must match exactly."""
    pred, gold = normalize_answer(prediction), normalize_answer(ground_truth)
    if pred in ("yes", "no", "noanswer") and pred != gold:
        return 0.0
    if gold in ("yes", "no", "noanswer") and pred != gold:
        return 0.0
    p_tokens, g_tokens = pred.split(), gold.split()
    same = sum((Counter(p_tokens) & Counter(g_tokens)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p_tokens), same / len(g_tokens)
    return 2 * precision * recall / (precision + recall)


def flat_answers(answers: Any) -> list[str]:
    """`drqa_metric_max_over_ground_truths`' answers: one string, a list, or a list of alias lists."""
    if isinstance(answers, str):
        return [answers]
    if answers and isinstance(answers[0], list):
        return [str(a) for group in answers for a in group]
    return [str(a) for a in answers]


_ROUGE: Any = None


def _rouge() -> Any:
    global _ROUGE
    if _ROUGE is None:
        from rouge_score import rouge_scorer

        _ROUGE = rouge_scorer.RougeScorer(["rougeL", "rougeLsum"], use_stemmer=True)
    return _ROUGE


def calculate_metrics(prediction: str, answers: Any) -> dict[str, float]:
    """utils.py `calculate_metrics`: exact match, F1 and substring exact match (best over the
    answers) and ROUGE-L / ROUGE-Lsum F1 and recall (rouge-score with the Porter stemmer, best
    over the answers), each 0-1."""
    refs = flat_answers(answers)
    norm_pred = normalize_answer(prediction)
    out = {
        "exact_match": float(max(norm_pred == normalize_answer(a) for a in refs)),
        "f1": max(f1_score(prediction, a) for a in refs),
        "substring_exact_match": float(max(normalize_answer(a) in norm_pred for a in refs)),
    }
    scores = [_rouge().score(target=a, prediction=prediction) for a in refs]
    for key in ("rougeL", "rougeLsum"):
        out[f"{key}_f1"] = max(s[key].fmeasure for s in scores)
        out[f"{key}_recall"] = max(s[key].recall for s in scores)
    return out


def parse_output(output: str, prefix: str = "Answer:") -> str | None:
    """utils.py `parse_output`: the rest of the line after the first `prefix` (case-insensitive),
    else the first line; the prefix stripped again from its start (chat models repeat it)."""
    for pattern in (re.compile(f"(?:{prefix})(.*)(?:\n|$)", flags=re.IGNORECASE),
                    re.compile(r"(?:^)(.*)(?:\n|$)")):
        match = pattern.search(output)
        if match is not None:
            return re.sub(f"^{re.escape(prefix)}", "", match[1].strip(), flags=re.IGNORECASE).strip()
    return None


def remove_citations(sent: str) -> str:
    """utils.py `remove_citations`: `[n]` markers removed."""
    return re.sub(r"\[\d+", "", re.sub(r" \[\d+", "", sent)).replace(" |", "").replace("]", "")


# -- re-ranking ----------------------------------------------------------------------------------


def parse_rankings(output: str) -> dict[str, int]:
    """utils.py `parse_rankings`: brackets, colons and "id" removed, the longest run of integers
    joined by `>` is the ranking; each id scored (length - position) at its first place. No
    integers: the whole (lower-cased) text is one id."""
    text = re.sub(r"[\[\]:]", "", output).lower().replace("id", "")
    longest = ""
    for match in re.finditer(r"(\d+)(?:\s*>\s*(\d+))*", text):
        if len(match.group(0)) > len(longest):
            longest = match.group(0)
    if longest:
        ranking = [n.strip() for n in longest.split(">") if n.strip().isdigit()]
    else:
        ranking = [text]
    results: dict[str, int] = {}
    for i, doc in enumerate(ranking):
        if doc not in results:
            results[doc] = len(ranking) - i
    return results


def ndcg_at(results: Mapping[str, float], qrels: Mapping[str, int], k: int) -> float:
    """trec_eval's `ndcg_cut.k` of one query, as pytrec_eval computes it for
    `calculate_retrieval_metrics`: the retrieved documents ranked by score (ties: document id,
    descending), gain = the graded label (0 for a document without one), discount log2(rank + 1),
    over the ideal ranking of the labels; 0 when no label is positive."""
    ranked = sorted(results.items(), key=lambda kv: (-kv[1], _neg(kv[0])))[:k]
    dcg = sum(max(qrels.get(doc, 0), 0) / math.log2(i + 2) for i, (doc, _) in enumerate(ranked))
    ideal = sorted((g for g in qrels.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


class _neg(str):
    """A string ordered backwards (trec_eval breaks score ties by document id, descending)."""

    def __lt__(self, other: str) -> bool:  # type: ignore[override]
        return str.__gt__(self, other)
