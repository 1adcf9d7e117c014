"""`lceval helmet report RUN_DIR... [--format table|markdown|json]`: HELMET's category scores and
their average per model and length, as the authors' scripts/collect_results.py computes them
(princeton-nlp/HELMET at 4526dfb, `custom_avgs`): a category is the unweighted mean of its
datasets' scores at one length (Cite: six numbers, ASQA's str_em, citation recall and precision
and QAMPARI's recall@5, citation recall and precision), the average the mean of the seven
categories. As pandas' mean there, a missing dataset is left out of its category's mean; here the
table also says how many of a category's numbers were there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lceval.errors import UserError
from lceval.interfaces import Command

#: collect_results.py custom_avgs: (task, metric label) per category; "score" is the headline
CATEGORIES: dict[str, list[tuple[str, str]]] = {
    "Recall": [("helmet_json_kv", "score"), ("helmet_ruler_mk_needle", "score"), ("helmet_ruler_mk_uuid", "score"),
               ("helmet_ruler_mv", "score")],
    "RAG": [("helmet_nq", "score"), ("helmet_hotpotqa", "score"), ("helmet_popqa", "score"),
            ("helmet_triviaqa", "score")],
    "ICL": [("helmet_trec_coarse", "score"), ("helmet_trec_fine", "score"), ("helmet_banking77", "score"),
            ("helmet_clinic150", "score"), ("helmet_nlu", "score")],
    "Cite": [("helmet_asqa", "score"), ("helmet_asqa", "citation_rec"), ("helmet_asqa", "citation_prec"),
             ("helmet_qampari", "score"), ("helmet_qampari", "citation_rec"), ("helmet_qampari", "citation_prec")],
    "Re-rank": [("helmet_msmarco", "score")],
    "LongQA": [("helmet_narrativeqa", "score"), ("helmet_infbench_qa", "score"), ("helmet_infbench_choice", "score")],
    "Summ": [("helmet_infbench_sum", "score"), ("helmet_multi_lexsum", "score")],
}


def _values(results: dict[str, Any]) -> dict[tuple[str, str, str], float]:
    """(task, metric label, length) -> value, from a results.json's per-length groups."""
    out: dict[tuple[str, str, str], float] = {}
    for task, block in (results.get("tasks") or {}).items():
        for label, metric in (block.get("metrics") or {}).items():
            groups = metric.get("groups") if isinstance(metric, dict) else None
            for length, group in (groups or {}).items():
                if isinstance(group, dict) and group.get("value") is not None:
                    out[(task, label, length)] = float(group["value"])
    return out


def helmet_report(run_dirs: list[Path]) -> list[dict[str, Any]]:
    """One row per model and length: each category's mean (None when none of its numbers is there),
    how many of its numbers were, and the average of the categories present."""
    values: dict[str, dict[tuple[str, str, str], float]] = {}
    for run_dir in run_dirs:
        path = run_dir / "results.json"
        if not path.is_file():
            raise UserError(f"{run_dir} holds no results.json (a run directory of lceval run)", field="RUN_DIR")
        try:
            results = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise UserError(f"{path} is no JSON: {exc}", field="RUN_DIR") from None
        values.setdefault(str(results.get("model") or run_dir.name), {}).update(_values(results))
    rows = []
    for model, found in values.items():
        lengths = sorted({k[2] for k in found}, key=lambda x: (len(x), x))
        for length in lengths:
            row: dict[str, Any] = {"model": model, "length": length}
            means = []
            for name, members in CATEGORIES.items():
                got = [found[(t, m, length)] for t, m in members if (t, m, length) in found]
                row[name] = sum(got) / len(got) if got else None
                row[f"{name}_n"] = f"{len(got)}/{len(members)}"
                if got:
                    means.append(row[name])
            row["Average"] = sum(means) / len(means) if means else None
            row["categories"] = len(means)
            if means:
                rows.append(row)
    if not rows:
        raise UserError("no HELMET task's score by length in these runs (run helmet tasks: lceval run --tasks helmet)",
                        field="RUN_DIR")
    return rows


def format_report(rows: list[dict[str, Any]], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(rows, indent=2)
    head = ["model", "length", *CATEGORIES, "Average"]

    def cell(row: dict[str, Any], name: str) -> str:
        value = row.get(name)
        if name in ("model", "length"):
            return str(value)
        if value is None:
            return "-"
        mark = "" if name == "Average" and row["categories"] == len(CATEGORIES) else \
            f" ({row[name + '_n']})" if name != "Average" and row[name + "_n"].split("/")[0] != row[name + "_n"].split("/")[1] \
            else f" ({row['categories']}/7)" if name == "Average" else ""
        return f"{value:.1f}{mark}"

    table = [[cell(r, h) for h in head] for r in rows]
    if fmt == "markdown":
        return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                         + ["| " + " | ".join(r) + " |" for r in table])
    widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in table]
    return "\n".join(lines) + "\n\n(n/m: the category's numbers present, of HELMET's; its mean is over those)"


class HelmetCommand(Command):
    help = "HELMET's category scores and average per model and length (scripts/collect_results.py)"

    def add_arguments(self, parser: Any) -> None:
        sub = parser.add_subparsers(dest="helmet_command", required=True)
        r = sub.add_parser("report", help="the seven categories' means and their average, per model and length")
        r.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories of `lceval run --tasks helmet`")
        r.add_argument("--format", choices=["table", "markdown", "json"], default="table")

    def run(self, args: Any) -> str:
        return format_report(helmet_report([Path(p) for p in args.run_dirs]), args.format)
