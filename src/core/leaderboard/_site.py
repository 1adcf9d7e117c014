"""`lceval leaderboard BUNDLE... -o DIR`: a static site from submitted bundles.

`index.html` ranks the verified submissions in one sortable table (per task and group the
score with its 95% interval, and the mean of the groups); each submission gets a page
with its verification, its versions, judges and data hashes, and the full HTML report of
its runs (plots and every sample). Bundles that fail `lceval verify` are listed apart with
their problems, never ranked. The site is plain files: any static host serves it.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from lceval.leaderboard._bundle import open_bundle
from lceval.report import ReportInputs, build_report, interval_cell, page
from lceval.results import FinishedRun, load_run
from lceval.leaderboard._verify import Verification, verify_bundle


@dataclass
class Submission:
    name: str
    slug: str
    index: dict[str, Any]
    results: list[dict[str, Any]]  # results.json of each run
    verification: Verification | None

    @property
    def status(self) -> str:
        if self.verification is None:
            return "not verified"
        return "verified" if self.verification.ok else "rejected"


def _slug(n: int, name: str) -> str:
    return f"{n:03d}-" + (re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-")[:60] or "submission")


def _verification_html(sub: Submission) -> str:
    v = sub.verification
    if v is None:
        return '<p class="warn">Not verified (the leaderboard was built with --no-verify).</p>'
    head = (f'<p class="ok">Verified: {len(v.passed)} checks passed.</p>' if v.ok else
            f'<p class="warn">Rejected: {len(v.problems)} problem(s).</p>')
    items = [f'<li class="warn">{escape(p)}</li>' for p in v.problems]
    items += [f"<li>{escape(p)}</li>" for p in v.passed]
    items += [f"<li><i>note:</i> {escape(n)}</li>" for n in v.notes]
    return head + f"<ul>{''.join(items)}</ul>"


def _provenance_html(index: dict[str, Any]) -> str:
    rows = []
    for run in index.get("runs") or []:
        for task, t in (run.get("tasks") or {}).items():
            rows.append(f"<tr><td><code>{escape(run['run_id'])}</code></td><td>{escape(task)}</td>"
                        f"<td><code>{escape(str(t.get('judge')))}</code></td><td>{escape(str(t.get('dataset')))}</td>"
                        f"<td class=\"num\">{t.get('n_samples')}</td></tr>")
    data = "".join(f"<tr><td>{escape(str(d.get('dataset')))}</td><td><code>{escape(d['path'])}</code></td>"
                   f"<td><code>{escape(d['sha256'][:16])}…</code></td></tr>"
                   for run in index.get("runs") or [] for d in run.get("data") or [])
    plugins = ", ".join(f"{escape(n)} {escape(str((v or {}).get('version')))}"
                        for n, v in sorted((index.get("plugins") or {}).items()))
    return (f"<p>Packed {escape(str(index.get('created_at')))} by lceval {escape(str(index.get('lceval_version')))}; "
            f"plugins: {plugins}.</p>"
            '<table class="results"><thead><tr><th>run</th><th>task</th><th>judge</th><th>dataset</th><th>samples</th>'
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
            '<details><summary>data files read (sha256)</summary><table class="results"><thead><tr><th>dataset</th>'
            f"<th>path</th><th>sha256</th></tr></thead><tbody>{data}</tbody></table></details>")


def _columns(subs: list[Submission]) -> list[tuple[str, str | None]]:
    """(task, group) per column, group None for the mean of the groups (or the only value)."""
    cols: list[tuple[str, str | None]] = []
    for sub in subs:
        for results in sub.results:
            for task, t in (results.get("tasks") or {}).items():
                groups = list(((t.get("metrics") or {}).get("score") or {}).get("groups") or {})
                for c in [*((task, g) for g in groups), (task, None)]:
                    if c not in cols:
                        cols.append(c)
    return cols


def _block(sub: Submission, task: str, group: str | None) -> dict[str, Any] | None:
    """The summary shown for (task, group): a group's, or the mean of the groups (no interval)."""
    for results in sub.results:
        score = (((results.get("tasks") or {}).get(task) or {}).get("metrics") or {}).get("score")
        if not score:
            continue
        if group is not None:
            return (score.get("groups") or {}).get(group)
        return {"value": score.get("mean_of_groups")} if score.get("groups") else score
    return None


