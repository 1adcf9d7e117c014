"""Every amount of money lceval writes goes through one formatter (`lceval.io.format_usd`):
never in scientific notation, small amounts with their first two significant digits, a sign
before the dollar, "unknown" for an unknown amount, and an upper bound rounded up at the digits
shown (so a limit set to the figure shown holds)."""

from __future__ import annotations

import pytest

from lceval.io import format_rate, format_usd
from lceval.results import usd


@pytest.mark.parametrize("amount, shown", [
    (0.0, "$0.0000"), (0.0123, "$0.0123"), (0.000012, "$0.000012"), (0.00000123, "$0.0000012"),
    (-0.189, "-$0.1890"), (12.5, "$12.5000"), (1234.567, "$1,234.57"), (None, "unknown"),
])
def test_an_amount_is_written_as_a_person_reads_money(amount: float | None, shown: str) -> None:
    assert format_usd(amount) == shown and "e" not in format_usd(amount).replace("unknown", "")


def test_an_upper_bound_is_rounded_up_at_the_digits_shown() -> None:
    assert format_usd(0.01231, up=True) == "$0.0124" and format_usd(0.0000121, up=True) == "$0.000013"
    assert format_usd(0.0123, up=True) == "$0.0123"  # already at the digits shown


def test_a_price_and_a_lower_bound_are_plain_too() -> None:
    assert format_rate(0.0003) == "$0.0003" and format_rate(2.0) == "$2" and format_rate(0.075) == "$0.075"
    assert usd(0.00002, unknown=3) == ">= $0.000020" and usd(None) == "unknown"
