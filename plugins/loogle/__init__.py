"""LooGLE (Li et al., 2024; bigai-nlco/LooGLE): short and long dependency questions over documents
newer than the models, as `documents` specs (tasks/loogle/). Its judges are the authors' scorers: the
n-gram metrics, the cloze score and the GPT-4 judge."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_judges(register):
    from .metric import LooGLEJudge, LooGLEClozeJudge, LooGLEGPT4Judge

    register(LooGLEJudge.name, LooGLEJudge, options_schema=LooGLEJudge.OPTIONS)
    register(LooGLEClozeJudge.name, LooGLEClozeJudge, options_schema=LooGLEClozeJudge.OPTIONS)
    register(LooGLEGPT4Judge.name, LooGLEGPT4Judge, options_schema=LooGLEGPT4Judge.OPTIONS)