def index_html(subs: list[Submission], title: str) -> str:
    ranked = [s for s in subs if s.status != "rejected"]
    cols = _columns(ranked)
    head = "".join(f"<th>{escape(t)}<br><small>{escape(g if g is not None else 'mean')}</small></th>" for t, g in cols)
    rows = []
    for sub in ranked:
        cells = [interval_cell(_block(sub, task, group)) for task, group in cols]
        cls = "ok" if sub.status == "verified" else "warn"
        rows.append(f'<tr><td><a href="submissions/{escape(sub.slug)}.html">{escape(sub.name)}</a></td>'
                    f'<td class="{cls}">{sub.status}</td>{"".join(cells)}</tr>')
    units: dict[str, list[str]] = {}  # what each task's intervals resample: its own cluster_by
    for sub in ranked:
        for results in sub.results:
            for task, t in (results.get("tasks") or {}).items():
                unit = f"{str(t.get('cluster_by') or 'item').removesuffix('_id').replace('_', ' ')}s"
                if task not in units.setdefault(unit, []):
                    units[unit].append(task)
    resample = "; ".join(f"{unit} ({', '.join(tasks)})" for unit, tasks in units.items()) or "items"
    body = ('<section id="ranking"><h2>Submissions</h2><p>Click a column to sort; 95% intervals resample '
            f"{escape(resample)}. Each submission's page has its verification, plots and samples.</p>"
            f'<table class="results sortable" id="leaderboard"><thead><tr><th>submission</th><th>status</th>{head}'
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table></section>")
    rejected = [s for s in subs if s.status == "rejected"]
    if rejected:
        items = "".join(f'<li><a href="submissions/{escape(s.slug)}.html">{escape(s.name)}</a>: '
                        f'{len(s.verification.problems) if s.verification else 0} problem(s)</li>' for s in rejected)
        body += f'<section id="rejected"><h2>Rejected bundles</h2><ul class="warn">{items}</ul></section>'
    return page(title, body, subtitle=f"{len(ranked)} ranked submission(s), {len(rejected)} rejected")


def _swap_in(staging: Path, output: Path) -> None:
    old = output.with_name(f".{output.name}.old")
    if old.exists():
        shutil.rmtree(old)
    if output.exists():
        os.replace(output, old)
    os.replace(staging, output)
    shutil.rmtree(old, ignore_errors=True)


def write_site(bundles: list[Path], output: Path, plugins: Any, catalog: Any, home: Path, *,
               title: str = "lceval leaderboard", verify: bool = True, rejudge: int = 200) -> str:
    output = Path(output)
    staging = output.with_name(f".{output.name}.partial")
    if staging.exists():
        shutil.rmtree(staging)
    (staging / "submissions").mkdir(parents=True)
    subs: list[Submission] = []
    try:
        for n, path in enumerate(bundles, 1):
            verification = verify_bundle(path, plugins, catalog, home, rejudge=rejudge) if verify else None
            with open_bundle(path) as bundle:
                runs: list[FinishedRun] = [load_run(bundle.run_dir(r["run_id"])) for r in bundle.index["runs"]]
                name = str(bundle.index.get("name") or path.stem)
                sub = Submission(name=name, slug=_slug(n, name), index=bundle.index,
                                 results=[r.results for r in runs], verification=verification)
                preface = [("back", "Leaderboard", '<p><a href="../index.html">← all submissions</a></p>'),
                           ("verification", f"Verification: {sub.status}", _verification_html(sub)),
                           ("provenance", "Versions, judges and data", _provenance_html(bundle.index))]
                html = build_report(ReportInputs(runs=runs), plugins, title=name, preface=preface)
            (staging / "submissions" / f"{sub.slug}.html").write_text(html, encoding="utf-8")
            subs.append(sub)
        (staging / "index.html").write_text(index_html(subs, title), encoding="utf-8")
        _swap_in(staging, output)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    lines = [f"{s.status:12} {s.name}" for s in subs]
    return "\n".join(lines + [f"wrote {output / 'index.html'} and {len(subs)} submission page(s)"])
