"""`lceval report --format html`: one self-contained HTML file (no network, no CDN, no
external font) with the results tables and their intervals, the plots, and a browser of
every sample.

Everything is inline: the SVG figures (`report_figures`, plugin panels), the stylesheet and
the script (`report/assets/`), and the samples as JSON the script filters and shows. The
page is built from run directories, `lceval rank` directories and, for judge agreement,
recorded-score files: it knows no benchmark.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any

from lceval import __version__
from lceval.io import write_text_atomic
from lceval.engine import removed_span
from lceval.errors import UserError
from lceval.interfaces import ReportContext, ReportFigure
from lceval.results import FinishedRun, load_run
from lceval.io import read_json_object
from lceval.results import primary_score
from lceval.results import run_model_name


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


def run_labels(runs: list[FinishedRun]) -> list[str]:
    """What rows and legends call each run: the model's short name (`GPT-4` for a replayed
    file), so one model's runs of several tasks share it; where two runs of one task would
    share it, the full model spec if their models differ, else the run id is added."""
    short = [run_model_name(r) for r in runs]
    labels = list(short)
    for i, run in enumerate(runs):
        clash = [j for j, r in enumerate(runs) if j != i and short[j] == short[i]
                 and set(r.results.get("tasks") or {}) & set(run.results.get("tasks") or {})]
        if clash:
            same_model = all(runs[j].model == run.model for j in clash)
            labels[i] = f"{labels[i]} ({run.run_id})" if same_model else run.model
    return labels


# -- tables -------------------------------------------------------------------------------

def _num(v: Any, digits: int = 2) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def interval_cell(block: dict[str, Any] | None, digits: int = 2) -> str:
    """A table cell for a results.json summary: the value, its interval and n (what it has)."""
    if not block or block.get("value") is None:
        return '<td class="num" data-sort="">–</td>'
    spread = block.get("spread") or {}
    ci = ""
    if spread.get("ci_low") is not None:
        ci = f'<span class="ci">[{_num(spread["ci_low"], digits)}, {_num(spread["ci_high"], digits)}]</span>'
    n = f'<span class="n">n={block["n"]}</span>' if block.get("n") is not None else ""
    return f'<td class="num" data-sort="{block["value"]:.6g}">{_num(block["value"], digits)}{ci}{n}</td>'



def _table(head: list[str], rows: list[str], cls: str = "results") -> str:
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    return f'<table class="{cls} sortable"><thead><tr>{th}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def task_table(task: str, runs: list[FinishedRun], names: list[str]) -> str:
    """Models x groups with intervals, the mean of groups, seeds, further metrics, tests and
    what was cut or not scored."""
    idx = [i for i, r in enumerate(runs) if task in (r.results.get("tasks") or {})]
    tasks = [runs[i].results["tasks"][task] for i in idx]
    groups: list[str] = []
    metrics: list[str] = []
    tests: list[str] = []
    for t in tasks:
        score = t["metrics"].get("score") or {}
        groups += [g for g in (score.get("groups") or {}) if g not in groups]
        metrics += [m for m in t["metrics"] if m != "score" and m not in metrics]
        tests += [x for x in (score.get("tests") or {}) if x not in tests]
    head = ["model", *groups, "mean of groups" if groups else "score", "seeds (mean ± sd)", *metrics,
            *[f"{x} p" for x in tests], "truncated", "skipped", "not scored"]
    rows = []
    for i, t in zip(idx, tasks):
        score = t["metrics"].get("score") or {}
        cells = [f"<td>{escape(names[i])}</td>"]
        cells += [interval_cell((score.get("groups") or {}).get(g)) for g in groups]
        cells.append(interval_cell({"value": score.get("mean_of_groups")} if groups else score))
        seeds = score.get("across_seeds")
        cells.append(f'<td class="num">{_num(seeds["mean"])} ± {_num(seeds["std"])}</td>'
                     if seeds and seeds.get("mean") is not None else '<td class="num">–</td>')
        for m in metrics:
            block = t["metrics"].get(m) or {}
            cells.append(interval_cell({"value": block.get("mean_of_groups"), "n": block.get("n")} if block.get("groups")
                               else block))
        for x in tests:
            res = (score.get("tests") or {}).get(x) or {}
            p = res.get("p_value")
            cells.append(f'<td class="num" data-sort="{p if p is not None else ""}">{_num(p, 3)}'
                         f'<span class="n">{res.get("n_a", "?")}/{res.get("n_b", "?")}</span></td>')
        acc = t.get("accounting") or {}
        not_scored = sum(int(acc.get(k, 0) or 0) for k in ("judge_parse_failures", "judge_missing", "unanswered"))
        cells += [f'<td class="num">{acc.get("truncated_share", 0):.0%}</td>',
                  f'<td class="num">{acc.get("skipped_share", 0):.0%}</td>', f'<td class="num">{not_scored}</td>']
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return _table(head, rows)


def breakdown_table(task: str, runs: list[FinishedRun], names: list[str], fieldname: str) -> str:
    """One breakdown field: a row per model and group (pooled without groups)."""
    idx = [i for i, r in enumerate(runs) if task in (r.results.get("tasks") or {})]
    entries: list[tuple[str, dict[str, Any]]] = []
    for i in idx:
        score = runs[i].results["tasks"][task]["metrics"].get("score") or {}
        groups = score.get("groups") or {}
        for g, block in groups.items() if groups else [("all", score)]:
            part = (block.get("breakdowns") or {}).get(fieldname)
            if part:
                entries.append((f"{names[i]}|{g}", part))
    values: list[str] = []
    for _, part in entries:
        values += [v for v in part if v not in values]
    rows = []
    for key, part in entries:
        label, group = key.rsplit("|", 1)
        rows.append(f"<tr><td>{escape(label)}</td><td>{escape(group)}</td>"
                    + "".join(interval_cell(part.get(v)) for v in values) + "</tr>")
    return _table(["model", "group", *values], rows) if rows else ""


# -- samples ------------------------------------------------------------------------------

def _cut(sample: Any) -> dict[str, Any]:
    cut = sample.context_cut
    out: dict[str, Any] = {"policy": cut.policy, "action": cut.action, "original": cut.original_tokens,
                           "kept": cut.kept_tokens}
    if cut.action == "truncated" and cut.original_tokens is not None and cut.kept_tokens is not None:
        out["removed"] = list(removed_span(cut.policy, cut.original_tokens, cut.kept_tokens))
    return out


def sample_rows(runs: list[FinishedRun], names: list[str]) -> list[dict[str, Any]]:
    """What the sample browser shows of every sample (and filters on)."""
    rows = []
    for i, run in enumerate(runs):
        sections: dict[str, dict[str, Any]] = {}
        for s in run.samples:
            if s.task not in sections:
                try:
                    sections[s.task] = run.task_spec(s.task).get("report") or {}
                except UserError:
                    sections[s.task] = {}
            group_by, cluster_by = sections[s.task].get("group_by"), sections[s.task].get("cluster_by")
            j = s.judgments[0] if s.judgments else None
            status = "unanswered" if s.response is None else (j.parse_status if j else "not judged")
            rows.append({
                "task": s.task, "model": names[i], "run": run.run_id,
                "group": str(s.metadata.get(group_by, "")) if group_by else "",
                "cluster": str(s.metadata.get(cluster_by, s.conv_id)) if cluster_by else s.conv_id,
                "item": s.item_id, "seed": s.seed, "turn": s.turn_index, "question": s.question,
                "reference": s.reference, "response": s.response, "score": primary_score(s), "status": status,
                "judge": j.judge if j else None, "raw": j.raw if j else None, "attempts": j.attempts if j else None,
                "details": {k: v for k, v in (j.details if j else {}).items() if k != "subitems"},
                "cut": _cut(s), "metadata": s.metadata,
                "tokens": {"prompt": s.prompt_tokens, "prefilled": s.prefilled_tokens,
                           "completion": s.completion_tokens},
                "extras": {k: v for k, v in s.generation_extras.items() if k != "replay_file_sha256"},
            })
    return rows


def _json_script(element_id: str, data: Any) -> str:
    """JSON inside <script>, every `<` written as \\u003c: no text can close the element."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    return f'<script type="application/json" id="{element_id}">{text}</script>'


