"""Score against length for benchmarks whose lengths come with the data: the `length_bins`
block of results.json, driven by each spec's `report.length_bins`.

A task's samples are placed in bins by the spec's declaration (a metadata field such as
LongBench v2's short/medium/long or HELMET's 8k..128k, the context counted in the evaluated
model's tokens, or one length for the whole task, as LV-Eval's task per length level). The tasks
of a run that name the same `curve` make one curve (LV-Eval's 16k..256k tasks of one dataset);
every other task is a curve of its own. Each bin gets its score, n and a 95% interval from the
same cluster bootstrap as every other number of results.json (`lceval.stats.cluster_bootstrap`,
the spec's `cluster_by` clusters within each task), and each curve the effective length by the
one definition `--context-lengths` sweeps use too (`effective_length`, after RULER: Hsieh et
al., 2024, Sec. 4).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from lceval.engine import TaskSpec, tokens_label
from lceval.errors import UserError
from lceval.results._curves import effective_length
from lceval.results._scoring import as_spec, cluster_of, primary_score
from lceval.stats import cluster_bootstrap
from lceval.types import Sample, is_scored

__all__ = ["length_bins"]


def length_bins(samples: dict[str, list[Sample]], specs: dict[str, TaskSpec | dict[str, Any]], seed: int = 0,
                threshold: float | None = None) -> dict[str, Any]:
    """The `length_bins` block of results.json (empty when no spec declares bins): per curve
    the field it bins on, its tasks, its bins in ascending length (`points`: label, length,
    value, ci, n, the task when one task makes the bin), how many scored samples fell in no
    bin, the threshold (`threshold`, the run's --effective-threshold, wins over the spec's) and
    the effective length. `samples` and `specs` by task name (a `TaskSpec` or a resolved spec's
    mapping)."""
    typed = {name: as_spec(name, spec) for name, spec in specs.items()}
    members: dict[str, list[str]] = defaultdict(list)
    for name, spec in typed.items():
        bins = spec.report.length_bins
        if bins is None:
            continue
        curve = bins.curve or name
        if bins.curve and spec.context.max_tokens:  # a --context-lengths variant: its own curve per budget
            curve += f"@{tokens_label(spec.context.max_tokens)}"
        members[curve].append(name)
    out: dict[str, Any] = {}
    for curve, tasks in sorted(members.items()):
        out[curve] = _curve(tasks, samples, typed, seed, threshold)
    return out


def _curve(tasks: list[str], samples: dict[str, list[Sample]], specs: dict[str, TaskSpec], seed: int,
           threshold: float | None) -> dict[str, Any]:
    by_bin: dict[str, list[tuple[float, str]]] = defaultdict(list)
    lengths: dict[str, int] = {}
    owners: dict[str, set[str]] = defaultdict(set)
    unbinned = uncounted = 0
    first = specs[tasks[0]].report
    declared = first.length_bins
    assert declared is not None
    for task in tasks:
        report = specs[task].report
        bins = report.length_bins
        assert bins is not None
        for s in samples.get(task, []):
            if not is_scored(s.metadata):
                continue
            try:
                placed = bins.place(s.metadata, s.context_cut.original_tokens)
            except UserError as exc:  # a run scored again under a spec whose field its data lacks
                raise specs[task].placed(exc) from None
            if placed is None:
                unbinned += 1
                uncounted += bins.counted
                continue
            value = primary_score(s)
            label, length = placed
            lengths[label] = max(length, lengths.get(label, 0))  # an open last bin: its longest sample
            owners[label].add(task)
            if value is not None:
                by_bin[label].append((value, f"{task}/{cluster_of(s, report.cluster_by)}"))
    points = []
    for label in sorted(lengths, key=lambda lab: (lengths[lab], lab)):
        pairs = by_bin.get(label, [])
        summary = cluster_bootstrap([v for v, _ in pairs], [c for _, c in pairs], seed=seed)
        spread = summary.get("spread") or {}
        ci = [spread["ci_low"], spread["ci_high"]] if spread.get("ci_low") is not None else None
        only = owners[label]
        points.append({"label": label, "length": lengths[label], "task": next(iter(only)) if len(only) == 1 else None,
                       "value": summary["value"], "ci": ci, "n": summary["n"],
                       "clusters": spread.get("clusters")})
    bar = threshold if threshold is not None else (
        declared.threshold if declared.threshold is not None else first.effective_length_threshold)
    block: dict[str, Any] = {"metric": "score", "field": declared.field, "tasks": sorted(tasks), "points": points,
                             "unbinned": unbinned, "threshold": float(bar) if bar is not None else None,
                             "effective_length": effective_length(points, bar)}
    if uncounted:  # the model lent no tokenizer: contexts were not counted, so not binned
        block["uncounted"] = uncounted
    return block
