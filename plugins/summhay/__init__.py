"""SummHay plugin (Laban et al., 2024, Summary of a Haystack): the `summhay` task type, its spec
folder and the `summhay` dataset (schema-checked files, no pinned checksums)."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_task_types(register):
    from .task import SummhayTaskType

    register("summhay", SummhayTaskType())


@hookimpl
def register_datasets(register):
    from .dataset import summhay_dataset

    register(summhay_dataset())


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


@hookimpl
def register_report_panels(register):
    def summhay(ctx):  # imported when a report is drawn, not whenever plugins load
        from .report_panels import summhay_panels

        return summhay_panels(ctx)

    register("summhay", summhay)
