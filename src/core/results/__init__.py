"""Finished runs: reading run directories back, scoring samples into results, writing a run
directory, and joining shards (public API).

- `load_run(path) -> FinishedRun`: a run directory read back and checked against its
  schemas; every later stage (score, compare, report, rank, a report panel) starts here.
- `primary_score`, `detail_value`, `cluster_of`, `run_model_name`: what a sample scored (a
  censored answer, whose thinking was cut before it answered, at the bottom of the judge's
  scale; `uncensored_score` leaves it out, `is_censored` tells it), the unit its interval
  resamples, and how a table names a run's model.
- `score_task`: samples -> the results block of one task (groups, breakdowns, intervals,
  tests), driven by the spec's typed `report` section; `differs_from_paper(*tasks_blocks)`
  and `DIFFERS_MARK`: the tasks whose spec says their number is not the paper's measurement,
  which every table marks; `length_curves`: the variants of a
  `--context-lengths` sweep put back together as curves with the effective length.
- `run_and_write(session)` (`lceval run`: each model of an engine `Session`'s plan answered,
  scored and written), `write_run` and `rewrite_run` (a `RunState` from the session - a run, a
  re-judged or merged one - as a new run folder, or in place with metrics added),
  `console_text`, `format_table`: the run directory and the console table.
- `merge_runs` (`lceval merge`): the shards of one run joined into the run one machine writes,
  with `add_up` (shards' counters summed) and `first_difference` (where two manifests differ);
  `effective_length` (RULER's summary of a length curve, one definition for a sweep and for
  bins) and `effective_said` (it in the console's words).
- `length_bins`: the score per length bin of the tasks whose spec has `report.length_bins`
  (a metadata field, the context counted in the model's tokens, or one length per task),
  tasks joined into curves, with intervals and the effective length.
- `run_failures(state)` / `failures_of(samples) -> Failures`, `format_failures`: what could not be
  generated or judged, by kind, with each kind's first message and hint (what `lceval run` says on
  stderr at its end; `Failures.nothing_done`: the run measured nothing, its own exit code).
- `cost_summary(usage, judge_usage)`, `format_cost`, `usd`: what a run cost (paid by the command,
  read from the cache, through batches; per task), as the manifest, console, report and bundles say it.
"""

from lceval.results._bins import length_bins
from lceval.results._cost import cost_summary, format_cost, usd
from lceval.results._curves import effective_length, length_curves
from lceval.results._failures import Failures, failures_of, format_failures, run_failures
from lceval.results._merge import add_up, first_difference, merge_runs
from lceval.results._outputs import (RESULTS_SCHEMA_VERSION, UNCENSORED_LABEL, console_text, effective_said,
                                     format_table, rewrite_run, run_and_write, write_run)
from lceval.results._run_dir import SAMPLES_MAX_BYTES, load_run, run_model_name, sample_from_record
from lceval.results._scoring import (DIFFERS_MARK, UNCENSORED, cluster_of, detail_value, differs_from_paper,
                                     headline_block, is_censored, primary_score, score_task, uncensored_score)
from lceval.engine import FinishedRun

__all__ = [
    "DIFFERS_MARK", "RESULTS_SCHEMA_VERSION", "SAMPLES_MAX_BYTES", "UNCENSORED", "UNCENSORED_LABEL",
    "Failures", "FinishedRun", "add_up", "cluster_of", "failures_of", "format_failures", "run_failures",
    "console_text", "cost_summary", "detail_value", "differs_from_paper", "effective_length", "effective_said",
    "first_difference", "format_cost",
    "format_table", "headline_block", "is_censored", "length_bins", "length_curves", "load_run", "merge_runs", "primary_score",
    "rewrite_run", "run_and_write", "run_model_name", "sample_from_record", "score_task", "uncensored_score", "usd", "write_run",
]
