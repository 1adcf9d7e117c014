"""`lceval report --format html`: one self-contained HTML file (no network, no CDN, no
external font) that answers "which model, where does it break, why": an overview of every
model on every task first, then a section per task (the console's table, the length curve,
the figures, the breakdowns), plugin panels, rankings, judge agreement, a browser of every
sample, what each run cost (per task, generation and judging, batch or not), and the runs.

Everything is inline: the stylesheet and script (`report/assets/`), the charts as Vega-Lite
specs with Vega's JavaScript from the installed `vl-convert-python` (`_charts`), and the
samples as JSON the script filters and shows. The page is built from run directories,
`lceval rank` directories and, for judge agreement, recorded-score files: it knows no
benchmark.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any

from lceval import __version__
from lceval.errors import UserError
from lceval.interfaces import ReportContext, ReportFigure
from lceval.io import read_json_object, write_text_atomic
from lceval.report._overview import table
from lceval.report._samples import json_script, sample_data
from lceval.results import DIFFERS_MARK, FinishedRun, load_run, run_model_name


@dataclass
class ReportInputs:
    runs: list[FinishedRun] = field(default_factory=list)
    rankings: list[dict[str, Any]] = field(default_factory=list)


def load_inputs(paths: list[Path]) -> ReportInputs:
    """Run directories (results.json) and `lceval rank` directories (rankings.json)."""
    out = ReportInputs()
    for path in paths:
        path = Path(path)
        ranking = path / "rankings.json"
        if ranking.is_file():
            rep = read_json_object(ranking, what="rankings file")
            rep.setdefault("ranking_id", path.name)
            out.rankings.append(rep)
        else:
            out.runs.append(load_run(path))
    if not out.runs and not out.rankings:
        raise UserError("nothing to report: give run directories or `lceval rank` directories", field="RUN_DIR")
    return out


def resampling_note(runs: list[FinishedRun]) -> str:
    """What the page's intervals resample, task by task, in each task's own unit (its
    `cluster_by`): "95% intervals resample meetings (elitr_qa), documents (notes_qa)"."""
    from lceval.report._figures import unit_of

    units: dict[str, list[str]] = {}
    for run in runs:
        for task, entry in (run.results.get("tasks") or {}).items():
            base = str(entry.get("spec_name", task)) if entry.get("context_max_tokens") else task
            names = units.setdefault(f"{unit_of(entry.get('cluster_by'))}s", [])
            if base not in names:
                names.append(base)
    if not units:
        return "95% intervals"
    return "95% intervals resample " + ", ".join(f"{unit} ({', '.join(tasks)})" for unit, tasks in units.items())


def _setting_apart(runs: list[FinishedRun], i: int, clash: list[int]) -> str | None:
    """The first setting (manifest `config`) in which run `i` differs from every run it
    would share a label with, as `key=value`; None when they are the same run settings."""
    mine = runs[i].record.config.to_manifest()
    others = [runs[j].record.config.to_manifest() for j in clash]
    for key in sorted(set(mine) | {k for o in others for k in o}):
        if key in ("model", "models", "command", "output", "tasks"):
            continue
        if all(o.get(key) != mine.get(key) for o in others):
            value = mine.get(key)
            shown = "default" if value is None else value if isinstance(value, (str, int, float, bool)) else \
                ",".join(map(str, value)) if isinstance(value, list) else str(value)
            return f"{key.replace('_', '-')}={shown}"
    return None


def run_labels(runs: list[FinishedRun]) -> list[str]:
    """What rows and legends call each run: the model's short name (`GPT-4` for a replayed
    file, `smollm2` for the alias), so one model's runs of several tasks share it; where two
    runs of one task would share it, the full model spec if their models differ, else the
    setting they differ in (`smollm2 (limit=9)`), and a number where even that is the same
    (`smollm2 #2`: the same run twice). Never a run id: a reader knows models, not folders."""
    short = [run_model_name(r) for r in runs]
    labels = list(short)
    for i, run in enumerate(runs):
        clash = [j for j, r in enumerate(runs) if j != i and short[j] == short[i]
                 and set(r.results.get("tasks") or {}) & set(run.results.get("tasks") or {})]
        if clash:
            same_model = all(runs[j].model == run.model for j in clash)
            apart = _setting_apart(runs, i, clash) if same_model else None
            labels[i] = (f"{labels[i]} ({apart})" if apart else labels[i]) if same_model else run.model
    seen: dict[str, set[str]] = {}
    for i, run in enumerate(runs):
        tasks = set(run.results.get("tasks") or {})
        base, n = labels[i], 1
        while tasks & seen.get(labels[i], set()):
            n += 1
            labels[i] = f"{base} #{n}"
        seen.setdefault(labels[i], set()).update(tasks)
    return labels


# -- page ---------------------------------------------------------------------------------

def asset(name: str) -> str:
    return resources.files("lceval").joinpath("report", "assets", name).read_text(encoding="utf-8")


def figures_html(figures: list[ReportFigure], specs: list[dict[str, Any]]) -> str:
    """The figures in an even grid, each a placeholder the script draws its spec into (the
    spec is appended to `specs`, inlined once as JSON); a figure that plots no value (every
    value missing) is named, not drawn."""
    parts = []
    empty = [f.title for f in figures if f.points == 0]
    for f in figures:
        if f.points == 0:
            continue
        n = len(specs)
        specs.append(f.spec)
        parts.append(f'<figure class="fig" data-points="{f.points}" aria-labelledby="fig-{n}-t">'
                     f'<figcaption><b id="fig-{n}-t">{escape(f.title)}</b>'
                     f'{"<span>" + escape(f.caption) + "</span>" if f.caption else ""}</figcaption>'
                     f'<div class="chart" data-chart="{n}" data-title="{escape(f.title)}"></div></figure>')
    note = f'<p class="desc">No value to plot: {escape("; ".join(empty))}.</p>' if empty else ""
    return (f'<div class="figs">{"".join(parts)}</div>' if parts else "") + note


def plugin_figures(ctx: ReportContext, plugins: Any) -> tuple[list[ReportFigure], list[str]]:
    """Every registered report panel's figures; a panel that fails is reported by name and
    left out, so one broken plugin never takes the report down."""
    figures: list[ReportFigure] = []
    failures: list[str] = []
    for name, panel in sorted(plugins.report_panels.items()):
        try:
            figures.extend(panel(ctx))
        except UserError:
            raise  # altair or vl-convert missing: the whole report needs them
        except Exception as exc:  # a plugin's bug: say which, keep the rest of the report
            failures.append(f"report panel '{name}' failed: {type(exc).__name__}: {exc}")
            print(f"lceval: warning: {failures[-1]}", file=sys.stderr)
    return figures, failures


def page(title: str, body: str, *, subtitle: str = "", nav: list[tuple[str, str]] | None = None,
         charts: list[dict[str, Any]] | None = None) -> str:
    """The HTML document around `body`: the stylesheet and script inline, a skip link and the
    section links, and, when the page has charts, their specs and Vega's JavaScript (from the
    installed vl-convert-python), so the file opens with no network."""
    sub = f'<p class="sub">{subtitle}</p>' if subtitle else ""
    links = "".join(f'<a href="#{a}">{escape(t)}</a>' for a, t in nav or [])
    nav_html = f'<nav aria-label="sections">{links}</nav>' if links else ""
    vega = ""
    if charts:
        from lceval.report._charts import vega_bundle

        vega = json_script("lceval-charts", charts) + f"<script>{vega_bundle()}</script>"
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{escape(title)}</title><style>{asset('report.css')}</style></head>"
            f'<body><a class="skip" href="#main">Skip to the report</a><header><h1>{escape(title)}</h1>{sub}</header>'
            f'{nav_html}<main id="main">{body}</main>{vega}<script>{asset("report.js")}</script></body></html>')


def _section(anchor_id: str, title: str, inner: str) -> str:
    return f'<section id="{anchor_id}" aria-labelledby="{anchor_id}-h"><h2 id="{anchor_id}-h">{escape(title)}</h2>{inner}</section>'


def _details(summary: str, inner: str) -> str:
    return f"<details><summary>{escape(summary)}</summary>{inner}</details>" if inner else ""


def task_section(ctx: ReportContext, task: str, figures: list[ReportFigure], specs: list[dict[str, Any]]) -> str:
    """One task: its description, the console's table, its length curve (a sweep), the
    figures, then the breakdown tables and each swept length's own table, folded."""
    from lceval.report._overview import (breakdown_tables, curve_table, pooled_tests_table, task_table,
                                         variant_tasks)

    entry = next(((r.results.get("tasks") or {}).get(t) for r in ctx.runs for t in [task, *variant_tasks(ctx, task)]
                  if t in (r.results.get("tasks") or {})), {}) or {}
    inner = f'<p class="desc">{escape(entry.get("description", ""))}</p>'
    if entry.get("differs_from_paper"):
        inner += (f'<p class="note warn">{DIFFERS_MARK} Not comparable with the paper\'s number: '
                  f'{escape(str(entry["differs_from_paper"]))}</p>')
    if any(task in (r.results.get("tasks") or {}) for r in ctx.runs):
        inner += task_table(task, ctx)
    inner += curve_table(task, ctx)
    inner += figures_html(figures, specs)
    if any(task in (r.results.get("tasks") or {}) for r in ctx.runs):
        inner += _details("Breakdown tables", breakdown_tables(task, ctx))
        inner += _details("Tests pooled over the groups", pooled_tests_table(task, ctx))
    variants = variant_tasks(ctx, task)
    if variants:
        inner += _details("Each context length's results",
                          "".join(f"<h3>{escape(v)}</h3>" + task_table(v, ctx) + breakdown_tables(v, ctx)
                                  for v in variants))
    return inner


