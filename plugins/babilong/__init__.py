"""BABILong (Kuratov et al., 2024; booydar/babilong, data RMT-team/babilong and
RMT-team/babilong-1k-samples): bAbI's twenty reasoning tasks hidden in PG-19 text of 0 to 1M
tokens. The `babilong` task type reads one task's rows at each length (a length is a split) and
asks them with the authors' prompt; the `babilong` judge is the authors' `compare_answers`."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_task_types(register):
    from .task import BabilongTaskType

    register("babilong", BabilongTaskType())


@hookimpl
def register_judges(register):
    from .metric import BabilongJudge

    register(BabilongJudge.name, BabilongJudge, options_schema=BabilongJudge.OPTIONS)
