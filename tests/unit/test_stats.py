"""Statistics against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from lceval.stats import across_seeds, cluster_bootstrap, welch_one_tailed


def test_welch_matches_scipy_one_tailed():
    rng = np.random.default_rng(1)
    a, b = rng.normal(5, 2, 30), rng.normal(6, 1, 50)
    ours = welch_one_tailed(a, b, "less")
    ref = sps.ttest_ind(a, b, equal_var=False, alternative="less")
    assert ours["p_value"] == pytest.approx(ref.pvalue, rel=1e-9)
    assert ours["t"] == pytest.approx(ref.statistic, rel=1e-9)
    greater = welch_one_tailed(a, b, "greater")["p_value"]
    assert greater == pytest.approx(1 - ours["p_value"], rel=1e-9)


def test_welch_hand_computed():
    # a = [1,2,3]: mean 2, var 1; b = [4,6]: mean 5, var 2
    res = welch_one_tailed([1, 2, 3], [4, 6])
    se2 = 1 / 3 + 2 / 2
    assert res["t"] == pytest.approx(-3 / math.sqrt(se2))
    assert res["df"] == pytest.approx(se2 ** 2 / ((1 / 3) ** 2 / 2 + 1.0 ** 2 / 1))


def test_welch_degenerate_groups_give_no_p_value():
    assert welch_one_tailed([1], [2, 3])["p_value"] is None
    assert welch_one_tailed([2, 2], [2, 2])["p_value"] is None


def test_cluster_standard_error_hand_computed():
    # clusters: A=[1,3] (sum 4), B=[5] (sum 5), C=[7,9,11] (sum 27); n=6, mean=6
    res = cluster_bootstrap([1, 3, 5, 7, 9, 11], ["A", "A", "B", "C", "C", "C"], n_boot=4000, seed=3)
    resid = np.array([4 - 2 * 6, 5 - 1 * 6, 27 - 3 * 6])
    expected = math.sqrt(3 / 2 * (resid ** 2).sum()) / 6
    assert res["value"] == 6 and res["spread"]["stderr"] == pytest.approx(expected)
    assert res["spread"]["clusters"] == 3
    assert res["spread"]["ci_low"] < 6 < res["spread"]["ci_high"]


def test_cluster_ci_wider_than_naive_when_clusters_correlate():
    values = [1.0] * 10 + [9.0] * 10
    clustered = cluster_bootstrap(values, ["a"] * 10 + ["b"] * 10, seed=0)["spread"]
    independent = cluster_bootstrap(values, [str(i) for i in range(20)], seed=0)["spread"]
    assert clustered["ci_high"] - clustered["ci_low"] > independent["ci_high"] - independent["ci_low"]


def test_single_cluster_has_no_interval():
    res = cluster_bootstrap([1, 2, 3], ["m", "m", "m"])
    assert res["value"] == 2 and res["spread"]["ci_low"] is None


def test_across_seeds_uses_sample_std():
    res = across_seeds([6.0, 7.0, 8.0])
    assert res["mean"] == 7.0 and res["std"] == pytest.approx(1.0) and res["n_seeds"] == 3


# Shrout & Fleiss (1979), Psychol. Bull. 86(2): Table 2 (6 targets x 4 judges), with their
# Table 3 mean squares and Table 4 coefficients (printed to two digits)
SHROUT_FLEISS = [[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]]


def test_icc_reproduces_shrout_fleiss_worked_example():
    from lceval.stats import icc

    res = icc(SHROUT_FLEISS)
    ms = res["mean_squares"]
    assert (round(ms["rows"], 2), round(ms["within"], 2), round(ms["columns"], 2), round(ms["error"], 2)) \
        == (11.24, 6.26, 32.49, 1.02)
    printed = {"icc1": 0.17, "icc2": 0.29, "icc3": 0.71, "icc1k": 0.44, "icc2k": 0.62, "icc3k": 0.91}
    assert {name: round(res[name], 2) for name in printed} == printed
    assert (res["n"], res["k"]) == (6, 4)


def test_icc_perfect_agreement_and_degenerate_tables():
    from lceval.stats import icc

    same = icc([[1, 1, 1], [5, 5, 5], [3, 3, 3]])
    assert same["icc1k"] == pytest.approx(1.0) and same["icc2k"] == pytest.approx(1.0)
    assert icc([[1, 2, 3]])["icc2k"] is None  # one target: no between-target variance to compare
    assert icc([[2, 2], [2, 2]])["icc1"] is None  # nothing varies: undefined, not nan


def test_judge_agreement_takes_its_sources_as_icc_raters():
    from lceval.analysis import agreement, format_agreement
    from lceval.types import ScoredItem, ScoreSource

    sources = [ScoreSource(name=f"judge{j}", items=[ScoredItem(item_id=str(i), system="m", score=float(row[j]),
                                                               cluster="a" if i < 3 else "b")
                                                    for i, row in enumerate(SHROUT_FLEISS)])
               for j in range(4)]
    rep = agreement(sources, n_boot=10)
    assert round(rep["icc"]["overall"]["icc2k"], 2) == 0.62 and round(rep["icc"]["overall"]["icc1k"], 2) == 0.44
    assert [b["n"] for b in rep["icc"]["by_cluster"].values()] == [3, 3]
    assert "| all | 6 | 0.443 | 0.620 | 0.290 |" in format_agreement(rep)
