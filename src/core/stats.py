"""Statistics that respect how long-context benchmarks are built.

Questions are nested in meetings (documents, haystacks): answers about one meeting are not
independent, so intervals come from resampling whole clusters, not single questions.
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from typing import Any, Sequence

import numpy as np

__all__ = ["across_seeds", "cluster_bootstrap", "icc", "welch_one_tailed"]


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
    as in ELITR-Bench Thonet et al., 2024a, App. C.2, Table 9 (a = middle-position answers).
    scipy's `ttest_ind(equal_var=False, alternative=...)` computes it; we only decide what
    a group too small or without variance gives (no p-value, said why, never nan)."""
    from scipy import stats as sps

    a_arr, b_arr = np.asarray(a, float), np.asarray(b, float)
    res: dict[str, Any] = {"n_a": len(a_arr), "n_b": len(b_arr),
                           "mean_a": float(a_arr.mean()) if len(a_arr) else None,
                           "mean_b": float(b_arr.mean()) if len(b_arr) else None,
                           "alternative": alternative}
    if len(a_arr) < 2 or len(b_arr) < 2:
        res.update(t=None, df=None, p_value=None, note="needs at least 2 scores on each side")
        return res
    if a_arr.var(ddof=1) + b_arr.var(ddof=1) == 0:
        res.update(t=None, df=None, p_value=None, note="both groups have zero variance")
        return res
    with warnings.catch_warnings():
        # scipy warns of "catastrophic cancellation" when one side's scores are all equal
        # (a zero variance is exact there, and the test is still defined by the other side)
        warnings.simplefilter("ignore", RuntimeWarning)
        test = sps.ttest_ind(a_arr, b_arr, equal_var=False, alternative=alternative)
    res.update(t=float(test.statistic), df=float(test.df), p_value=float(test.pvalue))
    return res


def across_seeds(values: Sequence[float]) -> dict[str, Any]:
    """Mean and sample standard deviation over seeded runs (Thonet et al., 2024a, App. C.1, Table 7)."""
    arr = np.asarray([v for v in values if v is not None], float)
    return {
        "values": [float(v) for v in arr],
        "mean": float(arr.mean()) if len(arr) else None,
        "std": float(arr.std(ddof=1)) if len(arr) > 1 else None,
        "n_seeds": int(len(arr)),
    }


def icc(ratings: Sequence[Sequence[float]]) -> dict[str, Any]:
    """Intraclass correlations of a complete targets x raters table (Shrout & Fleiss 1979,
    Psychol. Bull. 86(2), Table 1): ICC(1,*) one-way (each target rated by its own raters),
    ICC(2,*) two-way random (the same raters for every target, raters a random sample),
    ICC(3,*) two-way mixed (these raters only); `*1` is one rater's reliability, `*k` the
    mean of the k raters'. Thonet et al., 2024b (Table 11) reports ICC(2,k) per meeting and ICC(1,k)
    over all meetings (whose annotators differ). None where a coefficient is undefined."""
    x = np.asarray(ratings, dtype=float)
    out: dict[str, Any] = {"n": int(x.shape[0]) if x.ndim == 2 else 0,
                           "k": int(x.shape[1]) if x.ndim == 2 else 0}
    names = ("icc1", "icc1k", "icc2", "icc2k", "icc3", "icc3k")
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 2:
        out.update({name: None for name in names}, note="needs at least 2 targets and 2 raters")
        return out
    n, k = x.shape
    grand = x.mean()
    ss_rows = k * float(((x.mean(axis=1) - grand) ** 2).sum())
    ss_cols = n * float(((x.mean(axis=0) - grand) ** 2).sum())
    ss_total = float(((x - grand) ** 2).sum())
    msr = ss_rows / (n - 1)
    msw = (ss_total - ss_rows) / (n * (k - 1))
    msc = ss_cols / (k - 1)
    mse = (ss_total - ss_rows - ss_cols) / ((n - 1) * (k - 1))

    def ratio(num: float, den: float) -> float | None:
        return num / den if den != 0 else None

    out.update(
        icc1=ratio(msr - msw, msr + (k - 1) * msw),
        icc1k=ratio(msr - msw, msr),
        icc2=ratio(msr - mse, msr + (k - 1) * mse + k * (msc - mse) / n),
        icc2k=ratio(msr - mse, msr + (msc - mse) / n),
        icc3=ratio(msr - mse, msr + (k - 1) * mse),
        icc3k=ratio(msr - mse, msr),
        mean_squares={"rows": msr, "within": msw, "columns": msc, "error": mse},
    )
    return out