# -- page ---------------------------------------------------------------------------------

def asset(name: str) -> str:
    return resources.files("lceval").joinpath("report", "assets", name).read_text(encoding="utf-8")


def figures_html(figures: list[ReportFigure]) -> str:
    """The figures in a grid; one with no data mark (every value missing) is named, not drawn."""
    parts = []
    empty = [f.title for f in figures if f.marks == 0]
    for f in figures:
        if f.marks == 0:
            continue
        parts.append(f'<figure class="fig" data-marks="{f.marks}"><figcaption><b>{escape(f.title)}</b>'
                     f'{" " + escape(f.caption) if f.caption else ""}</figcaption>{f.svg}</figure>')
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
        except Exception as exc:  # a plugin's bug: say which, keep the rest of the report
            failures.append(f"report panel '{name}' failed: {type(exc).__name__}: {exc}")
            print(f"lceval: warning: {failures[-1]}", file=sys.stderr)
    return figures, failures


def page(title: str, body: str, *, subtitle: str = "") -> str:
    """The HTML document around `body`, with the report's stylesheet and script inline."""
    sub = f'<p class="sub">{subtitle}</p>' if subtitle else ""
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{escape(title)}</title><style>{asset('report.css')}</style></head>"
            f"<body><header><h1>{escape(title)}</h1>{sub}</header><main>{body}</main>"
            f"<script>{asset('report.js')}</script></body></html>")


