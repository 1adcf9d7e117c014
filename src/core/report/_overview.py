"""The HTML report's tables: the overview (models x tasks, ranked), each task's table in the
console's words, its length curve and breakdowns, and the runs.

One number, one rendering: a score has two decimals and a p-value three, as the console
prints them (`lceval.results.format_table`), and a cell labelled as the console labels its
row ("mean of groups", "dev lost_in_the_middle", "trunc"). Tests are shown per group as the
spec's groups ask (the console's rule); a test pooled over groups appears only labelled
"pooled (dev + test2)". A cell without an interval says why (one meeting only, no score)
next to its n, and seeds read "1 seed (2023)".
"""

from __future__ import annotations

import re
from html import escape
from typing import Any

from lceval.report._charts import fmt, numeric_order
from lceval.report._figures import (base_task, breakdown_fields, breakdown_values,
                                    is_variant, metric_label, unit_of, why_no_interval)
from lceval.interfaces import ReportContext
from lceval.results import DIFFERS_MARK, UNCENSORED, UNCENSORED_LABEL, differs_from_paper, headline_block


def p_text(p: float | None) -> str:
    """The report's one rule for p-values (the console's): three decimals."""
    return "–" if p is None else f"{p:.3f}"


def anchor(prefix: str, name: str) -> str:
    """A stable, valid id for a section or table: `task-elitr_qa`, `task-needle-1k`."""
    return f"{prefix}-" + re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")


def interval_cell(block: dict[str, Any] | None, digits: int = 2, unit: str = "item", link: str = "") -> str:
    """A table cell for a results.json summary: the value, then its interval, or why it has
    none next to its n (never a bare blank)."""
    if not block or block.get("value") is None:
        why = why_no_interval(block or {}, unit) if block else "not run"
        return f'<td class="num" data-sort="">–<span class="ci">{escape(why)}</span></td>'
    spread = block.get("spread") or {}
    value = f'{block["value"]:.{digits}f}'
    if link:
        value = f'<a href="{escape(link)}">{value}</a>'
    if spread.get("ci_low") is not None:
        ci = f'<span class="ci">[{spread["ci_low"]:.{digits}f}, {spread["ci_high"]:.{digits}f}]</span>'
    elif "spread" in block or block.get("n") is not None:
        ci = f'<span class="ci">no interval: {escape(why_no_interval(block, unit))}</span>'
    else:
        ci = ""
    n = f'<span class="n">n={block["n"]}</span>' if block.get("n") is not None else ""
    return f'<td class="num" data-sort="{block["value"]:.6g}">{value}{ci}{n}</td>'


def table(head: list[str], rows: list[str], cls: str = "results", caption: str = "",
          titles: dict[str, str] | None = None) -> str:
    """A sortable table; `titles` explains a header on hover (e.g. "trunc")."""
    th = "".join(f'<th scope="col"{f" title={chr(34)}{escape(titles[h])}{chr(34)}" if titles and h in titles else ""}>'
                 f"{escape(h)}</th>" for h in head)
    cap = f"<caption>{escape(caption)}</caption>" if caption else ""
    return (f'<div class="scroll"><table class="{cls} sortable">{cap}<thead><tr>{th}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def seeds_text(seeds: list[Any], across: dict[str, Any] | None) -> str:
    """`1 seed (2023)`, or `3 seeds (1, 2, 3): 6.40 ± 0.20` (mean ± sample std over seeds)."""
    listed = ", ".join(map(str, seeds))
    text = f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''} ({listed})" if seeds else "no seed recorded"
    if across and across.get("mean") is not None:
        text += f": {fmt(across['mean'])} ± {fmt(across['std'])}"
    return text


def headline(score: dict[str, Any] | None) -> float | None:
    """The task's headline, as the console's last row: the mean of groups, else the mean."""
    if not score:
        return None
    return score.get("mean_of_groups") if score.get("groups") else score.get("value")


# -- the overview ----------------------------------------------------------------------------

