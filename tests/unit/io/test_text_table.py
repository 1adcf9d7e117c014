"""The one plain-text table every console table is drawn with (`lceval.io.text_table`)."""

from __future__ import annotations

from lceval.io import text_table

ROWS = [("task", "score", "n"), ("elitr_qa", "8.21", "141"), ("ruler", "-", "")]


def test_columns_are_as_wide_as_their_widest_cell_and_the_header_is_ruled():
    assert text_table(ROWS) == ["task      score  n",
                                "--------  -----  ---",
                                "elitr_qa  8.21   141",
                                "ruler     -"]


def test_without_a_rule_or_stripping_and_with_a_given_width():
    assert text_table(ROWS, rule=False, strip=False, widths=[None, 7, None]) == [
        "task      score    n", "elitr_qa  8.21     141", "ruler     -        "]


def test_markdown_is_a_pipe_table():
    assert text_table(ROWS, markdown=True) == ["| task | score | n |", "|---|---|---|",
                                               "| elitr_qa | 8.21 | 141 |", "| ruler | - |  |"]
