"""ELITR-Bench plugin: the `elitr` task type and the `elitr-bench` dataset."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_task_types(register):
    from .task import ElitrTaskType

    register("elitr", ElitrTaskType())


@hookimpl
def register_datasets(register):
    from .dataset import ELITR_BENCH

    register(ELITR_BENCH)
