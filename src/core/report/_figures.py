"""The figures of the HTML report that the engine draws by itself, from the structure of
results.json, rankings.json and judge-agreement sources alone: no task name appears here.

- per task, the score (and every further metric the spec's `report.metrics` declares) per
  group (split), one colour per model, with the cluster-bootstrap intervals;
- score against context length, the view a long-context study is about: a line with its
  interval band per model, from `length_curves` (a `--context-lengths` sweep, the
  threshold drawn) or else from the `context_tokens` breakdown buckets in numeric order;
  for needle-style tasks, score by depth x length as a heatmap per model, from the `depth`
  breakdown of each `<task>@<length>` variant;
- per breakdown field (question type, answer position ...) and group: grouped bars with
  whiskers;
- per `lceval rank` output: Elo and Bradley-Terry with intervals, and the pairwise score
  matrix (Gong et al., 2024, Table 3);
- for two or more score sources (a judge and people): a scatter of each against the
  reference and the per-bin means of Thonet et al., 2024a, Fig. 2a.

Benchmark-specific figures come from plugins (`register_report_panels`).
"""

from __future__ import annotations

from typing import Any

from lceval.interfaces import ReportContext, ReportFigure
from lceval.report import _charts as charts
from lceval.report._charts import Point, Series, numeric_order

#: breakdowns the engine adds to every task with a measured context (plotted against length)
CONTEXT_FIELDS = ("context_tokens", "context_kept_share")
#: the breakdown of a needle-style task's variants that the depth x length heatmap reads
DEPTH_FIELD = "depth"


def ci_note(unit: str) -> str:
    """What a figure's whiskers and bands are, in the task's own unit (its `cluster_by`)."""
    return f"whiskers and bands: 95% intervals resampling {unit}s; hover for n."


def metric_label(ctx: ReportContext, task: str, metric: str = "score") -> str:
    """A metric as the task names it: `score` is its judge's score (`f1 score`, `lexical
    score`, `rubric score`), so an axis or a column says which metric it shows; other metrics
    keep their names."""
    if metric != "score":
        return metric
    for run in ctx.runs:
        judge = (_tasks(run).get(task) or {}).get("judge")
        name = (judge.get("judge") or judge.get("name")) if isinstance(judge, dict) else judge
        if isinstance(name, str) and name:
            return f"{name} score"
    return metric


def absent(ctx: ReportContext, task: str, drawn: list[str], why: str) -> str:
    """The caption's sentence naming the models that have the task but are not in a chart
    (so none vanishes silently), with the reason."""
    labels = [ctx.labels[i] for i in _runs_with(ctx, task)]
    missing = [lab for lab in dict.fromkeys(labels) if lab not in drawn]
    return f" Not drawn: {', '.join(missing)} ({why})." if missing else ""


def why_no_interval(block: dict[str, Any], unit: str = "item") -> str:
    """Why a results.json summary has no interval, in the console's words."""
    if not block.get("n"):
        return "no score"
    spread = block.get("spread") or {}
    if spread.get("clusters") == 1:
        return f"1 {unit} only"
    return "too few scores"


def unit_of(cluster_by: str | None) -> str:
    """What an interval resamples, in words (`meeting_id` -> "meeting"), as the console says."""
    return cluster_by.removesuffix("_id").replace("_", " ") if cluster_by else "item"


def metric_point(block: dict[str, Any] | None, category: str, note: str = "", unit: str = "item") -> Point:
    """A results.json summary block (value, n, spread) as a plotted point with its interval;
    without one, the point says why (one meeting only, no score)."""
    if not block:
        return Point(category, None)
    spread = block.get("spread") or {}
    n = block.get("n")
    low, high = spread.get("ci_low"), spread.get("ci_high")
    missing = "" if low is not None else why_no_interval(block, unit)
    return Point(category, block.get("value"), low, high, note or (f"n={n}" if n is not None else ""), missing)