def build_report(inputs: ReportInputs, plugins: Any, *, title: str = "lceval report",
                 agreement: tuple[dict[str, Any], dict[str, list[tuple[float, float]]]] | None = None,
                 preface: list[tuple[str, str, str]] | None = None) -> str:
    """The page: the overview first, a section per task (its table, length curve, figures and
    folded breakdown tables), plugin panels, rankings, judge agreement, the sample browser and
    the runs. `preface` sections (anchor, title, inner HTML) come before all (a leaderboard
    puts a submission's verification there)."""
    from lceval.report._charts import palette
    from lceval.report._figures import (agreement_figures, curve_figures, depth_figures, overview_figures,
                                        ranking_figures, task_figures, task_order)
    from lceval.report._lengths import length_figures, length_tables
    from lceval.report._overview import anchor, cost_table, model_order, overview, runs_table
    from lceval.report._press import press_figures

    runs = inputs.runs
    labels = run_labels(runs)
    ctx = ReportContext(runs=runs, labels=labels, rankings=inputs.rankings)
    colors = palette(labels)
    specs: list[dict[str, Any]] = []
    sections: list[tuple[str, str, str]] = list(preface or [])
    tasks = task_order(ctx)
    anchors = {t: anchor("task", t) for t in tasks}
    if runs:
        forest = figures_html(overview_figures(ctx, model_order(ctx), colors), specs)
        sections.append(("overview", "Overview", f'<div class="overview-row">{overview(ctx, anchors)}{forest}</div>'))
    lengths = figures_html(length_figures(ctx), specs) + length_tables(ctx)
    if lengths:  # every task of a run on one length axis
        sections.append(("lengths", "Score by length", lengths))
    panels, failures = plugin_figures(ctx, plugins)
    extra = curve_figures(ctx, colors) + depth_figures(ctx) + press_figures(ctx, colors)
    for task in tasks:
        figs = [f for f in extra if f.section == task] + task_figures(ctx, task, colors)
        sections.append((anchors[task], task, task_section(ctx, task, figs, specs)))
    by_section: dict[str, list[ReportFigure]] = {}
    for fig in panels + [f for f in extra if f.section not in anchors]:
        by_section.setdefault(fig.section or "More", []).append(fig)
    for name, figs in by_section.items():
        sections.append((anchor("panel", name), name, figures_html(figs, specs)))
    if failures:
        sections.append(("panel-failures", "Panels that failed",
                         "<ul>" + "".join(f'<li class="warn">{escape(f)}</li>' for f in failures) + "</ul>"))
    if inputs.rankings:
        sections.append(("rankings", "Rankings (lceval rank)", figures_html(ranking_figures(ctx), specs)))
    if agreement is not None:
        rep, points = agreement
        sections.append(("agreement", "Judges and people", _agreement_table(rep)
                         + figures_html(agreement_figures(rep, points), specs)))
    if runs:
        data = sample_data(runs, labels)
        sections.append(("samples", "Samples", json_script("lceval-samples", data)
                         + '<div id="sample-browser" class="browser"><p class="note">The sample browser needs '
                         "JavaScript.</p></div>"))
        costs = cost_table(ctx)
        if costs:
            sections.append(("cost", "Cost", costs))
        sections.append(("runs", "Runs", runs_table(ctx)))
    nav = [(a, t) for a, t, _ in sections]
    body = "".join(_section(a, t, inner) for a, t, inner in sections)
    subtitle = (f"lceval {escape(__version__)} · {time.strftime('%Y-%m-%d %H:%M')} · {len(runs)} run(s), "
                f"{len(inputs.rankings)} ranking(s) · scores with 2 decimals and p-values with 3, as the console "
                f"prints them · {resampling_note(runs)}")
    return page(title, body, subtitle=subtitle, nav=nav, charts=specs)


