"""`lceval ruler report RUN_DIR...`: what a RULER sweep says, read from finished runs.

Per run: the score of each ruler task at each length of its `--context-lengths` sweep with a
95% interval over its samples (haystacks resampled), the mean curve over the tasks swept at
the same lengths (RULER's "Avg."), the effective length (RULER, Hsieh et al. 2024, Sec. 4:
the longest length such that it and every shorter one score at least the threshold, 85.6 =
Llama-2-7B at 4k by default), and, for needle tasks, the score by needle depth (rows) and
length (columns). The curves are `lceval.results.length_curves`, the same computation as the
`length_curves` block of results.json, redone here so that `--threshold` can move the bar;
the depth cells are the variants' `depth` breakdowns of results.json.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from lceval.errors import UserError

__all__ = ["DEFAULT_THRESHOLD", "format_report", "ruler_report", "run_report"]

DEFAULT_THRESHOLD = 85.6  # RULER's Llama-2-7B baseline at 4k (paper, Sec. 4)
TASK_TYPES = ("ruler_niah", "ruler_vt", "ruler_cwe", "ruler_fwe")


def _num(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return float("inf")


def run_report(run: Any, threshold: float | None = None) -> dict[str, Any]:
    """The report of one finished run (`lceval.results.FinishedRun`)."""
    from lceval.results import length_curves, run_model_name

    tasks = {name: entry for name, entry in run.results.get("tasks", {}).items()
             if entry.get("type") in TASK_TYPES}
    specs: dict[str, dict[str, Any]] = {}
    for name in tasks:
        spec = copy.deepcopy(run.task_spec(name))
        report = spec.setdefault("report", {})
        if threshold is not None or report.get("effective_length_threshold") is None:
            report["effective_length_threshold"] = DEFAULT_THRESHOLD if threshold is None else threshold
        specs[name] = spec
    samples = {name: run.task_samples(name) for name in tasks}
    curves = length_curves(tasks, samples, specs)
    depth_tables = {}
    for base, curve in curves.items():
        if base == "mean":
            continue
        table = _depth_table(tasks, curve)
        if table is not None:
            depth_tables[base] = table
    if len(depth_tables) >= 2:
        depth_tables["mean"] = _mean_table(list(depth_tables.values()))
    return {"run": str(run.path), "run_id": run.run_id, "model": run_model_name(run), "curves": curves,
            "depth_tables": depth_tables}


def _depth_table(tasks: dict[str, Any], curve: dict[str, Any]) -> dict[str, Any] | None:
    """Rows: needle depths; columns: the curve's lengths; cells: the score of the samples
    whose needle was at that depth (value, n)."""
    columns, cells_by_col = [], []
    for point in curve["points"]:
        breakdown = tasks[point["task"]]["metrics"]["score"].get("breakdowns", {}).get("depth")
        if not breakdown:
            continue
        columns.append(point["label"])
        cells_by_col.append(breakdown)
    if not columns:
        return None
    depths = sorted({d for col in cells_by_col for d in col}, key=_num)
    cells = [[_cell(col.get(d)) for col in cells_by_col] for d in depths]
    return {"depths": depths, "lengths": columns, "cells": cells}


def _cell(block: dict[str, Any] | None) -> dict[str, Any] | None:
    if not block or block.get("value") is None:
        return None
    return {"value": float(block["value"]), "n": int(block.get("n", 0))}


def _mean_table(tables: list[dict[str, Any]]) -> dict[str, Any]:
    """The mean over needle tasks of each (depth, length) cell that every table has."""
    depths = sorted({d for t in tables for d in t["depths"]}, key=_num)
    lengths = [label for label in tables[0]["lengths"] if all(label in t["lengths"] for t in tables)]
    cells = []
    for d in depths:
        row = []
        for label in lengths:
            found = [t["cells"][t["depths"].index(d)][t["lengths"].index(label)] if d in t["depths"] else None
                     for t in tables]
            if any(c is None for c in found):
                row.append(None)
            else:
                row.append({"value": sum(c["value"] for c in found) / len(found), "n": sum(c["n"] for c in found)})
        cells.append(row)
    return {"depths": depths, "lengths": lengths, "cells": cells, "tasks": len(tables)}


def ruler_report(run_dirs: list[Path], threshold: float | None = None) -> list[dict[str, Any]]:
    from lceval.results import load_run

    out = []
    for path in run_dirs:
        report = run_report(load_run(Path(path)), threshold)
        if not report["curves"]:
            raise UserError("the run has no ruler task swept over --context-lengths", file=Path(path),
                            hint="Run e.g.: lceval run --tasks ruler --model M --context-lengths 4k,8k")
        out.append(report)
    return out


# -- text ------------------------------------------------------------------------------------

def _fmt_point(point: dict[str, Any]) -> str:
    if point["value"] is None:
        return "n/a"
    ci = point.get("ci")
    return f"{point['value']:.1f}" + (f" ({ci[0]:.1f}-{ci[1]:.1f})" if ci else "")


def _eff(curve: dict[str, Any]) -> str:
    from lceval.engine import tokens_label

    length = curve.get("effective_length")
    return "none" if length is None else tokens_label(int(length))


def _grid(head: list[str], rows: list[list[str]], markdown: bool) -> list[str]:
    if markdown:
        return ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"] + \
            ["| " + " | ".join(r) + " |" for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return [line(head)] + [line(r) for r in rows]


def format_report(reports: list[dict[str, Any]], fmt: str = "table") -> str:
    if fmt == "json":
        return json.dumps(reports, indent=1)
    markdown = fmt == "markdown"
    lines: list[str] = []
    for rep in reports:
        curves = rep["curves"]
        labels: list[str] = []
        for curve in curves.values():
            labels += [p["label"] for p in curve["points"] if p["label"] not in labels]
        threshold = next((c["threshold"] for c in curves.values() if c.get("threshold") is not None), None)
        title = f"{rep['model']} ({rep['run_id']}): score by length, 95% interval over samples"
        lines += [("### " if markdown else "") + title, ""]
        rows = []
        for name, curve in curves.items():
            by_label = {p["label"]: p for p in curve["points"]}
            n = sorted({p["n"] for p in curve["points"]})
            rows.append([name if name != "mean" else f"mean of {len(curve.get('tasks', []))} tasks"]
                        + [_fmt_point(by_label[lab]) if lab in by_label else "" for lab in labels]
                        + [_eff(curve), "/".join(str(x) for x in n)])
        lines += _grid(["task", *labels, "effective length", "n"], rows, markdown)
        lines += ["", f"effective length: the longest length such that it and every shorter one score >= "
                      f"{threshold if threshold is not None else 'the threshold'}", ""]
        for name, table in rep["depth_tables"].items():
            what = f"mean of {table['tasks']} needle tasks" if name == "mean" else name
            lines += [("#### " if markdown else "") + f"{what}: score by needle depth (rows, %) and length (columns)", ""]
            body = [[str(d)] + ["" if c is None else f"{c['value']:.1f}" for c in row]
                    for d, row in zip(table["depths"], table["cells"])]
            lines += _grid(["depth", *table["lengths"]], body, markdown) + [""]
    return "\n".join(lines).rstrip() + "\n"
