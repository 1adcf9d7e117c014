"""Press sweeps: accuracy, memory and speed against the compression ratio.

A sweep is the runs of one model that differ only in the `compression_ratio` of one press
(`lceval run --press-sweep snapkv:0,0.25,0.5,0.75`, or runs made one by one): found here from
the runs' model strings (lceval.methods' option names), whatever the backend. For each task
the sweep holds (a `--context-lengths` variant `<task>@8k` is a task of its own, so each
context length gets its rows) and each ratio:

- the score with its interval, as results.json gives it (`headline_block`);
- the paired difference against the uncompressed run (ratio 0, else the same model without a
  press) on the items both answered: `lceval compare`'s test (`analysis.paired_comparison`:
  cluster-bootstrap interval, sign-flip permutation p);
- the KV cache at its largest (the most bytes any answer's cache held, and the mean), the
  memory the entries the press kept would take, the share of the context's key/value entries
  kept and the positions the cache holds, and the mean seconds an answer spent prefilling and
  decoding, from what the backend recorded per answer (`Generation.extras`,
  lceval.methods.EXTRAS). Held and kept are apart because a head-wise press (kvpress's AdaKV
  budget) masks keys instead of removing them: its cache holds every position, and only the
  kept share and the kept entries' memory show what it dropped.

`lceval report` prints these as a table per sweep and task; the HTML report draws them
against the ratio in each task's section, with the score per context-length bucket.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lceval.analysis import paired_comparison
from lceval.interfaces import ReportContext, ReportFigure
from lceval.methods import METHOD_OPTION, RATIO_OPTION
from lceval.options import split_options
from lceval.report._charts import Point, Series
from lceval.report._inputs import ReportRun
from lceval.results import headline_block

MIB = 1024 * 1024


@dataclass
class Sweep:
    """Runs of one model and press at several ratios (ascending), and the run they are tested
    against (ratio 0, else the model without a press; None: neither was given)."""

    model: str
    press: str
    points: list[tuple[float, ReportRun]]
    baseline: ReportRun | None

    @property
    def title(self) -> str:
        return f"{self.model}, press {self.press}"


@dataclass
class Row:
    """One ratio of a sweep on one task."""

    ratio: float
    score: float | None
    low: float | None
    high: float | None
    n: int
    diff: float | None  # against the baseline, paired
    diff_low: float | None
    diff_high: float | None
    p_value: float | None
    pairs: int
    peak_kv_mib: float | None  # the memory the cache takes
    mean_kv_mib: float | None
    peak_kept_mib: float | None  # the memory the entries kept would take (masked ones removed)
    kept_share: float | None  # of the context's key/value entries, masked ones counted as dropped
    kv_context_tokens: float | None  # positions the cache holds after compression
    prefill_s: float | None
    decode_s: float | None


def _model(run: ReportRun) -> str:
    return str(run.results.get("model") or run.model)


def find_sweeps(runs: list[ReportRun]) -> list[Sweep]:
    """The sweeps among `runs`: two or more runs whose models differ only in the ratio."""
    groups: dict[str, list[tuple[float, ReportRun]]] = {}
    plain: dict[str, ReportRun] = {}
    press_of: dict[str, str] = {}
    for run in runs:
        base, options = split_options(_model(run))
        if METHOD_OPTION not in options:
            plain.setdefault(_key(base, options), run)
            continue
        try:
            ratio = float(options.get(RATIO_OPTION, "nan"))
        except ValueError:
            continue
        if ratio != ratio:
            continue
        rest = {k: v for k, v in options.items() if k != RATIO_OPTION}
        key = _key(base, rest)
        groups.setdefault(key, []).append((ratio, run))
        press_of[key] = options[METHOD_OPTION]
    sweeps = []
    for key, points in groups.items():
        points = sorted(points, key=lambda p: p[0])
        if len({r for r, _ in points}) < 2:
            continue
        base, options = split_options(key)
        unpressed = _key(base, {k: v for k, v in options.items()
                                if k != METHOD_OPTION and not k.startswith(METHOD_OPTION)})
        zero = next((run for r, run in points if r == 0), None)
        sweeps.append(Sweep(model=unpressed, press=press_of[key], points=points,
                            baseline=zero if zero is not None else plain.get(unpressed)))
    return sweeps


def _key(base: str, options: dict[str, str]) -> str:
    return base + "".join(f",{k}={v}" for k, v in sorted(options.items()))


def sweep_tasks(sweep: Sweep) -> list[str]:
    """The tasks every run of the sweep holds, in the first run's order."""
    first = list((sweep.points[0][1].results.get("tasks") or {}))
    return [t for t in first if all(t in (run.results.get("tasks") or {}) for _, run in sweep.points)]


