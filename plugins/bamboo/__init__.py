"""BAMBOO (Dong et al., 2024; RUCAIBox/BAMBOO): ten long-text tasks at 4k and 16k tokens - multiple-choice
QA over meetings and papers, numeric QA over altered Wikipedia pages, hallucination detection in
papers, predicting the next speaker, reordering shuffled paragraphs or events, and completing code
against a paraphrased private library. The specs (tasks/bamboo/) are `documents_by_length` specs;
this plugin holds the authors' metrics (`bamboo_qa`, `bamboo_exact`, `bamboo_hallucination`,
`bamboo_concordance`), the code task's execution of the authors' checks in a limited subprocess
(`bamboo_code`), and the `bamboo` dataset (`lceval data fetch bamboo --from` a checkout of the
authors' repository)."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_judges(register):
    from .code import CodeJudge
    from .metric import ConcordanceJudge, ExactJudge, HallucinationJudge, QAJudge

    for judge in (QAJudge, ExactJudge, HallucinationJudge, ConcordanceJudge, CodeJudge):
        register(judge.name, judge, options_schema=judge.OPTIONS)


@hookimpl
def register_datasets(register):
    from .dataset import bamboo_dataset

    register(bamboo_dataset())