def _agreement_table(rep: dict[str, Any]) -> str:
    rows = []
    for p in rep["pairs"]:
        cells = []
        for name in ("pearson", "spearman", "kendall"):
            c = p["item"][name]
            ci = (f'<span class="ci">[{c["ci_low"]:.3f}, {c["ci_high"]:.3f}]</span>' if c["ci_low"] is not None
                  else '<span class="ci">no interval</span>')
            value = "–" if c["value"] is None else f'{c["value"]:.3f}'
            cells.append(f'<td class="num">{value}{ci}</td>')
        rows.append(f"<tr><th scope=\"row\">{escape(p['a'])}</th><td>{escape(p['b'])}</td>"
                    f"<td class=\"num\">{p['item']['n']}</td>" + "".join(cells) + "</tr>")
    return (f"<p>Items matched by {escape(rep['matched_by'])}; correlations with three decimals; bootstrap "
            "intervals resample clusters.</p>" + table(["A", "B", "n", "Pearson", "Spearman", "Kendall"], rows,
                                                      caption="Agreement between score sources"))


def agreement_inputs(runs: list[FinishedRun], sources: list[str], bins_of: str | None, plugins: Any,
                     seed: int = 0) -> tuple[dict[str, Any], dict[str, list[tuple[float, float]]]]:
    """The judge-agreement report and the scatter points of the report's runs (their judges)
    with further score sources (recorded human scores ...), as `lceval judge-agreement`."""
    from lceval.analysis import agreement, matched_scores, merge_sources, read_sources

    extra = [s for arg in sources for s in read_sources(arg, plugins, None)]
    ids = {i.item_id for s in extra for i in s.items}
    # a run's judge joins only where it scored the same items (another benchmark's runs would
    # otherwise force matching by system, and match nothing)
    found = [s for run in runs for s in read_sources(str(run.path), plugins, None)
             if any(i.item_id in ids for i in s.items)]
    merged = merge_sources(found + extra)
    rep = agreement(merged, bins_of=bins_of, n_boot=1000, seed=seed)
    ref = rep["bins_of"]
    points = {s.name: matched_scores(merged, ref, s.name) for s in merged if s.name != ref}
    return rep, points


def write_report(paths: list[Path], output: Path, plugins: Any, *, agreement: list[str] | None = None,
                 bins_of: str | None = None, title: str | None = None) -> Path:
    """Build the report of `paths` and write it to `output` atomically (a failed build
    leaves an earlier report in place)."""
    inputs = load_inputs(paths)
    agree = agreement_inputs(inputs.runs, agreement, bins_of, plugins) if agreement else None
    html = build_report(inputs, plugins, title=title or "lceval report", agreement=agree)
    return write_text_atomic(Path(output), html)
