"""The `documents_by_length` task type: a `documents` spec over one data file per length level, as
benchmarks that publish a file per length ship their data (Ada-LEval's `stackselect_{1k..128k}.json`,
BAMBOO's `{task}_{4k,16k}.jsonl`, LongIns' `{GIST,LIST}/{256..16384}.json`). Each length is a split
of the task (the spec's `splits`, chosen with `--split`), every sample carries its `length`, and
`options.take` keeps the first N rows of a length as the authors' scripts do."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_task_types(register):
    from .task import ByLengthTaskType

    register("documents_by_length", ByLengthTaskType())
