"""The SVG plots the HTML report is made of: valid XML, one mark per datum drawn where the
axis says, nothing from the data ever becoming markup."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from lceval.report import svgplot
from lceval.report import Point, Series

NS = "{http://www.w3.org/2000/svg}"


def parse(plot: svgplot.Plot) -> ET.Element:
    root = ET.fromstring(plot.svg)
    assert root.tag == f"{NS}svg" and int(root.get("data-marks")) == plot.marks
    return root


def marks(root: ET.Element) -> list[ET.Element]:
    return [e for e in root.iter() if e.get("class") == "mark"]


@pytest.mark.parametrize("lo,hi", [(0, 10), (1, 9.3), (-2.5, 3), (1000, 1180), (0.02, 0.37), (5, 5)])
def test_ticks_are_round_and_cover_the_range(lo, hi):
    ticks = svgplot.nice_ticks(lo, hi)
    assert ticks[0] <= lo and ticks[-1] >= hi
    steps = {round(b - a, 9) for a, b in zip(ticks, ticks[1:])}
    assert len(steps) == 1 and 3 <= len(ticks) <= 12
    mantissa = float(f"{steps.pop():e}".split("e")[0])
    assert mantissa in (1.0, 2.0, 2.5, 5.0)


def test_bars_are_drawn_to_scale_with_whiskers_and_missing_values_left_out():
    series = [Series("A", [Point("dev", 5.0, 4.0, 6.0, "n=10"), Point("test2", 10.0)]),
              Series("B", [Point("dev", None), Point("test2", 2.5, 2.0, 3.0)])]
    plot = svgplot.category_chart(["dev", "test2"], series, y_label="score", y_min=0, y_max=10)
    root = parse(plot)
    bars = marks(root)
    assert plot.marks == 3 and len(bars) == 3  # B has no dev value: nothing drawn for it
    heights = sorted(float(b.get("height")) for b in bars)
    assert heights[2] == pytest.approx(2 * heights[1]) == pytest.approx(4 * heights[0], rel=0.02)
    titles = [b.find(f"{NS}title").text for b in bars]
    assert "A · dev: 5 [4, 6] (n=10)" in titles
    assert len([e for e in root.iter() if e.get("class") == "whisker"]) == 2


def test_dots_with_category_notes():
    plot = svgplot.category_chart(["1", "2"], [Series("gpt-4", [Point("1", 2.0, 1.5, 2.5), Point("2", 6.0)])],
                                  style="dots", notes={"1": "N=3", "2": "N=40"})
    root = parse(plot)
    assert [m.tag for m in marks(root)] == [f"{NS}circle"] * 2
    assert {"N=3", "N=40"} <= {t.text for t in root.iter(f"{NS}text")}


def test_text_from_data_is_escaped():
    evil = '<script>alert(1)</script>" onload="x'
    plot = svgplot.category_chart([evil], [Series(evil, [Point(evil, 1.0)])])
    assert "<script>" not in plot.svg and 'onload="x' not in plot.svg
    root = parse(plot)
    assert not list(root.iter(f"{NS}script"))


def test_scatter_jitter_is_reproducible_and_hover_gives_true_values():
    pts = [(1.0, 2.0), (1.0, 2.0), (9.0, 8.0)]
    a = svgplot.scatter(pts, x_label="gold", y_label="gpt-4", jitter=0.2, seed=3)
    b = svgplot.scatter(pts, x_label="gold", y_label="gpt-4", jitter=0.2, seed=3)
    assert a.svg == b.svg and a.marks == 3
    dots = marks(parse(a))
    assert dots[0].get("cx") != dots[1].get("cx")  # equal scores spread apart
    assert dots[0].find(f"{NS}title").text == "gold 1, gpt-4 2"


def test_heatmap_cells_and_blank_diagonal():
    values = [[None, 0.589], [0.694, None]]
    plot = svgplot.heatmap(["a", "b"], ["a", "b"], values, v_min=0, v_max=1, scale=100, suffix="%")
    root = parse(plot)
    assert plot.marks == 2
    assert {"58.9%", "69.4%"} <= {t.text for t in root.iter(f"{NS}text")}


def test_interval_rows_in_the_given_order():
    rows = [("first", 1125.0, 1075.0, 1177.0), ("second", 981.0, None, None), ("none", None, None, None)]
    plot = svgplot.interval_rows(rows, x_label="Elo", reference=1000.0)
    root = parse(plot)
    dots = marks(root)
    assert plot.marks == 2 and float(dots[0].get("cy")) < float(dots[1].get("cy"))
    assert float(dots[0].get("cx")) > float(dots[1].get("cx"))