def _extras(run: ReportRun, task: str, name: str) -> list[float]:
    return [float(s.generation_extras[name]) for s in run.samples
            if s.task == task and isinstance(s.generation_extras.get(name), (int, float))]


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def sweep_rows(sweep: Sweep, task: str, seed: int = 0) -> list[Row]:
    """One row per ratio of the sweep on `task`."""
    rows = []
    base = sweep.baseline
    for ratio, run in sweep.points:
        head = headline_block(run.results["tasks"][task]["metrics"]["score"])
        spread = head.get("spread") or {}
        test = None
        if base is not None and base is not run and task in (base.results.get("tasks") or {}):
            spec = run.specs.get(task)
            test = paired_comparison([s for s in run.samples if s.task == task],
                                     [s for s in base.samples if s.task == task], task,
                                     spec.report.cluster_by if spec is not None else None, seed=seed)
        kv = _extras(run, task, "kv_cache_bytes")
        kept = _extras(run, task, "kv_kept_bytes")
        rows.append(Row(
            ratio=ratio, score=head.get("value"), low=spread.get("ci_low"), high=spread.get("ci_high"),
            n=int(head.get("n") or 0), diff=test.diff if test else None, diff_low=test.ci_low if test else None,
            diff_high=test.ci_high if test else None, p_value=test.p_value if test else None,
            pairs=test.n_pairs if test else 0, peak_kv_mib=max(kv) / MIB if kv else None,
            mean_kv_mib=_mean(kv) / MIB if kv else None, peak_kept_mib=max(kept) / MIB if kept else None,
            kept_share=_mean(_extras(run, task, "kv_kept_share")),
            kv_context_tokens=_mean(_extras(run, task, "kv_context_tokens")),
            prefill_s=_mean(_extras(run, task, "prefill_seconds")),
            decode_s=_mean(_extras(run, task, "decode_seconds"))))
    return rows


#: the table's columns: (group, name, Row field)
COLUMNS = (("score", "mean", "score"), ("score", "ci low", "low"), ("score", "ci high", "high"),
           ("vs uncompressed", "diff", "diff"), ("vs uncompressed", "ci low", "diff_low"),
           ("vs uncompressed", "ci high", "diff_high"), ("vs uncompressed", "p", "p_value"),
           ("KV cache MiB held", "peak", "peak_kv_mib"), ("KV cache MiB held", "mean", "mean_kv_mib"),
           ("KV MiB of kept entries", "peak", "peak_kept_mib"),
           ("context", "kept share", "kept_share"), ("context", "positions held", "kv_context_tokens"),
           ("seconds per answer", "prefill", "prefill_s"), ("seconds per answer", "decode", "decode_s"))


def sweep_table_rows(sweep: Sweep, task: str) -> list[tuple[str, list[float | None]]]:
    """(row label, the COLUMNS' values) per ratio, for the papers' tables."""
    return [(f"{sweep.press} {r.ratio:g}", [getattr(r, name) for _, _, name in COLUMNS])
            for r in sweep_rows(sweep, task)]


def table_notes(sweep: Sweep) -> list[str]:
    base = sweep.baseline
    notes = ["vs uncompressed: paired difference on the items both runs answered (95% interval resampling "
             "clusters; p: two-sided sign-flip permutation test, as `lceval compare`)"]
    if base is None:
        notes.append("no uncompressed run was given (ratio 0 or the model without a press): no paired test")
    notes.append("KV cache MiB held: the bytes of the keys and values the cache held when an answer ended (its "
                 "largest); KV MiB of kept entries: what they would take without the entries the press masks; "
                 "kept share: of the context's key/value entries (positions x heads), masked ones counted as dropped; "
                 "positions held: the context's positions in the cache; seconds: prefill (context and question) and "
                 "decoding, the mean per answer")
    if _masks(sweep):
        notes.append(f"{sweep.press} masks keys instead of removing them (a head-wise budget): its cache holds every "
                     "position and takes the memory held, not the memory of the kept entries")
    return notes


def _masks(sweep: Sweep) -> bool:
    """Whether the press masked entries it left in the cache: some answer's kept entries take
    fewer bytes than its cache held (the two are equal for a press that removes what it drops)."""
    return any(isinstance(s.generation_extras.get("kv_kept_bytes"), (int, float))
               and isinstance(s.generation_extras.get("kv_cache_bytes"), (int, float))
               and s.generation_extras["kv_kept_bytes"] < s.generation_extras["kv_cache_bytes"]
               for _, run in sweep.points for s in run.samples)


# -- the HTML report --------------------------------------------------------------------

