"""`lceval rank`: rank systems by pairwise comparison of their outputs (CREAM, Gong et al., 2024).

A *system* is a model, or a model plus a variant of one run (e.g. a summarization prompt:
the spec's `rank.variant` names the metadata field). Items that answer the same thing (the
spec's `rank.unit`, e.g. one meeting) are compared pairwise by a pairwise-judge plugin, every
pair in both orders so that the position a text is shown in cancels out (and is measured).
Each criterion the judge scores (CREAM: completeness and conciseness) becomes its own set of
matches, ranked with Elo over many random match orders and with a Bradley-Terry fit, each
with a bootstrap interval that resamples whole units (`lceval.pairwise`).

Nothing here knows a benchmark: the unit, the variant, the default judge and the criteria
come from the task spec's `rank` section as the run recorded it; the judge is a plugin.
When the runs' own judge is a reference-based one reporting the same criteria in its
details (CREAM's check against human minutes, paper Table 5), its per-system means give a
reference ranking and its agreement with the pairwise one.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from lceval.analysis import _pairwise as pairwise
from lceval.errors import UserError
from lceval.interfaces import JudgeContext, PairwiseJudge
from lceval.engine import Plugins
from lceval.results import FinishedRun
from lceval.stats import cluster_bootstrap
from lceval.results import run_model_name
from lceval.types import PairInput, PairJudgment, Sample

SCHEMA = "lceval-rankings-1"


@dataclass
class RankOptions:
    """Everything that shapes a ranking besides the runs and the judge model."""

    judge: str | None = None  # name[,key=value...]; default: the spec's rank.judge
    criteria: list[str] | None = None  # default: the spec's rank.criteria, else the judge's
    k_factor: float = 32.0
    initial: float = 1000.0
    n_orders: int = 1000
    n_boot: int = 1000
    bt_prior: float = 0.0
    tie_margin: float = 0.0
    swap: bool = True
    seed: int = 0
    level: float = 0.95
    reference_judge: str | None = None  # judgment name in the runs' samples; default: any with the criteria
    tasks: list[str] | None = None

    def check(self) -> None:
        checks = [("--k-factor", self.k_factor > 0), ("--n-orders", self.n_orders >= 1),
                  ("--n-boot", self.n_boot >= 1), ("--bt-prior", self.bt_prior >= 0),
                  ("--tie-margin", self.tie_margin >= 0), ("--level", 0 < self.level < 1)]
        for flag, ok in checks:
            if not ok:
                raise UserError(f"{flag} is out of range: {getattr(self, flag[2:].replace('-', '_'))}",
                                field=flag)


@dataclass
class System:
    label: str
    run_id: str
    model: str
    task: str
    variant: str | None
    #: (unit, seed) -> the sample answering it
    items: dict[tuple[str, int], Sample] = field(default_factory=dict)
    excluded: int = 0  # samples without a usable answer (skipped, failed)


# -- systems -------------------------------------------------------------------------------


def _answered(sample: Sample) -> bool:
    return (sample.response is not None and bool(sample.response.strip())
            and not sample.generation_extras.get("generation_failed"))


def collect_systems(runs: list[FinishedRun], tasks: list[str] | None) -> tuple[list[System], dict[str, Any]]:
    """Split the runs into systems; returns them and the (first) task's rank section."""
    if not runs:
        raise UserError("give at least one run directory", field="RUN_DIR")
    available = [t for run in runs for t in (run.results.get("tasks") or {})]
    chosen = list(dict.fromkeys(tasks or available))
    for t in chosen:
        if t not in available:
            raise UserError(f"no run has task '{t}' (they have: {', '.join(sorted(set(available)))})",
                            field="--task")
    short = [run_model_name(r) for r in runs]
    systems: dict[str, System] = {}
    section: dict[str, Any] = {}
    for run, name in zip(runs, short):
        base = name if short.count(name) == 1 else run.model
        for task in chosen:
            if task not in (run.results.get("tasks") or {}):
                continue
            rank = dict(run.task_spec(task).get("rank") or {})
            section = section or rank
            unit_field, variant_field = rank.get("unit"), rank.get("variant")
            for s in run.task_samples(task):
                variant = str(s.metadata[variant_field]) if variant_field and variant_field in s.metadata else None
                label = "/".join(p for p in (base, task if len(chosen) > 1 else None, variant) if p)
                sys_ = systems.get(label)
                if sys_ is None:
                    sys_ = systems[label] = System(label=label, run_id=run.run_id, model=run.model, task=task,
                                                   variant=variant)
                elif sys_.run_id != run.run_id:
                    raise UserError(f"two runs give the same system '{label}' ({sys_.run_id} and {run.run_id})",
                                    file=run.path, hint="Rank one run per model, or rename one run directory's model.")
                unit = str(s.metadata.get(unit_field, s.item_id)) if unit_field else s.item_id
                if not _answered(s):
                    sys_.excluded += 1
                    continue
                sys_.items[(unit, s.seed)] = s
    found = sorted(systems.values(), key=lambda x: x.label)
    if len(found) < 2:
        raise UserError(f"ranking needs at least two systems, found {len(found)} "
                        f"({', '.join(x.label for x in found) or 'none'})", field="RUN_DIR",
                        hint="Give several runs, or a run whose task has several variants (e.g. prompts).")
    return found, section


