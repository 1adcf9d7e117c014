"""Ratings from pairwise comparisons: Elo, Bradley-Terry, and cluster-bootstrap intervals.

Why: a pairwise judge ("is summary X better than summary Y?") only says who won each match;
turning those outcomes into a ranking of systems (model + prompt) is the same job whatever the
benchmark, so it lives here, with no I/O and no knowledge of any benchmark. CREAM (Gong et al., 2024,
Section 4.1.1) is the first user; any other pairwise judge can feed the same functions.

Elo, exactly as Gong et al., 2024, eqs. (1)-(2):
    R_new = R_old + K * (S - E)                       (1)  S = 1 win, 0.5 draw, 0 loss
    E     = 1 / (1 + 10 ** ((R_opp - R_old) / 400))   (2)
Both players of a match are updated from their ratings *before* the match (simultaneous
update), so every match is zero-sum. Elo depends on the order of the matches, which the paper
does not fix: `elo_over_orders` averages over random orders and reports the spread the order
alone causes. Defaults K = 32 and an initial rating of 1000 are the conventional chess values;
the paper gives neither, so both are options.

Bradley-Terry: P(i beats j) = p_i / (p_i + p_j), fitted by maximum likelihood with the MM
algorithm of Hunter (2004, Ann. Statist. 32(1)):  p_i <- W_i / sum_j n_ij / (p_i + p_j),
renormalised every iteration (geometric mean of p = 1). A draw counts as half a win for each
side, so W_i is the sum of i's scores. Unlike Elo, the fit is independent of match order.
Ratings are reported on the Elo scale: anchor + 400 * log10(p_i), so their mean is `anchor`.
`prior` adds that many virtual draws between *every* pair of `systems` (a MAP smoothing that
also connects the comparison graph); with prior = 0 the MLE exists only when every split of
the systems into two groups has a win or draw in each direction, checked before iterating
(`NoMLE` otherwise).

Bootstrap: matches about one document (e.g. a meeting) are not independent, so
`bootstrap_ci` resamples *clusters* (distinct `Match.cluster`; "" = a match on its own) with
replacement, re-rates every replicate and takes percentile intervals. A replicate without an
MLE is skipped and counted rather than silently given a value.
"""

from __future__ import annotations

import math
import numbers
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np


class NoMLE(ValueError):
    """The Bradley-Terry maximum-likelihood ratings do not exist (some are infinite)."""


@dataclass(frozen=True)
class Match:
    a: str
    b: str
    score_a: float  # 1 win, 0.5 draw, 0 loss for `a`; `b` gets 1 - score_a
    cluster: str = ""  # resampling unit of the bootstrap

    def __post_init__(self) -> None:
        if not (isinstance(self.score_a, numbers.Real) and 0.0 <= self.score_a <= 1.0):
            raise ValueError(f"match {self.a} vs {self.b}: score_a must be in [0, 1], got {self.score_a!r}")
        if self.a == self.b:
            raise ValueError(f"match of system {self.a!r} against itself")


@dataclass
class EloResult:
    ratings: dict[str, float]  # mean over the orders
    order_sd: dict[str, float]  # population SD over the orders (ddof=0; 0 when n_orders == 1)
    n_orders: int


@dataclass
class BTResult:
    ratings: dict[str, float]
    strengths: dict[str, float]
    iterations: int
    converged: bool
    log_likelihood: float  # of the data the fit maximised (virtual prior draws included)


@dataclass
class BootstrapResult:
    intervals: dict[str, tuple[float, float]]
    n_boot: int  # replicates drawn
    skipped: int  # replicates where `rate` raised NoMLE (not in the intervals)
    level: float


@dataclass
class ScoreMatrix:
    mean: dict[str, dict[str, float | None]]  # mean score of row against column; None if never met
    count: dict[str, dict[str, int]]


def _index(matches: Sequence[Match], systems: Sequence[str]) -> dict[str, int]:
    idx = {s: i for i, s in enumerate(systems)}
    if len(idx) != len(systems):
        dup = sorted({s for s in systems if list(systems).count(s) > 1})
        raise ValueError(f"systems listed more than once: {', '.join(dup)}")
    for m in matches:
        for name in (m.a, m.b):
            if name not in idx:
                raise ValueError(f"match names system {name!r}, which is not among the systems "
                                 f"({', '.join(systems)})")
    return idx


def expected_score(rating: float, opponent: float) -> float:
    """Eq. (2): the score a player rated `rating` is expected to make against `opponent`."""
    return 1.0 / (1.0 + 10.0 ** ((opponent - rating) / 400.0))