def _effective(curve: dict[str, Any]) -> str:
    """The console's words for an effective length."""
    eff, threshold = curve.get("effective_length"), curve.get("threshold")
    if threshold is None:
        return "n/a: no threshold"
    if eff is None:
        return f"none (< {threshold:g} at the shortest)"
    return (f"{eff // 1024}k" if eff % 1024 == 0 else str(eff)) + f" (>= {threshold:g})"


def _ranks(values: dict[str, float | None]) -> dict[str, int]:
    """1 = highest; equal values share a rank."""
    known = sorted({v for v in values.values() if v is not None}, reverse=True)
    out, rank = {}, 1
    for v in known:
        tied = [k for k, x in values.items() if x == v]
        for k in tied:
            out[k] = rank
        rank += len(tied)
    return out


def _ci_inline(block: dict[str, Any], unit: str) -> str:
    spread = block.get("spread") or {}
    if spread.get("ci_low") is not None:
        return f'<span class="ci-inline">[{fmt(spread["ci_low"])}, {fmt(spread["ci_high"])}]</span>'
    return f'<span class="ci-inline">n={block.get("n")}, no interval: {escape(why_no_interval(block, unit))}</span>'


def model_order(ctx: ReportContext) -> list[str]:
    """The run labels best first: by mean rank over the tasks (each task ranked by its
    headline), ties in the order the runs were given."""
    labels = list(dict.fromkeys(ctx.labels))
    heads: dict[str, dict[str, float | None]] = {}
    for run, label in zip(ctx.runs, ctx.labels):
        for task, entry in (run.results.get("tasks") or {}).items():
            if not is_variant(entry):
                heads.setdefault(task, {})[label] = headline((entry.get("metrics") or {}).get("score"))
    ranks = [_ranks(values) for values in heads.values() if sum(v is not None for v in values.values()) >= 2]
    mean = {lab: sum(r) / len(r) for lab in labels if (r := [rk[lab] for rk in ranks if lab in rk])}
    return sorted(labels, key=lambda lab: (mean.get(lab, float("inf")), labels.index(lab)))


