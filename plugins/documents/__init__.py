"""The `documents` task type: any long-document benchmark (documents and questions over
them, from local files or a Hugging Face Hub dataset) defined by one YAML spec, no Python."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_task_types(register):
    from .task import DocumentsTaskType

    register("documents", DocumentsTaskType())
