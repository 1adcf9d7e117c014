"""Score against context length: what a `--context-lengths` sweep is for.

The engine runs a task once per budget as variants `<task>@1k`, `<task>@2k` ... (plus the
uncut task for `full`); each variant is scored on its own. This module puts them back
together per task, as a curve with an interval at every point, and reads off the effective
length, RULER's summary of a curve (Hsieh et al., 2024, Sec. 4: the longest length whose score
still exceeds a threshold, 85.6 = Llama-2-7B at 4k by default in its tables; here the spec's
`report.effective_length_threshold`, so a user sets their own). With several tasks swept over
the same lengths, a `mean` curve averages them, as RULER's "Avg." column.

A point is the variant's headline as results.json gives it (`headline_block`: the mean of
groups when the spec has `group_by`, with its interval resampling clusters within each group;
else the overall mean), so the curve shows the numbers of the table; the `mean` curve
resamples every task at once and averages the tasks' headlines.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from lceval.engine import ReportSettings, TaskSpec
from lceval.tokens import tokens_label
from lceval.results._scoring import HeadlineResampler, as_spec, headline_block, interval_of
from lceval.types import Sample

__all__ = ["length_curves"]

N_BOOT = 2000


def _label(length: int | None) -> str:
    return "full" if length is None else tokens_label(length)


def effective_length(points: list[dict[str, Any]], threshold: float | None) -> int | None:
    """The longest length such that it and every shorter length of `points` (ascending; a
    point without a length is skipped) score >= threshold: RULER's effective length (Hsieh et
    al., 2024, Sec. 4 and Table 3, the longest length at which the model still beats the bar),
    read so that a length below the bar ends it even when a longer one scores above again. None
    without a threshold, or when the shortest length is already below it. One definition for a
    `--context-lengths` sweep and for a spec's length bins."""
    if threshold is None:
        return None
    best = None
    for point in points:
        if point["length"] is None:
            continue
        if point["value"] is None or point["value"] < threshold:
            break
        best = point["length"]
    return best


def length_curves(task_results: dict[str, dict[str, Any]], samples: dict[str, list[Sample]],
                  specs: dict[str, TaskSpec | dict[str, Any]], seed: int = 0,
                  threshold: float | None = None) -> dict[str, Any]:
    """The `length_curves` block of results.json (empty when no task was swept): per swept
    task its points in ascending length (`full` last), the threshold and effective length;
    and `mean` over the swept tasks that share every length. `task_results` are results.json's
    `tasks`, `samples` and `specs` by the same task names (a `TaskSpec`, or a resolved spec's
    mapping as a manifest records it); `threshold` (the run's --effective-threshold) wins over
    the specs'."""
    specs = {name: as_spec(name, spec) for name, spec in specs.items()}
    variants: dict[str, dict[int | None, str]] = defaultdict(dict)
    for name, entry in task_results.items():
        if entry.get("context_max_tokens"):
            variants[str(entry.get("spec_name", name))][int(entry["context_max_tokens"])] = name
    for base in list(variants):
        if base in task_results:  # the uncut task of the same run: the `full` point
            variants[base][None] = base
    curves: dict[str, Any] = {}
    resamplers: dict[str, dict[int | None, HeadlineResampler]] = {}
    for base, by_length in sorted(variants.items()):
        lengths = sorted((length for length in by_length if length is not None)) + \
            ([None] if None in by_length else [])
        first = specs.get(by_length[lengths[0]])
        report = first.report if first is not None else ReportSettings()
        bar = threshold if threshold is not None else report.effective_length_threshold
        points, resamplers[base] = [], {}
        for length in lengths:
            task = by_length[length]
            own = specs.get(task)
            resamplers[base][length] = HeadlineResampler(samples.get(task, []), own.report if own else report)
            head = headline_block(task_results[task]["metrics"]["score"])
            spread = head.get("spread") or {}
            ci = [spread["ci_low"], spread["ci_high"]] if spread.get("ci_low") is not None else None
            points.append({"length": length, "label": _label(length), "task": task, "value": head["value"],
                           "ci": ci, "n": int(head["n"] or 0)})
        curves[base] = {"metric": "score", "points": points,
                        "threshold": float(bar) if bar is not None else None,
                        "effective_length": effective_length(points, bar)}
    if len(curves) >= 2:
        curves["mean"] = _mean_curve(curves, resamplers, seed)
    return curves


def _mean_curve(curves: dict[str, Any], resamplers: dict[str, dict[int | None, HeadlineResampler]], seed: int) -> dict[str, Any]:
    """The mean of the tasks' curves over the lengths every task was swept at."""
    tasks = sorted(curves)
    shared = set.intersection(*(set(resamplers[t]) for t in tasks))
    lengths = sorted(length for length in shared if length is not None) + ([None] if None in shared else [])
    rng = np.random.default_rng(seed)
    points = []
    for length in lengths:
        heads = [resamplers[t][length].headline() for t in tasks]
        value = float(sum(heads) / len(heads)) if all(h is not None for h in heads) else None
        boots = [resamplers[t][length].boot(rng, N_BOOT) for t in tasks]
        ci = interval_of(np.mean(boots, axis=0)) if all(b is not None for b in boots) else None
        n = sum(next(p["n"] for p in curves[t]["points"] if p["length"] == length) for t in tasks)
        points.append({"length": length, "label": _label(length), "task": None, "value": value, "ci": ci, "n": n})
    thresholds = {curves[t]["threshold"] for t in tasks}
    threshold = thresholds.pop() if len(thresholds) == 1 else None
    return {"metric": "score", "points": points, "threshold": threshold, "tasks": tasks,
            "effective_length": effective_length(points, threshold)}