def press_figures(ctx: ReportContext, colors: dict[str, str]) -> list[ReportFigure]:
    """Per sweep and task (section: the task): score and its paired difference, KV memory and
    seconds against the ratio, and the score by context-length bucket against the ratio."""
    from lceval.report import _charts as charts
    from lceval.report._figures import figure
    from lceval.report._inputs import from_run_dir

    out: list[ReportFigure] = []
    if not any(f",{METHOD_OPTION}=" in str(run.results.get("model", "")) for run in ctx.runs):
        return out  # no press: no run folder is read again
    runs = [from_run_dir(run) for run in ctx.runs]
    for sweep in find_sweeps(runs):
        label = ctx.labels[runs.index(sweep.points[0][1])]
        color = {sweep.title: colors.get(label, "#0072B2")}
        for task in sweep_tasks(sweep):
            rows = sweep_rows(sweep, task)
            cats = [f"{r.ratio:g}" for r in rows]
            x_title = f"compression ratio ({sweep.press})"

            score = charts.intervals(cats, [Series(sweep.title, [Point(c, r.score, r.low, r.high, f"n={r.n}")
                                                                  for c, r in zip(cats, rows)])],
                                     y_title="score", x_title=x_title, style="line", colors=color,
                                     description=f"{task}: score against the compression ratio")
            tests = "; ".join(f"{r.ratio:g}: {r.diff:+.2f} (p={r.p_value:.3f})" for r in rows
                              if r.diff is not None and r.p_value is not None)
            out.append(figure(score, f"{task}: score by compression ratio, {sweep.title}",
                              "Whiskers and band: 95% intervals. Paired difference against the uncompressed run "
                              f"(lceval compare's test): {tests or 'no uncompressed run given'}.", section=task))
            diff = charts.intervals(cats, [Series(sweep.title, [Point(c, r.diff, r.diff_low, r.diff_high,
                                                                      f"pairs={r.pairs}, p={r.p_value}")
                                                                for c, r in zip(cats, rows)])],
                                    y_title="score minus uncompressed", x_title=x_title, style="dots", colors=color,
                                    threshold=0.0, description=f"{task}: paired difference against ratio 0")
            out.append(figure(diff, f"{task}: paired difference against the uncompressed run, {sweep.title}",
                              "Per item, the score at this ratio minus the uncompressed run's; whiskers: 95% "
                              "intervals resampling clusters.", section=task))
            for fields, y_title, legend, what, caption in (
                    (("peak_kv_mib", "mean_kv_mib", "peak_kept_mib"), "KV cache (MiB)", "per answer",
                     "KV cache memory",
                     "The keys' and values' bytes the cache held when each answer ended (peak: the largest; mean: "
                     "over answers), and peak kept: what the entries the press kept would take (a press that masks "
                     "keys instead of removing them holds the first and would take the second)."),
                    (("prefill_s", "decode_s"), "seconds per answer", "phase", "prefill and decoding time",
                     "Mean seconds per answer (a context prefilled once is counted on the answer that prefilled "
                     "it).")):
                lines = [Series(_SERIES[name], [Point(c, getattr(r, name)) for c, r in zip(cats, rows)])
                         for name in fields]
                chart = charts.intervals(cats, lines, y_title=y_title, x_title=x_title, style="line", colors=None,
                                         series_title=legend, description=f"{task}: {what} against the ratio")
                out.append(figure(chart, f"{task}: {what} by compression ratio, {sweep.title}", caption,
                                  section=task))
            buckets = _bucket_series(sweep, task, cats)
            if buckets:
                chart = charts.intervals(cats, buckets, y_title="score", x_title=x_title, style="line", colors=None,
                                         series_title="context tokens",
                                         description=f"{task}: score against the ratio per context length")
                out.append(figure(chart, f"{task}: score by compression ratio per context length, {sweep.title}",
                                  "One line per bucket of context length (in the model's tokens); whiskers and "
                                  "bands: 95% intervals.", section=task))
    return out


#: the lines of the memory and time charts
_SERIES = {"peak_kv_mib": "peak held", "mean_kv_mib": "mean held", "peak_kept_mib": "peak kept",
           "prefill_s": "prefill", "decode_s": "decode"}


def _bucket_series(sweep: Sweep, task: str, cats: list[str]) -> list[Series]:
    """The `context_tokens` breakdown of each ratio's results, one series per bucket."""
    from lceval.report._charts import numeric_order

    parts = [((run.results["tasks"][task]["metrics"]["score"].get("breakdowns") or {}).get("context_tokens") or {})
             for _, run in sweep.points]
    names = numeric_order(list(dict.fromkeys(k for p in parts for k in p)))
    out = []
    for name in names:
        points = []
        for cat, part in zip(cats, parts):
            block: dict[str, Any] = part.get(name) or {}
            spread = block.get("spread") or {}
            points.append(Point(cat, block.get("value"), spread.get("ci_low"), spread.get("ci_high"),
                                f"n={block.get('n')}"))
        out.append(Series(name, points))
    return out if len(names) > 1 else []
