"""Where needles go: the depth grids of the authors (evenly spaced, the original needle in a
haystack's sigmoid spacing), the point of a haystack a depth names, and the order in which
`--limit` takes depths so that a few still span them."""

from __future__ import annotations

__all__ = ["depth_point", "linear_depths", "sigmoid_depths", "spread_order"]


def linear_depths(n: int, low: float = 0, high: float = 100) -> list[float]:
    """`np.linspace(low, high, n)`, unrounded (NoLiMa's depths)."""
    import numpy as np

    return [float(x) for x in np.linspace(low, high, n)]


def sigmoid_depths(n: int) -> list[float]:
    """The needle in a haystack tester's logistic spacing (its `logistic`), denser at both ends."""
    import numpy as np

    def logistic(x: float, top: float = 100, x0: float = 50, k: float = .1) -> float:
        if x in [0, 100]:
            return x
        x = -k * (x - x0)
        return float(np.round(top * (1 / (1 + np.exp(-x))), 3))

    return [float(logistic(x)) for x in np.linspace(0, 100, n)]


def depth_point(units: int, depth: float) -> int:
    """The authors' insertion point of a depth in percent: `int(units * (depth / 100))`."""
    return int(units * (depth / 100))


def spread_order(n: int) -> list[int]:
    """0..n-1 in an order whose every prefix spans the range (ends, then the middle, then each
    time the index farthest from those taken): `--limit 3` over depths asks at 0, 100 and 50."""
    if n <= 2:
        return list(range(n))
    order, rest = [0, n - 1], list(range(1, n - 1))
    while rest:
        best = max(rest, key=lambda i: (min(abs(i - j) for j in order), -i))
        order.append(best)
        rest.remove(best)
    return order
