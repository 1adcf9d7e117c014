"""Robustness to transcript noise, from finished runs: the score curve over WER levels.

Per model and task family (the same task with only `options.noise` varying), one row per
level: the target WER, the effective WER averaged over the meetings (Thonet et al., 2024b, Table 5),
the score with a meeting-level cluster-bootstrap interval, and the drop from the clean score
(clean minus noisy, paired by question and seed) with the paired interval and permutation
p-value of `lceval compare` (`lceval.compare` / `lceval.stats`, not re-implemented here).
A level is clean when its samples carry no noise (an ordinary `elitr_qa` run) or a target of 0.

`noise_report()` returns plain dataclasses (`as_dict()` for JSON) so that another front end,
such as an HTML report, can plot the same numbers; `format_report()` lays them out as text.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lceval.analysis import paired_bootstrap, paired_permutation_p
from lceval.errors import UserError
from lceval.results import run_model_name
from lceval.results import FinishedRun, load_run
from lceval.results import cluster_of, primary_score
from lceval.stats import cluster_bootstrap
from lceval.types import Sample


@dataclass
class MeetingPoint:
    """One meeting at one level: for a scatter of score against effective WER."""

    meeting: str
    effective_wer: float | None
    score: float | None  # mean over the meeting's scored questions
    n: int


@dataclass
class LevelRow:
    model: str
    family: str  # the clean task's name when present, else the lowest level's
    task: str
    run_id: str
    target_wer: float
    effective_wer: float | None  # mean over meetings
    meetings: int
    n: int  # scored items
    score: float | None
    ci_low: float | None
    ci_high: float | None
    drop: float | None = None  # clean minus this level, over paired items
    drop_ci_low: float | None = None
    drop_ci_high: float | None = None
    drop_p: float | None = None  # two-sided paired permutation test
    pairs: int = 0
    points: list[MeetingPoint] = field(default_factory=list)


@dataclass
class Table5Row:
    """Thonet et al., 2024b, Table 5: target vs effective WER, averaged over meetings."""

    rules: str  # sha256 prefix of the rules file
    seed: int
    target_wer: float
    effective_wer: float | None
    effective_min: float | None
    effective_max: float | None
    applied_rate: float | None  # edits the procedure applied per word (None from runs)
    meetings: int


@dataclass
class NoiseReport:
    rows: list[LevelRow]
    table5: list[Table5Row]
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _family_key(run: FinishedRun, task: str) -> str:
    spec = run.task_spec(task)
    options = {k: v for k, v in (spec.get("options") or {}).items() if k != "noise"}
    return json.dumps([run.model, spec.get("type"), options, spec.get("generation"), spec.get("judge")],
                      sort_keys=True, default=str)


def _level(samples: list[Sample]) -> tuple[float, bool]:
    """(target WER, noisy?) of one task's samples."""
    targets = {s.metadata.get("noise_target_wer") for s in samples}
    if len(targets) > 1:
        raise UserError(f"samples of one task carry several noise levels: {sorted(map(str, targets))}",
                        field="RUN_DIR")
    target = targets.pop() if targets else None
    return (0.0, False) if target is None else (float(target), True)