def overview(ctx: ReportContext, anchors: dict[str, str]) -> str:
    """Models x tasks, one line per model, best model first: each task's groups with their
    intervals and its headline (the console's "mean of groups", or the mean) with the model's
    rank in that column, the best marked, every value linked to the task's section; a swept
    task's effective length; the mean rank when there are two tasks or more."""
    labels = list(dict.fromkeys(ctx.labels))
    cells: dict[tuple[str, str], tuple[dict[str, Any], dict[str, Any]]] = {}
    tasks: list[str] = []
    groups: dict[str, list[str]] = {}
    curves: dict[tuple[str, str], dict[str, Any]] = {}
    swept: list[str] = []
    for run, label in zip(ctx.runs, ctx.labels):
        for task, entry in (run.results.get("tasks") or {}).items():
            if is_variant(entry):
                continue
            tasks += [task] if task not in tasks else []
            score = (entry.get("metrics") or {}).get("score") or {}
            cells[(label, task)] = (entry, score)
            groups.setdefault(task, [])
            groups[task] += [g for g in score.get("groups") or {} if g not in groups[task]]
        for name, curve in (run.results.get("length_curves") or {}).items():
            swept += [name] if name not in swept else []
            curves[(label, name)] = curve
    # a rank (and a best) only where two models or more have the task: one model alone is no contest
    ranks = {t: _ranks({lab: headline(cells[(lab, t)][1]) if (lab, t) in cells else None for lab in labels})
             for t in tasks}
    ranks = {t: r if len(r) >= 2 else {} for t, r in ranks.items()}
    mean_rank = {lab: sum(r) / len(r) for lab in labels if (r := [ranks[t][lab] for t in tasks if lab in ranks[t]])}
    order = model_order(ctx)
    differs = differs_from_paper(*((run.results.get("tasks") or {}) for run in ctx.runs))
    head = ["model"]
    for t in tasks:
        mark = DIFFERS_MARK if t in differs else ""
        head += [f"{t}{mark} · {g}" for g in groups[t]] + [f"{t}{mark} · {'mean of groups' if groups[t] else 'score'}"]
    head += [f"{s}: effective length" for s in swept]
    if len(tasks) >= 2:
        head.append("mean rank")
    rows = []
    for lab in order:
        tds = [f'<th scope="row">{escape(lab)}</th>']
        for t in tasks:
            link = f"#{anchors[t]}"
            if (lab, t) not in cells:
                tds += ['<td class="num" data-sort="">– <span class="ci-inline">not run</span></td>'] * (len(groups[t]) + 1)
                continue
            entry, score = cells[(lab, t)]
            unit = unit_of(entry.get("cluster_by"))
            for g in groups[t]:
                block = (score.get("groups") or {}).get(g)
                if not block or block.get("value") is None:
                    tds.append('<td class="num" data-sort="">–</td>')
                    continue
                tds.append(f'<td class="num" data-sort="{block["value"]:.6g}" title="n={block.get("n")}">'
                           f'<a href="{link}">{fmt(block["value"])}</a> {_ci_inline(block, unit)}</td>')
            value, rank = headline(score), ranks[t].get(lab)
            if value is None:
                tds.append(f'<td class="num head" data-sort="">–<span class="ci-inline">'
                           f'{escape(why_no_interval(score, unit))}</span></td>')
                continue
            best = rank == 1
            ci = " " + _ci_inline(headline_block(score), unit)  # the interval of the headline itself
            badge = ' <span class="best-badge">best</span>' if best else ""
            ranked = f' <span class="rank">rank {rank}/{len(ranks[t])}</span>' if rank else ""
            share = (entry.get("accounting") or {}).get("censored_share")
            censored = (f' <span class="censored" title="items whose thinking was cut before any answer, in the '
                        f'score at the bottom of the scale">{share:.0%} censored</span>' if share else "")
            tds.append(f'<td class="num head{" best" if best else ""}" data-sort="{value:.6g}" data-task="{escape(t)}" '
                       f'title="n={score.get("n")}"><a href="{link}"><b>{fmt(value)}</b></a>{ci}'
                       f'{ranked}{badge}{censored}</td>')
        for s in swept:
            curve = curves.get((lab, s))
            tds.append(f'<td class="num">{escape(_effective(curve)) if curve else "–"}</td>')
        if len(tasks) >= 2:
            avg = mean_rank.get(lab)
            n_ranked = sum(1 for t in tasks if lab in ranks[t])
            tds.append(f'<td class="num" data-sort="{"" if avg is None else avg}" title="over {n_ranked} task(s)">'
                       f'{"–" if avg is None else f"{avg:.1f}"}</td>')
        rows.append("<tr>" + "".join(tds) + "</tr>")
    units = ", ".join(dict.fromkeys(f"{unit_of(entry.get('cluster_by'))}s for {t}" for (_, t), (entry, _) in cells.items()))
    explain = ("Models ordered by rank. Per task: each group's mean score with its 95% interval, then the headline "
               f"the console prints (the mean of the groups' means, its interval resampling the task's own units "
               f"within each group: {units}; without groups, the mean and its interval) with "
               "the model's rank (1 = highest), the best marked. Hover a cell for n; click a score for the task's "
               "section, a header to sort.")
    notes = "".join(f'<p class="note warn">{DIFFERS_MARK} {escape(t)}: not comparable with the paper\'s number: '
                    f"{escape(why)}</p>" for t, why in differs.items() if t in tasks)
    return (f'<p class="desc">{escape(explain)}</p>' + table(head, rows, cls="results overview",
                                                              caption="Score per model and task") + notes)


# -- a task's tables -------------------------------------------------------------------------

HEAD_TITLES = {"trunc": "share of contexts truncated", "skip": "share of contexts skipped (did not fit)",
               "no-score": "answers without a score: judge parse failures, missing verdicts, unanswered",
               "censored": "share of items whose thinking was cut (budget or window) before any answer: in the "
                           "score at the bottom of the judge's scale, left out of the uncensored bound",
               UNCENSORED_LABEL: "the score over the uncensored items only: an optimistic bound when the censored "
                                 "items were the hard ones",
               "mean of groups": "the mean of the groups' means (the headline)"}


