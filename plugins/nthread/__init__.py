"""Needle Threading (Roberts et al., 2024; "NThread" in LOOM-Scope): retrieval and thread
following through haystacks of UUID key-value pairs (Hugging Face `jonathan-roberts1/needle-threading`).
The tasks are `documents` specs (tasks/nthread/); this plugin is their metric, the authors'
README rule (`needle_threading` judge)."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_judges(register):
    from .metric import NeedleThreadingJudge

    register(NeedleThreadingJudge.name, NeedleThreadingJudge, options_schema=NeedleThreadingJudge.OPTIONS)
