"""What `lceval report` writes (public API): the papers' tables over several runs, and the
self-contained HTML report with its charts.

- `paper_tables` (markdown, csv, latex) over `load_inputs` (run directories and recorded
  score files), with `parse_where` / `rescored` for subsets and further breakdowns.
- `write_report` / `build_report`: the HTML page; `page` and `interval_cell` for pages built
  around it (the leaderboard).
- For report panels (`register_report_panels`): `charts` builds Vega-Lite charts with
  altair from plain values (`Series` of `Point`s with their intervals): `charts.intervals`
  (grouped bars, dots or a line with its band), `charts.heatmap`, `charts.scatter`,
  `charts.ranked_intervals`, `charts.palette` (a model's colour across the page);
  `metric_point` turns a results.json block into a `Point`, and `figure(chart, title,
  caption, section)` wraps a chart (or a Vega-Lite dict) into a `ReportFigure`. altair is
  the `report` extra and is imported only when a chart is built.
"""

from lceval.report import _charts as charts
from lceval.report._charts import Point, Series, palette
from lceval.report._figures import figure, metric_point
from lceval.report._html import ReportInputs, build_report, page, write_report
from lceval.report._inputs import ReportRun, load_inputs, parse_where, rescored
from lceval.report._overview import interval_cell
from lceval.report._tables import paper_tables

__all__ = [
    "Point", "ReportInputs", "ReportRun", "Series", "build_report", "charts", "figure", "interval_cell", "load_inputs",
    "metric_point", "page", "palette", "paper_tables", "parse_where", "rescored", "write_report",
]