def plan_pairs(systems: list[System], swap: bool) -> list[PairInput]:
    """Every pair of systems on every unit both answered, in both orders when `swap`."""
    keys = sorted({k for s in systems for k in s.items})
    pairs: list[PairInput] = []
    for unit, seed in keys:
        present = [s for s in systems if (unit, seed) in s.items]
        for i, a in enumerate(present):
            for b in present[i + 1:]:
                orders = [(a, b), (b, a)] if swap else [(a, b)]
                for x, y in orders:
                    sx, sy = x.items[(unit, seed)], y.items[(unit, seed)]
                    pairs.append(PairInput(unit_id=unit, system_a=x.label, system_b=y.label,
                                           text_a=sx.response or "", text_b=sy.response or "",
                                           metadata={"seed": seed, "item_a": sx.item_id, "item_b": sy.item_id}))
    return pairs


def make_pairwise_judge(flag: str, plugins: Plugins, model: Any, seed: int) -> PairwiseJudge:
    from lceval.options import parse_judge_flag

    name, options = parse_judge_flag(flag)
    factory = plugins.get("pairwise-judge", name)
    try:
        judge = factory(JudgeContext(options=options, model=model, seed=seed))
    except UserError as exc:
        raise UserError(exc.message, field=exc.field if exc.field == "--judge-model" else "--judge",
                        hint=exc.hint) from None
    if model is not None and not judge.uses_model:
        raise UserError(f"pairwise judge '{name}' does not call a model", field="--judge-model")
    return judge


# -- from judgments to matches ---------------------------------------------------------------


@dataclass
class PairResult:
    """One unordered pair of systems on one unit, its orders combined."""

    unit: str
    seed: int
    a: str
    b: str
    orders_parsed: int
    scores: dict[str, tuple[float, float]]  # criterion -> (a's mean over orders, b's)
    outcome: dict[str, float]  # criterion -> S for a (1, 0.5, 0)
    #: criterion -> (a minus b with a shown first, a minus b with b shown first), both orders parsed
    by_order: dict[str, tuple[float, float]] = field(default_factory=dict)


def outcome(diff: float, margin: float) -> float:
    return 1.0 if diff > margin else 0.0 if diff < -margin else 0.5