def _inline(spec: Any) -> list[dict[str, Any]]:
    """Every inline data object of a spec, nested views included."""
    if isinstance(spec, dict):
        found = [spec["data"]] if isinstance(spec.get("data"), dict) and "values" in spec["data"] else []
        return found + [d for k, v in spec.items() if k != "data" for d in _inline(v)]
    if isinstance(spec, list):
        return [d for v in spec for d in _inline(v)]
    return []


def count_points(spec: dict[str, Any]) -> int:
    """Data rows a Vega-Lite spec plots: its data named `points` (the `charts` builders name
    their plotted values so; layers repeat it), else every row it holds (a hand-written spec,
    or altair's consolidated `datasets`)."""
    inline = _inline(spec)
    named = [d for d in inline if d.get("name") == charts.POINTS]
    if named:
        return len(named[0]["values"])
    return sum(len(v) for v in (spec.get("datasets") or {}).values()) + sum(len(d["values"]) for d in inline)


def figure(chart: Any, title: str, caption: str = "", section: str = "", points: int | None = None) -> ReportFigure:
    """A `ReportFigure` from an altair chart (or a Vega-Lite dict): the spec checked by altair,
    its `$schema` address dropped (the page never fetches it), its plotted rows counted."""
    spec = chart if isinstance(chart, dict) else chart.to_dict()
    spec = {k: v for k, v in spec.items() if k != "$schema"}
    return ReportFigure(title=title, spec=spec, caption=caption, section=section,
                        points=count_points(spec) if points is None else points)


def _ordered(keys: list[list[str]]) -> list[str]:
    """Every key once, in order of first appearance."""
    return list(dict.fromkeys(k for ks in keys for k in ks))


def _tasks(run: Any) -> dict[str, Any]:
    return run.results.get("tasks") or {}


def _metric(ctx: ReportContext, run_index: int, task: str, metric: str) -> dict[str, Any] | None:
    return (_tasks(ctx.runs[run_index]).get(task, {}).get("metrics") or {}).get(metric)


def is_variant(entry: dict[str, Any]) -> bool:
    """A `--context-lengths` variant (`<task>@1k`): drawn on its task's length curve."""
    return bool(entry.get("context_max_tokens"))


def base_task(task: str, entry: dict[str, Any]) -> str:
    return str(entry.get("spec_name", task)) if is_variant(entry) else task


def task_order(ctx: ReportContext) -> list[str]:
    """Every task of the runs, in order of appearance, a variant under its base task's name."""
    return _ordered([[base_task(t, e) for t, e in _tasks(r).items()] for r in ctx.runs])


def _runs_with(ctx: ReportContext, task: str) -> list[int]:
    return [i for i, r in enumerate(ctx.runs) if task in _tasks(r)]


def _unit(ctx: ReportContext, task: str) -> str:
    return unit_of(next((_tasks(r)[task].get("cluster_by") for r in ctx.runs if task in _tasks(r)), None))


def group_figure(ctx: ReportContext, task: str, metric: str, colors: dict[str, str]) -> ReportFigure | None:
    """The metric per group (split), one colour per model; the console's rows as bars."""
    blocks = [(i, b) for i in _runs_with(ctx, task) if (b := _metric(ctx, i, task, metric))]
    if not blocks:
        return None
    unit = _unit(ctx, task)
    groups = _ordered([list(b.get("groups") or {}) for _, b in blocks])
    series = []
    for i, b in blocks:
        pts = ([metric_point((b.get("groups") or {}).get(g), g, unit=unit) for g in groups] if groups
               else [metric_point(b, "all", unit=unit)])
        series.append(Series(ctx.labels[i], pts))
    by = next((b.get("group_by") for _, b in blocks if b.get("group_by")), None)
    name = metric_label(ctx, task, metric)
    chart = charts.intervals(groups or ["all"], series, y_title=name, x_title=by or "", colors=colors,
                             description=f"{task}: {name} per {by or 'task'} and model")
    caption = (f"Mean {name} per {by}; " if by else f"Mean {name}; ") + ci_note(unit)
    caption += absent(ctx, task, [s.name for s in series if any(p.value is not None for p in s.points)],
                      f"no {name} value")
    return figure(chart, f"{task}: {name}" + (f" by {by}" if by else ""), caption, section=task)


