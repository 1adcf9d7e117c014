"""CLongEval (Qiu et al., 2024; zexuanqiu/CLongEval, data zexuanqiu22/CLongEval): seven Chinese
long-context tasks at three sizes (about 1k-16k, 16k-50k and 50k-100k tokens), as `documents`
specs. The `clongeval` judge is the authors' metrics.py: jieba-word F1 and ROUGE-L, the stacked
tasks' pattern parsers and set overlaps, character edit similarity, substring match."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_judges(register):
    from .metric import CLongEvalJudge

    register(CLongEvalJudge.name, CLongEvalJudge, options_schema=CLongEvalJudge.OPTIONS)
