"""The report's "Score by length" section: every task of a run on one length axis.

Per run, one chart of score against length for all its tasks (a line with its interval band
per curve): the bins of results.json's `length_bins` (benchmarks whose lengths come with the
data, or counted in the model's tokens) and the budgets of its `length_curves` (a
`--context-lengths` sweep; its uncut `full` point has no length and is left to the task's own
figure). Under it, a table per run: each curve's bins with their intervals and n, and its
effective length, the console's rows.
"""

from __future__ import annotations

from html import escape
from typing import Any

from lceval.engine import tokens_label
from lceval.interfaces import ReportContext, ReportFigure
from lceval.report import _charts as charts
from lceval.report._charts import Point, Series, numeric_order, palette
from lceval.report._figures import figure
from lceval.report._overview import interval_cell, table
from lceval.results import effective_said

__all__ = ["length_curves_of", "length_figures", "length_tables"]


def length_curves_of(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A run's curves on the length axis: its `length_bins`, then its `--context-lengths`
    curves (their `mean` named so), each with its points that have a length."""
    out: dict[str, dict[str, Any]] = {}
    for name, curve in (results.get("length_bins") or {}).items():
        out[name] = curve
    for name, curve in (results.get("length_curves") or {}).items():
        label = "mean of swept tasks" if name == "mean" else name
        out[label if label not in out else f"{label} (swept)"] = {
            **curve, "points": [p for p in curve["points"] if p.get("length") is not None]}
    return out


def _point(p: dict[str, Any]) -> Point:
    ci = p.get("ci") or [None, None]
    bin_name = p.get("label") or ""
    note = f"n={p.get('n')}" + (f", bin {bin_name}" if bin_name != tokens_label(int(p["length"])) else "")
    return Point(tokens_label(int(p["length"])), p.get("value"), ci[0], ci[1], note,
                 "" if ci[0] is not None else "too few clusters")


def length_figures(ctx: ReportContext) -> list[ReportFigure]:
    """Per run with curves on the length axis: one chart, a line per curve (task)."""
    out: list[ReportFigure] = []
    for i, run in enumerate(ctx.runs):
        curves = length_curves_of(run.results)
        if not curves:
            continue
        series = [Series(name, [_point(p) for p in c["points"]]) for name, c in curves.items()]
        categories = numeric_order(list(dict.fromkeys(pt.category for s in series for pt in s.points)))
        thresholds = {c.get("threshold") for c in curves.values()} - {None}
        threshold = thresholds.pop() if len(thresholds) == 1 else None
        chart = charts.intervals(categories, series, y_title="score", x_title="length (tokens; a bin at its upper "
                                 "edge or the benchmark's nominal length)", style="line",
                                 colors=palette(list(curves)), threshold=threshold, series_title="task",
                                 description=f"{ctx.labels[i]}: score against length, one line per task")
        caption = ("Each point is a length bin of a task (its upper edge, or the length the benchmark names it "
                   "by) or a --context-lengths budget; hover for the bin and n; bands: 95% intervals. ")
        if threshold is not None:
            caption += f"Dashed: the effective-length threshold {threshold:g}."
        out.append(figure(chart, f"{ctx.labels[i]}: score against length, all tasks", caption, section="lengths"))
    return out


def length_tables(ctx: ReportContext) -> str:
    """Per run: a row per curve, a cell per bin (value, interval, n), then its effective length."""
    parts = []
    for i, run in enumerate(ctx.runs):
        bins = run.results.get("length_bins") or {}
        if not bins:
            continue
        rows = []
        widest = max(len(c["points"]) for c in bins.values())
        for name, curve in bins.items():
            cells = []
            for p in curve["points"]:
                ci = p.get("ci") or [None, None]
                block = {"value": p.get("value"), "n": p.get("n"),
                         "spread": {"ci_low": ci[0], "ci_high": ci[1], "clusters": p.get("clusters")}}
                cells.append(f'<td>{escape(p["label"])} <span class="n">({escape(tokens_label(int(p["length"])))})'
                             f'</span></td>' + interval_cell(block))
            cells += ['<td></td><td class="num"></td>'] * (widest - len(curve["points"]))
            unbinned = curve.get("uncounted") or curve.get("unbinned")
            why = (" (contexts not counted: the model lends no tokenizer)" if curve.get("uncounted")
                   else " in no bin" if unbinned else "")
            rows.append(f'<tr><th scope="row">{escape(name)}</th><td class="num">{escape(effective_said(curve))}</td>'
                        f'<td class="num">{unbinned or 0}{escape(why) if unbinned else ""}</td>{"".join(cells)}</tr>')
        head = ["task", "effective length", "not binned"]
        for k in range(widest):
            head += [f"bin {k + 1}", "score"]
        parts.append(table(head, rows, caption=f"{ctx.labels[i]}: score by length bin (shortest first)"))
    return "".join(parts)