def breakdown_fields(ctx: ReportContext, task: str, metric: str = "score") -> list[str]:
    """Every breakdown the results of `task` hold, pooled or per group, in order of appearance:
    the spec's `report.breakdowns` and what the engine adds (context-length buckets)."""
    blocks = [b for i in _runs_with(ctx, task) if (b := _metric(ctx, i, task, metric))]
    return _ordered([list(b.get("breakdowns") or {}) for b in blocks]
                    + [list(g.get("breakdowns") or {}) for b in blocks for g in (b.get("groups") or {}).values()])


def breakdown_values(parts: list[dict[str, Any]], name: str) -> list[str]:
    """The values of one breakdown as the results order them, merged over runs and groups;
    context buckets (and any field whose every value holds a number) in numeric order."""
    values = _ordered([list(p) for p in parts])
    if name in CONTEXT_FIELDS or name == DEPTH_FIELD:
        return numeric_order(values)
    return values


def breakdown_figures(ctx: ReportContext, task: str, colors: dict[str, str]) -> list[ReportFigure]:
    """Per breakdown field (not the context ones: `context_figures`) and group: grouped bars."""
    blocks = [(i, b) for i in _runs_with(ctx, task) if (b := _metric(ctx, i, task, "score"))]
    unit = _unit(ctx, task)
    groups = _ordered([list(b.get("groups") or {}) for _, b in blocks])
    out: list[ReportFigure] = []
    for name in breakdown_fields(ctx, task):
        if name in CONTEXT_FIELDS:
            continue
        for group in groups or [None]:
            def part(b: dict[str, Any]) -> dict[str, Any]:
                src = ((b.get("groups") or {}).get(group) or {}) if group is not None else b
                return (src.get("breakdowns") or {}).get(name) or {}

            values = breakdown_values([part(b) for _, b in blocks], name)
            if not values:
                continue
            series = [Series(ctx.labels[i], [metric_point(part(b).get(v), v, unit=unit) for v in values])
                      for i, b in blocks]
            where = f" ({group})" if group is not None else ""
            metric = metric_label(ctx, task)
            chart = charts.intervals(values, series, y_title=metric, x_title=name, colors=colors,
                                     description=f"{task}: {metric} by {name}{where}, per model")
            drawn = [s.name for s in series if any(p.value is not None for p in s.points)]
            out.append(figure(chart, f"{task}: {metric} by {name}{where}",
                              ci_note(unit) + absent(ctx, task, drawn, f"its results have no {name} breakdown"),
                              section=task))
    return out


def _pooled_label(blocks: list[dict[str, Any]]) -> str:
    groups = _ordered([list(b.get("groups") or {}) for b in blocks])
    return f" (pooled {' + '.join(groups)})" if len(groups) > 1 else ""


def context_figures(ctx: ReportContext, task: str, colors: dict[str, str]) -> list[ReportFigure]:
    """Score against the length of the context (buckets of its tokens, in numeric order) and
    against the share of it that was kept: a line with its interval band per model, over all
    groups (results.json's pooled breakdown, said in the title)."""
    blocks = [(i, b) for i in _runs_with(ctx, task) if (b := _metric(ctx, i, task, "score"))]
    unit = _unit(ctx, task)
    pooled = _pooled_label([b for _, b in blocks])
    out: list[ReportFigure] = []
    for name, x_title in (("context_tokens", "context length (tokens)"), ("context_kept_share", "share kept")):
        parts = [(i, (b.get("breakdowns") or {}).get(name) or {}) for i, b in blocks]
        values = breakdown_values([p for _, p in parts], name)
        if not values:
            continue
        series = [Series(ctx.labels[i], [metric_point(p.get(v), v, unit=unit) for v in values]) for i, p in parts]
        what = "context length" if name == "context_tokens" else "share of the context kept"
        metric = metric_label(ctx, task)
        chart = charts.intervals(values, series, y_title=metric, x_title=x_title, style="line", colors=colors,
                                 description=f"{task}: {metric} by {what}{pooled}, one line per model")
        caption = ("Contexts bucketed by their length in the model's tokens (a-b holds a < tokens <= b); "
                   if name == "context_tokens" else "Share of each context's tokens the model was sent; ")
        drawn = [s.name for s in series if any(p.value is not None for p in s.points)]
        caption += ci_note(unit) + absent(ctx, task, drawn, "no context measured in the model's tokens: its backend "
                                                            "lent no tokenizer, e.g. an API model or a replay")
        out.append(figure(chart, f"{task}: {metric} by {what}{pooled}", caption, section=task))
    return out


