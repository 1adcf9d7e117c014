"""Needles into a haystack of token ids, as the authors put them: one at a depth (moved back to
just after a sentence's end where the original needle in a haystack does), several at their
own depths (NeedleBench's multi-needle retrieval), or a chain a share of the haystack apart
(its multi-needle reasoning, their arithmetic as written)."""

from __future__ import annotations

from .depths import depth_point

__all__ = ["insert_at_depth", "insert_chain", "insert_parallel"]


def insert_at_depth(haystack: list[int], needle: list[int], depth: float,
                    after: list[int] | None = None) -> tuple[list[int], int]:
    """The needle at `int(len(haystack) * depth / 100)` (NeedleBench's origin.py), with `after`
    (the tokens of '.') moved back until the token before it is one of them or the haystack
    starts, except at depth 100 (the tester's `insert_needle`). Returns (the haystack with the
    needle, the needle's first token's index)."""
    point = depth_point(len(haystack), depth)
    if after is not None and depth != 100:
        while point > 0 and haystack[point - 1] not in after:
            point -= 1
    return haystack[:point] + needle + haystack[point:], point


def insert_chain(haystack: list[int], depth: int, needles: list[list[int]], diff: int) -> list[int]:
    """NeedleBench's multi.py `_generate_context`: the first needle at the depth, each next one
    `diff` percent of the haystack after the previous, its arithmetic (its double shift) as written."""
    points: list[int] = []
    total = len(haystack)
    for i, _ in enumerate(needles):
        if i == 0:
            point = int(total * (depth / 100))
        else:
            point = int(points[i - 1] + len(needles[i - 1]) + total * (diff / 100))
        points.append(min(point, total + sum(len(n) for n in needles[:i])))
    for i, ids in enumerate(needles):
        haystack = haystack[:points[i]] + ids + haystack[points[i]:]
        for j in range(i + 1, len(points)):
            points[j] += len(ids)
    return haystack


def insert_parallel(haystack: list[int], depths: list[int], needles: list[list[int]]) -> list[int]:
    """NeedleBench's parallel.py `_generate_context`: needle i at depth i of the haystack before
    insertion, shifted by the tokens already inserted."""
    points = [int(len(haystack) * (d / 100)) for d in depths]
    shift = 0
    for i, ids in enumerate(needles):
        at = min(points[i] + shift, len(haystack))
        haystack = haystack[:at] + ids + haystack[at:]
        shift += len(ids)
    return haystack
