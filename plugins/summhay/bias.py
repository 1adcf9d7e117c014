"""Laban et al., 2024, Appendix A.3, Table 6: is an automatic coverage evaluator biased by who wrote
the summary, or by how long its bullets are? From the authors' annotated summaries
(eval_benchmark_data.json: 200 summaries, a human verdict and six evaluators' per insight).

For each summary and evaluator, the Coverage Score is the mean over its reference insights of
1 / 0.5 / 0 (full / partial / no coverage; the table prints fractions, "roughly 5 points"
= 0.05). Delta = evaluator's score - the annotators' score.
- Summarizer bias: the mean Delta of the summaries each summarizer wrote (the summarizer is
  the last `_` part of `summkey`: `summary_subtopic_<retriever>_<model>` or, with the full
  haystack, `summary_subtopic_<model>`); Average = the mean of those rows.
- Length bias: Pearson correlation over summaries between words per bullet (the summary's
  words over its lines, as the authors' words_per_bullet) and the evaluator's score
  ("Length to Score Corr.") or its Delta ("Length to Delta Corr.").
Insights whose verdict is missing or unreadable on either side are left out of both means.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from lceval.errors import UserError

from .annotated import read_annotated_file, summary_text
from .scoring import COVERAGE_POINTS, normalize_label, split_bullets, words_per_bullet

#: the three evaluators Table 6 prints, in its column order
PAPER_EVALUATORS = ("prompted_gpt-4o", "prompted_claude3-opus", "prompted_gemini-1.5-pro")
PREFIX = "predictions_"


def summarizer_of(summkey: str) -> str:
    return str(summkey).removeprefix("summary_subtopic_").rsplit("_", 1)[-1]


def _coverage(verdicts: dict[str, Any], keep: set[str]) -> float | None:
    points = [COVERAGE_POINTS[label] / 100 for key, value in verdicts.items()
              if key in keep and (label := normalize_label(value))]
    return sum(points) / len(points) if points else None


def _verdicts(entries: Any) -> dict[str, Any]:
    return {str(e.get("insight_id")): e.get("coverage") for e in entries or [] if isinstance(e, dict)}


def _pearson(x: list[float], y: list[float]) -> float | None:
    import numpy as np

    if len(x) < 3 or np.std(x) == 0 or np.std(y) == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1])


def evaluator_bias(path: Path, evaluators: list[str] | None = None) -> dict[str, Any]:
    data = read_annotated_file(path)
    found = sorted({k[len(PREFIX):] for x in data for k in x if k.startswith(PREFIX)})
    chosen = list(evaluators or [e for e in PAPER_EVALUATORS if e in found] or found)
    unknown = [e for e in chosen if e not in found]
    if unknown:
        raise UserError(f"no predictions of evaluator(s) {', '.join(unknown)} in this file", file=path,
                        field="--evaluators", hint=f"It has: {', '.join(found) or 'none'}.")
    deltas: dict[str, dict[str, list[float]]] = {e: defaultdict(list) for e in chosen}
    points: dict[str, list[tuple[float, float, float]]] = {e: [] for e in chosen}  # (length, score, delta)
    for x in data:
        human = _verdicts(x["annotation"])
        length = words_per_bullet(split_bullets(summary_text(x["summary"])))
        for e in chosen:
            auto = _verdicts(x.get(PREFIX + e))
            both = {k for k in human.keys() & auto.keys() if normalize_label(human[k]) and normalize_label(auto[k])}
            score, truth = _coverage(auto, both), _coverage(human, both)
            if score is None or truth is None:
                continue
            deltas[e][summarizer_of(x["summkey"])].append(score - truth)
            points[e].append((length, score, score - truth))
    summarizers = sorted({s for e in chosen for s in deltas[e]})
    bias = {s: {e: (sum(v) / len(v) if (v := deltas[e].get(s)) else None) for e in chosen} for s in summarizers}
    average = {e: _mean([bias[s][e] for s in summarizers]) for e in chosen}
    return {
        "file": str(path), "evaluators": chosen, "summaries": len(data),
        "summarizer_bias": bias, "summaries_per_summarizer": {s: len(deltas[chosen[0]].get(s, [])) for s in summarizers},
        "average": average,
        "length_to_score": {e: _pearson([p[0] for p in points[e]], [p[1] for p in points[e]]) for e in chosen},
        "length_to_delta": {e: _pearson([p[0] for p in points[e]], [p[2] for p in points[e]]) for e in chosen},
    }


def _mean(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def format_bias(rep: dict[str, Any], fmt: str = "md") -> str:
    if fmt == "json":
        return json.dumps(rep, indent=1)
    evaluators = rep["evaluators"]

    def cells(values: dict[str, float | None]) -> str:
        return " | ".join("-" if values[e] is None else f"{values[e]:.3f}" for e in evaluators)

    rows = sorted(rep["summarizer_bias"].items(), key=lambda kv: _mean(list(kv[1].values())) or 0.0)
    out = [f"Evaluator bias on {rep['summaries']} annotated summaries (Laban et al., 2024, Table 6): "
           "evaluator's Coverage Score minus the annotators', 0-1 scale\n",
           "| summarizer | n | " + " | ".join(evaluators) + " |", "|---|---:|" + "---:|" * len(evaluators)]
    for name, values in rows:
        out.append(f"| {name} | {rep['summaries_per_summarizer'][name]} | {cells(values)} |")
    out.append(f"| Average | | {cells(rep['average'])} |")
    out.append(f"| Length to Score Corr. | | {cells(rep['length_to_score'])} |")
    out.append(f"| Length to Delta Corr. | | {cells(rep['length_to_delta'])} |")
    return "\n".join(out) + "\n"
