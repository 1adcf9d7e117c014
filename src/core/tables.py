"""The papers' tables from finished runs, as markdown, CSV or LaTeX.

Laid out from results.json alone, so any task whose spec declares `report.group_by` and
`report.breakdowns` gets them: one row per model; a main table with, per task, one column per
group (e.g. split dev / test2) and the mean of the groups (paper 000, Table 2), and per task a
breakdown table (e.g. question type and answer position, Table 3) with the spec's tests
(e.g. the one-tailed Welch p-value, Table 9).
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field

from .errors import UserError
from .rundir import FinishedRun


@dataclass
class Column:
    group: str  # e.g. the task (a LaTeX \multicolumn over its columns)
    name: str  # e.g. "dev"


@dataclass
class Table:
    title: str
    columns: list[Column]
    rows: list[tuple[str, list[float | None]]] = field(default_factory=list)
    digits: int = 2


def short_model_name(model: str) -> str:
    """`replay:FILE#GPT-4` -> `GPT-4`, `hf:org/Model,opt=1` -> `Model`: the last path-like
    component without options, which is what a paper's table calls the model."""
    base = model.split(",")[0]
    return re.split(r"[#/:]", base)[-1] or model


def _row_labels(runs: list[FinishedRun]) -> list[str]:
    short = [short_model_name(r.model) for r in runs]
    labels = [s if short.count(s) == 1 else r.model for s, r in zip(short, runs)]
    return [lab if labels.count(lab) == 1 else f"{lab} ({r.run_id})" for lab, r in zip(labels, runs)]


def _task_order(runs: list[FinishedRun]) -> list[str]:
    order: list[str] = []
    for r in runs:
        order += [t for t in r.results.get("tasks", {}) if t not in order]
    return order


def main_table(runs: list[FinishedRun], labels: list[str]) -> Table:
    tasks = _task_order(runs)
    layout: dict[str, list[str]] = {}
    for t in tasks:
        groups: list[str] = []
        for r in runs:
            metric = r.results["tasks"].get(t, {}).get("metrics", {}).get("score", {})
            groups += [g for g in (metric.get("groups") or {}) if g not in groups]
        layout[t] = [*groups, "mean"] if groups else ["all"]
    table = Table("Mean score per model, task and group", [Column(t, g) for t in tasks for g in layout[t]])
    for label, r in zip(labels, runs):
        values: list[float | None] = []
        for t in tasks:
            metric = r.results["tasks"].get(t, {}).get("metrics", {}).get("score")
            for g in layout[t]:
                if metric is None:
                    values.append(None)
                elif g == "all":
                    values.append(metric.get("value"))
                elif g == "mean":
                    values.append(metric.get("mean_of_groups"))
                else:
                    values.append((metric.get("groups") or {}).get(g, {}).get("value"))
        table.rows.append((label, values))
    return table


def breakdown_tables(runs: list[FinishedRun], labels: list[str]) -> list[Table]:
    out = []
    for t in _task_order(runs):
        columns: list[Column] = []
        for r in runs:
            metric = r.results["tasks"].get(t, {}).get("metrics", {}).get("score", {})
            for fieldname, groups in (metric.get("breakdowns") or {}).items():
                columns += [c for c in (Column(fieldname, g) for g in groups) if c not in columns]
            for test in metric.get("tests") or {}:
                col = Column("tests", f"{test} p")
                if col not in columns:
                    columns.append(col)
        if not columns:
            continue
        table = Table(f"{t}: breakdowns (all groups pooled) and tests", columns)
        for label, r in zip(labels, runs):
            metric = r.results["tasks"].get(t, {}).get("metrics", {}).get("score")
            if metric is None:
                continue
            values: list[float | None] = []
            for c in columns:
                if c.group == "tests":
                    values.append((metric.get("tests") or {}).get(c.name[:-2], {}).get("p_value"))
                else:
                    values.append((metric.get("breakdowns") or {}).get(c.group, {}).get(c.name, {}).get("value"))
            table.rows.append((label, values))
        out.append(table)
    return out


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
    lines += ["\\bottomrule", "\\end{tabular}"]
    return "\n".join(lines)


RENDERERS = {"markdown": render_markdown, "csv": render_csv, "latex": render_latex}


def paper_tables(runs: list[FinishedRun], fmt: str) -> str:
    if fmt not in RENDERERS:
        raise UserError(f"unknown table format '{fmt}' (known: {', '.join(RENDERERS)})", field="--format")
    if not runs:
        raise UserError("no run directories given", field="run_dirs")
    labels = _row_labels(runs)
    tables = [main_table(runs, labels), *breakdown_tables(runs, labels)]
    sep = "\n" if fmt == "csv" else "\n\n"
    return sep.join(RENDERERS[fmt](t) for t in tables)
