"""How an amount of money is written, everywhere lceval writes one (the console's cost footer
and prompt-cache lines, the dry run's "at most", a cost limit's message, the HTML report): one
function, so a figure reads the same wherever it is met.

Never in scientific notation (`$-1.89e-01` is not an amount a person reads as money): two
decimals from $100 on (with thousands separators), four below, and for an amount under a
hundredth of a cent as many as show its first two significant digits ($0.000012). A negative
amount carries its sign before the dollar. An "at most" (`up=True`) is rounded up at the
digits shown, so a limit set to the figure shown holds everything it counts.
"""

from __future__ import annotations

import math

#: below this, four decimals would print $0.0000: more digits are shown instead
_SMALL = 1e-4


def _decimals(amount: float) -> int:
    size = abs(amount)
    if size >= 100:
        return 2
    if size >= _SMALL or size == 0:
        return 4
    return -math.floor(math.log10(size)) + 1  # two significant digits


def format_usd(amount: float | None, *, up: bool = False) -> str:
    """`$0.0123`, `$1,234.57`, `$0.000012`, `-$0.1890`; "unknown" for None (an unknown price,
    never $0). `up`: rounded up at the digits shown (an upper bound stays one)."""
    if amount is None:
        return "unknown"
    if not math.isfinite(amount):
        return "unknown"
    digits = _decimals(amount)
    if up:
        scale = 10 ** digits
        amount = math.ceil(amount * scale - 1e-9) / scale
        digits = _decimals(amount) if amount else digits
    sign = "-" if amount < 0 else ""
    return f"{sign}${abs(amount):,.{digits}f}"


def format_rate(amount: float) -> str:
    """A price per million tokens as its user wrote it ($2, $0.075, $0.0003), never `3e-04`."""
    text = f"{amount:.10f}".rstrip("0").rstrip(".")
    return f"${text or '0'}"
