"""Finished runs: reading run directories back, scoring samples into results, writing a run
directory, and the commands that make new runs from old ones (public API).

- `load_run(path) -> FinishedRun`: a run directory read back and checked against its
  schemas; every later stage (score, compare, report, rank, a report panel) starts here.
- `primary_score`, `cluster_of`, `model_name`, `run_model_name`: what a sample scored, the
  unit its interval resamples, and how a table names a run's model.
- `score_task`: samples -> the results block of one task (groups, breakdowns, intervals,
  tests), driven by the spec's `report:` section; `length_curves`: the variants of a
  `--context-lengths` sweep put back together as curves with the effective length.
- `write_run`, `console_text`, `format_table`: the run directory and the console table.
- `rescore_run` (`lceval score`) and `merge_runs` (`lceval merge`).
"""

from lceval.results._curves import length_curves
from lceval.results._merge import merge_runs
from lceval.results._outputs import RESULTS_SCHEMA_VERSION, console_text, format_table, write_run
from lceval.results._rescore import config_of, rejudge_samples, rescore_run, spec_of
from lceval.results._run_dir import SAMPLES_MAX_BYTES, load_run, model_name, run_model_name, sample_from_record
from lceval.results._scoring import cluster_of, detail_value, headline_block, primary_score, score_task
from lceval.types import FinishedRun

__all__ = [
    "RESULTS_SCHEMA_VERSION", "SAMPLES_MAX_BYTES", "FinishedRun", "cluster_of", "config_of", "console_text",
    "detail_value", "format_table", "headline_block", "length_curves", "load_run", "merge_runs", "model_name", "primary_score", "rejudge_samples",
    "rescore_run", "run_model_name", "sample_from_record", "score_task", "spec_of", "write_run",
]
