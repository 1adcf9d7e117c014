"""From samples to the numbers in results.json, driven by the spec's `report` section, so
the engine computes ELITR's breakdowns and Welch test without knowing ELITR."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from lceval.engine import ReportSettings, TaskSpec, tokens_label
from lceval.stats import across_seeds, cluster_bootstrap, welch_one_tailed
from lceval.types import Sample, is_scored


def is_censored(sample: Sample) -> bool:
    """The model thought until its budget or the window ran out and never answered: not a
    wrong answer, no answer (counted at the bottom of the judge's scale in the score over all
    items, left out of the uncensored score)."""
    return sample.response is None and bool(sample.generation_extras.get("unclosed_thinking"))


def metric_value(sample: Sample, index: int) -> float | None:
    """The score of the sample's judgment `index` (0: the headline, then the spec's further
    metrics in order), a censored answer's at the bottom of the judge's scale; None if
    unanswered, missing or unparseable."""
    if len(sample.judgments) <= index:
        return None
    j = sample.judgments[index]
    if is_censored(sample):
        return j.score if j.parse_status == "censored" else None
    if sample.response is None:
        return None
    return j.score if j.parse_status == "ok" else None


def primary_score(sample: Sample) -> float | None:
    """The score of the sample's first judgment (a censored answer's: the bottom of the judge's
    scale, as the score over all items counts it); None if unanswered or unparseable."""
    return metric_value(sample, 0)


def uncensored_score(sample: Sample, index: int = 0) -> float | None:
    """As `metric_value`, a censored answer left out (None): the score over the uncensored
    items, an optimistic bound when the censored ones were the hard ones."""
    return None if is_censored(sample) else metric_value(sample, index)


def detail_value(sample: Sample, name: str) -> float | None:
    """A further number the judge reported in its details (e.g. SummHay's coverage beside the
    joint score); None when the answer or judgment is missing or failed, or was censored."""
    if uncensored_score(sample) is None:
        return None
    value = sample.judgments[0].details.get(name)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def cluster_of(sample: Sample, cluster_by: str | None) -> str:
    """The resampling unit of a sample: the spec's `report.cluster_by` field (e.g. the
    meeting), the conversation when the sample lacks it, each item alone without the field."""
    return str(sample.metadata.get(cluster_by, sample.conv_id)) if cluster_by else sample.item_id


#: Edges (tokens) of the `context_tokens` breakdown when the spec's report gives none: the
#: usual window sizes, so a bucket says which windows hold the whole context.
DEFAULT_CONTEXT_EDGES = (4096, 8192, 16384, 32768, 65536, 131072)
#: Edges of the `context_kept_share` breakdown (share of the context's tokens that were sent).
KEPT_SHARE_EDGES = (0.25, 0.5, 0.75)


@dataclass(frozen=True)
class Breakdown:
    """One way of splitting samples into named groups, in the order they are reported."""

    name: str
    key: Callable[[Sample], str | None]  # None: the sample is in no group
    order: tuple[str, ...] | None = None  # None: sorted by name


def context_tokens_breakdown(edges: Sequence[int]) -> Breakdown:
    """Samples by the original length of their context in the model's tokens: bucket
    "a-b" holds a < tokens <= b (so an 8k-window model takes all of "4k-8k" uncut), the
    first is "0-a", the last ">z". Samples whose context was not measured are in none."""
    edges = sorted(int(e) for e in edges)
    names = [f"0-{tokens_label(edges[0])}"]
    names += [f"{tokens_label(a)}-{tokens_label(b)}" for a, b in zip(edges, edges[1:])]
    names.append(f">{tokens_label(edges[-1])}")

    def key(sample: Sample) -> str | None:
        n = sample.context_cut.original_tokens
        if not n:
            return None
        return names[next((i for i, e in enumerate(edges) if n <= e), len(edges))]

    return Breakdown("context_tokens", key, tuple(names))


def kept_share_label(sample: Sample) -> str | None:
    """Share of the context's tokens the model saw: "100%" uncut, else the quarter it falls
    in ("75-100%" kept most but not all of it)."""
    cut = sample.context_cut
    if not cut.original_tokens or cut.kept_tokens is None:
        return None
    share = cut.kept_tokens / cut.original_tokens
    if share >= 1:
        return "100%"
    bounds = [0.0, *KEPT_SHARE_EDGES, 1.0]
    i = next(i for i in range(1, len(bounds)) if share < bounds[i])
    return f"{bounds[i - 1]:.0%}-{bounds[i]:.0%}".replace("%-", "-")


KEPT_SHARE_ORDER = ("0-25%", "25-50%", "50-75%", "75-100%", "100%")


def metadata_breakdown(fieldname: str, order: Sequence[str] | None = None) -> Breakdown:
    """Samples by the value of a metadata field: the values in `order` first (the spec's
    `report.breakdown_order`, e.g. the paper's who/what/when/howmany), then the rest sorted."""
    return Breakdown(fieldname, lambda s: str(s.metadata.get(fieldname)),
                     tuple(str(v) for v in order) if order else None)


def breakdowns_for(samples: list[Sample], report: ReportSettings) -> list[Breakdown]:
    """The spec's `report.breakdowns` (metadata fields), then, for a task whose samples have a
    measured context, the score by context length (`report.context_buckets` or the default
    edges) and by the share of the context that was kept; for a model that thought, by how
    long it thought."""
    out = [metadata_breakdown(f, report.breakdown_order.get(f)) for f in report.breakdowns]
    if any(s.context_cut.original_tokens for s in samples):
        out.append(context_tokens_breakdown(report.context_buckets or DEFAULT_CONTEXT_EDGES))
        out.append(Breakdown("context_kept_share", kept_share_label, KEPT_SHARE_ORDER))
    if any(s.reasoning_tokens for s in samples):
        out.append(reasoning_tokens_breakdown())
    return out


#: the metric beside `score` when answers were censored: the score over the uncensored items
UNCENSORED = "uncensored_bound"

#: Edges (tokens) of the `reasoning_tokens` breakdown: how long a reasoning model thought.
REASONING_EDGES = (1024, 4096, 16384)


def reasoning_tokens_breakdown() -> Breakdown:
    """Samples by the tokens the model thought before answering ("0-1k", "1k-4k", ...)."""
    edges = REASONING_EDGES
    names = [f"0-{tokens_label(edges[0])}"] + [f"{tokens_label(a)}-{tokens_label(b)}" for a, b in zip(edges, edges[1:])]
    names.append(f">{tokens_label(edges[-1])}")

    def key(sample: Sample) -> str | None:
        n = sample.reasoning_tokens
        if n is None:
            return None
        return names[next((i for i, e in enumerate(edges) if n <= e), len(edges))]

    return Breakdown("reasoning_tokens", key, tuple(names))


def _grouped_by(samples: list[Sample], breakdown: Breakdown) -> dict[str, list[Sample]]:
    """Samples by group, in the breakdown's order; empty groups left out."""
    groups: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        k = breakdown.key(s)
        if k is not None:
            groups[k].append(s)
    order = [n for n in breakdown.order or () if n in groups]
    return {n: groups[n] for n in order + sorted(set(groups) - set(order))}


def _grouped(samples: list[Sample], fieldname: str) -> dict[str, list[Sample]]:
    """Samples by the value of one metadata field, in sorted order of the values."""
    return _grouped_by(samples, metadata_breakdown(fieldname))


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


def _block(samples: list[Sample], report: ReportSettings, seed: int, splits: list[Breakdown],
           value_of: Callable[[Sample], float | None] = primary_score) -> dict[str, Any]:
    cluster_by = report.cluster_by
    block = _summary(samples, cluster_by, seed, value_of)
    seeds = _by_seed_mean(samples, value_of)
    if seeds:
        block["across_seeds"] = seeds
    breakdowns: dict[str, Any] = {}
    for breakdown in splits:
        groups = _grouped_by(samples, breakdown)
        if groups:
            breakdowns[breakdown.name] = {k: _summary(v, cluster_by, seed, value_of) for k, v in groups.items()}
    if breakdowns:
        block["breakdowns"] = breakdowns
    tests: dict[str, Any] = {}
    for test in report.tests:
        if test.kind == "welch_one_tailed":
            inside = [v for s in samples if str(s.metadata.get(test.field)) == str(test.value)
                      and (v := value_of(s)) is not None]
            outside = [v for s in samples if str(s.metadata.get(test.field)) != str(test.value)
                       and (v := value_of(s)) is not None]
            res = welch_one_tailed(inside, outside, test.alternative)
            res.update(field=test.field, value=test.value, description=test.description)
            tests[test.name] = res
    if tests:
        block["tests"] = tests
    return block


class HeadlineResampler:
    """One task's samples as (group -> cluster -> scores): the headline the table prints (the
    mean of the groups' means with `group_by`, else the mean) and its bootstrap, which
    resamples clusters within each group."""

    def __init__(self, samples: list[Sample], report: ReportSettings,
                 value_of: Callable[[Sample], float | None] = primary_score) -> None:
        group_by, cluster_by = report.group_by, report.cluster_by
        groups: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for s in samples:
            value = value_of(s)
            if value is None:
                continue
            group = str(s.metadata.get(group_by)) if group_by else ""
            groups[group][cluster_of(s, cluster_by)].append(value)
        # per group: cluster sums and counts, for the ratio estimator of a resampled mean
        self.groups = [(np.array([sum(v) for v in g.values()]), np.array([len(v) for v in g.values()]))
                       for _, g in sorted(groups.items())]

    def headline(self) -> float | None:
        means = [sums.sum() / counts.sum() for sums, counts in self.groups if counts.sum()]
        return float(sum(means) / len(means)) if means else None

    def boot(self, rng: np.random.Generator, n_boot: int) -> np.ndarray | None:
        """`n_boot` resampled headlines, or None when no group has two clusters to resample."""
        if not self.groups or all(len(sums) < 2 for sums, _ in self.groups):
            return None
        per_group = []
        for sums, counts in self.groups:
            picks = rng.integers(0, len(sums), size=(n_boot, len(sums)))
            per_group.append(sums[picks].sum(axis=1) / counts[picks].sum(axis=1))
        return np.mean(per_group, axis=0)


def headline_block(metric: dict[str, Any]) -> dict[str, Any]:
    """A metric's headline as a block of its own (`value`, `n`, `spread`): the mean of the
    groups' means with its stratified interval when the spec has `group_by`, else the overall
    mean with its interval. What the console's last row, the report and the curves show."""
    if not metric.get("groups"):
        return {"value": metric.get("value"), "n": metric.get("n"), "spread": metric.get("spread")}
    spread = dict(metric.get("mean_of_groups_spread") or {})
    spread.setdefault("clusters", (metric.get("spread") or {}).get("clusters"))
    return {"value": metric.get("mean_of_groups"), "n": metric.get("n"), "spread": spread}


def interval_of(boot: np.ndarray | None, level: float = 0.95) -> list[float] | None:
    """The percentile interval of bootstrap draws (None: nothing to resample)."""
    if boot is None:
        return None
    alpha = (1 - level) / 2
    return [float(np.quantile(boot, alpha)), float(np.quantile(boot, 1 - alpha))]


def _metric(samples: list[Sample], report: ReportSettings, seed: int,
            value_of: Callable[[Sample], float | None]) -> dict[str, Any]:
    splits = breakdowns_for(samples, report)
    metric = _block(samples, report, seed, splits, value_of)
    group_by = report.group_by
    if group_by:
        metric["groups"] = {k: _block(v, report, seed, splits, value_of)
                            for k, v in _grouped(samples, group_by).items()}
        means = [g["value"] for g in metric["groups"].values() if g["value"] is not None]
        metric["mean_of_groups"] = sum(means) / len(means) if means else None
        metric["group_by"] = group_by
        # the headline's own interval: clusters resampled within each group, the mean of the
        # groups' means recomputed (no interval with fewer than two clusters in every group)
        ci = interval_of(HeadlineResampler(samples, report, value_of).boot(np.random.default_rng(seed), 2000))
        metric["mean_of_groups_spread"] = {"method": "stratified_cluster_bootstrap", "level": 0.95, "n_boot": 2000,
                                           "ci_low": ci[0] if ci else None, "ci_high": ci[1] if ci else None}
    return metric


def as_spec(name: str, spec: TaskSpec | dict[str, Any]) -> TaskSpec:
    """A `TaskSpec`, or a resolved spec's mapping (what a manifest records, what
    `FinishedRun.task_spec` gives a plugin) made one."""
    if isinstance(spec, TaskSpec):
        return spec
    return TaskSpec.from_manifest(name, {"spec": spec}, Path("."))


def score_task(samples: list[Sample], spec: TaskSpec | dict[str, Any], judge_identity: dict[str, Any],
               seed: int = 0, metric_identities: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Results of one task: overall, per group (e.g. split) and the mean of group means, as
    the spec's typed `report` section asks (`spec`: a `TaskSpec`, or a resolved spec's mapping).
    A sample of an unscored turn (`metadata["scored"] is False`: a reasoning step) is no result."""
    spec = as_spec(spec.get("name", "task") if isinstance(spec, dict) else spec.name, spec)
    report = spec.report
    samples = [s for s in samples if is_scored(s.metadata)]
    n = len(samples)
    unanswered = sum(1 for s in samples if s.response is None)
    status = [s.judgments[0].parse_status for s in samples if s.response is not None and s.judgments]
    parse_failures = status.count("parse_failure")  # the judge answered, but with no usable score
    missing = status.count("missing")  # no verdict at all (no recorded score, judge API gave up)
    truncated = sum(1 for s in samples if s.context_cut.action == "truncated")
    unclosed = sum(1 for s in samples if s.generation_extras.get("unclosed_thinking"))
    censored = sum(1 for s in samples if is_censored(s))
    skipped = sum(1 for s in samples if s.context_cut.action == "skipped")
    metrics = {"score": _metric(samples, report, seed, primary_score)}
    if censored:  # the same items without the censored ones: a bound, said so wherever it is shown
        metrics[UNCENSORED] = _metric(samples, report, seed, uncensored_score)
    further = spec.metrics
    for i, m in enumerate(further, start=1):  # the spec's further metrics, each from its own judgment
        metrics[m.label] = _metric(samples, report, seed, lambda s, i=i: metric_value(s, i))
    for name in report.metrics:
        metrics[name] = _metric(samples, report, seed, lambda s, name=name: detail_value(s, name))
    out: dict[str, Any] = {
        "type": spec.type,
        "description": spec.description,
        "judge": judge_identity,
        **({"headline": spec.headline_label, "metric_judges": dict(metric_identities or {})} if further else {}),
        "n_samples": n,
        "cluster_by": report.cluster_by,  # what the intervals resample (the table names it)
        **({"differs_from_paper": report.differs_from_paper} if report.differs_from_paper else {}),
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
            "tokens": token_totals(samples),
        },
    }
    if unclosed:  # answers whose thinking never closed: no answer (among `unanswered`)
        out["accounting"]["unclosed_thinking"] = unclosed
    if censored:  # of them, those of scored items: in the score at the bottom of the scale
        out["accounting"]["censored"] = censored
        out["accounting"]["censored_share"] = censored / n
    limited = sum(1 for s in samples if _not_sent(s))
    if limited:  # not asked: a cost limit stopped the run (among `unanswered` and `generation_failures`)
        out["accounting"]["not_sent_cost_limit"] = limited
    budget = spec.context.max_tokens
    if budget:  # one point of a --context-lengths curve
        out["spec_name"] = spec.data["name"]
        out["context_max_tokens"] = budget
        # contexts longer than the budget that the model's window cut shorter still: this
        # point of the curve is not at its nominal length
        out["accounting"]["window_capped"] = sum(
            1 for s in samples if (s.context_cut.original_tokens or 0) > budget
            and s.context_cut.kept_tokens is not None and s.context_cut.kept_tokens < budget
            and s.context_cut.action == "truncated")
    return out


def _not_sent(sample: Sample) -> bool:
    """A question a cost limit kept from being asked (its failure's kind is "cost_limit")."""
    failed = sample.generation_extras.get("generation_failed")
    error = failed.get("error") if isinstance(failed, dict) else None
    return isinstance(error, dict) and error.get("kind") == "cost_limit"


def token_totals(samples: list[Sample]) -> dict[str, Any]:
    """Tokens the answers took (answers from the request cache count what they took when they
    were generated, so a resumed or sharded run reports what an uninterrupted one would). `prefilled` is None as soon as one answer's prefill is unknown: the sum
    over the answers whose prefill is known would pass for a total it is not."""
    # every answer the model gave, a thinking that never closed included: it was generated and billed
    answered = [s for s in samples if s.response is not None or s.generation_extras.get("unclosed_thinking")]
    unknown = sum(1 for s in answered if s.prefilled_tokens is None)
    out: dict[str, Any] = {
        "prompt": sum(s.prompt_tokens for s in answered),
        "prefilled": None if unknown else sum(s.prefilled_tokens or 0 for s in answered),
        "prefill_unknown": unknown,
        "completion": sum(s.completion_tokens for s in answered),
    }
    reported = [s for s in answered if s.cache_read_tokens is not None or s.cache_write_tokens is not None]
    if reported:  # an API provider's prompt cache: its reads and writes apart from the input it billed in full
        read = sum(s.cache_read_tokens or 0 for s in answered)
        written = sum(s.cache_write_tokens or 0 for s in answered)
        out["cache_read"], out["cache_write"] = read, written
        out["uncached_input"] = out["prompt"] - read - written
        out["cache_unreported"] = len(answered) - len(reported)
    thought = [s for s in answered if s.reasoning is not None]
    if thought:  # a reasoning model: its thinking (part of completion, as providers bill it)
        unknown_thought = sum(1 for s in thought if s.reasoning_tokens is None)
        # as prefilled: the sum over the answers whose count is known would pass for a total
        out["reasoning"] = None if unknown_thought else sum(s.reasoning_tokens or 0 for s in thought)
        out["reasoning_unknown"] = unknown_thought
        out["thinking_answers"] = len(thought)
    return out


#: marks a task's number that its spec says is not comparable with the paper's (`report.differs_from_paper`)
DIFFERS_MARK = "\u2020"


def differs_from_paper(*tasks: dict[str, Any]) -> dict[str, str]:
    """Task -> why its number is not comparable with the paper's, over the `tasks` blocks of
    one or more results (the first that says so for a task): every table marks these tasks
    with `DIFFERS_MARK` and says why under it."""
    out: dict[str, str] = {}
    for block in tasks:
        for name, entry in block.items():
            if name not in out and isinstance(entry, dict) and entry.get("differs_from_paper"):
                out[name] = str(entry["differs_from_paper"])
    return out
