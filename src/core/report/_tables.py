"""The papers' tables from finished runs and recorded files, as markdown, CSV or LaTeX.

Laid out from results alone, driven by each task's spec, so any benchmark gets them:
- main tables: one row per model (its name, e.g. `GPT-4` for `replay:FILE#GPT-4`), the runs
  of one model joined across tasks; a task's columns are its groups (e.g. dev, test2) and
  their mean. Tasks whose spec declares `report.table: {name, column, order}` share the table
  of that name, under their column label: ELITR's three settings give Table 2 of Thonet et al., 2024a
  (QA single-turn / QA multi-turn / Conv multi-turn x dev / test / mean). Other tasks go to
  one table with their own names as column labels.
- breakdown tables: per task and group (split) by default, pooled over the groups on request:
  the spec's breakdowns (e.g. question type and answer position, Table 8) with its tests
  (e.g. the one-tailed Welch p-value, Table 9, which the paper computed on test2 alone);
  the score by context length and kept share of the context in a table of their own;
- context-length curves: the budgets of a `--context-lengths` run side by side;
- length bins: the score per length bin of the tasks whose spec has `report.length_bins`, with
  each model's effective length;
- press sweeps: a `--press-sweep`'s ratios, with the paired test, KV memory and time.
Two runs of one model that both hold a task would share a cell: their rows are then told
apart by judge, then model spec, then run id.
"""

from __future__ import annotations

import csv
import io
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from lceval.engine import tokens_label
from lceval.errors import UserError
from lceval.report._inputs import ReportRun
from lceval.results import DIFFERS_MARK, UNCENSORED, UNCENSORED_LABEL, differs_from_paper

#: the columns a task with censored items gets beside its mean
CENSORED_COLUMNS = ("censored", UNCENSORED_LABEL)
#: breakdowns the engine adds to every task with a measured context (scoring.breakdowns_for)
CONTEXT_BREAKDOWNS = ("context_tokens", "context_kept_share")
DEFAULT_TABLE = "Mean score per model, task and group"


@dataclass(frozen=True)
class Column:
    group: str  # e.g. the task's column label (a LaTeX \multicolumn over its columns)
    name: str  # e.g. "dev"


@dataclass
class Table:
    title: str
    columns: list[Column]
    rows: list[tuple[str, list[float | None]]] = field(default_factory=list)
    digits: int = 2
    notes: list[str] = field(default_factory=list)


# -- rows ---------------------------------------------------------------------------------

def _tasks(run: ReportRun) -> dict[str, Any]:
    return run.results.get("tasks") or {}


def row_labels(runs: list[ReportRun]) -> list[str]:
    """The model's name; where two runs under one label hold the same task, both are told
    apart by the first of judge, model spec, reasoning settings (two thinking budgets of one
    model) and run id that differs."""
    labels = [r.name for r in runs]
    for part in (lambda r: r.judge, lambda r: r.model, lambda r: r.reasoning, lambda r: r.run_id):
        groups: dict[str, list[int]] = defaultdict(list)
        for i, label in enumerate(labels):
            groups[label].append(i)
        for label, idx in groups.items():
            seen: set[str] = set()
            clash = False
            for i in idx:
                tasks = set(_tasks(runs[i]))
                clash |= bool(tasks & seen)
                seen |= tasks
            if clash and len({part(runs[i]) for i in idx}) > 1:
                for i in idx:
                    labels[i] = f"{label} ({part(runs[i])})"
    taken: dict[str, set[str]] = defaultdict(set)
    counts: dict[str, int] = defaultdict(int)
    out = []
    for label, run in zip(labels, runs):  # the same run given twice: keep both, numbered
        if taken[label] & set(_tasks(run)):
            counts[label] += 1
            label = f"{label} #{counts[label] + 1}"
        taken[label] |= set(_tasks(run))
        out.append(label)
    return out


def _by_row(runs: list[ReportRun], labels: list[str]) -> tuple[list[str], dict[tuple[str, str], ReportRun]]:
    order = list(dict.fromkeys(labels))
    cell = {(label, task): run for label, run in zip(labels, runs) for task in _tasks(run)}
    return order, cell


def _score(run: ReportRun, task: str) -> dict[str, Any] | None:
    return (_tasks(run).get(task) or {}).get("metrics", {}).get("score")


def _is_variant(run: ReportRun, task: str) -> bool:
    return bool((_tasks(run).get(task) or {}).get("context_max_tokens"))


# -- main tables (Thonet et al., 2024a, Table 2) -----------------------------------------------------

