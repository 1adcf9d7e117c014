"""The charts of the HTML report, as Vega-Lite specs built with `altair`.

Why a library and which: people who read evaluation reports expect hover details, legend
filtering, zoom and an image export, and a maintained grammar gives them with no drawing code
of ours. Vega-Lite is declarative JSON, so a chart is data a test can read (and a plugin can
write with altair or by hand); `altair` checks each spec against the Vega-Lite schema when it
is built; `vl-convert-python` ships the matching Vega, Vega-Lite and vega-embed JavaScript
inside its wheel, so the page inlines it and opens with no network (`vega_bundle`). Plotly
would do the same at 3.5 MB of script per page; Bokeh needs its own server or CDN for
interactions. Both packages are the `report` extra (`pip install 'lceval[report]'`) and are
imported only when a report is drawn.

Every builder takes plain values (`Series` of `Point`s: a category, a value and its interval)
and returns an altair chart; `figure` (in `_figures`) turns it into a `ReportFigure`. Missing
values are left out of the data, so a figure's `points` is what it really plots. Colour means
one thing on the whole page, the model: `palette(labels)` maps each run label to the
Okabe-Ito colour of its position, and builders take it as `colors`. Series that are not
models (a task's groups, judges against people) are told apart by shape, in greys
(`colors=None`), never by a model's colour. Every interval that exists is drawn: a line's
band needs two neighbours, so each point with an interval also gets its whisker.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Sequence

from lceval.errors import UserError

__all__ = ["Point", "Series", "forest", "heatmap", "intervals", "palette", "ranked_intervals", "scatter",
           "vega_bundle"]

#: Okabe-Ito's colours first (distinguishable with the common colour-vision deficiencies), then
#: Tableau's for a ninth model and on; no black, which would hide the black whiskers.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#8C564B", "#7F7F7F",
           "#BCBD22", "#9467BD", "#17BECF")
#: series that are not models: greys (never a model's colour) and a shape each
NEUTRAL = ("#3A3A3A", "#7A7A7A", "#A8A8A8", "#555555", "#909090")
SHAPES = ("circle", "square", "triangle-up", "diamond", "cross", "triangle-down", "wedge")
#: the narrowest a chart is drawn (the page's figure grid), for fitting a legend's columns
MIN_WIDTH = 480
#: the name of a chart's plotted data (`count_points`)
POINTS = "points"
HEIGHT = 240
INSTALL_HINT = "pip install 'lceval[report]' (altair and vl-convert-python draw and inline the charts)"


@dataclass
class Point:
    """One value of a series at a category, with its interval (None = none), a note for the
    hover text (its n: "n=40") and, without an interval, why ("1 meeting only")."""

    category: str
    value: float | None
    low: float | None = None
    high: float | None = None
    note: str = ""
    missing: str = ""


@dataclass
class Series:
    name: str
    points: list[Point] = field(default_factory=list)


def altair() -> Any:
    """The altair module, or a UserError saying which extra to install."""
    try:
        import altair as alt
    except ImportError as exc:
        raise UserError(f"the HTML report draws its charts with altair, which is not installed ({exc})",
                        field="--format html", hint=INSTALL_HINT) from None
    return alt


@lru_cache(maxsize=1)
def vega_bundle() -> str:
    """Vega, Vega-Lite and vega-embed as one classic script (it sets `window.vegaEmbed`), from
    the JavaScript `vl-convert-python` ships, at the Vega-Lite version altair writes specs for."""
    alt = altair()
    try:
        import vl_convert
    except ImportError as exc:
        raise UserError(f"the HTML report inlines Vega's JavaScript from vl-convert-python, which is not "
                        f"installed ({exc})", field="--format html", hint=INSTALL_HINT) from None
    version = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    known = vl_convert.get_vegalite_versions()
    if version not in known:  # altair newer than the JavaScript: the newest Vega-Lite it has
        version = known[-1]
    # the bundle is inlined in a <script>: no text inside may close the element
    return vl_convert.javascript_bundle(vl_version=version).replace("</script", "<\\/script")


def palette(names: Sequence[str]) -> dict[str, str]:
    """Each name's colour by its position: a model keeps its colour in every chart of the page."""
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(dict.fromkeys(names))}