def _meeting_wers(samples: list[Sample], cluster_by: str | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for s in samples:
        wer = s.metadata.get("noise_wer")
        out[cluster_of(s, cluster_by)] = 0.0 if wer is None else float(wer)
    return out


def _row(model: str, family: str, task: str, run: FinishedRun, samples: list[Sample], target: float,
         cluster_by: str | None, n_boot: int, seed: int) -> LevelRow:
    wers = _meeting_wers(samples, cluster_by)
    scored = [(primary_score(s), cluster_of(s, cluster_by)) for s in samples]
    scored = [(v, c) for v, c in scored if v is not None]
    summary = cluster_bootstrap([v for v, _ in scored], [c for _, c in scored], n_boot=n_boot, seed=seed)
    spread = summary["spread"] or {}
    by_meeting: dict[str, list[float]] = defaultdict(list)
    for v, c in scored:
        by_meeting[c].append(v)
    points = [MeetingPoint(meeting=m, effective_wer=wers.get(m), score=_mean(by_meeting.get(m, [])),
                           n=len(by_meeting.get(m, []))) for m in sorted(wers)]
    return LevelRow(model=model, family=family, task=task, run_id=run.run_id, target_wer=target,
                    effective_wer=_mean(list(wers.values())), meetings=len(wers), n=len(scored),
                    score=summary["value"], ci_low=spread.get("ci_low"), ci_high=spread.get("ci_high"),
                    points=points)


def _add_drop(row: LevelRow, clean: list[Sample], noisy: list[Sample], cluster_by: str | None,
              n_boot: int, seed: int) -> None:
    base = {(s.item_id, s.seed): s for s in clean if primary_score(s) is not None}
    keys, diffs, clusters = [], [], []
    for s in noisy:
        v, k = primary_score(s), (s.item_id, s.seed)
        if v is not None and k in base:
            keys.append(k)
            diffs.append(primary_score(base[k]) - v)
            clusters.append(cluster_of(s, cluster_by))
    row.pairs = len(keys)
    if not keys:
        return
    arr = np.asarray(diffs, dtype=float)
    row.drop = float(arr.mean())
    row.drop_ci_low, row.drop_ci_high = paired_bootstrap(arr, clusters, n_boot, 0.95, seed)
    row.drop_p = paired_permutation_p(arr, 20000, seed)


def noise_report(run_dirs: list[Path], n_boot: int = 2000, seed: int = 0) -> NoiseReport:
    """The robustness report of every noisy task found in the runs (and its clean twin)."""
    return noise_report_of_runs([load_run(Path(p)) for p in run_dirs], n_boot, seed)


def noise_report_of_runs(runs: list[FinishedRun], n_boot: int = 2000, seed: int = 0) -> NoiseReport:
    """`noise_report` of runs already read (the HTML report's panel has them in hand)."""
    members: dict[str, list[tuple[float, bool, str, FinishedRun, list[Sample]]]] = defaultdict(list)
    for run in runs:
        for task in run.results.get("tasks", {}):
            samples = run.task_samples(task)
            if samples:
                target, noisy = _level(samples)
                members[_family_key(run, task)].append((target, noisy, task, run, samples))
    rows: list[LevelRow] = []
    notes: list[str] = []
    table5: dict[tuple[str, int, float], dict[str, float]] = defaultdict(dict)
    for entries in members.values():
        if not any(noisy for _, noisy, *_ in entries):
            continue
        entries.sort(key=lambda e: (e[0], e[1], e[2], e[3].run_id))
        clean = [e for e in entries if e[0] == 0.0]
        family = (clean[0] if clean else entries[0])[2]
        if not clean:
            notes.append(f"{family} ({run_model_name(entries[0][3])}): no clean run among the inputs, so no drop")
        elif len(clean) > 1:
            notes.append(f"{family} ({run_model_name(entries[0][3])}): several clean runs; drops are against "
                         f"{clean[0][2]} of run {clean[0][3].run_id}")
        for target, noisy, task, run, samples in entries:
            cluster_by = (run.task_spec(task).get("report") or {}).get("cluster_by")
            row = _row(run_model_name(run), family, task, run, samples, target, cluster_by, n_boot, seed)
            if clean and (task, run.run_id) != (clean[0][2], clean[0][3].run_id):
                _add_drop(row, clean[0][4], samples, cluster_by, n_boot, seed)
            rows.append(row)
            if noisy:
                for s in samples:
                    key = (str(s.metadata.get("noise_rules")), int(s.metadata.get("noise_seed", 0)), target)
                    table5[key][f"{s.metadata.get('split')}/{s.metadata.get('meeting_id')}"] = float(
                        s.metadata.get("noise_wer") or 0.0)
    if not rows:
        raise UserError("no task with options.noise in these runs", field="RUN_DIR",
                        hint="Run the noise levels first, e.g. lceval run --tasks elitr_noise ...")
    t5 = [Table5Row(rules=r, seed=sd, target_wer=t, effective_wer=_mean(list(m.values())),
                    effective_min=min(m.values()), effective_max=max(m.values()), applied_rate=None,
                    meetings=len(m)) for (r, sd, t), m in sorted(table5.items())]
    return NoiseReport(rows=rows, table5=t5, notes=notes)


def _f(value: float | None, digits: int = 2, pct: bool = False) -> str:
    if value is None:
        return "-"
    return f"{100 * value:.{digits}f}" if pct else f"{value:.{digits}f}"


def table5_lines(rows: list[Table5Row], markdown: bool) -> list[str]:
    head = ["rules", "seed", "target WER (%)", "effective WER (%)", "min-max (%)", "applied edits (%)", "meetings"]
    body = [[r.rules[:12], str(r.seed), _f(r.target_wer, pct=True), _f(r.effective_wer, pct=True),
             f"{_f(r.effective_min, 1, True)}-{_f(r.effective_max, 1, True)}", _f(r.applied_rate, pct=True),
             str(r.meetings)] for r in rows]
    return _table(head, body, markdown)


def _table(head: list[str], body: list[list[str]], markdown: bool) -> list[str]:
    if markdown:
        return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in body]
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [head, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def format_report(report: NoiseReport, fmt: str = "text") -> str:
    if fmt == "json":
        return json.dumps(report.as_dict(), indent=1)
    md = fmt == "markdown"
    head = ["model", "task", "target WER", "effective WER", "meetings", "n", "score", "95% CI",
            "drop vs clean", "95% CI (paired)", "p", "pairs"]
    body = [[r.model, r.task, _f(r.target_wer), _f(r.effective_wer, 3), str(r.meetings), str(r.n), _f(r.score),
             f"[{_f(r.ci_low)}, {_f(r.ci_high)}]" if r.ci_low is not None else "",
             _f(r.drop), f"[{_f(r.drop_ci_low)}, {_f(r.drop_ci_high)}]" if r.drop_ci_low is not None else "",
             _f(r.drop_p, 3), str(r.pairs)] for r in report.rows]
    parts = ["Score against transcript noise (intervals resample meetings)", "",
             *_table(head, body, md), "", "Target vs effective WER, mean over meetings (Thonet et al., 2024b, Table 5)", "",
             *table5_lines(report.table5, md)]
    if report.notes:
        parts += ["", *[f"note: {n}" for n in report.notes]]
    return "\n".join(parts) + "\n"


def table5_from_transcripts(transcripts: list[Path], rules_file: Path, levels: list[float], seed: int,
                            protect: bool, data_home: Path, calibration: str = "simulator") -> list[Table5Row]:
    """Table 5 without any model: every transcript at every level (built and cached as the
    tasks build them), with the edits the procedure applied beside the effective WER."""
    from lceval.io import sha256_file
    from lceval.io import read_text

    from lceval_plugins.transcript_noise.transcripts import noisy_transcript

    texts = [read_text(path, what="transcript") for path in transcripts]  # once, not once per level
    rules_sha = sha256_file(rules_file)[:12]
    rows = []
    for level in levels:
        effective, applied = [], []
        for text in texts:
            _, facts = noisy_transcript(text, rules_file, level, seed, protect, data_home, calibration)
            effective.append(facts["effective_wer"] or 0.0)
            applied.append(facts["applied_rate"] or 0.0)
        rows.append(Table5Row(rules=rules_sha, seed=seed, target_wer=level,
                              effective_wer=_mean(effective), effective_min=min(effective, default=None),
                              effective_max=max(effective, default=None), applied_rate=_mean(applied),
                              meetings=len(transcripts)))
    return rows