def combine(pairs: list[PairInput], verdicts: list[PairJudgment], criteria: list[str],
            tie_margin: float) -> tuple[list[PairResult], int]:
    """Average each side's scores over the orders that parsed; returns the pairs and how many
    unordered pairs had no usable judgment at all."""
    groups: dict[tuple[str, int, str, str], list[tuple[PairInput, PairJudgment]]] = defaultdict(list)
    for p, v in zip(pairs, verdicts):
        a, b = sorted((p.system_a, p.system_b))
        groups[(p.unit_id, int(p.metadata.get("seed", 0)), a, b)].append((p, v))
    results, unjudged = [], 0
    for (unit, seed, a, b), members in groups.items():
        sides: dict[str, dict[str, list[float]]] = {a: defaultdict(list), b: defaultdict(list)}
        a_first: dict[str, float] = {}  # criterion -> a minus b when a was shown first
        b_first: dict[str, float] = {}  # criterion -> a minus b when b was shown first
        parsed = 0
        for p, v in members:
            if v.parse_status != "ok" or v.scores_a is None or v.scores_b is None:
                continue
            missing = [c for c in criteria if c not in v.scores_a or c not in v.scores_b]
            if missing:
                raise UserError(f"pairwise judge '{v.judge}' gave no score for {', '.join(missing)}",
                                field="--criteria", hint=f"It scores: {', '.join(sorted(v.scores_a))}")
            parsed += 1
            first_is_a = p.system_a == a
            for c in criteria:
                sa, sb = (v.scores_a[c], v.scores_b[c]) if first_is_a else (v.scores_b[c], v.scores_a[c])
                sides[a][c].append(float(sa))
                sides[b][c].append(float(sb))
                (a_first if first_is_a else b_first)[c] = float(sa) - float(sb)
        if not parsed:
            unjudged += 1
            continue
        scores = {c: (float(np.mean(sides[a][c])), float(np.mean(sides[b][c]))) for c in criteria}
        by_order = {c: (a_first[c], b_first[c]) for c in criteria if c in a_first and c in b_first}
        results.append(PairResult(unit=unit, seed=seed, a=a, b=b, orders_parsed=parsed, scores=scores,
                                  outcome={c: outcome(scores[c][0] - scores[c][1], tie_margin) for c in criteria},
                                  by_order=by_order))
    results.sort(key=lambda r: (r.unit, r.seed, r.a, r.b))
    return results, unjudged


# -- statistics per criterion -----------------------------------------------------------------


def _interval(ci: Any, name: str) -> dict[str, float | None]:
    lo, hi = ci.intervals.get(name, (None, None))
    return {"ci_low": lo, "ci_high": hi}


def criterion_ranking(results: list[PairResult], labels: list[str], criterion: str,
                      opts: RankOptions) -> dict[str, Any]:
    matches = [pairwise.Match(a=r.a, b=r.b, score_a=r.outcome[criterion], cluster=r.unit) for r in results]
    out: dict[str, Any] = {"matches": len(matches)}
    if not matches:
        out["note"] = "no judged pair: nothing to rank"
        return out
    elo = pairwise.elo_over_orders(matches, labels, k=opts.k_factor, initial=opts.initial,
                                   n_orders=opts.n_orders, seed=opts.seed)

    def elo_once(ms: list[pairwise.Match], rng: np.random.Generator) -> dict[str, float]:
        order = [ms[i] for i in rng.permutation(len(ms))]
        return pairwise.elo(order, labels, k=opts.k_factor, initial=opts.initial)

    elo_ci = pairwise.bootstrap_ci(matches, labels, elo_once, n_boot=opts.n_boot, seed=opts.seed, level=opts.level)
    out["elo"] = {s: {"rating": elo.ratings[s], "order_sd": elo.order_sd[s], **_interval(elo_ci, s)} for s in labels}
    out["elo_bootstrap"] = {"n_boot": elo_ci.n_boot, "skipped": elo_ci.skipped}

    try:
        bt = pairwise.bradley_terry(matches, labels, prior=opts.bt_prior, anchor=opts.initial)
    except pairwise.NoMLE as exc:
        out["bradley_terry"] = None
        out["bradley_terry_note"] = f"{exc} Pass --bt-prior 1 (one virtual draw per pair)."
    else:
        try:
            bt_ci = pairwise.bootstrap_bradley_terry(matches, labels, prior=opts.bt_prior, anchor=opts.initial,
                                                     n_boot=opts.n_boot, seed=opts.seed, level=opts.level)
        except pairwise.NoMLE:  # no resample had a fit: no interval rather than a made-up one
            bt_ci = pairwise.BootstrapResult(intervals={}, n_boot=opts.n_boot, skipped=opts.n_boot, level=opts.level)
        out["bradley_terry"] = {s: {"rating": bt.ratings[s], **_interval(bt_ci, s)} for s in labels}
        out["bt_fit"] = {"iterations": bt.iterations, "converged": bt.converged,
                         "log_likelihood": bt.log_likelihood, "prior": opts.bt_prior,
                         "n_boot": bt_ci.n_boot, "skipped": bt_ci.skipped}
        if bt_ci.skipped:
            out["bt_fit"]["note"] = (f"{bt_ci.skipped} of {bt_ci.n_boot} resamples had no maximum-likelihood "
                                     "fit (a system won or lost all its matches) and were left out of the interval")
    out["order"] = sorted(labels, key=lambda s: -out["elo"][s]["rating"])
    out["head_to_head"] = {f"{a} vs {b}": {"wins": w, "draws": d, "losses": l}
                           for (a, b), (w, d, l) in sorted(pairwise.head_to_head(matches).items())}
    out["matrix"] = score_matrix(results, labels, criterion)
    out["position_bias"] = position_bias(results, criterion, opts)
    return out