def fmt(value: float | None, digits: int = 2) -> str:
    """The report's one rule for scores (as the console prints them): two decimals."""
    return "–" if value is None else f"{value:.{digits}f}"


def interval_text(low: float | None, high: float | None, missing: str = "") -> str:
    if low is not None and high is not None:
        return f"[{fmt(low)}, {fmt(high)}]"
    return f"none: {missing}" if missing else "none"


_NUMBER = re.compile(r"(-?\d+(?:\.\d+)?)\s*([kKmM%]?)")


def numeric_order(labels: Sequence[str]) -> list[str]:
    """Bucket labels in the order of the first number each holds ("0-4k" < "4k-8k" < "16k-32k"
    < ">128k"; "25-50%" < "100%"; "1k" < "2k" < "full"); labels without a number keep their
    order after the numbered ones. A `>x` bucket sorts after every bucket starting at x."""
    def key(item: tuple[int, str]) -> tuple[int, float, int]:
        index, label = item
        m = _NUMBER.search(label)
        if not m:
            return (1, 0.0, index)
        scale = {"k": 1024.0, "K": 1024.0, "m": 1024.0 ** 2, "M": 1024.0 ** 2}.get(m.group(2), 1.0)
        value = float(m.group(1)) * scale + (0.5 if label.lstrip().startswith(">") else 0.0)
        return (0, value, index)
    return [label for _, label in sorted(enumerate(labels), key=key)]


def _rows(categories: Sequence[str], series: Sequence[Series]) -> list[dict[str, Any]]:
    rows = []
    for s in series:
        for p in s.points:
            if p.category not in categories or p.value is None or not math.isfinite(p.value):
                continue
            rows.append({"category": p.category, "series": s.name, "value": p.value, "low": p.low, "high": p.high,
                         "shown": fmt(p.value), "interval": interval_text(p.low, p.high, p.missing), "note": p.note})
    return rows


def _points(alt: Any, rows: list[dict[str, Any]]) -> Any:
    """The plotted values as inline data named `points` (what a figure counts; a threshold
    rule or a diagonal is other data)."""
    return alt.InlineData(values=rows, name=POINTS)


