"""Plots as inline SVG text, from plain numbers: what the HTML report and the leaderboard
draw, and what plugins draw their own panels with.

Why our own: a report must be one self-contained file that opens offline and stays small,
and the few kinds of plot we need (means with intervals, a scatter, a heatmap) do not
justify a plotting stack with fonts and a browser runtime. Every drawn datum is an element
with class ``mark`` and a ``<title>`` (the browser shows it on hover), and each `Plot` says
how many marks it drew, so a test can check in a real browser that every plot rendered.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from html import escape
from typing import Sequence

#: Okabe-Ito: distinguishable with the common colour-vision deficiencies.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
FONT = 11


@dataclass
class Point:
    """One value of a series at a category, with its interval (None = none) and a note for
    the hover text (e.g. "n=40")."""

    category: str
    value: float | None
    low: float | None = None
    high: float | None = None
    note: str = ""


@dataclass
class Series:
    name: str
    points: list[Point] = field(default_factory=list)


@dataclass
class Plot:
    """An SVG document (no XML prolog: it is inlined in HTML) and how many data marks it has."""

    svg: str
    marks: int
    kind: str


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def fmt(value: float, digits: int | None = None) -> str:
    """A number short enough for a tick or a hover text."""
    if digits is not None:
        return f"{value:.{digits}f}"
    if value == 0:
        return "0"
    mag = abs(value)
    if mag >= 1000:
        return f"{value:,.0f}"
    if mag >= 10:
        return f"{value:.1f}".rstrip("0").rstrip(".")
    return f"{value:.3g}"


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About `count` round tick values covering [lo, hi] (1, 2, 2.5 or 5 times a power of 10)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"ticks need finite bounds, got {lo}, {hi}")
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:
        hi, lo = hi + 1, lo - (1 if lo != 0 else 0)
    raw = (hi - lo) / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    start = math.floor(lo / step + 1e-9) * step
    ticks = []
    v = start
    while v <= hi + step * 1e-6:
        ticks.append(round(v, 10))
        v += step
    if ticks[-1] < hi:
        ticks.append(round(v, 10))
    return ticks


def _bounds(values: Sequence[float | None], lo: float | None, hi: float | None) -> tuple[float, float]:
    """The axis range: the data (intervals included) padded to round ticks, unless fixed."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    data_lo = min(finite) if finite else 0.0
    data_hi = max(finite) if finite else 1.0
    ticks = nice_ticks(data_lo if lo is None else lo, data_hi if hi is None else hi)
    return (ticks[0] if lo is None else lo), (ticks[-1] if hi is None else hi)


class _Canvas:
    """An SVG being written: elements as text, escaped once, here."""

    def __init__(self, width: int, height: int, label: str) -> None:
        self.width, self.height = width, height
        self.parts: list[str] = []
        self.label = label
        self.marks = 0

    def add(self, tag: str, attrs: dict[str, object], title: str | None = None, text: str | None = None) -> None:
        attr = " ".join(f'{k.replace("_", "-")}="{escape(str(v), quote=True)}"' for k, v in attrs.items()
                        if v is not None)
        inner = ""
        if title is not None:
            inner += f"<title>{escape(title)}</title>"
        if text is not None:
            inner += escape(text)
        self.parts.append(f"<{tag} {attr}>{inner}</{tag}>" if inner else f"<{tag} {attr}/>")

    def mark(self, tag: str, attrs: dict[str, object], title: str) -> None:
        attrs = {"class": "mark", **attrs}
        self.add(tag, attrs, title=title)
        self.marks += 1

    def text(self, x: float, y: float, text: str, anchor: str = "middle", size: int = FONT,
             rotate: float | None = None, cls: str | None = None, weight: str | None = None) -> None:
        attrs: dict[str, object] = {"x": _r(x), "y": _r(y), "text-anchor": anchor, "font-size": size,
                                    "class": cls, "font-weight": weight}
        if rotate is not None:
            attrs["transform"] = f"rotate({rotate} {_r(x)} {_r(y)})"
        self.add("text", attrs, text=text)

    def plot(self, kind: str) -> Plot:
        body = "".join(self.parts)
        svg = (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.width} {self.height}" '
               f'width="{self.width}" height="{self.height}" role="img" class="plot" data-kind="{kind}" '
               f'data-marks="{self.marks}" aria-label="{escape(self.label, quote=True)}" '
               f'font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif">{body}</svg>')
        return Plot(svg=svg, marks=self.marks, kind=kind)