def curve_figures(ctx: ReportContext, colors: dict[str, str]) -> list[ReportFigure]:
    """Per swept task (and the mean of the swept tasks): score at each `--context-lengths`
    budget from results.json's `length_curves`, a line with its interval band per model,
    `full` last, the effective-length threshold as a dashed rule."""
    curves: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for i, run in enumerate(ctx.runs):
        for name, curve in (run.results.get("length_curves") or {}).items():
            curves.setdefault(name, []).append((i, curve))
    out: list[ReportFigure] = []
    for name, entries in curves.items():
        labels = _ordered([[p["label"] for p in c["points"]] for _, c in entries])
        labels = numeric_order([x for x in labels if x != "full"]) + (["full"] if "full" in labels else [])
        series = []
        for i, curve in entries:
            pts = []
            for p in curve["points"]:
                ci = p.get("ci") or [None, None]
                pts.append(Point(p["label"], p.get("value"), ci[0], ci[1], f"n={p.get('n')}",
                                 "" if ci[0] is not None else "too few clusters"))
            series.append(Series(ctx.labels[i], pts))
        thresholds = {c.get("threshold") for _, c in entries} - {None}
        threshold = thresholds.pop() if len(thresholds) == 1 else None
        eff = []
        for i, curve in entries:
            length = curve.get("effective_length")
            if curve.get("threshold") is not None:
                eff.append(f"{ctx.labels[i]}: {_tokens(length) if length is not None else 'none'}")
        title = "mean of the swept tasks" if name == "mean" else name
        chart = charts.intervals(labels, series, y_title="score", x_title="context length (tokens kept, at most)",
                                 style="line", colors=colors, threshold=threshold,
                                 description=f"{title}: score against context length, one line per model")
        caption = "Each point is the task run with the context cut to that many tokens (`full`: uncut); "
        if threshold is not None:
            caption += f"dashed: the threshold {threshold:g}; effective length (longest length at or above it " \
                       f"with every shorter one): {'; '.join(eff)}. "
        section = entries[0][1].get("tasks", [name])[0] if name == "mean" else name
        unit = _unit(ctx, section) if any(section in _tasks(r) for r in ctx.runs) else "cluster"
        drawn = [ctx.labels[i] for i, _ in entries]
        missing = [lab for i, lab in enumerate(ctx.labels) if lab not in drawn and any(
            is_variant(e) and base_task(t, e) == section for t, e in _tasks(ctx.runs[i]).items())]
        note = f" Not drawn: {', '.join(dict.fromkeys(missing))} (no length curve in its results)." if missing else ""
        out.append(figure(chart, f"{title}: score by context length", caption + ci_note(unit) + note, section=section))
    return out


def _tokens(n: int) -> str:
    return f"{n // 1024}k" if n % 1024 == 0 else str(n)


