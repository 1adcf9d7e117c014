"""The authors' heatmap of a synthetic family (score by depth, or by star, x length), drawn in
`lceval report` from one task's samples: the engine's own depth x length heatmap reads the
`<task>@<length>` variants of `--context-lengths`, and these families' lengths are splits."""

from __future__ import annotations

from typing import Any, Callable, Iterable

from .lengths import length_order

__all__ = ["cells_by_field", "grid_figures"]


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
