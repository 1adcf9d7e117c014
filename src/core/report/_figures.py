"""The figures of the HTML report that the engine draws by itself, from the structure of
results.json, rankings.json and judge-agreement sources alone: no task name appears here.

- per task, the score (and every further metric the spec's `report.metrics` declares) per
  group (e.g. split), one series per model, with the cluster-bootstrap intervals;
- per task and breakdown field (question type, answer position, context-length bucket ...),
  per group when the results have groups: whatever `report.breakdowns` produced;
- per `lceval rank` output: Elo and Bradley-Terry with intervals, and the pairwise score
  matrix as a heatmap (paper 003, Table 3);
- for two or more score sources (a judge and people): a scatter of each against the
  reference source and the per-bin distribution of paper 000, Fig. 2a.

Benchmark-specific figures come from plugins (`register_report_panels`).
"""

from __future__ import annotations

from typing import Any

from lceval.report import _svgplot as svgplot
from lceval.interfaces import ReportContext, ReportFigure
from lceval.report._svgplot import Point, Series


def metric_point(block: dict[str, Any] | None, category: str, note: str = "") -> Point:
    """A results.json summary block (value, n, spread) as a plot point with its interval."""
    if not block:
        return Point(category, None)
    spread = block.get("spread") or {}
    n = block.get("n")
    return Point(category, block.get("value"), spread.get("ci_low"), spread.get("ci_high"),
                 note or (f"n={n}" if n is not None else ""))


def figure(plot: svgplot.Plot, title: str, caption: str = "", section: str = "") -> ReportFigure:
    return ReportFigure(title=title, svg=plot.svg, caption=caption, section=section, marks=plot.marks)


def _ordered(keys: list[list[str]]) -> list[str]:
    out: list[str] = []
    for ks in keys:
        out += [k for k in ks if k not in out]
    return out


def _metric(ctx: ReportContext, run_index: int, task: str, metric: str) -> dict[str, Any] | None:
    return ((ctx.runs[run_index].results.get("tasks") or {}).get(task, {}).get("metrics") or {}).get(metric)


def task_order(ctx: ReportContext) -> list[str]:
    return _ordered([list((r.results.get("tasks") or {})) for r in ctx.runs])


def _runs_with(ctx: ReportContext, task: str) -> list[int]:
    return [i for i, r in enumerate(ctx.runs) if task in (r.results.get("tasks") or {})]


def group_figure(ctx: ReportContext, task: str, metric: str) -> ReportFigure | None:
    """The metric per group (split) and the mean of the groups, one series per model."""
    idx = _runs_with(ctx, task)
    blocks = [(i, _metric(ctx, i, task, metric)) for i in idx]
    blocks = [(i, b) for i, b in blocks if b]
    if not blocks:
        return None
    groups = _ordered([list(b.get("groups") or {}) for _, b in blocks])
    series = []
    for i, b in blocks:
        if groups:
            pts = [metric_point((b.get("groups") or {}).get(g), g) for g in groups]
            pts.append(Point("mean of groups", b.get("mean_of_groups")))
        else:
            pts = [metric_point(b, "all")]
        series.append(Series(ctx.labels[i], pts))
    cats = [*groups, "mean of groups"] if groups else ["all"]
    by = next((b.get("group_by") for _, b in blocks if b.get("group_by")), None)
    plot = svgplot.category_chart(cats, series, y_label=metric, label=f"{task} {metric}")
    caption = (f"Mean {metric} per {by} and the mean of the {by} means; whiskers: 95% cluster-bootstrap "
               "intervals." if by else f"Mean {metric}; whiskers: 95% cluster-bootstrap interval.")
    return figure(plot, f"{task}: {metric}" + (f" by {by}" if by else ""), caption, section=task)


def breakdown_fields(ctx: ReportContext, task: str, metric: str = "score") -> list[str]:
    """Every breakdown the results of `task` hold, pooled or per group, in order of appearance:
    the spec's `report.breakdowns` and whatever the engine adds (context-length buckets)."""
    blocks = [b for i in _runs_with(ctx, task) if (b := _metric(ctx, i, task, metric))]
    return _ordered([list(b.get("breakdowns") or {}) for b in blocks]
                    + [list(g.get("breakdowns") or {}) for b in blocks for g in (b.get("groups") or {}).values()])


def breakdown_figures(ctx: ReportContext, task: str, metric: str = "score") -> list[ReportFigure]:
    """One figure per breakdown field and group (pooled when the results have no groups)."""
    idx = _runs_with(ctx, task)
    blocks = [(i, b) for i in idx if (b := _metric(ctx, i, task, metric))]
    out: list[ReportFigure] = []
    fields = breakdown_fields(ctx, task, metric)
    groups = _ordered([list(b.get("groups") or {}) for _, b in blocks])
    for name in fields:
        for group in groups or [None]:
            def part(b: dict[str, Any]) -> dict[str, Any]:
                src = (b.get("groups") or {}).get(group) or {} if group is not None else b
                return (src.get("breakdowns") or {}).get(name) or {}

            values = _ordered([list(part(b)) for _, b in blocks])
            if not values:
                continue
            series = [Series(ctx.labels[i], [metric_point(part(b).get(v), v) for v in values]) for i, b in blocks]
            where = f" ({group})" if group is not None else ""
            plot = svgplot.category_chart(values, series, y_label=metric, label=f"{task} {metric} by {name}{where}")
            out.append(figure(plot, f"{task}: {metric} by {name}{where}",
                              "Whiskers: 95% cluster-bootstrap intervals; hover a bar for n.", section=task))
    return out