def score_matrix(results: list[PairResult], labels: list[str], criterion: str) -> dict[str, dict[str, Any]]:
    """Gong et al., 2024, Table 3's layout: row system's mean score when compared with the column
    system (both orders averaged), over the units both answered."""
    triples = [t for r in results for t in ((r.a, r.b, r.scores[criterion][0]), (r.b, r.a, r.scores[criterion][1]))]
    m = pairwise.score_matrix(triples, labels)
    return {row: {col: ({"mean": m.mean[row][col], "n": m.count[row][col]} if m.count[row][col] else None)
                  for col in labels if col != row} for row in labels}


def position_bias(results: list[PairResult], criterion: str, opts: RankOptions) -> dict[str, Any]:
    """How much being shown first is worth: over pairs judged in both orders, half the sum of
    (first minus second) in the two orders; the systems' own difference cancels. Also the
    share of pairs whose winner stays the same when the order is swapped."""
    both = [r for r in results if criterion in r.by_order]
    if not both:
        return {"pairs_both_orders": 0}
    # by_order holds (a-b with a first, a-b with b first): first minus second is d1, then -d2
    bias = [(r.by_order[criterion][0] - r.by_order[criterion][1]) / 2 for r in both]
    same = [outcome(r.by_order[criterion][0], opts.tie_margin) == outcome(r.by_order[criterion][1], opts.tie_margin)
            for r in both]
    summary = cluster_bootstrap(bias, [r.unit for r in both], n_boot=opts.n_boot, level=opts.level, seed=opts.seed)
    spread = summary.get("spread") or {}
    return {"pairs_both_orders": len(both), "first_minus_second": summary["value"],
            "ci_low": spread.get("ci_low"), "ci_high": spread.get("ci_high"),
            "same_winner_both_orders": float(np.mean(same))}


# -- the reference check -----------------------------------------------------------------


def _reference_value(sample: Sample, criterion: str, judge: str | None) -> float | None:
    for j in sample.judgments:
        if judge is not None and j.judge != judge:
            continue
        value = j.details.get(criterion)
        if j.parse_status == "ok" and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def reference_check(systems: list[System], results: list[PairResult], criterion: str,
                    ranking: dict[str, Any], opts: RankOptions) -> dict[str, Any] | None:
    """Per-system mean of the runs' reference judge on this criterion, over the units the
    system was compared on, and how well the pairwise ranking agrees with it (paper Table 5
    reports the rank correlation)."""
    from scipy import stats

    compared: dict[str, set[tuple[str, int]]] = defaultdict(set)
    for r in results:
        compared[r.a].add((r.unit, r.seed))
        compared[r.b].add((r.unit, r.seed))
    per_system: dict[str, Any] = {}
    judge_names: set[str] = set()
    for sys_ in systems:
        values, clusters = [], []
        for key in sorted(compared.get(sys_.label, ())):
            sample = sys_.items[key]
            v = _reference_value(sample, criterion, opts.reference_judge)
            if v is not None:
                values.append(v)
                clusters.append(key[0])
                judge_names.update(j.judge for j in sample.judgments)
        if values:
            block = cluster_bootstrap(values, clusters, n_boot=opts.n_boot, level=opts.level, seed=opts.seed)
            spread = block.get("spread") or {}
            per_system[sys_.label] = {"mean": block["value"], "n": block["n"],
                                      "ci_low": spread.get("ci_low"), "ci_high": spread.get("ci_high")}
    if not per_system:
        return None
    means = [per_system[s]["mean"] for s in per_system]
    for s, r in zip(per_system, stats.rankdata([-m for m in means], method="min")):
        per_system[s]["rank"] = int(r)  # ties share the best rank (1, 1, 3)
    out: dict[str, Any] = {"judge": sorted(judge_names), "systems": per_system,
                           "order": sorted(per_system, key=lambda s: -per_system[s]["mean"])}
    for method in ("elo", "bradley_terry"):
        rated = ranking.get(method) or {}
        common = [s for s in per_system if s in rated]
        if len(common) < 2:
            continue
        ref = [per_system[s]["mean"] for s in common]
        got = [rated[s]["rating"] for s in common]
        pairs = [(i, j) for i in range(len(common)) for j in range(i + 1, len(common))]
        # a pair either side calls a tie says nothing about order: counted apart
        ordered = [(i, j) for i, j in pairs if ref[i] != ref[j] and got[i] != got[j]]
        same = sum(1 for i, j in ordered if (ref[i] - ref[j]) * (got[i] - got[j]) > 0)
        entry: dict[str, Any] = {"systems": len(common), "pairs": len(pairs), "pairs_tied": len(pairs) - len(ordered),
                                 "pairs_same_order": same / len(ordered) if ordered else None,
                                 "spearman": None, "kendall": None}
        if len(set(ref)) > 1 and len(set(got)) > 1:
            entry["spearman"] = float(stats.spearmanr(ref, got).statistic)
            entry["kendall"] = float(stats.kendalltau(ref, got).statistic)
        out[f"agreement_{method}"] = entry
    return out