def task_table(task: str, ctx: ReportContext) -> str:
    """Models x the console's rows of one task: each group with its interval and n, the mean of
    groups, seeds, further metrics, each group's tests (p and n = inside/outside), and what was
    cut or not scored."""
    idx = [i for i, r in enumerate(ctx.runs) if task in (r.results.get("tasks") or {})]
    entries = [ctx.runs[i].results["tasks"][task] for i in idx]
    groups: list[str] = []
    metrics: list[str] = []
    tests: list[tuple[str | None, str]] = []
    for t in entries:
        score = t["metrics"].get("score") or {}
        groups += [g for g in (score.get("groups") or {}) if g not in groups]
        metrics += [m for m in t["metrics"] if m != "score" and m not in metrics]
        per_group = [(g, x) for g, b in (score.get("groups") or {}).items() for x in (b.get("tests") or {})]
        for key in per_group or [(None, x) for x in (score.get("tests") or {})]:
            tests += [key] if key not in tests else []
    metric = metric_label(ctx, task)
    censoring = any((t.get("accounting") or {}).get("censored") for t in entries)
    head = ["model", *groups, "mean of groups" if groups else metric, "seeds",
            *[UNCENSORED_LABEL if m == UNCENSORED else m for m in metrics],
            *[f"{g} {x}" if g else x for g, x in tests], "trunc", "skip", "no-score",
            *(["censored"] if censoring else [])]
    rows = []
    for i, t in zip(idx, entries):
        score = t["metrics"].get("score") or {}
        unit = unit_of(t.get("cluster_by"))
        cells = [f'<th scope="row">{escape(ctx.labels[i])}</th>']
        cells += [interval_cell((score.get("groups") or {}).get(g), unit=unit) for g in groups]
        cells.append(interval_cell(headline_block(score), unit=unit))  # the console's last row
        seeds = ctx.runs[i].results.get("seeds") or []
        cells.append(f"<td>{escape(seeds_text(seeds, score.get('across_seeds')))}</td>")
        for m in metrics:
            block = t["metrics"].get(m) or {}
            if block.get("groups"):
                v = block.get("mean_of_groups")
                cells.append(f'<td class="num" data-sort="{"" if v is None else f"{v:.6g}"}">{fmt(v)}'
                             f'<span class="n">mean of groups, n={block.get("n")}</span></td>')
            else:
                cells.append(interval_cell(block, unit=unit))
        for g, x in tests:
            src = (score.get("groups") or {}).get(g) or {} if g else score
            res = (src.get("tests") or {}).get(x)
            if not res:
                cells.append('<td class="num" data-sort="">–</td>')
                continue
            p = res.get("p_value")
            why = "" if p is not None else f'<span class="ci">n/a: {escape(str(res.get("note") or "no test"))}</span>'
            cells.append(f'<td class="num" data-sort="{"" if p is None else p}">'
                         f'{"p=" + p_text(p) if p is not None else "–"}{why}'
                         f'<span class="n">n={res.get("n_a", "?")}/{res.get("n_b", "?")}</span></td>')
        acc = t.get("accounting") or {}
        not_scored = sum(int(acc.get(k, 0) or 0) for k in ("judge_parse_failures", "judge_missing", "unanswered"))
        not_scored -= int(acc.get("censored") or 0)  # in the score, at the bottom of the scale
        cells += [f'<td class="num">{acc.get("truncated_share", 0):.0%}</td>',
                  f'<td class="num">{acc.get("skipped_share", 0):.0%}</td>', f'<td class="num">{not_scored}</td>']
        if censoring:
            cells.append(f'<td class="num">{acc.get("censored_share", 0):.0%}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    note = ""
    if tests:
        descs: dict[str, str] = {}
        for t in entries:
            score = t["metrics"].get("score") or {}
            for block in [score, *(score.get("groups") or {}).values()]:
                for x, res in (block.get("tests") or {}).items():
                    descs.setdefault(x, str(res.get("description") or ""))
        said = "; ".join(f"{x}: {d}" for x, d in descs.items() if d)
        note = ("Tests per group, as the console prints them; n = inside/outside. " if any(g for g, _ in tests)
                else "n = inside/outside. ") + said
    caption = (f"{task}: {metric}" + (" per group" if groups else "")
               + f" with 95% intervals resampling {unit_of(entries[0].get('cluster_by'))}s")
    return table(head, rows, caption=caption, titles=HEAD_TITLES) + (f'<p class="note">{escape(note)}</p>' if note else "")


def pooled_tests_table(task: str, ctx: ReportContext) -> str:
    """The tests pooled over every group, only for a grouped task and labelled as pooled
    (results.json holds them; the console and the papers test per group)."""
    idx = [i for i, r in enumerate(ctx.runs) if task in (r.results.get("tasks") or {})]
    rows, names = [], []
    for i in idx:
        score = ctx.runs[i].results["tasks"][task]["metrics"].get("score") or {}
        if not score.get("groups") or not score.get("tests"):
            continue
        groups = " + ".join(score["groups"])
        names += [x for x in score["tests"] if x not in names]
        cells = [f'<th scope="row">{escape(ctx.labels[i])}</th>']
        for x in names:
            res = score["tests"].get(x) or {}
            cells.append(f'<td class="num">{"p=" + p_text(res.get("p_value")) if res.get("p_value") is not None else "–"}'
                         f'<span class="n">n={res.get("n_a", "?")}/{res.get("n_b", "?")}</span></td>')
        rows.append(("pooled (" + groups + ")", "<tr>" + "".join(cells) + "</tr>"))
    if not rows:
        return ""
    label = rows[0][0]
    return table(["model", *[f"{x} {label}" for x in names]], [r for _, r in rows],
                 caption=f"{task}: tests over all groups together, {label}")


def breakdown_tables(task: str, ctx: ReportContext) -> str:
    """One table per breakdown field: a row per model and group, its values in order."""
    idx = [i for i, r in enumerate(ctx.runs) if task in (r.results.get("tasks") or {})]
    out = []
    for name in breakdown_fields(ctx, task):
        entries: list[tuple[str, str, dict[str, Any], str]] = []
        for i in idx:
            entry = ctx.runs[i].results["tasks"][task]
            score = entry["metrics"].get("score") or {}
            groups = score.get("groups") or {}
            for g, block in groups.items() if groups else [("all", score)]:
                part = (block.get("breakdowns") or {}).get(name)
                if part:
                    entries.append((ctx.labels[i], g, part, unit_of(entry.get("cluster_by"))))
        values = breakdown_values([p for _, _, p, _ in entries], name)
        if not values:
            continue
        rows = [f'<tr><th scope="row">{escape(label)}</th><td>{escape(g)}</td>'
                + "".join(interval_cell(part.get(v), unit=unit) for v in values) + "</tr>"
                for label, g, part, unit in entries]
        out.append(table(["model", "group", *values], rows, caption=f"{task}: score by {name}"))
    return "".join(out)


def curve_table(base: str, ctx: ReportContext) -> str:
    """The console's length-curve rows of one swept task, a row per model: the score at each
    length, then the effective length."""
    entries = [(ctx.labels[i], (r.results.get("length_curves") or {}).get(base)) for i, r in enumerate(ctx.runs)]
    entries = [(lab, c) for lab, c in entries if c]
    if not entries:
        return ""
    labels: list[str] = []
    for _, c in entries:
        labels += [p["label"] for p in c["points"] if p["label"] not in labels]
    labels = numeric_order([x for x in labels if x != "full"]) + (["full"] if "full" in labels else [])
    rows = []
    for lab, c in entries:
        at = {p["label"]: p for p in c["points"]}
        cells = []
        for x in labels:
            p = at.get(x)
            if p is None:
                cells.append('<td class="num" data-sort="">–</td>')
                continue
            block = {"value": p.get("value"), "n": p.get("n"),
                     "spread": {"ci_low": (p.get("ci") or [None, None])[0], "ci_high": (p.get("ci") or [None, None])[1]}}
            cells.append(interval_cell(block))
        rows.append(f'<tr><th scope="row">{escape(lab)}</th>{"".join(cells)}'
                    f'<td class="num">{escape(_effective(c))}</td></tr>')
    title = "mean of tasks" if base == "mean" else base
    return table(["model", *labels, "effective length"], rows, caption=f"{title}: score by context length")


def variant_tasks(ctx: ReportContext, base: str) -> list[str]:
    """The `--context-lengths` variants of `base`, shortest first."""
    found: dict[str, int] = {}
    for run in ctx.runs:
        for task, entry in (run.results.get("tasks") or {}).items():
            if is_variant(entry) and base_task(task, entry) == base:
                found[task] = int(entry["context_max_tokens"])
    return sorted(found, key=found.get)


def runs_table(ctx: ReportContext) -> str:
    rows = []
    for run, label in zip(ctx.runs, ctx.labels):
        tasks = run.results.get("tasks") or {}
        judges = sorted({str((t.get("judge") or {}).get("judge", "?")) for t in tasks.values()})
        stretched = run.record.long_context
        rows.append(f'<tr><th scope="row">{escape(label)}</th><td><code>{escape(run.model)}</code></td>'
                    f"<td>{escape(stretched.summary() if stretched else '-')}</td>"
                    f"<td>{escape(', '.join(tasks))}</td><td>{escape(', '.join(judges))}</td>"
                    f"<td>{escape(seeds_text(run.results.get('seeds') or [], None))}</td>"
                    f'<td class="num">{len(run.samples)}</td><td><code>{escape(run.run_id)}</code></td></tr>')
    return table(["label", "model", "long context", "tasks", "judge", "seeds", "samples", "run"], rows, cls="runs",
                 caption="The runs of this report")



def cost_table(ctx: ReportContext) -> str:
    """What each run cost, per task: generation and judging, through batches or not, paid by
    the run or read from the cache (answers paid before). Empty when no run cost anything
    (local models) or recorded a cost (an lceval older than cost accounting)."""
    from lceval.results import cost_summary, usd

    rows = []
    for run, label in zip(ctx.runs, ctx.labels):
        summary = run.record.cost or cost_summary(run.record.usage, run.record.judge_usage)
        if not summary.get("total_usd") and not summary.get("unknown"):
            continue
        partial = " (partial: a cost limit stopped it)" if run.record.partial else ""
        tasks = summary.get("by_task") or {}
        for task, parts in [*tasks.items(), *([("all tasks", summary)] if len(tasks) != 1 else [])]:
            cells = []
            for name in ("generation", "judging"):
                part = parts.get(name)
                if part is None:
                    cells += ['<td class="num">-</td>', "<td></td>"]
                    continue
                how = []
                if part["batched"]:
                    how.append(f"{part['batched']} of {part['answers']} through batches ({usd(part['batch_usd'])})")
                if part["cached_usd"]:
                    how.append(f"{usd(part['cached_usd'])} paid before (cache)")
                if part.get("not_sent"):
                    how.append(f"{part['not_sent']} not sent (cost limit)")
                cells += [f'<td class="num" data-sort="{part["total_usd"] or 0:.8g}">'
                          f'{escape(usd(part["total_usd"], part["unknown"]))}</td>', f"<td>{escape('; '.join(how))}</td>"]
            amounts = [p["total_usd"] for p in (parts.get("generation"), parts.get("judging")) if p]
            total = sum(a for a in amounts if a is not None) if any(a is not None for a in amounts) else None
            unknown = sum(p["unknown"] for p in (parts.get("generation"), parts.get("judging")) if p)
            rows.append(f'<tr><th scope="row">{escape(label + partial)}</th><td>{escape(task)}</td>{"".join(cells)}'
                        f'<td class="num" data-sort="{total or 0:.8g}">{escape(usd(total, unknown))}</td></tr>')
    if not rows:
        return ""
    return table(["run", "task", "generation", "how", "judging", "how", "total"], rows, cls="costs",
                 caption="What each run's answers and verdicts cost (USD; paid by the run or before it, from the "
                         "cache; batch answers at the batch price; >= where a price was unknown)")
