"""HELMET's automatic metrics (princeton-nlp/HELMET at commit 4526dfb):

- `helmet_qa`: `calculate_metrics` (utils.py) on the answer as written and on its parse
  (`parse_output` after a prefix), the larger of the two as data.py's post-processing takes it:
  `substring_exact_match` (Recall's JSON KV, RAG), `exact_match` (ICL: the parse only; InfiniteBench
  MC with its option-text rule), `rougeL_f1` (InfiniteBench QA), or RULER's `ruler_recall` (the
  share of the answers found in the raw answer, lower-cased);
- `helmet_rerank`: `parse_rankings` then NDCG@10 against the row's graded labels, as
  `calculate_retrieval_metrics` gets it from pytrec_eval, rounded to 5 decimals per row.

In completion style (the task's `options.style`) eval.py prepends the answer prefix to the
answer before scoring; the sample's metadata carries the prefix and the style, so the metrics do
the same. Every score is 0-100 (the authors' mean x 100).
"""

from __future__ import annotations

from typing import Any

from lceval.types import JudgeInput

from lceval_plugins.judges.metric_base import MetricJudge, as_written

from .text import calculate_metrics, ndcg_at, parse_output, parse_rankings

QA_METRICS = ("substring_exact_match", "exact_match", "f1", "rougeL_f1", "rougeL_recall", "rougeLsum_f1",
              "rougeLsum_recall", "ruler_recall")


def helmet_answer(item: JudgeInput) -> str:
    """The answer the authors' metrics read: as the model wrote it, with the answer prefix before
    it in completion style (eval.py lines 98-103)."""
    text = as_written(item)
    if item.metadata.get("style") == "completion":
        text = str(item.metadata.get("answer_prefix") or "") + text
    return text


class HelmetQAJudge(MetricJudge):
    """data.py's post-processing of QA-like answers, one metric of `calculate_metrics`."""

    name = "helmet_qa"
    AS_WRITTEN = True
    OPTIONS = {"type": "object", "additionalProperties": False, "properties": {
        "metric": {"enum": list(QA_METRICS), "default": "substring_exact_match",
                   "description": "Which value of calculate_metrics is the score (ruler_recall: load_ruler's)."},
        "parse": {"enum": ["max", "parsed", "raw"], "default": "max",
                  "description": "max: the better of the raw answer and its parse (default_post_process, JSON KV, "
                                 "InfiniteBench); parsed: the parse only (ICL); raw: the raw answer only (RULER)."},
        "prefix": {"type": "string", "default": "Answer:",
                   "description": "parse_output's prefix (JSON KV: 'corresponding value:', ICL: 'label:')."},
        "choice": {"type": "boolean", "default": False,
                   "description": "InfiniteBench MC's choice_post_process: exact match on [letter, 'letter. text'], "
                                  "or 1 when 'letter. text' is in the answer (lower-cased)."},
    }}

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        opts = self.options
        text = helmet_answer(item)
        metric = opts["metric"]
        if metric == "ruler_recall":
            found = sum(a.lower() in text.lower() for a in references)
            return found / len(references), {"found": found, "references": len(references)}
        parsed = parse_output(text, opts["prefix"])
        if opts["choice"]:
            return self._choice(text, parsed, references)
        values: dict[str, float] = {}
        if opts["parse"] in ("max", "raw"):
            values = calculate_metrics(text, references)
        if opts["parse"] in ("max", "parsed") and parsed is not None:
            again = calculate_metrics(parsed, references)
            values = {k: max(v, again[k]) for k, v in values.items()} if values else again
        value = values.get(metric, 0.0)
        return float(value), {"parsed": parsed, **{k: round(v, 6) for k, v in values.items()}}

    @staticmethod
    def _choice(text: str, parsed: str | None, references: list[str]) -> tuple[float, dict[str, Any]]:
        """data.py `choice_post_process` (exact_match is what collect_results reports)."""
        em = calculate_metrics(text, references)["exact_match"]
        if parsed is not None:
            em = max(em, calculate_metrics(parsed, references)["exact_match"])
        if len(references) > 1 and references[1].lower() in text.lower():
            em = 1.0
        return float(em), {"parsed": parsed}


class HelmetRerankJudge(MetricJudge):
    """NDCG@k of the parsed ranking against the row's graded labels (metadata `qrels`)."""

    name = "helmet_rerank"
    AS_WRITTEN = True
    OPTIONS = {"type": "object", "additionalProperties": False, "properties": {
        "k": {"type": "integer", "minimum": 1, "default": 10, "description": "The cut of NDCG (HELMET reports 10)."},
    }}

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        qrels = {str(k): int(v) for k, v in (item.metadata.get("qrels") or {}).items()}
        ranking = parse_rankings(helmet_answer(item))
        value = round(ndcg_at(ranking, qrels, self.options["k"]), 5)
        return value, {"ranked": len(ranking), "top": list(ranking)[:10]}