# -- the whole ranking -----------------------------------------------------------------------


@dataclass
class Ranking:
    report: dict[str, Any]  # rankings.json
    judgments: list[dict[str, Any]]  # one record per ordered pair judged (pairs.jsonl)


def rank(runs: list[FinishedRun], judge: PairwiseJudge, judge_flag: str, opts: RankOptions,
         systems: list[System], section: dict[str, Any]) -> Ranking:
    # the spec's criteria are meant for its own judge: another judge ranks on those it scores
    from_spec = [c for c in section.get("criteria") or [] if c in judge.criteria]
    criteria = list(opts.criteria or from_spec or judge.criteria)
    unknown = [c for c in criteria if c not in judge.criteria]
    if unknown:
        raise UserError(f"pairwise judge '{judge.name}' does not score {', '.join(unknown)} "
                        f"(it scores: {', '.join(judge.criteria)})", field="--criteria")
    labels = [s.label for s in systems]
    pairs = plan_pairs(systems, opts.swap)
    if not pairs:
        raise UserError("the systems share no unit to compare (no meeting answered by two of them)",
                        field="RUN_DIR", hint=f"Units are matched on the spec's rank.unit "
                        f"('{section.get('unit', 'item_id')}') and on the seed.")
    verdicts = judge.compare(pairs)
    if len(verdicts) != len(pairs):
        raise RuntimeError(f"pairwise judge '{judge.name}' returned {len(verdicts)} judgments for {len(pairs)} pairs")
    results, unjudged = combine(pairs, verdicts, criteria, opts.tie_margin)
    statuses = defaultdict(int)
    for v in verdicts:
        statuses[v.parse_status] += 1
    rankings: dict[str, Any] = {}
    for c in criteria:
        rankings[c] = criterion_ranking(results, labels, c, opts)
        ref = reference_check(systems, results, c, rankings[c], opts)
        if ref is not None:
            rankings[c]["reference"] = ref
    report = {
        "schema": SCHEMA,
        "judge": {"flag": judge_flag, "identity": judge.identity()},
        "criteria": criteria,
        "options": {k: v for k, v in asdict(opts).items() if k not in ("judge", "criteria")},
        "runs": [{"run_id": r.run_id, "model": r.model, "path": str(r.path)} for r in runs],
        "systems": {s.label: {"run_id": s.run_id, "model": s.model, "task": s.task, "variant": s.variant,
                              "units": len(s.items), "excluded": s.excluded} for s in systems},
        "unit_field": section.get("unit", "item_id"),
        "accounting": {"ordered_judgments": len(verdicts), "ok": statuses["ok"],
                       "parse_failures": statuses["parse_failure"], "missing": statuses["missing"],
                       "pairs": len(results) + unjudged, "pairs_ranked": len(results), "pairs_unjudged": unjudged,
                       "units": len({r.unit for r in results})},
        "rankings": rankings,
    }
    records = [{"unit": p.unit_id, "seed": p.metadata.get("seed"), "shown_first": p.system_a,
                "shown_second": p.system_b, "item_first": p.metadata.get("item_a"),
                "item_second": p.metadata.get("item_b"), **asdict(v)} for p, v in zip(pairs, verdicts)]
    return Ranking(report=report, judgments=records)