def elo(matches: Sequence[Match], systems: Sequence[str], k: float = 32.0,
        initial: float = 1000.0) -> dict[str, float]:
    """One pass in the given order, both sides updated from their pre-match ratings (eq. 1)."""
    if not k > 0 or not math.isfinite(k):
        raise ValueError(f"K-factor must be a positive number, got {k}")
    _index(matches, systems)
    r = {s: float(initial) for s in systems}
    for m in matches:
        ra, rb = r[m.a], r[m.b]
        r[m.a] = ra + k * (m.score_a - expected_score(ra, rb))
        r[m.b] = rb + k * ((1.0 - m.score_a) - expected_score(rb, ra))
    return r


def elo_over_orders(matches: Sequence[Match], systems: Sequence[str], k: float = 32.0,
                    initial: float = 1000.0, n_orders: int = 1000, seed: int = 0) -> EloResult:
    """Elo averaged over `n_orders` random orders of the matches.

    Order o is `np.random.default_rng(seed).permutation(len(matches))` drawn o-th in sequence
    (so the result is deterministic, and equals the mean of `elo` over those permutations);
    every order is shuffled, n_orders=1 included — call `elo` for the given order. Vectorised
    over orders: one numpy step per match position.
    """
    if n_orders < 1:
        raise ValueError(f"n_orders must be at least 1, got {n_orders}")
    if not k > 0 or not math.isfinite(k):
        raise ValueError(f"K-factor must be a positive number, got {k}")
    idx = _index(matches, systems)
    rng = np.random.default_rng(seed)
    ia = np.array([idx[m.a] for m in matches], dtype=int)
    ib = np.array([idx[m.b] for m in matches], dtype=int)
    sa = np.array([m.score_a for m in matches], dtype=float)
    perms = np.array([rng.permutation(len(matches)) for _ in range(n_orders)], dtype=int)
    perms = perms.reshape(n_orders, len(matches))
    r = np.full((n_orders, len(systems)), float(initial))
    rows = np.arange(n_orders)
    for t in range(len(matches)):
        p = perms[:, t]
        a, b, s = ia[p], ib[p], sa[p]
        ra, rb = r[rows, a], r[rows, b]
        r[rows, a] = ra + k * (s - 1.0 / (1.0 + 10.0 ** ((rb - ra) / 400.0)))
        r[rows, b] = rb + k * ((1.0 - s) - 1.0 / (1.0 + 10.0 ** ((ra - rb) / 400.0)))
    mean, sd = r.mean(axis=0), r.std(axis=0)
    return EloResult(ratings={s: float(mean[i]) for i, s in enumerate(systems)},
                     order_sd={s: float(sd[i]) for i, s in enumerate(systems)}, n_orders=n_orders)


def _tallies(matches: Sequence[Match], systems: Sequence[str],
             prior: float) -> tuple[np.ndarray, np.ndarray]:
    """W[i, j] = score of i against j summed over matches; N[i, j] = matches between i and j."""
    idx = _index(matches, systems)
    n = len(systems)
    w, cnt = np.zeros((n, n)), np.zeros((n, n))
    for m in matches:
        i, j = idx[m.a], idx[m.b]
        w[i, j] += m.score_a
        w[j, i] += 1.0 - m.score_a
        cnt[i, j] += 1.0
        cnt[j, i] += 1.0
    off = ~np.eye(n, dtype=bool)
    w[off] += prior / 2.0
    cnt[off] += prior
    return w, cnt


def _reach(w: np.ndarray) -> np.ndarray:
    """reach[i, j]: j can be reached from i along 'i scored something against j' edges."""
    n = len(w)
    reach = (w > 0) | np.eye(n, dtype=bool)
    for _ in range(max(1, math.ceil(math.log2(max(n, 2))))):  # transitive closure by squaring
        reach = (reach.astype(int) @ reach.astype(int)) > 0
    return reach


def _check_mle(w: np.ndarray, cnt: np.ndarray, systems: Sequence[str]) -> None:
    """Raise NoMLE unless the graph 'i scored something against j' is strongly connected."""
    n = len(systems)
    reach = _reach(w)
    if reach.all():
        return
    hint = "Use a prior > 0 (virtual draws between every pair) to get finite ratings."
    notes = []
    for i, s in enumerate(systems):
        played, won = cnt[i].sum(), w[i].sum()
        if played == 0:
            notes.append(f"{s} has no matches")
        elif won == played:
            notes.append(f"{s} won every match")
        elif won == 0:
            notes.append(f"{s} lost every match")
    if not notes:
        v = int(np.argmin(reach.sum(axis=1)))
        top = [systems[j] for j in range(n) if not reach[v, j]]
        low = [systems[j] for j in range(n) if reach[v, j]]
        notes.append(f"{', '.join(low)} never won or drew against {', '.join(top)}")
    raise NoMLE(f"Bradley-Terry maximum-likelihood ratings do not exist ({'; '.join(notes)}). {hint}")


