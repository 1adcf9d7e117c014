"""L-Eval (An et al., 2024; OpenLMLab/LEval): closed-ended exam tasks and open-ended generation, as
`documents` specs (tasks/leval/). Its judges are the authors' scorers: `leval_exam`, `leval_rouge` and the
pairwise `leval_llm_judge`."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_judges(register):
    from .metric import LEvalExamJudge, LEvalRougeJudge, LEvalPairJudge

    register(LEvalExamJudge.name, LEvalExamJudge, options_schema=LEvalExamJudge.OPTIONS)
    register(LEvalRougeJudge.name, LEvalRougeJudge, options_schema=LEvalRougeJudge.OPTIONS)
    register(LEvalPairJudge.name, LEvalPairJudge, options_schema=LEvalPairJudge.OPTIONS)
