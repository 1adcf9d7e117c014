"""What a run cost, from its manifest's usage counters (`usage` for the model, `judge_usage`
for the judge model): the same summary in the manifest, the console footer, the HTML report
and bundles.

Two amounts per model: what this command *paid* (the answers it generated: a provider's own
count, else their tokens at the model's price; through batches at the batch price), and what
the answers it read from the request cache had cost when they were paid. Their sum is what
the run's answers cost, whoever paid them; a resumed run pays only what was left. An answer
whose cost is unknown (a server with no price) is counted apart: the amounts are then lower
bounds, and say so.
"""

from __future__ import annotations

from typing import Any

from lceval.io import format_usd

_PARTS = ("generation", "judging")


def _part(usage: dict[str, Any] | None) -> dict[str, Any] | None:
    """One model's cost; its amounts None (unknown, never 0) when every answer it paid or
    read from the cache is of unknown price (an answer of known cost makes them lower bounds)."""
    if not usage or "cost_usd" not in usage:
        return None
    paid, cached = float(usage.get("cost_usd") or 0.0), float(usage.get("cached_cost_usd") or 0.0)
    unknown = int(usage.get("cost_unknown") or 0)
    answers = int(usage.get("generated") or 0) + int(usage.get("cache_hits") or 0)
    known = not unknown or paid or cached or unknown < int(usage.get("generated") or 0)
    return {"paid_usd": round(paid, 6) if known else None, "cached_usd": round(cached, 6),
            "total_usd": round(paid + cached, 6) if known else None,
            "batch_usd": round(float(usage.get("batch_cost_usd") or 0.0), 6),
            "answers": answers, "batched": int(usage.get("batched") or 0), "unknown": unknown,
            "not_sent": int(usage.get("cost_limited") or 0)}


def _sum(parts: list[dict[str, Any]], name: str) -> float | None:
    """The parts' amounts added; None when none of them is known."""
    amounts = [p[name] for p in parts if p[name] is not None]
    return round(sum(amounts), 6) if amounts or not parts else None


def cost_summary(usage: dict[str, Any] | None, judge_usage: dict[str, Any] | None) -> dict[str, Any]:
    """The run's cost: per part (generation, judging), in all and per task."""
    parts = {"generation": _part(usage), "judging": _part(judge_usage)}
    known = [p for p in parts.values() if p is not None]
    tasks = list(dict.fromkeys([*((usage or {}).get("by_task") or {}), *((judge_usage or {}).get("by_task") or {})]))
    by_task = {}
    for name in tasks:
        by_task[name] = {"generation": _part(((usage or {}).get("by_task") or {}).get(name)),
                         "judging": _part(((judge_usage or {}).get("by_task") or {}).get(name))}
    return {**parts,
            "paid_usd": _sum(known, "paid_usd"), "total_usd": _sum(known, "total_usd"),
            "unknown": sum(p["unknown"] for p in known),
            "by_task": by_task}


def usd(amount: float | None, unknown: int = 0) -> str:
    """`$0.0123` (`format_usd`: never in scientific notation), `>= $0.0123` when some answers'
    cost is unknown, "unknown" when none is known."""
    if amount is None:
        return "unknown"
    return (">= " if unknown else "") + format_usd(amount)


def format_cost(summary: dict[str, Any]) -> str:
    """The console footer: one line, or "" when nothing cost anything (a local model)."""
    parts = [(name, summary.get(name)) for name in _PARTS if summary.get(name)]
    if not parts or (not summary["total_usd"] and not summary["unknown"]):
        return ""
    said = []
    for name, part in parts:
        text = f"{name} {usd(part['total_usd'], part['unknown'])}"
        notes = []
        if part["cached_usd"]:
            notes.append(f"{usd(part['cached_usd'])} of it paid before (from the cache)")
        if part["batched"]:
            notes.append(f"{part['batched']} answers through batches, {usd(part['batch_usd'])}")
        if part["unknown"]:
            notes.append(f"{part['unknown']} answers of unknown price")
        said.append(text + (f" ({'; '.join(notes)})" if notes else ""))
    return (f"cost: {usd(summary['total_usd'], summary['unknown'])} = " + " + ".join(said)
            + f"; paid by this command: {usd(summary['paid_usd'], summary['unknown'])}")


def format_prompt_cache(usage: dict[str, Any] | None, judge_usage: dict[str, Any] | None) -> str:
    """Console lines on an API provider's prompt cache: per part, the prompt tokens it wrote,
    read and billed in full, and what it saved; and, so a cache that does not serve is not
    missed, the answers sent after their context was cached that the provider reported no
    cache read for. "" when no provider reported a cache."""
    lines = []
    for name, part in (("generation", usage), ("judging", judge_usage)):
        if not part:
            continue
        read, written = int(part.get("cache_read_tokens") or 0), int(part.get("cache_write_tokens") or 0)
        if read or written:
            wrote = f"{written:,} written into it, " if written else ""
            lines.append(f"prompt cache ({name}): {read:,} prompt tokens read from the provider's cache, {wrote}"
                         f"{int(part.get('uncached_prompt_tokens') or 0):,} billed in full; "
                         + _saving(part))
        missed, expected = int(part.get("cache_reads_missed") or 0), int(part.get("cache_reads_expected") or 0)
        if missed:
            lines.append(f"prompt cache ({name}): the provider reported no cache read for {missed} of the {expected} "
                         "answers sent after their context was cached; their prompts were billed in full (the run "
                         "went on)")
    return "\n".join(lines)


def _saving(usage: dict[str, Any]) -> str:
    """What the provider's prompt cache saved, or cost more and why (writes at a premium that
    too few reads paid back: a batch's lines, processed at once, each write their context), or
    that it is unknown (no price)."""
    saved = usage.get("cache_saved_usd")
    if saved is None:
        return "what it saved is unknown (the price is unknown)"
    if saved >= 0:
        return f"{usd(float(saved))} saved against no cache"
    writers, batched = int(usage.get("cache_writes") or 0), int(usage.get("batched") or 0)
    if batched:
        why = (f"cache writes from {writers:,} lines at once: a batch's lines are processed together, so each line "
               "about a context may write it at the write premium instead of reading it")
    else:
        why = f"{writers:,} answers wrote into the cache at its write premium, and too few read from it"
    return f"caching cost {format_usd(-float(saved))} more than no cache ({why})"
