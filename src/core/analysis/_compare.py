"""`lceval compare RUN_A RUN_B`: is model A better than model B on the same items?

Both runs answered the same questions, so the right test is paired: per item, the difference
of the two scores. The interval resamples whole clusters (meetings) because questions about
one meeting are not independent; the p-value comes from a paired permutation test (under
H0 the labels A/B of each pair are exchangeable, so each difference's sign is a coin flip).
An unpaired test would throw away the pairing and report needlessly wide uncertainty.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from lceval.errors import UserError
from lceval.results import FinishedRun
from lceval.io import text_table
from lceval.results import cluster_of, primary_score
from lceval.stats import cluster_bootstrap


@dataclass
class PairedComparison:
    task: str
    n_pairs: int
    only_a: int  # items scored in A but not in B (unanswered, parse failure, absent)
    only_b: int
    mean_a: float | None
    mean_b: float | None
    diff: float | None  # mean(A - B) over the pairs
    ci_low: float | None
    ci_high: float | None
    p_value: float | None  # two-sided paired permutation test
    clusters: int
    wins: int  # pairs where A > B
    losses: int
    ties: int

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def paired_bootstrap(diffs: np.ndarray, clusters: list[str], n_boot: int, level: float,
                     seed: int) -> tuple[float | None, float | None]:
    """Percentile CI of the mean difference, resampling clusters with replacement (the
    engine's cluster bootstrap applied to the differences)."""
    spread = cluster_bootstrap(diffs, clusters, n_boot=n_boot, level=level, seed=seed)["spread"] or {}
    return spread.get("ci_low"), spread.get("ci_high")


def paired_permutation_p(diffs: np.ndarray, n_perm: int, seed: int) -> float | None:
    """Two-sided p-value of H0: mean difference 0, by random sign flips (exact enumeration
    when there are at most 16 non-zero differences). The observed statistic is counted among
    the permutations, so p is never 0."""
    nz = diffs[diffs != 0]
    if len(diffs) == 0:
        return None
    if len(nz) == 0:
        return 1.0
    observed = abs(nz.sum())
    tol = 1e-12 * max(1.0, observed)
    if len(nz) <= 16:
        signs = ((np.arange(2 ** len(nz))[:, None] >> np.arange(len(nz))) & 1) * 2 - 1
        stats = np.abs((signs * nz).sum(axis=1))
        return float((stats >= observed - tol).mean())
    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(n_perm, len(nz)))
    stats = np.abs((signs * nz).sum(axis=1))
    return float(((stats >= observed - tol).sum() + 1) / (n_perm + 1))


def _scores(samples: list, cluster_by: str | None) -> dict[tuple[str, int], tuple[float, str]]:
    out = {}
    for s in samples:
        v = primary_score(s)
        if v is not None:
            out[(s.item_id, s.seed)] = (v, cluster_of(s, cluster_by))
    return out


def compare_task(a: FinishedRun, b: FinishedRun, task: str, *, n_boot: int = 5000, n_perm: int = 20000,
                 level: float = 0.95, seed: int = 0) -> PairedComparison:
    return paired_comparison(a.task_samples(task), b.task_samples(task), task,
                             a.spec(task).report.cluster_by, n_boot=n_boot, n_perm=n_perm,
                             level=level, seed=seed)


def paired_comparison(samples_a: list, samples_b: list, task: str, cluster_by: str | None, *, n_boot: int = 5000,
                      n_perm: int = 20000, level: float = 0.95, seed: int = 0) -> PairedComparison:
    """`lceval compare`'s paired test over two lists of one task's samples (A - B): for callers
    that hold samples rather than run folders (the report's press sweeps)."""
    sa, sb = _scores(samples_a, cluster_by), _scores(samples_b, cluster_by)
    keys = sorted(set(sa) & set(sb))
    diffs = np.array([sa[k][0] - sb[k][0] for k in keys], dtype=float)
    clusters = [sa[k][1] for k in keys]
    n = len(keys)
    low, high = paired_bootstrap(diffs, clusters, n_boot, level, seed) if n else (None, None)
    return PairedComparison(
        task=task, n_pairs=n, only_a=len(set(sa) - set(sb)), only_b=len(set(sb) - set(sa)),
        mean_a=float(np.mean([sa[k][0] for k in keys])) if n else None,
        mean_b=float(np.mean([sb[k][0] for k in keys])) if n else None,
        diff=float(diffs.mean()) if n else None, ci_low=low, ci_high=high,
        p_value=paired_permutation_p(diffs, n_perm, seed), clusters=len(set(clusters)),
        wins=int((diffs > 0).sum()), losses=int((diffs < 0).sum()), ties=int((diffs == 0).sum()),
    )


def compare_runs(a: FinishedRun, b: FinishedRun, tasks: list[str] | None = None,
                 **kwargs: Any) -> list[PairedComparison]:
    shared = [t for t in a.results.get("tasks", {}) if t in b.results.get("tasks", {})]
    if tasks:
        missing = [t for t in tasks if t not in shared]
        if missing:
            raise UserError(f"task(s) {', '.join(missing)} are not in both runs "
                            f"(shared: {', '.join(shared) or 'none'})", field="--task")
        shared = tasks
    if not shared:
        raise UserError(f"runs {a.run_id} and {b.run_id} share no task", file=b.path)
    out = [compare_task(a, b, t, **kwargs) for t in shared]
    if all(c.n_pairs == 0 for c in out):
        raise UserError(f"runs {a.run_id} and {b.run_id} have no scored item in common", file=b.path,
                        hint="Compare runs of the same task, split and seeds.")
    return out


def format_comparison(a: FinishedRun, b: FinishedRun, rows: list[PairedComparison], fmt: str) -> str:
    if fmt == "json":
        import json

        return json.dumps({"a": {"run_id": a.run_id, "model": a.model},
                           "b": {"run_id": b.run_id, "model": b.model},
                           "comparisons": [r.as_dict() for r in rows]}, indent=2)

    def f(v: float | None, d: int = 2) -> str:
        return "-" if v is None else f"{v:.{d}f}"

    head = ["task", "pairs", "A", "B", "A-B", "95% CI (paired, by cluster)", "p (perm.)", "A>B/A<B/=",
            "unpaired"]
    body = [[r.task, str(r.n_pairs), f(r.mean_a), f(r.mean_b), f(r.diff),
             f"[{f(r.ci_low)}, {f(r.ci_high)}]" if r.ci_low is not None else "",
             f(r.p_value, 4), f"{r.wins}/{r.losses}/{r.ties}", f"{r.only_a}/{r.only_b}"] for r in rows]
    title = f"A = {a.model} ({a.run_id})\nB = {b.model} ({b.run_id})\n"
    return title + "\n" + "\n".join(text_table([head, *body], markdown=fmt == "markdown"))