def _placement(run: ReportRun, task: str) -> tuple[str, str, float]:
    spec = run.specs.get(task)
    table = spec.report.table if spec is not None else {}
    if table:
        return str(table["name"]), str(table["column"]), float(table.get("order", 0))
    return DEFAULT_TABLE, task, 0.0


def _groups(runs: list[ReportRun], task: str) -> list[str]:
    groups: list[str] = []
    for r in runs:
        metric = _score(r, task) or {}
        groups += [g for g in (metric.get("groups") or {}) if g not in groups]
    return [*groups, "mean"] if groups else ["all"]


def _main_value(metric: dict[str, Any] | None, group: str) -> float | None:
    if metric is None:
        return None
    if group == "all":
        return metric.get("value")
    if group == "mean":
        return metric.get("mean_of_groups")
    return ((metric.get("groups") or {}).get(group) or {}).get("value")


def _censoring(runs: list[ReportRun], task: str) -> bool:
    return any(((_tasks(r).get(task) or {}).get("accounting") or {}).get("censored") for r in runs)


def _censored_value(run: ReportRun, task: str, column: str) -> float | None:
    """`censored`: the share of items whose thinking was cut before any answer; the bound: the
    score over the uncensored items (the headline, as `_main_value` reads it)."""
    entry = _tasks(run).get(task) or {}
    if column == "censored":
        return float((entry.get("accounting") or {}).get("censored_share") or 0.0)
    bound = (entry.get("metrics") or {}).get(UNCENSORED) or _score(run, task)
    return _main_value(bound, "mean" if (bound or {}).get("groups") else "all")


def main_tables(runs: list[ReportRun], labels: list[str]) -> list[Table]:
    """Per table, a row per model and a column per task group and mean; a task whose thinking
    was censored for some item also gets its censored share and the score over the uncensored
    items (a bound, labelled so) beside its mean."""
    placed: dict[str, list[tuple[str, str]]] = defaultdict(list)
    spec_of = {t: r for r in runs for t in _tasks(r)}
    for task in _task_order(runs):
        title, column, _ = _placement(spec_of[task], task)
        placed[title].append((task, column))
    order, cell = _by_row(runs, labels)
    differs = differs_from_paper(*(_tasks(run) for run in runs))
    tables = []
    for title, entries in placed.items():
        names = [c for _, c in entries]
        layout = [(task, (column if names.count(column) == 1 else f"{column} ({task})")
                   + (DIFFERS_MARK if task in differs else ""),
                   _groups(runs, task) + (list(CENSORED_COLUMNS) if _censoring(runs, task) else []))
                  for task, column in entries]
        table = Table(title, [Column(col, g) for _, col, groups in layout for g in groups],
                      notes=[f"{DIFFERS_MARK} {task}: not comparable with the paper's number: {differs[task]}"
                             for task, _ in entries if task in differs])
        if any(CENSORED_COLUMNS[0] in groups for _, _, groups in layout):
            table.notes.append("censored: share of items whose thinking was cut (budget or window) before any "
                               "answer, counted at the bottom of the judge's scale in the score; "
                               f"{CENSORED_COLUMNS[1]}: the score over the other items, an optimistic bound")
        for label in order:
            values = [(_censored_value(cell[(label, task)], task, g) if g in CENSORED_COLUMNS else
                       _main_value(_score(cell[(label, task)], task), g)) if (label, task) in cell else None
                      for task, _, groups in layout for g in groups]
            if any(v is not None for v in values):
                table.rows.append((label, values))
        tables.append(table)
    return tables


# -- breakdown tables (Thonet et al., 2024a, Tables 3, 8 and 9) --------------------------------------

def _block(metric: dict[str, Any], group: str | None) -> dict[str, Any]:
    return metric if group is None else ((metric.get("groups") or {}).get(group) or {})


def _breakdown_table(runs: list[ReportRun], labels: list[str], task: str, group: str | None,
                     context: bool) -> Table | None:
    order, cell = _by_row(runs, labels)
    blocks = {label: _block(m, group) for label in order
              if (label, task) in cell and (m := _score(cell[(label, task)], task)) is not None}
    columns: list[Column] = []
    for block in blocks.values():
        for name, values in (block.get("breakdowns") or {}).items():
            if (name in CONTEXT_BREAKDOWNS) == context:
                columns += [c for c in (Column(name, v) for v in values) if c not in columns]
        if not context:
            columns += [c for c in (Column("tests", f"{t} p") for t in block.get("tests") or {}) if c not in columns]
    if not columns:
        return None
    where = "all groups pooled" if group is None else group
    what = "by context length and kept share of the context" if context else "breakdowns and tests"
    table = Table(f"{task}, {where}: {what}", columns)
    for label, block in blocks.items():
        values = []
        for c in columns:
            if c.group == "tests":
                values.append(((block.get("tests") or {}).get(c.name[:-2]) or {}).get("p_value"))
            else:
                values.append((((block.get("breakdowns") or {}).get(c.group) or {}).get(c.name) or {}).get("value"))
        table.rows.append((label, values))
    return table