def _legend(alt: Any, names: list[str]) -> Any:
    longest = max((len(n) for n in names), default=8)
    columns = max(1, min(len(names), MIN_WIDTH // (7 * min(longest, 30) + 30)))
    return alt.Legend(orient="bottom", direction="horizontal", columns=columns, labelLimit=210)


def _color(alt: Any, names: list[str], colors: dict[str, str] | None, title: str, field: str = "series:N",
           legend: bool = True) -> Any:
    """The colour of each name: the page's model colours (`colors`); names that are not
    models (`colors` None) in greys, told apart by `_shape` as well."""
    if colors is None:
        rng = [NEUTRAL[i % len(NEUTRAL)] for i in range(len(names))]
    else:
        known = dict(colors)
        spare = [c for c in PALETTE if c not in known.values()] or list(PALETTE)
        rng = [known.get(n) or spare[i % len(spare)] for i, n in enumerate(names)]
    return alt.Color(field, title=title, scale=alt.Scale(domain=names, range=rng),
                     legend=_legend(alt, names) if legend else None)


def _shape(alt: Any, names: list[str], title: str) -> Any:
    return alt.Shape("series:N", title=title, scale=alt.Scale(domain=names, range=list(SHAPES[:len(names)] or SHAPES)),
                     legend=_legend(alt, names))


def _pick(alt: Any) -> Any:
    """A click on a legend entry shows that series alone (shift-click adds one); the rest fade."""
    return alt.selection_point(name="legend_pick", fields=["series"], bind="legend")


def _tooltip(alt: Any, value_title: str, category_title: str, series_title: str, interval_title: str) -> list[Any]:
    return [alt.Tooltip("series:N", title=series_title), alt.Tooltip("category:N", title=category_title),
            alt.Tooltip("shown:N", title=value_title), alt.Tooltip("interval:N", title=interval_title),
            alt.Tooltip("note:N", title="details")]


def intervals(categories: Sequence[str], series: Sequence[Series], *, y_title: str, x_title: str = "",
              style: str = "bars", colors: dict[str, str] | None = None, y_domain: tuple[float, float] | None = None,
              threshold: float | None = None, series_title: str = "model", interval_title: str = "95% interval",
              description: str = "") -> Any:
    """Values per category, one colour per series, each with its interval: grouped bars with
    whiskers (`bars`), dots with whiskers (`dots`), or a line with a shaded interval band and
    dots (`line`, for an ordered axis such as context length). `threshold` draws a dashed rule
    (e.g. the effective-length threshold). Hover a mark for its value, interval and n; click a
    legend entry to show that series alone. `colors`: the page's model colours, for series
    that are models; None: the series are something else (judges, groups), drawn in greys
    with a shape each."""
    alt = altair()
    cats = list(categories)
    rows = _rows(cats, series)
    names = [s.name for s in series if any(r["series"] == s.name for r in rows)]
    models = colors is not None
    pick = _pick(alt)
    x = alt.X("category:N", sort=cats, title=x_title or None, axis=alt.Axis(labelAngle=0, labelLimit=140))
    y = alt.Y("value:Q", title=y_title, scale=alt.Scale(domain=list(y_domain), zero=True) if y_domain
              else alt.Scale(zero=style == "bars"))
    color = _color(alt, names, colors, series_title)
    shaped = {} if models else {"shape": _shape(alt, names, series_title)}
    fade = alt.condition(pick, alt.value(1.0), alt.value(0.12))
    tip = _tooltip(alt, y_title, x_title or "category", series_title, interval_title)
    base = alt.Chart(_points(alt, rows))
    offset = {"xOffset": alt.XOffset("series:N", sort=names)} if style in ("bars", "dots") and len(names) > 1 else {}
    whisker = base.mark_rule(strokeWidth=1.6, color="#222").encode(
        x=x, y=alt.Y("low:Q", title=y_title), y2="high:Q", opacity=fade, tooltip=tip, **offset)
    # whiskers and bands only where some value has an interval (an empty extent is Vega's warning)
    spread = any(r["low"] is not None and r["high"] is not None for r in rows)
    if style == "bars":
        layers = [base.mark_bar().encode(x=x, y=y, color=color, opacity=fade, tooltip=tip, **offset).add_params(pick),
                  *([whisker] if spread else [])]
    elif style == "dots":
        layers = [*([whisker.encode(color=color)] if spread else []),
                  base.mark_point(filled=True, size=70).encode(x=x, y=y, color=color, opacity=fade, tooltip=tip,
                                                               **offset, **shaped).add_params(pick)]
    elif style == "line":
        band = base.mark_area(opacity=0.18).encode(x=x, y=alt.Y("low:Q", title=y_title), y2="high:Q", color=color,
                                                  opacity=alt.condition(pick, alt.value(0.2), alt.value(0.03)))
        line = base.mark_line(point=alt.OverlayMarkDef(filled=True, size=60)).encode(
            x=x, y=y, color=color, opacity=fade, tooltip=tip, **({"strokeDash": alt.StrokeDash(
                "series:N", legend=None)} if not models else {})).add_params(pick)
        if not models:
            line = alt.layer(line, base.mark_point(filled=True, size=60).encode(x=x, y=y, color=color, opacity=fade,
                                                                              tooltip=tip, **shaped))
        # the band joins neighbouring intervals; a point whose neighbours have none would show
        # nothing, so every interval also gets its whisker, in its series' colour
        layers = [band, line, whisker.encode(color=color)] if spread else [line]
    else:
        raise ValueError(f"unknown chart style {style!r}")
    if threshold is not None:
        rule = alt.Chart(alt.Data(values=[{"threshold": threshold, "label": f"threshold {threshold:g}"}]))
        layers.append(rule.mark_rule(strokeDash=[5, 4], color="#555").encode(
            y="threshold:Q", tooltip=[alt.Tooltip("label:N", title="rule")]))
    return alt.layer(*layers).properties(width="container", height=HEIGHT,
                                         description=description or f"{y_title} by {x_title or 'category'}")


def ranked_intervals(rows: Sequence[tuple[str, float | None, float | None, float | None]], *, x_title: str,
                     reference: float | None = None, description: str = "") -> Any:
    """One row per system (in the order given, best first): its rating as a dot with its
    interval, and a dashed rule at `reference` (e.g. the initial Elo)."""
    alt = altair()
    data = [{"system": s, "value": v, "low": lo, "high": hi, "shown": fmt(v, 1),
             "interval": f"[{fmt(lo, 1)}, {fmt(hi, 1)}]" if lo is not None and hi is not None else "none"}
            for s, v, lo, hi in rows if v is not None]
    order = [d["system"] for d in data]
    base = alt.Chart(_points(alt, data))
    y = alt.Y("system:N", sort=order, title=None, axis=alt.Axis(labelLimit=220))
    tip = [alt.Tooltip("system:N"), alt.Tooltip("shown:N", title=x_title), alt.Tooltip("interval:N", title="interval")]
    x = alt.X("value:Q", title=x_title, scale=alt.Scale(zero=False))
    layers = [base.mark_point(filled=True, size=70, color=NEUTRAL[0]).encode(y=y, x=x, tooltip=tip)]
    if any(d["low"] is not None and d["high"] is not None for d in data):
        layers.insert(0, base.mark_rule(strokeWidth=1.6, color="#222").encode(
            y=y, x=alt.X("low:Q", title=x_title, scale=alt.Scale(zero=False)), x2="high:Q", tooltip=tip))
    if reference is not None:
        layers.append(alt.Chart(alt.Data(values=[{"ref": reference}])).mark_rule(strokeDash=[5, 4], color="#555")
                      .encode(x="ref:Q"))
    return alt.layer(*layers).properties(width="container", height=max(120, 26 * len(order)),
                                         description=description or x_title)


def forest(systems: Sequence[str], series: Sequence[Series], *, x_title: str, series_title: str = "group",
           colors: dict[str, str] | None = None, description: str = "") -> Any:
    """One row per system (in the order given), a dot with its interval for each series (e.g.
    each split), the series side by side within the row: who is ahead, and by how much more
    than the intervals allow. A `Point`'s category is the system it belongs to. The colour is
    the row's model (the page's `colors`), the series (groups) are told apart by shape."""
    alt = altair()
    rows = _rows(list(systems), series)
    names = [s.name for s in series if any(r["series"] == s.name for r in rows)]
    pick = _pick(alt)
    y = alt.Y("category:N", sort=list(systems), title=None, axis=alt.Axis(labelLimit=220))
    offset = {"yOffset": alt.YOffset("series:N", sort=names)} if len(names) > 1 else {}
    shown = [s for s in systems if any(r["category"] == s for r in rows)]
    color = _color(alt, shown, colors, "model", field="category:N", legend=False) if colors is not None else \
        alt.value(NEUTRAL[0])
    shape = _shape(alt, names, series_title)
    fade = alt.condition(pick, alt.value(1.0), alt.value(0.12))
    tip = _tooltip(alt, x_title, "model", series_title, "95% interval")
    base = alt.Chart(_points(alt, rows))
    layers = [base.mark_point(filled=True, size=60).encode(
        y=y, x=alt.X("value:Q", title=x_title, scale=alt.Scale(zero=False)), color=color, shape=shape, opacity=fade,
        tooltip=tip, **offset).add_params(pick)]
    if any(r["low"] is not None and r["high"] is not None for r in rows):
        layers.insert(0, base.mark_rule(strokeWidth=1.6).encode(
            y=y, x=alt.X("low:Q", title=x_title, scale=alt.Scale(zero=False)), x2="high:Q", color=color,
            opacity=fade, tooltip=tip, **offset))
    return alt.layer(*layers).properties(width="container", height=max(120, (14 + 8 * len(names)) * len(systems)),
                                         description=description or f"{x_title} per model")


def heatmap(rows: Sequence[str], columns: Sequence[str], values: Sequence[Sequence[float | None]], *,
            x_title: str, y_title: str, value_title: str, domain: tuple[float, float] | None = None,
            notes: Sequence[Sequence[str]] | None = None, percent: bool = False, description: str = "") -> Any:
    """A value per (row, column) as coloured cells with the number written in each (empty
    cells left out), e.g. score by needle depth x context length, or a pairwise win matrix."""
    alt = altair()
    data = []
    for i, r in enumerate(rows):
        for j, c in enumerate(columns):
            v = values[i][j]
            if v is None:
                continue
            shown = f"{100 * v:.0f}%" if percent else fmt(v)
            data.append({"row": r, "column": c, "value": v, "shown": shown, "note": notes[i][j] if notes else ""})
    lo, hi = domain if domain else (min(d["value"] for d in data), max(d["value"] for d in data)) if data else (0, 1)
    base = alt.Chart(_points(alt, data)).encode(
        x=alt.X("column:N", sort=list(columns), title=x_title, axis=alt.Axis(labelAngle=0, labelLimit=140)),
        y=alt.Y("row:N", sort=list(rows), title=y_title, axis=alt.Axis(labelLimit=200)))
    tip = [alt.Tooltip("row:N", title=y_title), alt.Tooltip("column:N", title=x_title),
           alt.Tooltip("shown:N", title=value_title), alt.Tooltip("note:N", title="n")]
    cells = base.mark_rect().encode(color=alt.Color("value:Q", title=value_title,
                                                    scale=alt.Scale(scheme="viridis", domain=[lo, hi])), tooltip=tip)
    mid = (lo + hi) / 2
    text = base.mark_text(fontSize=11).encode(
        text="shown:N", color=alt.condition(f"datum.value > {mid}", alt.value("#111"), alt.value("#fff")), tooltip=tip)
    return alt.layer(cells, text).properties(width="container", height=max(120, 30 * len(rows)),
                                             description=description or f"{value_title} by {y_title} and {x_title}")


def scatter(points: Sequence[tuple[float, float]], *, x_title: str, y_title: str, jitter: float = 0.0,
            diagonal: bool = True, seed: int = 0, description: str = "") -> Any:
    """One dot per pair (e.g. a judge's score against a person's), jittered by up to `jitter`
    (seeded, so the page is the same each time) so that equal pairs stay visible; the hover
    text gives the true values. `diagonal` draws y = x. Drag to pan, scroll to zoom."""
    alt = altair()
    rng = random.Random(seed)
    data = [{"x": x + (rng.uniform(-jitter, jitter) if jitter else 0.0),
             "y": y + (rng.uniform(-jitter, jitter) if jitter else 0.0), "true_x": fmt(x), "true_y": fmt(y)}
            for x, y in points]
    tip = [alt.Tooltip("true_x:N", title=x_title), alt.Tooltip("true_y:N", title=y_title)]
    dots = alt.Chart(_points(alt, data)).mark_circle(size=36, opacity=0.45, color=NEUTRAL[0]).encode(
        x=alt.X("x:Q", title=x_title, scale=alt.Scale(zero=False)),
        y=alt.Y("y:Q", title=y_title, scale=alt.Scale(zero=False)), tooltip=tip).interactive()
    layers = [dots]
    if diagonal and points:
        lo = min(min(x, y) for x, y in points)
        hi = max(max(x, y) for x, y in points)
        layers.insert(0, alt.Chart(alt.Data(values=[{"x": lo, "y": lo}, {"x": hi, "y": hi}])).mark_line(
            strokeDash=[4, 4], color="#888").encode(x="x:Q", y="y:Q"))
    return alt.layer(*layers).properties(width="container", height=HEIGHT + 40,
                                         description=description or f"{y_title} against {x_title}")
