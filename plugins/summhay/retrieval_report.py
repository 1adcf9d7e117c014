"""Retrieval-only SummHay report: no LLM, seconds per haystack.

For each retriever and token budget, the documents a RAG system would pass to its model are
chosen exactly as the `summhay` task type chooses them (same ranking, same budget fill), and
for each reference insight we measure:

- `source_share`: the share of the insight's source documents (those whose
  `insights_included` lists it) that made it into the context, a cut last document counting
  as in;
- `best_citation_f1`: the Citation F1 a summarizer would get by citing exactly the sources it
  was shown (precision 1, recall = source_share): 2r / (1 + r). This is the bound the paper
  quotes for the oracle at 15k tokens ("the oracle citation F1 achievable with this context
  length is 0.84 averaged across insights", Limitations);
- `reachable`: whether at least one source is in context (coverage is possible at all).

Means are over all insights of all subtopics (the authors average insight-level scores).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterable

from lceval import tokens as budgets
from .haystack import Haystack, load_haystack
from .task import make_retriever, rank_documents


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def retrieval_report(haystacks: Haystack | Path | Iterable[Haystack | Path], retrievers: Iterable[str],
                     budgets_tokens: Iterable[int] = (15000,), tokenizer: str = "auto", seed: int = 0,
                     retriever_options: dict[str, dict[str, Any]] | None = None,
                     factories: dict[str, Any] | None = None) -> dict[str, Any]:
    """{"tokenizer", "seconds", "rows": [{retriever, budget, n_insights, source_share,
    best_citation_f1, reachable, documents_kept, subtopics: [...]}]}. `retrievers` are
    registered names or `stored:NAME` (the scores stored in the haystack file)."""
    start = time.perf_counter()
    if isinstance(haystacks, (Haystack, str, Path)):
        haystacks = [haystacks]
    hays = [h if isinstance(h, Haystack) else load_haystack(Path(h)) for h in haystacks]
    count = budgets.counter(tokenizer)
    budget_list = sorted(set(int(b) for b in budgets_tokens))
    rows = []
    for name in retrievers:
        retriever: Any = name if name.startswith("stored:") else make_retriever(
            name, (retriever_options or {}).get(name, {}), seed, factories)
        per_budget: dict[int, list[dict[str, Any]]] = {b: [] for b in budget_list}
        for hay in hays:
            texts = [d.text for d in hay.documents]
            gold = hay.gold_cites()
            encoded = [count.encode(t) for t in texts]  # once per haystack, for every ranking
            for subtopic in hay.subtopics:
                ranking = rank_documents(retriever, hay, subtopic)
                for b in budget_list:
                    kept = budgets.fill_budget(texts, ranking, b, count, encoded)
                    numbers = {hay.documents[k.index].number for k in kept}
                    insights = []
                    for ins in subtopic.insights:
                        src = gold.get(ins.insight_id, set())
                        r = len(src & numbers) / len(src) if src else 0.0
                        insights.append({"insight_id": ins.insight_id, "sources": len(src),
                                         "in_context": len(src & numbers), "source_share": r,
                                         "best_citation_f1": 2 * r / (1 + r) if r else 0.0})
                    per_budget[b].append({"topic_id": hay.topic_id, "subtopic_id": subtopic.subtopic_id,
                                          "documents_kept": len(kept), "insights": insights})
        for b in budget_list:
            subs = per_budget[b]
            flat = [i for s in subs for i in s["insights"]]
            rows.append({
                "retriever": name, "budget": b, "n_subtopics": len(subs), "n_insights": len(flat),
                "source_share": _mean([i["source_share"] for i in flat]),
                "best_citation_f1": _mean([i["best_citation_f1"] for i in flat]),
                "reachable": _mean([1.0 if i["in_context"] else 0.0 for i in flat]),
                "documents_kept": _mean([float(s["documents_kept"]) for s in subs]),
                "subtopics": subs,
            })
    return {"tokenizer": count.name, "haystacks": [h.topic_id for h in hays],
            "seconds": time.perf_counter() - start, "rows": rows}


def to_markdown(report: dict[str, Any]) -> str:
    lines = [f"Retrieval-only SummHay report ({len(report['haystacks'])} haystack(s), tokens counted with "
             f"{report['tokenizer']}, {report['seconds']:.2f} s)", "",
             "| retriever | budget | insights | source share | best citation F1 | reachable | docs kept |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in report["rows"]:
        lines.append(f"| {r['retriever']} | {r['budget']} | {r['n_insights']} | {100 * r['source_share']:.1f} | "
                     f"{100 * r['best_citation_f1']:.1f} | {100 * r['reachable']:.1f} | {r['documents_kept']:.1f} |")
    return "\n".join(lines) + "\n"