def _r(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def _clip(label: str, n: int) -> str:
    return label if len(label) <= n else label[: n - 1] + "…"


def _legend(c: _Canvas, names: list[str], x: float, y: float) -> None:
    for i, name in enumerate(names):
        c.add("rect", {"x": _r(x), "y": _r(y + 16 * i - 9), "width": 10, "height": 10, "fill": color(i)})
        c.text(x + 14, y + 16 * i, _clip(name, 28), anchor="start")


def _y_axis(c: _Canvas, left: float, top: float, bottom: float, right: float, lo: float, hi: float,
            label: str) -> None:
    for t in nice_ticks(lo, hi):
        if t < lo - 1e-9 or t > hi + 1e-9:
            continue
        y = bottom - (t - lo) / (hi - lo) * (bottom - top)
        c.add("line", {"x1": left, "x2": _r(right), "y1": _r(y), "y2": _r(y), "stroke": "#e3e3e3"})
        c.text(left - 5, y + 4, fmt(t), anchor="end")
    c.add("line", {"x1": left, "x2": left, "y1": top, "y2": bottom, "stroke": "#777"})
    if label:
        c.text(14, (top + bottom) / 2, label, rotate=-90)


def category_chart(categories: list[str], series: list[Series], *, style: str = "bars", y_label: str = "",
                   y_min: float | None = None, y_max: float | None = None, label: str = "",
                   width: int | None = None, height: int = 260, notes: dict[str, str] | None = None) -> Plot:
    """Values per category and series: grouped bars (``style="bars"``) or dots
    (``"dots"``), each with its interval as a whisker. `notes` are printed under a
    category (Fig. 2a's "N=..."). A missing value (None) draws nothing and is not a mark."""
    if style not in ("bars", "dots"):
        raise ValueError(f"unknown style {style!r}")
    names = [s.name for s in series]
    legend_w = 0 if len(series) <= 1 else min(200, 24 + 7 * max(len(n) for n in names))
    slot = max(36, 18 * max(len(series), 1) + 12)
    width = width or int(max(320, 60 + slot * len(categories) + legend_w + 20))
    left, top, right = 52, 12, width - legend_w - 10
    longest = max((len(x) for x in categories), default=1)
    slant = longest * 6.2 > (right - left) / max(len(categories), 1)
    bottom = height - (min(90, 14 + 5.5 * min(longest, 24)) if slant else 34) - (14 if notes else 0)
    values = [v for s in series for p in s.points for v in (p.value, p.low, p.high)]
    if style == "bars":
        values.append(0.0)
    lo, hi = _bounds(values, y_min, y_max)
    c = _Canvas(width, height, label or y_label)
    _y_axis(c, left, top, bottom, right, lo, hi, y_label)

    def y_of(v: float) -> float:
        return bottom - (min(max(v, lo), hi) - lo) / (hi - lo) * (bottom - top)

    band = (right - left) / max(len(categories), 1)
    inner = band * 0.8 / max(len(series), 1)
    for ci, cat in enumerate(categories):
        x0 = left + band * ci + band * 0.1
        if slant:
            c.text(x0 + band * 0.4, bottom + 12, _clip(cat, 24), anchor="end", rotate=-35)
        else:
            c.text(x0 + band * 0.4, bottom + 14, _clip(cat, int(band / 6.2) + 1))
        if notes and cat in notes:
            c.text(x0 + band * 0.4, height - 4, notes[cat], size=FONT - 1, cls="note")
        for si, s in enumerate(series):
            p = next((q for q in s.points if q.category == cat), None)
            if p is None or p.value is None:
                continue
            cx = x0 + inner * (si + 0.5)
            hover = f"{s.name} · {cat}: {fmt(p.value)}"
            if p.low is not None and p.high is not None:
                hover += f" [{fmt(p.low)}, {fmt(p.high)}]"
            if p.note:
                hover += f" ({p.note})"
            if style == "bars":
                y0, y1 = y_of(max(lo, 0.0) if lo <= 0 <= hi else lo), y_of(p.value)
                c.mark("rect", {"x": _r(cx - inner * 0.42), "y": _r(min(y0, y1)), "width": _r(inner * 0.84),
                                "height": _r(max(abs(y0 - y1), 0.5)), "fill": color(si)}, hover)
            else:
                c.mark("circle", {"cx": _r(cx), "cy": _r(y_of(p.value)), "r": 4, "fill": color(si)}, hover)
            if p.low is not None and p.high is not None:
                stroke = "#333" if style == "bars" else color(si)
                c.add("line", {"x1": _r(cx), "x2": _r(cx), "y1": _r(y_of(p.low)), "y2": _r(y_of(p.high)),
                               "stroke": stroke, "stroke-width": 1.3, "class": "whisker"})
                for yy in (p.low, p.high):
                    c.add("line", {"x1": _r(cx - 3), "x2": _r(cx + 3), "y1": _r(y_of(yy)), "y2": _r(y_of(yy)),
                                   "stroke": stroke, "stroke-width": 1.3})
    c.add("line", {"x1": left, "x2": _r(right), "y1": _r(bottom), "y2": _r(bottom), "stroke": "#777"})
    if len(series) > 1:
        _legend(c, names, right + 12, top + 10)
    return c.plot(style)


def interval_rows(rows: list[tuple[str, float | None, float | None, float | None]], *, x_label: str = "",
                  label: str = "", width: int = 560, reference: float | None = None) -> Plot:
    """One horizontal row per entry (label, value, low, high), top to bottom as given: a
    ranking with intervals (Elo, Bradley-Terry). `reference` draws a dashed vertical line
    (e.g. the initial rating)."""
    height = 28 + 24 * max(len(rows), 1) + 30
    left = min(220, 16 + 6.5 * max((len(r[0]) for r in rows), default=4))
    right, top, bottom = width - 16, 12, height - 30
    lo, hi = _bounds([v for r in rows for v in r[1:]] + ([reference] if reference is not None else []), None, None)
    c = _Canvas(width, height, label or x_label)

    def x_of(v: float) -> float:
        return left + (v - lo) / (hi - lo) * (right - left)

    for t in nice_ticks(lo, hi):
        if lo - 1e-9 <= t <= hi + 1e-9:
            c.add("line", {"x1": _r(x_of(t)), "x2": _r(x_of(t)), "y1": top, "y2": _r(bottom), "stroke": "#e3e3e3"})
            c.text(x_of(t), bottom + 14, fmt(t))
    if reference is not None:
        c.add("line", {"x1": _r(x_of(reference)), "x2": _r(x_of(reference)), "y1": top, "y2": _r(bottom),
                       "stroke": "#999", "stroke-dasharray": "4 3"})
    for i, (name, value, low, high) in enumerate(rows):
        y = top + 12 + 24 * i
        c.text(left - 8, y + 4, _clip(name, 34), anchor="end")
        if low is not None and high is not None:
            c.add("line", {"x1": _r(x_of(low)), "x2": _r(x_of(high)), "y1": _r(y), "y2": _r(y),
                           "stroke": color(0), "stroke-width": 2, "class": "whisker"})
        if value is not None:
            hover = f"{name}: {fmt(value)}" + (f" [{fmt(low)}, {fmt(high)}]" if low is not None and high is not None else "")
            c.mark("circle", {"cx": _r(x_of(value)), "cy": _r(y), "r": 5, "fill": color(0)}, hover)
    c.add("line", {"x1": left, "x2": _r(right), "y1": _r(bottom), "y2": _r(bottom), "stroke": "#777"})
    if x_label:
        c.text((left + right) / 2, height - 2, x_label)
    return c.plot("intervals")


def scatter(points: list[tuple[float, float]], *, x_label: str = "", y_label: str = "", label: str = "",
            diagonal: bool = True, jitter: float = 0.0, seed: int = 0, size: int = 320,
            bounds: tuple[float, float] | None = None) -> Plot:
    """Points (x, y) on equal axes, with the diagonal y = x: a judge against people. Scores
    on a few levels overlap, so `jitter` (in data units, drawn reproducibly from `seed`)
    spreads them; the hover text gives the true values."""
    lo, hi = bounds or _bounds([v for p in points for v in p], None, None)
    pad_l, pad_b, top, right = 46, 40, 10, size - 10
    bottom = size - pad_b
    c = _Canvas(size, size, label or f"{y_label} against {x_label}")
    rng = random.Random(seed)
    span = hi - lo

    def px(v: float) -> float:
        return pad_l + (v - lo) / span * (right - pad_l)

    def py(v: float) -> float:
        return bottom - (v - lo) / span * (bottom - top)

    for t in nice_ticks(lo, hi):
        if lo - 1e-9 <= t <= hi + 1e-9:
            c.add("line", {"x1": _r(px(t)), "x2": _r(px(t)), "y1": top, "y2": _r(bottom), "stroke": "#eee"})
            c.add("line", {"x1": pad_l, "x2": _r(right), "y1": _r(py(t)), "y2": _r(py(t)), "stroke": "#eee"})
            c.text(px(t), bottom + 14, fmt(t))
            c.text(pad_l - 5, py(t) + 4, fmt(t), anchor="end")
    if diagonal:
        c.add("line", {"x1": _r(px(lo)), "y1": _r(py(lo)), "x2": _r(px(hi)), "y2": _r(py(hi)),
                       "stroke": "#999", "stroke-dasharray": "4 3"})
    for x, y in points:
        jx = x + (rng.uniform(-jitter, jitter) if jitter else 0.0)
        jy = y + (rng.uniform(-jitter, jitter) if jitter else 0.0)
        c.mark("circle", {"cx": _r(px(min(max(jx, lo), hi))), "cy": _r(py(min(max(jy, lo), hi))), "r": 2.6,
                          "fill": color(0), "fill-opacity": 0.35}, f"{x_label} {fmt(x)}, {y_label} {fmt(y)}")
    c.add("rect", {"x": pad_l, "y": top, "width": _r(right - pad_l), "height": _r(bottom - top),
                   "fill": "none", "stroke": "#777"})
    c.text((pad_l + right) / 2, size - 6, x_label)
    c.text(12, (top + bottom) / 2, y_label, rotate=-90)
    return c.plot("scatter")


def _heat(t: float) -> str:
    """White (0) to a light blue (1): dark text stays readable on every cell."""
    t = min(max(t, 0.0), 1.0)
    r, g, b = (int(round(255 + (e - 255) * t)) for e in (0x56, 0xB4, 0xE9))
    return f"#{r:02x}{g:02x}{b:02x}"


def heatmap(rows: list[str], cols: list[str], values: list[list[float | None]], *, label: str = "",
            v_min: float | None = None, v_max: float | None = None, digits: int = 1, scale: float = 1.0,
            suffix: str = "", notes: list[list[str]] | None = None) -> Plot:
    """A matrix of numbers as coloured cells with the number written in (Table 3 of paper
    003: the row system's score against the column system). `scale` multiplies the printed
    number (100 with suffix "%" for shares); None cells are left blank and are not marks."""
    left = min(220, 16 + 6.5 * max((len(r) for r in rows), default=4))
    cell_w, cell_h = 78, 30
    top = 16 + min(110, 6 * max((len(x) for x in cols), default=4))
    width = int(left + cell_w * len(cols) + 90)  # room for the last slanted column label
    height = int(top + cell_h * len(rows) + 10)
    flat = [v for row in values for v in row if v is not None]
    lo = v_min if v_min is not None else (min(flat) if flat else 0.0)
    hi = v_max if v_max is not None else (max(flat) if flat else 1.0)
    span = (hi - lo) or 1.0
    c = _Canvas(width, height, label)
    for j, col in enumerate(cols):
        x = left + cell_w * (j + 0.5)
        c.text(x, top - 6, _clip(col, 18), anchor="start", rotate=-35)
    for i, row in enumerate(rows):
        y = top + cell_h * i
        c.text(left - 8, y + cell_h / 2 + 4, _clip(row, 34), anchor="end")
        for j, col in enumerate(cols):
            v = values[i][j]
            x = left + cell_w * j
            if v is None:
                c.add("rect", {"x": _r(x), "y": _r(y), "width": cell_w, "height": cell_h, "fill": "#f6f6f6",
                               "stroke": "#fff"})
                continue
            t = (v - lo) / span
            note = f" ({notes[i][j]})" if notes and notes[i][j] else ""
            c.mark("rect", {"x": _r(x), "y": _r(y), "width": cell_w, "height": cell_h, "fill": _heat(t),
                            "stroke": "#fff"}, f"{row} vs {col}: {v * scale:.{digits}f}{suffix}{note}")
            c.text(x + cell_w / 2, y + cell_h / 2 + 4, f"{v * scale:.{digits}f}{suffix}", cls="cell")
    return c.plot("heatmap")
