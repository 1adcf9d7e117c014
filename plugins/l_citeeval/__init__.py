"""L-CiteEval (Tang et al., 2024; ZetangForward/L-CITEEVAL, data Jonaszky123/L-CiteEval): long-context
tasks answered from numbered passages with citations - single- and multi-document QA,
summarization, dialogue, a needle and Counting-Stars - scored for the answer and for whether its
citations support it. The `l_citeeval` task type asks each task as the authors' one-shot script
does; `l_citeeval_citation` is their citation recall/precision (an NLI model, named by the judge
option `nli_model`, judges entailment), `l_citeeval_answer` their answer metrics; the
`l_citeeval` dataset copies their prompt files into the data home."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_task_types(register):
    from .task import L_CiteEvalTaskType

    register("l_citeeval", L_CiteEvalTaskType())


@hookimpl
def register_judges(register):
    from .answer import AnswerJudge
    from .citation import CitationJudge

    for judge in (CitationJudge, AnswerJudge):
        register(judge.name, judge, options_schema=judge.OPTIONS)


@hookimpl
def register_datasets(register):
    from .dataset import l_citeeval_dataset

    register(l_citeeval_dataset())
