"""Pairwise ratings (lceval.pairwise) against hand computations written out here.

Elo follows paper 003 §4.1.1, eqs. (1)-(2); Bradley-Terry is checked through its likelihood
equations rather than through numbers copied from the implementation.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from lceval.analysis import (Match, NoMLE, bootstrap_ci, bradley_terry, bt_log_likelihood, clusters_of,
                                       elo, elo_over_orders, expected_score, head_to_head, match_triples,
                                       score_matrix)

AB = ["A", "B"]
ABC = ["A", "B", "C"]


def E(r: float, o: float) -> float:
    # eq. (2) written out independently of the module
    return 1 / (1 + 10 ** ((o - r) / 400))


# ---------------------------------------------------------------- expected score (eq. 2)

def test_expected_score_values():
    assert expected_score(1000, 1000) == 0.5
    # 1/(1 + 10^((1000-1200)/400)) = 1/(1 + 10^-0.5) = 1/(1 + 0.316227766) = 0.759746927
    assert expected_score(1200, 1000) == pytest.approx(0.759746927, abs=1e-9)
    for a, b in [(1200, 1000), (873.5, 1411.2), (0, 0)]:
        assert expected_score(a, b) + expected_score(b, a) == pytest.approx(1.0, abs=1e-15)


# ---------------------------------------------------------------- Elo (eq. 1)

def test_elo_single_win_then_loss():
    # A beats B at 1000/1000: E = 0.5, A = 1000 + 32*(1 - 0.5) = 1016, B = 1000 + 32*(0 - 0.5) = 984
    r = elo([Match("A", "B", 1.0)], AB)
    assert r == {"A": 1016.0, "B": 984.0}
    # then B beats A: E_B = 1/(1 + 10^((1016-984)/400)) = 1/(1 + 10^0.08) = 1/2.2022644 = 0.4540782
    # B = 984 + 32*(1 - 0.4540782) = 1001.46950, A = 1016 + 32*(0 - 0.5459218) = 998.53050
    e_b = 1 / (1 + 10 ** 0.08)
    r = elo([Match("A", "B", 1.0), Match("B", "A", 1.0)], AB)
    assert r["B"] == pytest.approx(984 + 32 * (1 - e_b), abs=1e-9)
    assert r["A"] == pytest.approx(1016 + 32 * (0 - (1 - e_b)), abs=1e-9)
    assert r["B"] == pytest.approx(1001.46950, abs=1e-4)
    assert r["A"] == pytest.approx(998.53050, abs=1e-4)


def test_elo_draw_pulls_together_and_is_zero_sum():
    # after A beats B: 1016 / 984. Draw: E_A = 1/(1+10^(-32/400)) = 0.5459218,
    # A = 1016 + 32*(0.5 - 0.5459218) = 1014.53050, B = 984 + 32*(0.5 - 0.4540782) = 985.46950
    r = elo([Match("A", "B", 1.0), Match("A", "B", 0.5)], AB)
    assert r["A"] == pytest.approx(1014.53050, abs=1e-4)
    assert r["B"] == pytest.approx(985.46950, abs=1e-4)
    assert 984 < r["B"] < r["A"] < 1016
    ms = [Match("A", "B", 1), Match("C", "A", 0.5), Match("B", "C", 0.25), Match("C", "D", 0)]
    for n in range(1, len(ms) + 1):
        assert sum(elo(ms[:n], ["A", "B", "C", "D"]).values()) == pytest.approx(4000, abs=1e-9)


def test_elo_unplayed_system_keeps_initial_and_options_apply():
    r = elo([Match("A", "B", 1.0)], ABC, k=10, initial=1500)
    # E = 0.5: A = 1500 + 10*0.5, B = 1500 - 10*0.5
    assert r == {"A": 1505.0, "B": 1495.0, "C": 1500.0}


def test_elo_depends_on_order():
    m1, m2, m3 = Match("A", "B", 1), Match("B", "C", 1), Match("C", "A", 1)
    # order m1, m2, m3
    a, b, c = 1000.0, 1000.0, 1000.0
    a, b = a + 32 * (1 - E(a, b)), b + 32 * (0 - E(b, a))      # A 1016, B 984
    b, c = b + 32 * (1 - E(b, c)), c + 32 * (0 - E(c, b))      # B 984 vs C 1000: B wins
    c, a = c + 32 * (1 - E(c, a)), a + 32 * (0 - E(a, c))      # C beats A
    first = {"A": a, "B": b, "C": c}
    assert (a, b) == pytest.approx((1016 - 32 * E(1016, 983.26369), 1000.73631), abs=1e-4)
    # order m3, m2, m1
    a, b, c = 1000.0, 1000.0, 1000.0
    c, a = c + 32 * (1 - E(c, a)), a + 32 * (0 - E(a, c))      # C 1016, A 984
    b, c = b + 32 * (1 - E(b, c)), c + 32 * (0 - E(c, b))      # B 1000 beats C 1016
    a, b = a + 32 * (1 - E(a, b)), b + 32 * (0 - E(b, a))      # A 984 beats B
    second = {"A": a, "B": b, "C": c}
    assert elo([m1, m2, m3], ABC) == pytest.approx(first, abs=1e-9)
    assert elo([m3, m2, m1], ABC) == pytest.approx(second, abs=1e-9)
    assert abs(first["A"] - second["A"]) > 1  # the order alone moves A by more than a point


def test_elo_over_orders_averages_the_orders():
    m1, m2 = Match("A", "B", 1), Match("A", "C", 0.5)
    # order (m1, m2): A 1016, B 984, then A 1016 draws C 1000
    e = E(1016, 1000)
    o1 = {"A": 1016 + 32 * (0.5 - e), "B": 984.0, "C": 1000 + 32 * (0.5 - (1 - e))}
    # order (m2, m1): the draw at 1000/1000 changes nothing, then A beats B
    o2 = {"A": 1016.0, "B": 984.0, "C": 1000.0}
    res = elo_over_orders([m1, m2], ABC, n_orders=4000, seed=3)
    assert res.n_orders == 4000
    for s in ABC:
        assert res.ratings[s] == pytest.approx((o1[s] + o2[s]) / 2, abs=0.05)
    assert res.order_sd["B"] == pytest.approx(0.0, abs=1e-9)
    # A is o1 or o2 with about equal frequency: SD ~ |o1 - o2| / 2
    assert res.order_sd["A"] == pytest.approx(abs(o1["A"] - o2["A"]) / 2, rel=0.01)


def test_elo_over_orders_is_mean_of_the_drawn_permutations():
    ms = [Match("A", "B", 1), Match("B", "C", 0.5), Match("C", "A", 1), Match("A", "C", 0)]
    res = elo_over_orders(ms, ABC, k=20, initial=1200, n_orders=50, seed=7)
    rng = np.random.default_rng(7)
    runs = [elo([ms[i] for i in rng.permutation(len(ms))], ABC, k=20, initial=1200)
            for _ in range(50)]
    for s in ABC:
        vals = [r[s] for r in runs]
        assert res.ratings[s] == pytest.approx(float(np.mean(vals)), abs=1e-9)
        assert res.order_sd[s] == pytest.approx(float(np.std(vals)), abs=1e-9)
    again = elo_over_orders(ms, ABC, k=20, initial=1200, n_orders=50, seed=7)
    assert again == res
    one = elo_over_orders(ms, ABC, n_orders=1)
    assert one.order_sd == {s: 0.0 for s in ABC}


# ---------------------------------------------------------------- Bradley-Terry

def test_bt_two_systems_ratio():
    ms = [Match("A", "B", 1)] * 3 + [Match("B", "A", 1)]
    res = bradley_terry(ms, AB)
    # MLE: p_A/(p_A+p_B) = 3/4, so p_A/p_B = 3; rating gap 400*log10(3) = 190.848501
    assert res.strengths["A"] / res.strengths["B"] == pytest.approx(3, rel=1e-9)
    assert res.ratings["A"] - res.ratings["B"] == pytest.approx(190.848501, abs=1e-5)
    assert (res.ratings["A"] + res.ratings["B"]) / 2 == pytest.approx(1000, abs=1e-9)
    assert res.converged and res.iterations < 10000


def test_bt_draw_is_half_a_win():
    # A: 2 wins + 1 draw = 2.5, B: 1 win + 1 draw-half = 1.5 -> ratio 5/3
    ms = [Match("A", "B", 1), Match("A", "B", 1), Match("B", "A", 0.5), Match("B", "A", 1)]
    res = bradley_terry(ms, AB, anchor=1500)
    assert res.strengths["A"] / res.strengths["B"] == pytest.approx(5 / 3, rel=1e-9)
    assert res.ratings["A"] - 1500 == pytest.approx(200 * math.log10(5 / 3), abs=1e-6)


def test_bt_cycle_is_all_equal():
    res = bradley_terry([Match("A", "B", 1), Match("B", "C", 1), Match("C", "A", 1)], ABC)
    for s in ABC:
        assert res.ratings[s] == pytest.approx(1000, abs=1e-8)
        assert res.strengths[s] == pytest.approx(1, abs=1e-10)


FOUR = ["A", "B", "C", "D"]
# (winner, loser, times); C-D also has two draws
TRANSITIVE = [("A", "B", 5), ("B", "A", 2), ("B", "C", 4), ("C", "B", 1), ("C", "D", 3),
              ("D", "C", 2), ("A", "C", 2), ("C", "A", 1), ("D", "A", 1), ("A", "D", 1)]


def transitive_matches() -> list[Match]:
    ms = [Match(w, l, 1.0) for w, l, t in TRANSITIVE for _ in range(t)]
    return ms + [Match("C", "D", 0.5), Match("D", "C", 0.5)]


def test_bt_likelihood_equations_hold():
    ms = transitive_matches()
    res = bradley_terry(ms, FOUR)
    p = res.strengths
    wins = {s: 0.0 for s in FOUR}
    n = {(i, j): 0 for i in FOUR for j in FOUR}
    for m in ms:
        wins[m.a] += m.score_a
        wins[m.b] += 1 - m.score_a
        n[(m.a, m.b)] += 1
        n[(m.b, m.a)] += 1
    # at the optimum, for each i: wins_i = sum_j n_ij * p_i / (p_i + p_j)
    for i in FOUR:
        expected = sum(n[(i, j)] * p[i] / (p[i] + p[j]) for j in FOUR if j != i)
        assert wins[i] == pytest.approx(expected, abs=1e-8)
    assert res.ratings["A"] > res.ratings["B"] > res.ratings["D"]
    assert float(np.prod(list(p.values()))) == pytest.approx(1.0, abs=1e-9)  # mean rating = anchor
    assert sum(res.ratings.values()) / 4 == pytest.approx(1000, abs=1e-8)
    for s in FOUR:
        assert res.ratings[s] == pytest.approx(1000 + 400 * math.log10(p[s]), abs=1e-9)


def test_bt_order_invariant():
    ms = transitive_matches()
    ref = bradley_terry(ms, FOUR).ratings
    shuffled = list(ms)
    random.Random(5).shuffle(shuffled)
    assert shuffled != ms
    assert bradley_terry(shuffled, FOUR).ratings == pytest.approx(ref, abs=1e-9)


def test_bt_converges_to_a_maximum():
    ms = transitive_matches()
    res = bradley_terry(ms, FOUR)
    assert res.converged and 1 < res.iterations < 10000
    assert res.log_likelihood == pytest.approx(bt_log_likelihood(ms, FOUR, res.strengths), abs=1e-12)
    rng = np.random.default_rng(0)
    for _ in range(200):
        scale = rng.choice([1e-4, 1e-2, 0.3])
        moved = {s: v * math.exp(rng.normal(0, scale)) for s, v in res.strengths.items()}
        assert bt_log_likelihood(ms, FOUR, moved) <= res.log_likelihood + 1e-12
    few = bradley_terry(ms, FOUR, max_iter=2)
    assert not few.converged and few.iterations == 2


def test_bt_undefeated_needs_a_prior():
    ms = [Match("A", "B", 1)] * 3
    with pytest.raises(NoMLE, match=r"A won every match.*prior > 0"):
        bradley_terry(ms, AB)
    # prior 1 = one virtual draw: A 3 + 0.5 = 3.5, B 0 + 0.5 = 0.5 -> ratio 7
    res = bradley_terry(ms, AB, prior=1)
    assert res.strengths["A"] / res.strengths["B"] == pytest.approx(7, rel=1e-9)
    assert all(math.isfinite(v) for v in res.ratings.values())
    assert isinstance(NoMLE("x"), ValueError)


def test_bt_disconnected_and_unplayed():
    ms = [Match("A", "B", 1), Match("B", "A", 1), Match("C", "D", 1), Match("D", "C", 1)]
    with pytest.raises(NoMLE, match=r"A, B never won or drew against C, D"):
        bradley_terry(ms, FOUR)
    with pytest.raises(NoMLE, match=r"C has no matches"):
        bradley_terry([Match("A", "B", 1), Match("B", "A", 1)], ABC)
    # the prior connects every pair of systems: C, never played, sits at the anchor
    res = bradley_terry([Match("A", "B", 1), Match("B", "A", 1)], ABC, prior=0.5)
    assert res.ratings == pytest.approx({"A": 1000, "B": 1000, "C": 1000}, abs=1e-8)


# ---------------------------------------------------------------- bootstrap

def bt_rate(ms, rng):
    return bradley_terry(ms, AB).ratings


def test_bootstrap_single_cluster_is_degenerate():
    ms = [Match("A", "B", 1, "m1")] * 3 + [Match("B", "A", 1, "m1")]
    point = bradley_terry(ms, AB).ratings
    res = bootstrap_ci(ms, AB, bt_rate, n_boot=50)
    for s in AB:
        assert res.intervals[s] == (point[s], point[s])
    assert res.n_boot == 50 and res.skipped == 0 and res.level == 0.95


def test_bootstrap_resamples_clusters_not_matches():
    # m1 holds two A wins, m2 one B win. Cluster resampling gives A's share in {1, 2/3, 0}
    # with 4, 3 or 2 matches; resampling single matches would always give 3 matches.
    ms = [Match("A", "B", 1, "m1"), Match("A", "B", 1, "m1"), Match("B", "A", 1, "m2")]
    seen = []

    def share(sample, rng):
        seen.append((len(sample), sum(m.score_a if m.a == "A" else 1 - m.score_a for m in sample)))
        a = seen[-1][1] / len(sample)
        return {"A": a, "B": 1 - a}

    res = bootstrap_ci(ms, AB, share, n_boot=400)
    assert set(seen) == {(4, 4), (3, 2), (2, 0)}
    assert res.intervals["A"] == (0.0, 1.0)
    # "" = every match its own cluster
    assert [len(g) for g in clusters_of([Match("A", "B", 1)] * 3)] == [1, 1, 1]
    assert [len(g) for g in clusters_of(ms)] == [2, 1]


def test_bootstrap_deterministic_and_levels():
    ms = [Match(w, l, 1.0, f"m{i % 5}") for i, (w, l, _) in enumerate(TRANSITIVE * 3)]

    def rate(sample, rng):
        return bradley_terry(sample, FOUR, prior=1).ratings

    a = bootstrap_ci(ms, FOUR, rate, n_boot=200, seed=11)
    assert a == bootstrap_ci(ms, FOUR, rate, n_boot=200, seed=11)
    assert a != bootstrap_ci(ms, FOUR, rate, n_boot=200, seed=12)
    narrow = bootstrap_ci(ms, FOUR, rate, n_boot=200, seed=11, level=0.5)
    for s in FOUR:
        lo, hi = a.intervals[s]
        nlo, nhi = narrow.intervals[s]
        assert lo <= nlo <= nhi <= hi and lo < hi


def test_bootstrap_with_shuffled_elo():
    ms = [Match("A", "B", 1, "m1"), Match("B", "A", 0.5, "m2"), Match("A", "B", 0, "m3")]

    def rate(sample, rng):
        return elo([sample[i] for i in rng.permutation(len(sample))], AB)

    res = bootstrap_ci(ms, AB, rate, n_boot=100, seed=2)
    assert res == bootstrap_ci(ms, AB, rate, n_boot=100, seed=2)
    assert res.intervals["A"][0] < 1000 < res.intervals["A"][1]


def test_bootstrap_counts_skipped_replicates():
    # m1: A beats B, m2: B beats A. A replicate drawing the same cluster twice has an
    # undefeated system -> NoMLE -> skipped. Replay the draws to know how many.
    ms = [Match("A", "B", 1, "m1"), Match("B", "A", 1, "m2")]
    res = bootstrap_ci(ms, AB, bt_rate, n_boot=300, seed=4)
    rng = np.random.default_rng(4)
    expected = sum(len(set(rng.integers(0, 2, size=2).tolist())) == 1 for _ in range(300))
    assert res.skipped == expected and 100 < expected < 200
    assert res.intervals["A"] == (1000.0, 1000.0)  # only the one-win-each replicates remain
    with pytest.raises(NoMLE, match="all 5 bootstrap replicates"):
        bootstrap_ci([Match("A", "B", 1, "m1")], AB, bt_rate, n_boot=5)


@pytest.mark.parametrize("prior", [0.0, 1.0])
def test_bradley_terry_bootstrap_tallies_once_and_gives_bootstrap_ci(prior):
    """The fast path draws the same resamples as bootstrap_ci(bradley_terry): same intervals,
    same skipped count (resamples where a system won or lost everything, with prior 0)."""
    from lceval.analysis import bootstrap_bradley_terry

    rng = random.Random(3)
    systems = ["A", "B", "C", "D"]
    ms = [Match(a, b, rng.choice([0.0, 0.5, 1.0, 0.75]), f"m{k}")
          for k in range(6) for a, b in [("A", "B"), ("B", "C"), ("C", "D"), ("A", "D")]]
    slow = bootstrap_ci(ms, systems, lambda sample, _: bradley_terry(sample, systems, prior=prior).ratings,
                        n_boot=120, seed=7)
    fast = bootstrap_bradley_terry(ms, systems, prior=prior, n_boot=120, seed=7)
    assert fast.skipped == slow.skipped and fast.n_boot == slow.n_boot
    for s in systems:
        assert fast.intervals[s] == pytest.approx(slow.intervals[s], abs=1e-9)
    two = [Match("A", "B", 1, "m1"), Match("B", "A", 1, "m2")]
    assert bootstrap_bradley_terry(two, AB, n_boot=300, seed=4).skipped == bootstrap_ci(two, AB, bt_rate, n_boot=300,
                                                                                        seed=4).skipped
    with pytest.raises(NoMLE, match="all 5 bootstrap replicates"):
        bootstrap_bradley_terry([Match("A", "B", 1, "m1")], AB, n_boot=5)


# ---------------------------------------------------------------- summaries

def test_head_to_head_and_score_matrix():
    ms = [Match("A", "B", 1), Match("B", "A", 0.5), Match("B", "A", 1), Match("A", "C", 0.8)]
    h = head_to_head(ms)
    assert h[("A", "B")] == (1, 1, 1) and h[("B", "A")] == (1, 1, 1)
    assert h[("A", "C")] == (1, 0, 0) and h[("C", "A")] == (0, 0, 1)
    assert ("B", "C") not in h
    sm = score_matrix(match_triples(ms), ABC)
    # A vs B: scores 1, 0.5, 0 -> mean 0.5 over 3; A vs C: 0.8; C vs A: 0.2
    assert sm.mean["A"]["B"] == pytest.approx(0.5) and sm.count["A"]["B"] == 3
    assert sm.mean["C"]["A"] == pytest.approx(0.2) and sm.mean["B"]["C"] is None
    assert sm.count["A"]["A"] == 0
    # asymmetric judges: row-vs-column triples need not add up to 1
    sm = score_matrix([("A", "B", 0.9), ("B", "A", 0.8), ("A", "B", 0.7)], AB)
    assert sm.mean["A"]["B"] == pytest.approx(0.8) and sm.mean["B"]["A"] == pytest.approx(0.8)
    with pytest.raises(ValueError, match="'Z'"):
        score_matrix([("A", "Z", 1.0)], AB)


# ---------------------------------------------------------------- validation

@pytest.mark.parametrize("score", [1.5, -0.1, float("nan"), "1"])
def test_bad_score(score):
    with pytest.raises(ValueError, match="score_a"):
        Match("A", "B", score)


def test_validation_errors():
    with pytest.raises(ValueError, match="against itself"):
        Match("A", "A", 1)
    ms = [Match("A", "Q", 1)]
    for call in (lambda: elo(ms, AB), lambda: elo_over_orders(ms, AB),
                 lambda: bradley_terry(ms, AB), lambda: bootstrap_ci(ms, AB, bt_rate)):
        with pytest.raises(ValueError, match="'Q'"):
            call()
    good = [Match("A", "B", 1)]
    for bad_k in (0, -1, float("nan")):
        with pytest.raises(ValueError, match="K-factor"):
            elo(good, AB, k=bad_k)
        with pytest.raises(ValueError, match="K-factor"):
            elo_over_orders(good, AB, k=bad_k)
    with pytest.raises(ValueError, match="n_orders"):
        elo_over_orders(good, AB, n_orders=0)
    with pytest.raises(ValueError, match="n_boot"):
        bootstrap_ci(good, AB, bt_rate, n_boot=0)
    with pytest.raises(ValueError, match="level"):
        bootstrap_ci(good, AB, bt_rate, level=1.0)
    with pytest.raises(ValueError, match="prior"):
        bradley_terry(good, AB, prior=-1)
    with pytest.raises(ValueError, match="more than once"):
        elo(good, ["A", "B", "A"])
