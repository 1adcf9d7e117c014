"""OpenAI MRCR (OpenAI, 2025; Hugging Face dataset `openai/mrcr`): multi-round co-reference
resolution in a long synthetic chat. The `mrcr` task type is the `documents` type (each row's
chat sent as its own messages, `fields.messages`) with the row's length bin in o200k tokens, as
the dataset card bins its results; the `mrcr` judge is the card's grader (the random prefix,
then difflib's ratio)."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_task_types(register):
    from .task import MrcrTaskType

    register("mrcr", MrcrTaskType())


@hookimpl
def register_judges(register):
    from .metric import MrcrJudge

    register(MrcrJudge.name, MrcrJudge, options_schema=MrcrJudge.OPTIONS)
