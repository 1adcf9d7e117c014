"""Printing and writing what `lceval rank` computed: console and markdown tables, and a
rankings directory (rankings.json, pairs.jsonl with every ordered judgment and its key facts,
rankings.md) written aside and renamed into place, so a failed ranking never leaves half a
directory behind."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from lceval.io import atomic_directory, text_table
from lceval.analysis._rank import Ranking


def _num(v: Any, digits: int = 1) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _ci(entry: dict[str, Any] | None, digits: int = 1) -> str:
    if not entry or entry.get("ci_low") is None:
        return "-"
    return f"[{entry['ci_low']:.{digits}f}, {entry['ci_high']:.{digits}f}]"


def _render(rows: list[list[str]], markdown: bool) -> str:
    return "\n".join(text_table(rows, rule=False, markdown=markdown))


def _ranking_table(block: dict[str, Any], markdown: bool) -> str:
    ref = block.get("reference") or {}
    ref_systems = ref.get("systems") or {}
    bt = block.get("bradley_terry") or {}
    head = ["rank", "system", "Elo", "CI", "order sd", "Bradley-Terry", "CI"]
    if ref_systems:
        head += ["reference", "CI", "ref rank"]
    rows = [head]
    for i, system in enumerate(block["order"], 1):
        e = block["elo"][system]
        row = [str(i), system, _num(e["rating"]), _ci(e), _num(e["order_sd"]),
               _num((bt.get(system) or {}).get("rating")), _ci(bt.get(system))]
        if ref_systems:
            r = ref_systems.get(system)
            row += [_num(r and r["mean"], 3), _ci(r, 3), str(r["rank"]) if r else "-"]
        rows.append(row)
    return _render(rows, markdown)


def _matrix_table(block: dict[str, Any], markdown: bool) -> str:
    matrix = block["matrix"]
    systems = list(matrix)
    rows = [["row vs column"] + systems]
    for row in systems:
        cells = []
        for col in systems:
            cell = matrix[row].get(col) if col != row else None
            cells.append("-" if cell is None else f"{100 * cell['mean']:.1f}% (n={cell['n']})")
        rows.append([row] + cells)
    return _render(rows, markdown)


def format_ranking(ranking: Ranking, markdown: bool = False) -> str:
    rep = ranking.report
    opts, acc = rep["options"], rep["accounting"]
    level = int(round(100 * opts["level"]))
    h = "## " if markdown else ""
    out = [f"{h}Pairwise ranking: {len(rep['systems'])} systems, judge {rep['judge']['flag']}",
           f"{acc['units']} units, {acc['pairs_ranked']} of {acc['pairs']} pairs ranked; "
           f"{acc['ordered_judgments']} ordered judgments: {acc['ok']} ok, {acc['parse_failures']} parse failures, "
           f"{acc['missing']} missing.",
           f"Elo: K={opts['k_factor']:g}, initial {opts['initial']:g}, mean over {opts['n_orders']} random match orders "
           f"(Gong et al., 2024, eqs. 1-2); Bradley-Terry: maximum likelihood"
           + (f" with {opts['bt_prior']:g} virtual draw(s) per pair" if opts["bt_prior"] else "")
           + f"; {level}% intervals from {opts['n_boot']} bootstrap resamples of units."]
    excluded = {s: v["excluded"] for s, v in rep["systems"].items() if v["excluded"]}
    if excluded:
        out.append("Left out (no usable answer): " + ", ".join(f"{s} {n}" for s, n in excluded.items()) + ".")
    for criterion in rep["criteria"]:
        block = rep["rankings"][criterion]
        out.append("")
        out.append(f"{'### ' if markdown else ''}{criterion}")
        if "elo" not in block:
            out.append(block.get("note", "nothing to rank"))
            continue
        out.append(_ranking_table(block, markdown))
        if block.get("bradley_terry_note"):
            out.append(f"Bradley-Terry: {block['bradley_terry_note']}")
        elif (block.get("bt_fit") or {}).get("note"):
            out.append(f"Bradley-Terry: {block['bt_fit']['note']}")
        ref = block.get("reference")
        if ref:
            for method, name in (("elo", "Elo"), ("bradley_terry", "Bradley-Terry")):
                agree = ref.get(f"agreement_{method}")
                if agree:
                    same = agree["pairs_same_order"]
                    order = (f"the same order for {100 * same:.0f}% of the {agree['pairs'] - agree['pairs_tied']} "
                             "system pairs both separate" if same is not None else "no system pair both separate")
                    tied = f", {agree['pairs_tied']} tied pair(s) left out" if agree["pairs_tied"] else ""
                    out.append(f"Agreement of {name} with the reference ({', '.join(ref['judge'])}): "
                               f"Spearman {_num(agree['spearman'], 2)}, Kendall {_num(agree['kendall'], 2)}; "
                               f"{order}{tied} ({agree['systems']} systems).")
        bias = block["position_bias"]
        if bias.get("pairs_both_orders"):
            out.append(f"Position bias: shown-first minus shown-second {bias['first_minus_second']:+.3f} "
                       f"{_ci(bias, 3)} over {bias['pairs_both_orders']} pairs judged in both orders; "
                       f"the same winner in both orders for {100 * bias['same_winner_both_orders']:.0f}%.")
        out.append("")
        out.append("Pairwise scores (row's mean score when compared with the column; Gong et al., 2024, Table 3):")
        out.append(_matrix_table(block, markdown))
    return "\n".join(out)


def write_ranking(ranking: Ranking, output: Path, name: str) -> Path:
    with atomic_directory(output, name) as (tmp, final):
        report = {**ranking.report, "ranking_id": final.name, "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        (tmp / "rankings.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        with open(tmp / "pairs.jsonl", "w", encoding="utf-8") as fh:
            for rec in ranking.judgments:
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
        (tmp / "rankings.md").write_text(format_ranking(ranking, markdown=True) + "\n", encoding="utf-8")
    return final
