"""The shared haystack builder's parts on their own (the families' pinned samples test them as
each family configures them): a needle at a depth with and without the move back to a
sentence's end, the chain and parallel needles, the depth order `--limit` takes, and the
authors' length labels."""

from __future__ import annotations

import pytest

from lceval.errors import UserError
from lceval_plugins.haystack.depths import depth_point, linear_depths, sigmoid_depths, spread_order
from lceval_plugins.haystack.lengths import length_of, length_order
from lceval_plugins.haystack.needles import insert_at_depth, insert_chain, insert_parallel

PERIOD = 0
HAY = [1, 2, PERIOD, 3, 4, 5, PERIOD, 6, 7, 8]


def test_a_needle_at_a_depth_moves_back_after_a_sentences_end_when_asked():
    assert insert_at_depth(HAY, [9], 50) == (HAY[:5] + [9] + HAY[5:], 5)                 # int(10 * 0.5)
    assert insert_at_depth(HAY, [9], 50, after=[PERIOD]) == (HAY[:3] + [9] + HAY[3:], 3)  # after the period
    assert insert_at_depth(HAY, [9], 100, after=[PERIOD]) == (HAY + [9], 10)               # the end stays the end
    assert insert_at_depth(HAY, [9], 0) == ([9] + HAY, 0)


def test_several_needles():
    assert insert_parallel([1, 2, 3, 4], [0, 50], [[8], [9]]) == [8, 1, 2, 9, 3, 4]
    # the next needle 25% of the haystack after the first, and shifted once more (their arithmetic)
    assert insert_chain([1, 2, 3, 4], 0, [[8], [9]], 25) == [8, 1, 2, 9, 3, 4]


def test_depths_and_the_order_limit_takes_them():
    assert [round(d) for d in linear_depths(5)] == [0, 25, 50, 75, 100] and depth_point(40, 12.5) == 5
    sig = sigmoid_depths(5)
    assert sorted(sig) == [0.0, 7.586, 50.0, 92.414, 100.0]                           # denser at both ends
    assert spread_order(5) == [0, 4, 2, 1, 3] and spread_order(2) == [0, 1]


def test_lengths_as_the_authors_name_them():
    assert length_of("32K") == length_of("32k") == 32000 and length_of("4000") == 4000
    assert length_order(["128K", "4K", "32K"]) == ["4K", "32K", "128K"]
    with pytest.raises(UserError, match="is not a length"):
        length_of("4KB")
