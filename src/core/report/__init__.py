"""What `lceval report` writes (public API): the papers' tables over several runs, and the
self-contained HTML report with its figures.

- `paper_tables` (markdown, csv, latex) over `load_inputs` (run directories and recorded
  score files), with `parse_where` / `rescored` for subsets and further breakdowns.
- `write_report` / `build_report`: the HTML page.
- For report panels (`register_report_panels`): `figure` wraps a plot into a
  `lceval.interfaces.ReportFigure`, `metric_point` turns a results block into a plotted
  point with its interval, and `svgplot` draws the plots (`Series`, `Point`,
  `category_chart`, `interval_rows`, `scatter`, `heatmap`).
"""

from lceval.report import _svgplot as svgplot
from lceval.report._figures import figure, metric_point
from lceval.report._html import ReportInputs, build_report, interval_cell, page, write_report
from lceval.report._inputs import ReportRun, load_inputs, parse_where, rescored
from lceval.report._svgplot import Point, Series
from lceval.report._tables import paper_tables

__all__ = [
    "Point", "ReportInputs", "ReportRun", "Series", "build_report", "figure", "interval_cell", "load_inputs",
    "metric_point", "page", "paper_tables", "parse_where", "rescored", "svgplot", "write_report",
]
