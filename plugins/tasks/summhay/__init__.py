"""SummHay plugin (paper 002, Summary of a Haystack): the `summhay` task type, its spec
folder and, when the engine can install schema-checked files, the `summhay` dataset."""

from __future__ import annotations


from lceval import hookimpl


@hookimpl
def register_task_types(register):
    from .task import SummhayTaskType

    register("summhay", SummhayTaskType())


@hookimpl
def register_datasets(register):
    from .dataset import summhay_dataset

    dataset = summhay_dataset()
    if dataset is not None:
        register(dataset)


@hookimpl
def register_models(register):
    from .annotated import register as register_backend

    register_backend(register)


@hookimpl
def register_commands(register):
    from .commands import SummhayCommand

    register("summhay", SummhayCommand())


@hookimpl
def register_score_sources(register):
    from .annotations import read_annotated

    register("summhay-annotations", read_annotated)
