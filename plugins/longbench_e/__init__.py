"""LongBench-E (Bai et al., 2024; THUDM/LongBench, `eval.py --e`): thirteen of LongBench's
English tasks resampled so that their rows spread evenly over lengths, scored per length bin.
The `longbench_e` task type is the `documents` type with each row's bin of its `length` field
(words, as the data count them): `scorer_e`'s "0-4k" (< 4000), "4-8k" (< 8000) and "8k+"."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_task_types(register):
    from .task import LongBenchETaskType

    register("longbench_e", LongBenchETaskType())