def bt_log_likelihood(matches: Sequence[Match], systems: Sequence[str],
                      strengths: dict[str, float], prior: float = 0.0) -> float:
    """sum_{i,j} W_ij log(p_i / (p_i + p_j)) over ordered pairs, prior draws included."""
    w, _ = _tallies(matches, systems, prior)
    p = np.array([strengths[s] for s in systems], dtype=float)
    return _loglik(w, p)


def _loglik(w: np.ndarray, p: np.ndarray) -> float:
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = w * np.log(p[:, None] / (p[:, None] + p[None, :]))
    return float(np.where(w > 0, terms, 0.0).sum())


def _check_bt_args(prior: float, tol: float, max_iter: int) -> None:
    if not prior >= 0 or not math.isfinite(prior):
        raise ValueError(f"prior must be a number >= 0, got {prior}")
    if not tol > 0 or max_iter < 1:
        raise ValueError(f"need tol > 0 and max_iter >= 1, got tol={tol}, max_iter={max_iter}")


def _mm(w: np.ndarray, cnt: np.ndarray, tol: float,
        max_iter: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hunter's MM iterations on a stack of tallies (B, n, n) at once: log-strengths (B, n),
    the iterations each took and whether it converged. A fit that has converged is left as it
    is while the others go on, so each is exactly what iterating it alone would give."""
    b, n = w.shape[0], w.shape[1]
    wins = w.sum(axis=2)
    logp = np.zeros((b, n))
    iterations = np.zeros(b, dtype=int)
    converged = np.full(b, n <= 1)
    active = np.flatnonzero(~converged)
    while active.size and iterations[active[0]] < max_iter:
        p = np.exp(logp[active])
        denom = (cnt[active] / (p[:, :, None] + p[:, None, :])).sum(axis=2)
        new = np.log(wins[active] / denom)
        new -= new.mean(axis=1, keepdims=True)  # geometric mean of strengths = 1: mean rating = anchor
        done = np.max(np.abs(new - logp[active]), axis=1) < tol
        logp[active] = new
        iterations[active] += 1
        converged[active[done]] = True
        active = active[~done]
    return logp, iterations, converged


def bradley_terry(matches: Sequence[Match], systems: Sequence[str], prior: float = 0.0,
                  anchor: float = 1000.0, tol: float = 1e-10, max_iter: int = 10000) -> BTResult:
    """Bradley-Terry ratings (MLE, or MAP with `prior` virtual draws per pair of systems)."""
    _check_bt_args(prior, tol, max_iter)
    w, cnt = _tallies(matches, systems, prior)
    n = len(systems)
    if n > 1:
        _check_mle(w, cnt, systems)
    logps, its, done = _mm(w[None], cnt[None], tol, max_iter)
    logp = logps[0]
    p = np.exp(logp)
    rating = anchor + 400.0 * logp / math.log(10.0)
    return BTResult(ratings={s: float(rating[i]) for i, s in enumerate(systems)},
                    strengths={s: float(p[i]) for i, s in enumerate(systems)},
                    iterations=int(its[0]), converged=bool(done[0]), log_likelihood=_loglik(w, p))


def clusters_of(matches: Sequence[Match]) -> list[list[Match]]:
    """Matches grouped into resampling units, in order of first appearance."""
    groups: dict[str, list[Match]] = {}
    singles: list[list[Match]] = []
    order: list[list[Match]] = []
    for m in matches:
        if m.cluster == "":
            singles.append([m])
            order.append(singles[-1])
        elif m.cluster not in groups:
            groups[m.cluster] = [m]
            order.append(groups[m.cluster])
        else:
            groups[m.cluster].append(m)
    return order


def _resampling_units(matches: Sequence[Match], systems: Sequence[str], n_boot: int,
                      level: float) -> list[list[Match]]:
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, got {n_boot}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be strictly between 0 and 1, got {level}")
    _index(matches, systems)
    return clusters_of(matches)


def bootstrap_ci(matches: Sequence[Match], systems: Sequence[str],
                 rate: Callable[[list[Match], np.random.Generator], dict[str, float]],
                 n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> BootstrapResult:
    """Percentile intervals from resampling clusters with replacement.

    One `np.random.default_rng(seed)` draws the clusters and is handed to `rate` (which may use
    it, e.g. to shuffle an Elo order), so the result is deterministic for a given seed.
    A cluster drawn twice contributes all its matches twice. Raises NoMLE if every replicate did.
    """
    groups = _resampling_units(matches, systems, n_boot, level)
    rng = np.random.default_rng(seed)
    values: dict[str, list[float]] = {s: [] for s in systems}
    skipped = 0
    for _ in range(n_boot):
        picks = rng.integers(0, len(groups), size=len(groups)) if groups else []
        sample = [m for g in picks for m in groups[int(g)]]
        try:
            got = rate(sample, rng)
        except NoMLE:
            skipped += 1
            continue
        for s in systems:
            values[s].append(float(got[s]))
    if skipped == n_boot:
        raise NoMLE(f"all {n_boot} bootstrap replicates had no maximum-likelihood ratings; "
                    "use a prior > 0")
    q = [100 * (1 - level) / 2, 100 * (1 + level) / 2]
    intervals = {}
    for s in systems:
        lo, hi = np.percentile(np.asarray(values[s]), q)
        intervals[s] = (float(lo), float(hi))
    return BootstrapResult(intervals=intervals, n_boot=n_boot, skipped=skipped, level=level)


def bootstrap_bradley_terry(matches: Sequence[Match], systems: Sequence[str], prior: float = 0.0,
                            anchor: float = 1000.0, n_boot: int = 1000, seed: int = 0, level: float = 0.95,
                            tol: float = 1e-10, max_iter: int = 10000) -> BootstrapResult:
    """`bootstrap_ci` of `bradley_terry`, the same resamples and intervals, computed faster:
    each cluster's win and match matrices are tallied once, a resample's tallies are their
    sum weighted by how often it drew each cluster, and the MM fits of all resamples iterate
    together. Resamples without a maximum-likelihood fit are skipped and counted."""
    _check_bt_args(prior, tol, max_iter)
    groups = _resampling_units(matches, systems, n_boot, level)
    n, g = len(systems), len(groups)
    tallies = [_tallies(group, systems, 0.0) for group in groups]
    w_c = np.stack([t[0] for t in tallies]) if groups else np.zeros((0, n, n))
    n_c = np.stack([t[1] for t in tallies]) if groups else np.zeros((0, n, n))
    rng = np.random.default_rng(seed)  # the draws of bootstrap_ci, in the same order
    drawn = np.stack([np.bincount(rng.integers(0, g, size=g), minlength=g) if g else np.zeros(0, int)
                      for _ in range(n_boot)]).astype(float)
    off = ~np.eye(n, dtype=bool)
    w = np.einsum("bg,gij->bij", drawn, w_c) + np.where(off, prior / 2.0, 0.0)
    cnt = np.einsum("bg,gij->bij", drawn, n_c) + np.where(off, prior, 0.0)
    fits = [b for b in range(n_boot) if n <= 1 or _has_mle(w[b])]
    if not fits:
        raise NoMLE(f"all {n_boot} bootstrap replicates had no maximum-likelihood ratings; use a prior > 0")
    logp, _, _ = _mm(w[fits], cnt[fits], tol, max_iter)
    ratings = anchor + 400.0 * logp / math.log(10.0)
    lo, hi = np.percentile(ratings, [100 * (1 - level) / 2, 100 * (1 + level) / 2], axis=0)
    return BootstrapResult(intervals={s: (float(lo[i]), float(hi[i])) for i, s in enumerate(systems)},
                           n_boot=n_boot, skipped=n_boot - len(fits), level=level)


def _has_mle(w: np.ndarray) -> bool:
    return bool(_reach(w).all())


def head_to_head(matches: Iterable[Match]) -> dict[tuple[str, str], tuple[int, int, int]]:
    """(wins, draws, losses) of a against b, for both orders of every pair that met.

    Graded scores count by their side of 0.5: above is a win, exactly 0.5 a draw.
    """
    tally: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for m in matches:
        col = 0 if m.score_a > 0.5 else 1 if m.score_a == 0.5 else 2
        tally[(m.a, m.b)][col] += 1
        tally[(m.b, m.a)][2 - col] += 1
    return {pair: (w, d, l) for pair, (w, d, l) in tally.items()}


def match_triples(matches: Iterable[Match]) -> list[tuple[str, str, float]]:
    """(row, column, score of row) in both directions, for `score_matrix`."""
    out = []
    for m in matches:
        out += [(m.a, m.b, m.score_a), (m.b, m.a, 1.0 - m.score_a)]
    return out


def score_matrix(triples: Iterable[tuple[str, str, float]], systems: Sequence[str]) -> ScoreMatrix:
    """Mean score of row against column (CREAM Table 3 layout); None where they never met.

    Takes triples rather than matches because a judge need not be symmetric: "row vs column"
    and "column vs row" may be judged separately and need not add up to 1.
    """
    total = {r: {c: 0.0 for c in systems} for r in systems}
    count = {r: {c: 0 for c in systems} for r in systems}
    for row, col, score in triples:
        if row not in total or col not in total:
            bad = row if row not in total else col
            raise ValueError(f"score names system {bad!r}, which is not among the systems")
        total[row][col] += float(score)
        count[row][col] += 1
    mean = {r: {c: (total[r][c] / count[r][c] if count[r][c] else None) for c in systems}
            for r in systems}
    return ScoreMatrix(mean=mean, count=count)
