"""CREAM plugin: the `cream` task type (meeting summaries of ELITR transcripts, Gong et al., 2024).

The summaries it generates are ranked by `lceval rank` with a pairwise judge (the `cream`
judge) and checked against the human minutes with a reference judge (`keyfacts`,
`keyfacts-lexical`)."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_task_types(register):
    from .task import CreamTaskType

    register("cream", CreamTaskType())
