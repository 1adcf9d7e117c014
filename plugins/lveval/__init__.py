"""LV-Eval (Yuan et al., 2024; infinigence/LVEval): 11 datasets at five length levels, 16k to 256k, as
`documents` specs (tasks/lveval/). The `lveval` judge is the authors' metrics.py: keyword-gated token F1
and the blacklisted Chinese ROUGE-L."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_judges(register):
    from .metric import LVEvalJudge

    register(LVEvalJudge.name, LVEvalJudge, options_schema=LVEvalJudge.OPTIONS)
