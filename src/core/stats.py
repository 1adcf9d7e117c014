"""Statistics that respect how long-context benchmarks are built.

Questions are nested in meetings (documents, haystacks): answers about one meeting are not
independent, so intervals come from resampling whole clusters, not single questions.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Sequence

import numpy as np


def cluster_bootstrap(values: Sequence[float], clusters: Sequence[str], *, n_boot: int = 2000,
                      level: float = 0.95, seed: int = 0) -> dict[str, Any]:
    """Mean with a percentile CI from resampling clusters with replacement, and the
    cluster-robust standard error of the mean (CR1 small-sample correction)."""
    vals = np.asarray(values, dtype=float)
    n = len(vals)
    out: dict[str, Any] = {"value": float(vals.mean()) if n else None, "n": n}
    if n == 0:
        out["spread"] = None
        return out
    by: dict[str, list[float]] = defaultdict(list)
    for v, c in zip(vals, clusters):
        by[c].append(float(v))
    sums = np.array([sum(v) for v in by.values()])
    counts = np.array([len(v) for v in by.values()])
    g = len(by)
    spread: dict[str, Any] = {"method": "cluster_bootstrap", "clusters": g, "level": level,
                              "n_boot": n_boot}
    if g >= 2:
        mean = vals.mean()
        resid = sums - counts * mean
        se = math.sqrt(g / (g - 1) * float((resid ** 2).sum())) / n
        rng = np.random.default_rng(seed)
        picks = rng.integers(0, g, size=(n_boot, g))
        boot = sums[picks].sum(axis=1) / counts[picks].sum(axis=1)
        alpha = (1 - level) / 2
        spread.update(stderr=se, ci_low=float(np.quantile(boot, alpha)),
                      ci_high=float(np.quantile(boot, 1 - alpha)))
    else:
        spread.update(stderr=None, ci_low=None, ci_high=None)
    out["spread"] = spread
    return out


def welch_one_tailed(a: Sequence[float], b: Sequence[float], alternative: str = "less") -> dict[str, Any]:
    """Welch's t-test of H1: mean(a) < mean(b) (or > with alternative='greater'),
    as in ELITR-Bench paper 000, App. C.2, Table 9 (a = middle-position answers)."""
    from scipy import stats as sps

    a_arr, b_arr = np.asarray(a, float), np.asarray(b, float)
    res: dict[str, Any] = {"n_a": len(a_arr), "n_b": len(b_arr),
                           "mean_a": float(a_arr.mean()) if len(a_arr) else None,
                           "mean_b": float(b_arr.mean()) if len(b_arr) else None,
                           "alternative": alternative}
    if len(a_arr) < 2 or len(b_arr) < 2:
        res.update(t=None, df=None, p_value=None, note="needs at least 2 scores on each side")
        return res
    va, vb = a_arr.var(ddof=1) / len(a_arr), b_arr.var(ddof=1) / len(b_arr)
    if va + vb == 0:
        res.update(t=None, df=None, p_value=None, note="both groups have zero variance")
        return res
    t = (a_arr.mean() - b_arr.mean()) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (len(a_arr) - 1) + vb ** 2 / (len(b_arr) - 1))
    p = float(sps.t.cdf(t, df)) if alternative == "less" else float(sps.t.sf(t, df))
    res.update(t=float(t), df=float(df), p_value=p)
    return res


def across_seeds(values: Sequence[float]) -> dict[str, Any]:
    """Mean and sample standard deviation over seeded runs (paper 000, App. C.1, Table 7)."""
    arr = np.asarray([v for v in values if v is not None], float)
    return {
        "values": [float(v) for v in arr],
        "mean": float(arr.mean()) if len(arr) else None,
        "std": float(arr.std(ddof=1)) if len(arr) > 1 else None,
        "n_seeds": int(len(arr)),
    }
