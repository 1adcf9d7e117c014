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
- How the page names and orders things, for a page or panel built to match it: `run_labels`
  (a row label per run), `row_labels`, `seeds_text`, `numeric_order` (bucket names in
  numeric order), `from_run_dir` (a run folder as the tables read it).
"""

from lceval.report import _charts as charts
from lceval.report._charts import Point, Series, numeric_order, palette
from lceval.report._figures import figure, metric_point
from lceval.report._html import ReportInputs, build_report, page, run_labels, write_report
from lceval.report._inputs import ReportRun, from_run_dir, load_inputs, parse_where, rescored
from lceval.report._overview import interval_cell, seeds_text
from lceval.report._tables import paper_tables, row_labels

__all__ = [
    "Point", "ReportInputs", "ReportRun", "Series", "build_report", "charts", "figure", "from_run_dir", "interval_cell",
    "load_inputs", "metric_point", "numeric_order", "page", "palette", "paper_tables", "parse_where", "rescored",
    "row_labels", "run_labels", "seeds_text", "write_report",
]