def depth_figures(ctx: ReportContext) -> list[ReportFigure]:
    """Needle-style tasks: per model, the score by needle depth (rows) x context length
    (columns), from the `depth` breakdown of each `<task>@<length>` variant."""
    out: list[ReportFigure] = []
    for i, run in enumerate(ctx.runs):
        by_base: dict[str, dict[str, dict[str, Any]]] = {}
        for task, entry in _tasks(run).items():
            block = ((entry.get("metrics") or {}).get("score") or {}).get("breakdowns") or {}
            if is_variant(entry) and DEPTH_FIELD in block:
                by_base.setdefault(base_task(task, entry), {})[_tokens(int(entry["context_max_tokens"]))] = block[DEPTH_FIELD]
        for base, per_length in by_base.items():
            lengths = numeric_order(list(per_length))
            depths = breakdown_values(list(per_length.values()), DEPTH_FIELD)
            values = [[(per_length[length].get(d) or {}).get("value") for length in lengths] for d in depths]
            notes = [[f"n={(per_length[length].get(d) or {}).get('n')}" for length in lengths] for d in depths]
            chart = charts.heatmap(depths, lengths, values, x_title="context length", y_title="depth",
                                   value_title="score", notes=notes,
                                   description=f"{base}: {ctx.labels[i]}'s score by depth and context length")
            out.append(figure(chart, f"{base}: score by depth x context length ({ctx.labels[i]})",
                              "Mean score of the items whose needle sits at each depth of a context cut to each "
                              "length; hover for n.", section=base))
    return out


def overview_figures(ctx: ReportContext, order: list[str], colors: dict[str, str] | None = None) -> list[ReportFigure]:
    """Per task (not a length variant): every model's score per group with its interval, the
    models best first, as the overview table orders them; each model in its page colour, the
    groups told apart by shape."""
    out: list[ReportFigure] = []
    for task in task_order(ctx):
        idx = _runs_with(ctx, task)
        if not idx:
            continue
        unit = _unit(ctx, task)
        blocks = {ctx.labels[i]: b for i in idx if (b := _metric(ctx, i, task, "score"))}
        groups = _ordered([list(b.get("groups") or {}) for b in blocks.values()])
        series = [Series(g, [metric_point((b.get("groups") or {}).get(g), lab, unit=unit) for lab, b in blocks.items()])
                  for g in groups] or [Series("score", [metric_point(b, lab, unit=unit) for lab, b in blocks.items()])]
        by = next((b.get("group_by") for b in blocks.values() if b.get("group_by")), None) or "score"
        metric = metric_label(ctx, task)
        chart = charts.forest([lab for lab in order if lab in blocks], series, x_title=f"{task} {metric}",
                              series_title=by, colors=colors,
                              description=f"{task}: every model's {metric} per {by}, best first")
        out.append(figure(chart, f"{task}: {metric} per model" + (f" and {by}" if groups else ""),
                          f"Dots: mean {metric}, in each model's colour" + (f", one shape per {by}" if groups else "")
                          + f"; lines: 95% intervals resampling {unit}s."
                          + (f" Click a legend entry to show one {by} alone." if groups else "")
                          + absent(ctx, task, list(blocks), "no score"), section="overview"))
    return out


def task_figures(ctx: ReportContext, task: str, colors: dict[str, str]) -> list[ReportFigure]:
    """Every metric of `task` by group, its score against context length, then by each
    further breakdown field and group."""
    out: list[ReportFigure] = []
    metrics = _ordered([list((_tasks(r).get(task, {}).get("metrics") or {})) for r in ctx.runs])
    for metric in metrics:
        fig = group_figure(ctx, task, metric, colors)
        if fig is not None:
            out.append(fig)
    return out + context_figures(ctx, task, colors) + breakdown_figures(ctx, task, colors)


