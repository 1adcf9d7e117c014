"""From samples to the numbers in results.json, driven by the spec's `report` section, so
the engine computes ELITR's breakdowns and Welch test without knowing ELITR."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable

from .stats import across_seeds, cluster_bootstrap, welch_one_tailed
from .types import Sample


def primary_score(sample: Sample) -> float | None:
    """The score of the sample's first judgment; None if unanswered or unparseable."""
    if sample.response is None or not sample.judgments:
        return None
    j = sample.judgments[0]
    return j.score if j.parse_status == "ok" else None


def detail_value(sample: Sample, name: str) -> float | None:
    """A further number the judge reported in its details (e.g. SummHay's coverage beside the
    joint score); None when the answer or judgment is missing or failed."""
    if primary_score(sample) is None:
        return None
    value = sample.judgments[0].details.get(name)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def cluster_of(sample: Sample, cluster_by: str | None) -> str:
    """The resampling unit of a sample: the spec's `report.cluster_by` field (e.g. the
    meeting), the conversation when the sample lacks it, each item alone without the field."""
    return str(sample.metadata.get(cluster_by, sample.conv_id)) if cluster_by else sample.item_id


def _grouped(samples: list[Sample], fieldname: str) -> dict[str, list[Sample]]:
    """Samples by the value of one metadata field, in sorted order of the values."""
    groups: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        groups[str(s.metadata.get(fieldname))].append(s)
    return dict(sorted(groups.items()))


def _summary(samples: list[Sample], cluster_by: str | None, seed: int,
             value_of: Callable[[Sample], float | None] = primary_score) -> dict[str, Any]:
    scored = [(s, value_of(s)) for s in samples]
    scored = [(s, v) for s, v in scored if v is not None]
    values = [v for _, v in scored]
    clusters = [cluster_of(s, cluster_by) for s, _ in scored]
    return cluster_bootstrap(values, clusters, seed=seed)


def _by_seed_mean(samples: list[Sample], value_of: Callable[[Sample], float | None]) -> dict[str, Any] | None:
    seeds = sorted({s.seed for s in samples})
    if len(seeds) < 2:
        return None
    per_seed = []
    for seed in seeds:
        vals = [v for s in samples if s.seed == seed and (v := value_of(s)) is not None]
        per_seed.append(sum(vals) / len(vals) if vals else None)
    out = across_seeds(per_seed)
    out["seeds"] = seeds
    return out


def _block(samples: list[Sample], report: dict[str, Any], seed: int,
           value_of: Callable[[Sample], float | None] = primary_score) -> dict[str, Any]:
    cluster_by = report.get("cluster_by")
    block = _summary(samples, cluster_by, seed, value_of)
    seeds = _by_seed_mean(samples, value_of)
    if seeds:
        block["across_seeds"] = seeds
    breakdowns: dict[str, Any] = {}
    for fieldname in report.get("breakdowns", []):
        breakdowns[fieldname] = {k: _summary(v, cluster_by, seed, value_of)
                                 for k, v in _grouped(samples, fieldname).items()}
    if breakdowns:
        block["breakdowns"] = breakdowns
    tests: dict[str, Any] = {}
    for test in report.get("tests", []):
        if test["kind"] == "welch_one_tailed":
            inside = [v for s in samples if str(s.metadata.get(test["field"])) == str(test["value"])
                      and (v := value_of(s)) is not None]
            outside = [v for s in samples if str(s.metadata.get(test["field"])) != str(test["value"])
                       and (v := value_of(s)) is not None]
            res = welch_one_tailed(inside, outside, test.get("alternative", "less"))
            res.update(field=test["field"], value=test["value"], description=test.get("description", ""))
            tests[test["name"]] = res
    if tests:
        block["tests"] = tests
    return block


def _metric(samples: list[Sample], report: dict[str, Any], seed: int,
            value_of: Callable[[Sample], float | None]) -> dict[str, Any]:
    metric = _block(samples, report, seed, value_of)
    group_by = report.get("group_by")
    if group_by:
        metric["groups"] = {k: _block(v, report, seed, value_of) for k, v in _grouped(samples, group_by).items()}
        means = [g["value"] for g in metric["groups"].values() if g["value"] is not None]
        metric["mean_of_groups"] = sum(means) / len(means) if means else None
        metric["group_by"] = group_by
    return metric


def score_task(samples: list[Sample], spec_data: dict[str, Any], judge_identity: dict[str, Any],
               seed: int = 0) -> dict[str, Any]:
    """Results of one task: overall, per group (e.g. split) and the mean of group means."""
    report = spec_data.get("report", {})
    n = len(samples)
    unanswered = sum(1 for s in samples if s.response is None)
    status = [s.judgments[0].parse_status for s in samples if s.response is not None and s.judgments]
    parse_failures = status.count("parse_failure")  # the judge answered, but with no usable score
    missing = status.count("missing")  # no verdict at all (no recorded score, judge API gave up)
    truncated = sum(1 for s in samples if s.context_cut.action == "truncated")
    skipped = sum(1 for s in samples if s.context_cut.action == "skipped")
    metrics = {"score": _metric(samples, report, seed, primary_score)}
    for name in report.get("metrics", []):
        metrics[name] = _metric(samples, report, seed, lambda s, name=name: detail_value(s, name))
    return {
        "type": spec_data["type"],
        "description": spec_data["description"],
        "judge": judge_identity,
        "n_samples": n,
        "metrics": metrics,
        "accounting": {
            "answered": n - unanswered,
            "unanswered": unanswered,
            "generation_failures": sum(1 for s in samples if "generation_failed" in s.generation_extras),
            "judge_parse_failures": parse_failures,
            "judge_missing": missing,
            "truncated": truncated,
            "skipped": skipped,
            "truncated_share": truncated / n if n else 0.0,
            "skipped_share": skipped / n if n else 0.0,
        },
    }
