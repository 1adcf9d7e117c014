"""The authors' human-annotated summaries (eval_benchmark_data.json in
salesforce/summary-of-a-haystack, also in ../shared/datasets/summhay) as score sources for
`lceval judge-agreement`: one source for the human annotation and one per recorded
automatic evaluator (GPT-4o, GPT-4o 9-shot, Claude 3 Haiku/Opus, Gemini 1.5 Pro, GPT-3.5).

Items are insights of a summary: item_id `<subtopic_id>/<summkey>/<insight_id>` (summkey =
retriever + summarizer), system `summhay-replay:annotated`, cluster = the subtopic, score =
coverage 100/50/0, label =
the bullet the insight was linked to, as a 1-based summary line. The human `candidate_id` is
the 0-based line and the evaluators' `bullet_id` the 1-based one (the authors' notebook
compares `bullet_id - 1 == candidate_id`); "no_selection" / "NA" give no label. With these,
`lceval judge-agreement FILE` reproduces Table 1 of Laban et al., 2024 (GPT-4o: Pearson 0.716 on the
1,419 insights, same bullet 88.9%).

The system is the model of a run that replays these summaries (annotated.py): judge-agreement
matches run items by (item id, system), so `lceval run --tasks summhay_annotated --model
summhay-replay:annotated --judge J` gives items that line up with these one for one, and any
coverage judge J sits beside the annotators and the six evaluators. (The summary's system is
in the item id, so no per-summarizer means are reported.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lceval.errors import UserError
from lceval.io import quote, read_json
from lceval.types import ScoredItem, ScoreSource

from .annotated import SYSTEM
from .scoring import COVERAGE_POINTS, normalize_label

NOTES = {
    "human": "professional annotators (Laban et al., 2024, §4.2)",
    "prompted_gpt-4o": "GPT-4o, the paper's evaluator (Appendix A.2 prompt)",
    "9fs_gpt-4o": "GPT-4o with 9 few-shot examples",
}


def _item(x: dict, insight_id: str, coverage: object, bullet: int | None) -> ScoredItem:
    label = normalize_label(coverage)
    return ScoredItem(item_id=f"{x['subtopic_id']}/{x['summkey']}/{insight_id}", system=SYSTEM,
                      score=COVERAGE_POINTS[label] if label else None, cluster=str(x["subtopic_id"]),
                      label=None if bullet is None else str(bullet))


def _verdicts(values: Any, path: Path, where: str) -> list[dict[str, Any]]:
    """A list of per-insight verdicts, each an object with an `insight_id`."""
    if not isinstance(values, list):
        raise UserError(f"must be a list, got {quote(values)}", file=path, field=where)
    for k, v in enumerate(values):
        if not isinstance(v, dict) or not isinstance(v.get("insight_id"), (str, int)):
            raise UserError(f"a verdict needs an 'insight_id', got {quote(v)}", file=path, field=f"{where}[{k}]")
    return values


def read_annotated(path: Path) -> list[ScoreSource] | None:
    """None when `path` is not that file's format."""
    try:
        data = read_json(Path(path), what="annotated summaries file")
    except UserError:
        return None
    if not isinstance(data, list) or not data or not all(
            isinstance(x, dict) and {"summkey", "subtopic_id", "annotation", "summary"} <= set(x) for x in data):
        return None
    sources: dict[str, list[ScoredItem]] = {"human": []}
    for n, x in enumerate(data):
        for k, a in enumerate(_verdicts(x["annotation"], path, f"[{n}].annotation")):
            cand = a.get("candidate_id")
            bullet = int(cand) + 1 if isinstance(cand, (int, str)) and str(cand).isdigit() else None
            sources["human"].append(_item(x, a["insight_id"], a.get("coverage"), bullet))
        for key, preds in x.items():
            if not key.startswith("predictions_") or not isinstance(preds, list):
                continue
            name = key[len("predictions_"):]
            for p in _verdicts(preds, path, f"[{n}].{key}"):
                bid = p.get("bullet_id")
                bullet = bid if isinstance(bid, int) and not isinstance(bid, bool) else None
                sources.setdefault(name, []).append(_item(x, p["insight_id"], p.get("coverage"), bullet))
    return [ScoreSource(name=name, items=items, origin=str(path), note=NOTES.get(name, "recorded evaluator"))
            for name, items in sources.items()]
