"""SummHay metrics (Laban et al., 2024, §4.1, Fig. 2), computed exactly as the authors' utils_eval.py.

Per reference insight, a coverage verdict maps it to one bullet: coverage 100 (FULL),
50 (PARTIAL) or 0 (NO). For a covered insight, the citations of that bullet (regex
`\\[([\\d, ]+)\\]`, so "[1][4]" and "[1, 4]" both give {1, 4}) are compared with the documents
that include the insight: precision, recall, F1 (= the insight's Citation Score).
Joint = coverage x F1 (0 for an uncovered insight). A summary's Coverage and Joint are the
means over all its insights; its Citation Score is the mean over the *covered* insights only
(Fig. 2: "(29 + 73)/2 = 51"); with none covered it is undefined (None), as np.mean([]) is NaN
in the authors' code. Words per bullet: words of the summary / its lines (Eval_Benchmarking:
calc_num_words(summary) / len(summary)). Position sensitivity (§5.4): max |Joint(Random) -
Joint(Top)|, |Joint(Random) - Joint(Bottom)|.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

CITATION = re.compile(r"\[([\d, ]+)\]")
COVERAGE_POINTS = {"FULL_COVERAGE": 100.0, "PARTIAL_COVERAGE": 50.0, "NO_COVERAGE": 0.0}
#: Spellings seen in the wild (human annotation file, short JSON labels) -> the official label.
LABEL_ALIASES = {
    "FULL": "FULL_COVERAGE", "FULLY_COVERED": "FULL_COVERAGE", "FULL_COVERAGE": "FULL_COVERAGE",
    "PARTIAL": "PARTIAL_COVERAGE", "PARTIALLY_COVERED": "PARTIAL_COVERAGE",
    "PARTIAL_COVERAGE": "PARTIAL_COVERAGE",
    "NO": "NO_COVERAGE", "NONE": "NO_COVERAGE", "NOT_COVERED": "NO_COVERAGE", "NO_COVERAGE": "NO_COVERAGE",
}


def normalize_label(label: Any) -> str | None:
    if not isinstance(label, str):
        return None
    return LABEL_ALIASES.get(label.strip().upper().replace(" ", "_").replace("-", "_"))


def split_bullets(summary: str) -> list[str]:
    """populate_summaries.bullet_processor: non-empty stripped lines. Headers count as lines,
    so bullet ids are line numbers (the coverage judge sees the same numbering)."""
    return [line.strip() for line in summary.split("\n") if line.strip()]


def extract_citations(bullet: str) -> list[int]:
    ids: list[int] = []
    for match in CITATION.findall(bullet):
        ids += [int(m.strip()) for m in match.split(",") if m.strip()]
    return ids


def words_per_bullet(bullets: list[str]) -> float:
    if not bullets:
        return 0.0
    text = re.sub(r"\s{2,}", " ", "\n".join(bullets))
    return (text.count(" ") + 1) / len(bullets)


@dataclass
class InsightScore:
    insight_id: str
    coverage: float  # 100 / 50 / 0
    label: str  # FULL_COVERAGE | PARTIAL_COVERAGE | NO_COVERAGE
    bullet_id: int | None  # 1-based line of the summary, None when not covered
    cites: list[int] = field(default_factory=list)
    gold: list[int] = field(default_factory=list)
    precision: float | None = None  # None when the insight is not covered
    recall: float | None = None
    f1: float | None = None

    @property
    def joint(self) -> float:
        return self.coverage * (self.f1 or 0.0)


def score_insight(insight_id: str, label: str, bullet_id: Any, bullets: list[str],
                  gold: set[int]) -> InsightScore:
    """One verdict -> coverage and citation scores (utils_eval.compute_single_sample_scores).

    A covered verdict whose bullet_id is not a valid line keeps its coverage but cites
    nothing (the authors' `bullets[-2]` fallback would read an arbitrary line instead)."""
    label = normalize_label(label) or "NO_COVERAGE"
    cov = COVERAGE_POINTS[label]
    if cov == 0:
        return InsightScore(insight_id, 0.0, label, None, [], sorted(gold))
    try:
        bid: int | None = int(bullet_id)
    except (TypeError, ValueError):
        bid = None
    if bid is not None and not 1 <= bid <= len(bullets):
        bid = None
    cites = set(extract_citations(bullets[bid - 1])) if bid is not None else set()
    hit = len(cites & gold)
    p = hit / len(cites) if cites else 0.0
    r = hit / len(gold) if gold else 0.0
    f1 = 2 * p * r / (p + r) if p + r else 0.0
    return InsightScore(insight_id, cov, label, bid, sorted(cites), sorted(gold), p, r, f1)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarize_scores(per_insight: list[InsightScore], bullets: list[str]) -> dict[str, Any]:
    """The summary-level numbers (0-100 scale, as the paper's tables)."""
    covered = [s for s in per_insight if s.coverage > 0]
    f1 = _mean([100.0 * (s.f1 or 0.0) for s in covered])
    return {
        "coverage": _mean([s.coverage for s in per_insight]) or 0.0,
        "citation_f1": f1,
        "citation_precision": _mean([100.0 * (s.precision or 0.0) for s in covered]),
        "citation_recall": _mean([100.0 * (s.recall or 0.0) for s in covered]),
        "joint": _mean([s.joint for s in per_insight]) or 0.0,
        "words_per_bullet": words_per_bullet(bullets),
        "n_bullets": len(bullets),
        "n_insights": len(per_insight),
        "per_insight": [{**asdict(s), "joint": s.joint} for s in per_insight],
    }


def score_summary(summary: str, verdicts: list[dict[str, Any]], gold: dict[str, set[int]]) -> dict[str, Any]:
    """`verdicts`: [{"insight_id", "coverage", "bullet_id"}] as the coverage judge returns them."""
    bullets = split_bullets(summary)
    per = [score_insight(str(v["insight_id"]), v.get("coverage"), v.get("bullet_id"), bullets,
                         set(gold.get(str(v["insight_id"]), set()))) for v in verdicts]
    return summarize_scores(per, bullets)


def position_sensitivity(joint_by_order: dict[str, float]) -> float:
    """§5.4 / Table 3: max absolute difference in Joint Score between Random and Top/Bottom.
    `joint_by_order` holds "random", "top" and "bottom"."""
    missing = {"random", "top", "bottom"} - set(joint_by_order)
    if missing:
        raise ValueError(f"position sensitivity needs the orders {sorted(missing)}")
    rand = joint_by_order["random"]
    return max(abs(rand - joint_by_order["top"]), abs(rand - joint_by_order["bottom"]))