def _task_order(runs: list[ReportRun]) -> list[str]:
    """Tasks (not budget variants) as the main tables place them: by table, then the spec's
    column order, then first seen."""
    first: dict[str, tuple[str, float, int]] = {}
    for run in runs:
        for task in _tasks(run):
            if task not in first and not _is_variant(run, task):
                title, _, order = _placement(run, task)
                first[task] = (title, order, len(first))
    titles = list(dict.fromkeys(title for title, _, _ in first.values()))
    return sorted(first, key=lambda t: (titles.index(first[t][0]), first[t][1], first[t][2]))


def breakdown_tables(runs: list[ReportRun], labels: list[str], pooled: bool = False) -> list[Table]:
    out = []
    for task in _task_order(runs):
        groups = [g for g in _groups(runs, task) if g not in ("mean", "all")]
        for group in ([None] if pooled or not groups else groups):
            for context in (False, True):
                table = _breakdown_table(runs, labels, task, group, context)
                if table is not None:
                    out.append(table)
    return out


# -- context-length curves (--context-lengths) -------------------------------------------

def curve_tables(runs: list[ReportRun], labels: list[str]) -> list[Table]:
    """Per spec run at several budgets: the score (mean of the groups) at each budget, and
    the uncut task as `full` when the same runs hold it."""
    budgets: dict[str, dict[int, str]] = defaultdict(dict)
    for run in runs:
        for task, entry in _tasks(run).items():
            if entry.get("context_max_tokens"):
                budgets[str(entry.get("spec_name", task))][int(entry["context_max_tokens"])] = task
    order, cell = _by_row(runs, labels)
    out = []
    for spec, tasks in budgets.items():
        layout = [(tokens_label(b), tasks[b]) for b in sorted(tasks)]
        if any((label, spec) in cell for label in order):
            layout.append(("full", spec))
        table = Table(f"{spec}: score by context length (tokens kept of each context, at most)",
                      [Column("context length", name) for name, _ in layout])
        for label in order:
            values = []
            for name, task in layout:
                metric = _score(cell[(label, task)], task) if (label, task) in cell else None
                values.append(None if metric is None else
                              metric.get("mean_of_groups") if metric.get("groups") else metric.get("value"))
                capped = ((_tasks(cell[(label, task)]).get(task) or {}).get("accounting") or {}).get(
                    "window_capped") if (label, task) in cell else 0
                if capped:
                    table.notes.append(f"{label} at {name}: the model's window cut {capped} contexts "
                                       "below the budget, so this point is shorter than its label")
            if any(v is not None for v in values):
                table.rows.append((label, values))
        out.append(table)
    return out


def bin_tables(runs: list[ReportRun], labels: list[str]) -> list[Table]:
    """Per curve of results.json's `length_bins` (a spec's `report.length_bins`): a row per
    model, a column per bin (shortest first), each model's effective length in the notes."""
    from lceval.results import effective_said

    curves: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for label, run in zip(labels, runs):
        for name, curve in (run.results.get("length_bins") or {}).items():
            curves[name].append((label, curve))
    out = []
    for name, entries in curves.items():
        lengths: dict[str, int] = {}
        for _, curve in entries:
            for p in curve["points"]:
                lengths.setdefault(p["label"], int(p["length"]))
        bins = sorted(lengths, key=lambda b: (lengths[b], b))
        table = Table(f"{name}: score by length bin", [Column("length bin", b) for b in bins])
        for label, curve in entries:
            at = {p["label"]: p.get("value") for p in curve["points"]}
            table.rows.append((label, [at.get(b) for b in bins]))
            table.notes.append(f"{label}: effective length {effective_said(curve)}")
        out.append(table)
    return out


# -- press sweeps (--press-sweep) ---------------------------------------------------------

def press_tables(runs: list[ReportRun]) -> list[Table]:
    """Per press sweep and task: each ratio's score, its paired difference against the
    uncompressed run, KV memory and seconds (report/_press.py)."""
    from lceval.report._press import COLUMNS, find_sweeps, sweep_table_rows, sweep_tasks, table_notes

    out = []
    for sweep in find_sweeps(runs):
        for task in sweep_tasks(sweep):
            table = Table(f"{task}: {sweep.title}, by compression ratio", [Column(g, n) for g, n, _ in COLUMNS],
                          digits=3, notes=table_notes(sweep))
            table.rows = sweep_table_rows(sweep, task)
            out.append(table)
    return out