def ranking_figures(ctx: ReportContext) -> list[ReportFigure]:
    """Per rankings directory and criterion: Elo and Bradley-Terry with intervals, the
    reference check when there is one, and the pairwise score matrix (Gong et al., 2024, Table 3)."""
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

            def rows(source: dict[str, Any], key: str = "rating") -> list[tuple[str, Any, Any, Any]]:
                return [(s, (source.get(s) or {}).get(key), (source.get(s) or {}).get("ci_low"),
                         (source.get(s) or {}).get("ci_high")) for s in order]

            out.append(figure(charts.ranked_intervals(rows(block["elo"]), x_title="Elo rating",
                                                      reference=opts.get("initial"), description=f"Elo {criterion}"),
                              f"{criterion}: Elo", f"Mean over {opts.get('n_orders', '?')} match orders (Gong et al., 2024 "
                              f"eqs. 1-2); {level}% intervals from resampling units; dashed: the initial rating.",
                              section))
            bt = block.get("bradley_terry") or {}
            if bt:
                out.append(figure(charts.ranked_intervals(rows(bt), x_title="Bradley-Terry rating (Elo scale)",
                                                          description=f"Bradley-Terry {criterion}"),
                                  f"{criterion}: Bradley-Terry", f"{level}% intervals.", section))
            ref = (block.get("reference") or {}).get("systems") or {}
            if ref:
                judges = ", ".join(block["reference"].get("judge") or [])
                out.append(figure(charts.ranked_intervals(rows(ref, "mean"), x_title=f"reference {criterion}",
                                                          description=f"reference {criterion}"),
                                  f"{criterion}: reference check ({judges})",
                                  "Mean against the references, with intervals (Gong et al., 2024, Table 5).", section))
            matrix = block.get("matrix") or {}
            systems = list(matrix)
            if systems:
                values = [[(matrix[r].get(c) or {}).get("mean") if c != r else None for c in systems] for r in systems]
                notes = [[f"n={(matrix[r].get(c) or {}).get('n')}" if c != r and matrix[r].get(c) else ""
                          for c in systems] for r in systems]
                chart = charts.heatmap(systems, systems, values, x_title="against", y_title="system",
                                       value_title=criterion, domain=(0.0, 1.0), notes=notes, percent=True,
                                       description=f"pairwise {criterion}")
                out.append(figure(chart, f"{criterion}: pairwise scores",
                                  "The row system's mean score when compared with the column system "
                                  "(Gong et al., 2024, Table 3).", section))
    return out


def agreement_figures(report: dict[str, Any], points: dict[str, list[tuple[float, float]]]) -> list[ReportFigure]:
    """From `agreement(...)` and the matched (reference, other) score pairs: a scatter per
    source against the reference, and Fig. 2a of Thonet et al., 2024a: the other sources' mean score
    (95% t-interval) within each integer bin of the reference."""
    ref = report["bins_of"]
    out: list[ReportFigure] = []
    pairs = {frozenset((p["a"], p["b"])): p for p in report["pairs"]}
    for other, pts in points.items():
        if not pts:
            continue
        item = (pairs.get(frozenset((ref, other))) or {}).get("item") or {}
        r = (item.get("pearson") or {}).get("value")
        caption = f"{len(pts)} items" + (f"; Pearson {r:.3f}" if r is not None else "") + \
            "; points jittered by up to 0.2 so that equal scores stay visible (hover for the values); " \
            "dashed: equal scores. Scroll to zoom, drag to pan."
        chart = charts.scatter(pts, x_title=ref, y_title=other, jitter=0.2, description=f"{other} against {ref}")
        out.append(figure(chart, f"{other} against {ref}", caption, section="judges and people"))
    bins = report.get("bins") or {}
    if bins:
        cats = [str(b) for b in sorted({row["bin"] for rows in bins.values() for row in rows})]
        series = [Series(other, [Point(str(row["bin"]), row["mean"], row["ci_low"], row["ci_high"], f"n={row['n']}",
                                       "" if row["ci_low"] is not None else "too few items")
                                 for row in rows]) for other, rows in bins.items()]
        chart = charts.intervals(cats, series, y_title="mean score", x_title=f"{ref} score", style="dots",
                                 series_title="source", description=f"score distribution per {ref} bin")
        out.append(figure(chart, f"Scores within each {ref} score bin (Thonet et al., 2024a, Fig. 2a)",
                          f"Per integer bin of {ref}: the other sources' mean score with its 95% interval; "
                          "hover for the items in the bin.", section="judges and people"))
    return out