def task_figures(ctx: ReportContext, task: str) -> list[ReportFigure]:
    """Every metric of `task` by group, then its score by each breakdown field and group."""
    out: list[ReportFigure] = []
    metrics = _ordered([list(((r.results.get("tasks") or {}).get(task, {}).get("metrics") or {})) for r in ctx.runs])
    for metric in metrics:
        fig = group_figure(ctx, task, metric)
        if fig is not None:
            out.append(fig)
    return out + breakdown_figures(ctx, task)


def ranking_figures(ctx: ReportContext) -> list[ReportFigure]:
    """Per rankings directory and criterion: Elo and Bradley-Terry with intervals, the
    reference ranking when there is one, and the pairwise score matrix (paper 003, Table 3)."""
    out: list[ReportFigure] = []
    for rep in ctx.rankings:
        name = str(rep.get("ranking_id") or "ranking")
        opts = rep.get("options") or {}
        level = int(round(100 * float(opts.get("level", 0.95))))
        for criterion in rep.get("criteria") or []:
            block = (rep.get("rankings") or {}).get(criterion) or {}
            if "elo" not in block:
                continue
            section = f"ranking {name}"
            order = list(block.get("order") or block["elo"])
            rows = [(s, block["elo"][s].get("rating"), block["elo"][s].get("ci_low"), block["elo"][s].get("ci_high"))
                    for s in order]
            plot = svgplot.interval_rows(rows, x_label="Elo rating", label=f"Elo {criterion}",
                                         reference=opts.get("initial"))
            out.append(figure(plot, f"{criterion}: Elo", f"Mean over {opts.get('n_orders', '?')} match orders "
                              f"(paper 003 eqs. 1-2); {level}% intervals from resampling units.", section))
            bt = block.get("bradley_terry") or {}
            if bt:
                rows = [(s, (bt.get(s) or {}).get("rating"), (bt.get(s) or {}).get("ci_low"),
                         (bt.get(s) or {}).get("ci_high")) for s in order]
                plot = svgplot.interval_rows(rows, x_label="Bradley-Terry rating (Elo scale)",
                                             label=f"Bradley-Terry {criterion}")
                out.append(figure(plot, f"{criterion}: Bradley-Terry", f"{level}% intervals.", section))
            ref = (block.get("reference") or {}).get("systems") or {}
            if ref:
                rows = [(s, (ref.get(s) or {}).get("mean"), (ref.get(s) or {}).get("ci_low"),
                         (ref.get(s) or {}).get("ci_high")) for s in order]
                plot = svgplot.interval_rows(rows, x_label=f"reference {criterion}", label=f"reference {criterion}")
                judges = ", ".join(block["reference"].get("judge") or [])
                out.append(figure(plot, f"{criterion}: reference check ({judges})",
                                  "Mean against the references, with intervals (paper 003 Table 5).", section))
            matrix = block.get("matrix") or {}
            systems = list(matrix)
            if systems:
                values = [[(matrix[r].get(c) or {}).get("mean") if c != r else None for c in systems] for r in systems]
                notes = [[f"n={(matrix[r].get(c) or {}).get('n')}" if c != r and matrix[r].get(c) else ""
                          for c in systems] for r in systems]
                plot = svgplot.heatmap(systems, systems, values, label=f"pairwise {criterion}", v_min=0.0, v_max=1.0,
                                       scale=100, suffix="%", notes=notes)
                out.append(figure(plot, f"{criterion}: pairwise scores",
                                  "The row system's mean score when compared with the column system "
                                  "(paper 003, Table 3).", section))
    return out


def agreement_figures(report: dict[str, Any], points: dict[str, list[tuple[float, float]]]) -> list[ReportFigure]:
    """From `agreement.agreement(...)` and the matched (reference, other) score pairs: a
    scatter per source against the reference, and Fig. 2a of paper 000: the other sources'
    mean score (95% t-interval) within each integer bin of the reference."""
    ref = report["bins_of"]
    out: list[ReportFigure] = []
    pairs = {frozenset((p["a"], p["b"])): p for p in report["pairs"]}
    for other, pts in points.items():
        if not pts:
            continue
        item = (pairs.get(frozenset((ref, other))) or {}).get("item") or {}
        r = (item.get("pearson") or {}).get("value")
        caption = f"{len(pts)} items" + (f"; Pearson {r:.3f}" if r is not None else "") + \
            "; points jittered by up to 0.2 so that equal scores stay visible (hover for the values)."
        plot = svgplot.scatter(pts, x_label=ref, y_label=other, jitter=0.2, label=f"{other} against {ref}")
        out.append(figure(plot, f"{other} against {ref}", caption, section="judges and people"))
    bins = report.get("bins") or {}
    if bins:
        cats = [str(b) for b in sorted({row["bin"] for rows in bins.values() for row in rows})]
        series = [Series(other, [Point(str(row["bin"]), row["mean"], row["ci_low"], row["ci_high"], f"n={row['n']}")
                                 for row in rows]) for other, rows in bins.items()]
        first = next(iter(bins.values()))
        notes = {str(row["bin"]): f"N={row['n']}" for row in first}
        plot = svgplot.category_chart(cats, series, style="dots", y_label="mean score", notes=notes,
                                      label=f"score distribution per {ref} bin")
        out.append(figure(plot, f"Scores within each {ref} score bin (paper 000, Fig. 2a)",
                          f"Per integer bin of {ref}: the other sources' mean score with its 95% interval; "
                          "N = items in the bin.", section="judges and people"))
    return out