# -- what the answers took ----------------------------------------------------------------

def token_table(runs: list[ReportRun], labels: list[str]) -> Table | None:
    """Per model and task: prompt tokens, tokens prefilled and completion tokens of the
    answers. Prefilled is empty where the backend could not tell for some answer (a sum over
    the others would pass for a total it is not)."""
    order, cell = _by_row(runs, labels)
    tasks = list(dict.fromkeys(t for r in runs for t in _tasks(r)))
    columns = [Column(t, kind) for t in tasks for kind in ("prompt", "prefilled", "completion")]
    table = Table("Tokens per model and task", columns, digits=0)
    unreported = False  # a run of the task whose backend could not tell what it prefilled
    for label in order:
        values: list[float | None] = []
        for c in columns:
            run = cell.get((label, c.group))
            tokens = ((_tasks(run).get(c.group) or {}).get("accounting", {}).get("tokens") or {}) if run else {}
            values.append(tokens.get(c.name))
            unreported |= run is not None and c.name == "prefilled" and tokens.get("prefilled") is None
        table.rows.append((label, values))
    if unreported:  # said only where such a "-" is printed (issue 19: not under every table)
        table.notes.append("prefilled: - where the backend did not report what it prefilled (a server "
                           "without cached-token counts)")
    known = any(v is not None for _, values in table.rows for v in values)
    return table if known else None


# -- rendering ----------------------------------------------------------------------------

def _cell(v: float | None, digits: int) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _digits(column: Column, table: Table) -> int:
    return 3 if column.group == "tests" else table.digits


def render_markdown(table: Table) -> str:
    head = ["model"] + [f"{c.group} {c.name}" if c.group != c.name else c.name for c in table.columns]
    lines = [f"### {table.title}\n", "| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for label, values in table.rows:
        lines.append("| " + " | ".join([label] + [_cell(v, _digits(c, table))
                                                  for c, v in zip(table.columns, values)]) + " |")
    lines += [f"\n{note}" for note in table.notes]
    return "\n".join(lines)


def render_csv(table: Table) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["table", "model", *[f"{c.group}/{c.name}" for c in table.columns]])
    for label, values in table.rows:
        writer.writerow([table.title, label, *["" if v is None else f"{v:.6g}" for v in values]])
    return buf.getvalue().rstrip("\n")


def _tex(text: str) -> str:
    return re.sub(r"([&%$#_{}])", r"\\\1", text)


def render_latex(table: Table) -> str:
    spans: list[tuple[str, int]] = []
    for c in table.columns:
        if spans and spans[-1][0] == c.group:
            spans[-1] = (c.group, spans[-1][1] + 1)
        else:
            spans.append((c.group, 1))
    lines = [f"% {table.title}", "\\begin{tabular}{l" + "r" * len(table.columns) + "}", "\\toprule",
             " & " + " & ".join(f"\\multicolumn{{{n}}}{{c}}{{{_tex(g)}}}" for g, n in spans) + " \\\\",
             "Model & " + " & ".join(_tex(c.name) for c in table.columns) + " \\\\", "\\midrule"]
    for label, values in table.rows:
        lines.append(_tex(label) + " & " + " & ".join(_cell(v, _digits(c, table))
                                                     for c, v in zip(table.columns, values)) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}"] + [f"% {note}" for note in table.notes]
    return "\n".join(lines)


RENDERERS = {"markdown": render_markdown, "csv": render_csv, "latex": render_latex}


def paper_tables(runs: list[ReportRun], fmt: str, pooled: bool = False, subset: str = "") -> str:
    """All tables over `runs`; `subset` (e.g. "qa_conv_differs=true") is said in every title."""
    if fmt not in RENDERERS:
        raise UserError(f"unknown table format '{fmt}' (known: {', '.join(RENDERERS)})", field="--format")
    if not runs:
        raise UserError("no run directories given", field="run_dirs")
    labels = row_labels(runs)
    tokens = token_table(runs, labels)
    tables = [*main_tables(runs, labels), *curve_tables(runs, labels), *bin_tables(runs, labels), *press_tables(runs),
              *breakdown_tables(runs, labels, pooled), *([tokens] if tokens else [])]
    for table in tables if subset else []:
        table.title += f" (only samples with {subset})"
    sep = "\n" if fmt == "csv" else "\n\n"
    return sep.join(RENDERERS[fmt](t) for t in tables)