def _runs_table(runs: list[FinishedRun], labels: list[str]) -> str:
    rows = []
    for run, label in zip(runs, labels):
        tasks = run.results.get("tasks") or {}
        judges = sorted({str((t.get("judge") or {}).get("judge", "?")) for t in tasks.values()})
        rows.append(f"<tr><td>{escape(label)}</td><td><code>{escape(run.model)}</code></td>"
                    f"<td>{escape(', '.join(tasks))}</td><td>{escape(', '.join(judges))}</td>"
                    f"<td>{escape(', '.join(map(str, run.results.get('seeds') or [])))}</td>"
                    f"<td>{len(run.samples)}</td><td><code>{escape(run.run_id)}</code></td></tr>")
    return _table(["label", "model", "tasks", "judge", "seeds", "samples", "run"], rows, cls="runs")


def _section(anchor: str, title: str, inner: str) -> str:
    return f'<section id="{anchor}"><h2>{escape(title)}</h2>{inner}</section>'


def build_report(inputs: ReportInputs, plugins: Any, *, title: str = "lceval report",
                 agreement: tuple[dict[str, Any], dict[str, list[tuple[float, float]]]] | None = None,
                 preface: list[tuple[str, str, str]] | None = None) -> str:
    """The page; `preface` sections (anchor, title, inner HTML) come first (a leaderboard
    puts a submission's verification there)."""
    from lceval.report._figures import (agreement_figures, breakdown_fields, ranking_figures, task_figures,
                                        task_order)

    runs = inputs.runs
    labels = run_labels(runs)
    names = labels
    ctx = ReportContext(runs=runs, labels=labels, rankings=inputs.rankings)
    sections: list[tuple[str, str, str]] = list(preface or [])
    if runs:
        sections.append(("runs", "Runs", _runs_table(runs, labels)))
    for n, task in enumerate(task_order(ctx)):
        first = next(r for r in runs if task in (r.results.get("tasks") or {}))
        desc = first.results["tasks"][task].get("description", "")
        inner = f'<p class="desc">{escape(desc)}</p>' + task_table(task, runs, names)
        inner += figures_html(task_figures(ctx, task))
        for fieldname in breakdown_fields(ctx, task):
            table = breakdown_table(task, runs, names, fieldname)
            if table:
                inner += f"<h4>{escape(task)}: score by {escape(fieldname)}</h4>{table}"
        sections.append((f"task-{n}", task, inner))
    panels, failures = plugin_figures(ctx, plugins)
    by_section: dict[str, list[ReportFigure]] = {}
    for fig in panels:
        by_section.setdefault(fig.section or "More", []).append(fig)
    for n, (name, figs) in enumerate(by_section.items()):
        sections.append((f"panel-{n}", name, figures_html(figs)))
    if failures:
        sections.append(("panel-failures", "Panels that failed",
                         "<ul>" + "".join(f'<li class="warn">{escape(f)}</li>' for f in failures) + "</ul>"))
    if inputs.rankings:
        sections.append(("rankings", "Rankings (lceval rank)", figures_html(ranking_figures(ctx))))
    if agreement is not None:
        rep, points = agreement
        sections.append(("agreement", "Judges and people", _agreement_table(rep)
                         + figures_html(agreement_figures(rep, points))))
    if runs:
        rows = sample_rows(runs, names)
        specs = [r.task_spec(t).get("report") or {} for r in runs for t in (r.results.get("tasks") or {})]
        data = {"samples": rows,
                "group_fields": list(dict.fromkeys(x["group_by"] for x in specs if x.get("group_by"))),
                "cluster_fields": list(dict.fromkeys(x["cluster_by"] for x in specs if x.get("cluster_by")))}
        sections.append(("samples", "Samples", _json_script("lceval-samples", data)
                         + '<div id="sample-browser" class="browser"></div>'))
    nav = "".join(f'<a href="#{a}">{escape(t)}</a>' for a, t, _ in sections)
    body = f'<nav>{nav}</nav>' + "".join(_section(a, t, inner) for a, t, inner in sections)
    subtitle = (f"lceval {escape(__version__)} · {time.strftime('%Y-%m-%d %H:%M')} · {len(runs)} run(s), "
                f"{len(inputs.rankings)} ranking(s) · 95% intervals resample clusters (meetings, topics)")
    return page(title, body, subtitle=subtitle)


def _agreement_table(rep: dict[str, Any]) -> str:
    rows = []
    for p in rep["pairs"]:
        cells = []
        for name in ("pearson", "spearman", "kendall"):
            c = p["item"][name]
            ci = f'<span class="ci">[{_num(c["ci_low"], 3)}, {_num(c["ci_high"], 3)}]</span>' if c["ci_low"] is not None else ""
            cells.append(f'<td class="num">{_num(c["value"], 3)}{ci}</td>')
        rows.append(f"<tr><td>{escape(p['a'])}</td><td>{escape(p['b'])}</td><td class=\"num\">{p['item']['n']}</td>"
                    + "".join(cells) + "</tr>")
    return (f"<p>Items matched by {escape(rep['matched_by'])}; bootstrap intervals resample clusters.</p>"
            + _table(["A", "B", "n", "Pearson", "Spearman", "Kendall"], rows))


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
