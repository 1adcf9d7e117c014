"""What the synthetic needle families (NeedleBench, NoLiMa, Counting-Stars) share: their lengths
named as their authors name them (a length is a split of the task, `--split 32K`), the order in
which `--limit` takes samples so that a few still span the depths, and the authors' heatmap
(score by depth, or by star, x length) drawn from one task's samples in `lceval report`.

The engine's own depth x length heatmap reads `<task>@<length>` variants of `--context-lengths`,
which cut every context to a budget in the model's tokens. These families' lengths are not such
budgets (NeedleBench counts GPT-4's tokens, NoLiMa the haystack without its needle, Counting-Stars
words), so each length is a split of one task and the heatmap is drawn here from the samples'
`length` and depth fields.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable

from lceval.errors import UserError

__all__ = ["cells_by_field", "grid_figures", "length_of", "length_order", "lengths_of", "spread_order"]

_LENGTH = re.compile(r"(\d+)([kK]?)")


def length_of(label: str, field: str = "--split") -> int:
    """A length as the authors name it: `32000`, `32K` or `32k` (K = 1,000, as the papers write
    4K, 128K for 4,000 and 128,000)."""
    m = _LENGTH.fullmatch(str(label).strip())
    if not m or int(m.group(1)) == 0:
        raise UserError(f"{label!r} is not a length (e.g. 4000 or 4K, K = 1,000)", field=field)
    return int(m.group(1)) * (1000 if m.group(2) else 1)


def lengths_of(ctx: Any, known: Iterable[str] | None = None) -> list[tuple[str, int]]:
    """(label, length) of each split to build: `--split`, else the spec's `splits`. A task with
    `known` lengths (the authors' own) refuses others."""
    labels = [part.strip() for label in (ctx.splits or ctx.spec.get("splits") or []) for part in str(label).split(",")
              if part.strip()]  # --split is repeatable; a comma list works too
    if not labels:
        raise UserError("name the lengths to build as the spec's splits (e.g. [4K, 8K]) or with --split",
                        field="splits")
    out = []
    for label in labels:
        n = length_of(label)
        if known is not None and str(label) not in known:
            raise UserError(f"{label!r} is none of this task's lengths ({', '.join(known)})", field="--split")
        out.append((str(label), n))
    if getattr(ctx, "context_length", None):
        raise UserError("this task's lengths are its splits, as its authors count them (not a budget of the "
                        "model's tokens): choose them with --split", field="--context-lengths",
                        hint="Run without --context-lengths, e.g. --split 4K,8K.")
    return out


def spread_order(n: int) -> list[int]:
    """0..n-1 in an order whose every prefix spans the range (ends, then the middle, then each
    time the index farthest from those taken): `--limit 3` over depths asks at 0, 100 and 50."""
    if n <= 2:
        return list(range(n))
    order, rest = [0, n - 1], list(range(1, n - 1))
    while rest:
        best = max(rest, key=lambda i: (min(abs(i - j) for j in order), -i))
        order.append(best)
        rest.remove(best)
    return order


def length_order(labels: Iterable[str]) -> list[str]:
    """Length labels shortest first."""
    def key(label: str) -> tuple[int, str]:
        try:
            return (length_of(label), label)
        except UserError:
            return (1 << 62, label)
    return sorted(set(labels), key=key)


def _num(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return float("inf")


Cells = Callable[[Any], Iterable[tuple[str, str, float]]]


def cells_by_field(row: str, column: str = "length") -> Cells:
    """One cell per sample: (its metadata[row], metadata[column], its first judgment's score)."""
    def cells(sample: Any) -> Iterable[tuple[str, str, float]]:
        scores = [j.score for j in sample.judgments if j.score is not None]
        if scores and row in sample.metadata and column in sample.metadata:
            yield str(sample.metadata[row]), str(sample.metadata[column]), float(scores[0])
    return cells


def grid_figures(ctx: Any, task_types: tuple[str, ...], cells: Cells, *, row_title: str, what: str,
                 row_order: Callable[[Iterable[str]], list[str]] | None = None) -> list[Any]:
    """Per run and task of one of `task_types`: the mean score of each (row, length) cell of its
    samples as a heatmap, rows as `row_order` sorts them (numbers ascending by default)."""
    from lceval.report import charts, figure

    out = []
    for i, run in enumerate(ctx.runs):
        for task, entry in (run.results.get("tasks") or {}).items():
            if entry.get("type") not in task_types:
                continue
            sums: dict[tuple[str, str], list[float]] = {}
            for sample in run.task_samples(task):
                for r, c, v in cells(sample):
                    sums.setdefault((r, c), []).append(v)
            if not sums:
                continue
            rows = (row_order or (lambda xs: sorted(set(xs), key=lambda x: (_num(x), x))))(r for r, _ in sums)
            cols = length_order(c for _, c in sums)
            values = [[(sum(sums[(r, c)]) / len(sums[(r, c)])) if (r, c) in sums else None for c in cols]
                      for r in rows]
            notes = [[str(len(sums.get((r, c), []))) for c in cols] for r in rows]
            chart = charts.heatmap(rows, cols, values, x_title="length", y_title=row_title, value_title="score",
                                   notes=notes, description=f"{task}: {ctx.labels[i]}'s score by {row_title} and length")
            out.append(figure(chart, f"{task}: score by {row_title} x length ({ctx.labels[i]})",
                              f"{what} Hover a cell for n.", section=task))
    return out
