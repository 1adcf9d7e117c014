"""HELMET (Yen et al., 2025; princeton-nlp/HELMET): seven categories of long-context tasks at
input lengths from 8k to 128k tokens - synthetic recall, RAG, re-ranking, citation, long-document
QA, summarization and many-shot in-context learning. The `helmet` task type reads the authors'
files and Hub datasets as their data.py does (tasks/helmet/); the judges are their metrics:
`helmet_qa`, `helmet_rerank`, `helmet_alce` (with an NLI model for citations) and the GPT-4o
judges `helmet_longqa_gpt4` and `helmet_summ_gpt4`."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_task_types(register):
    from .task import HelmetTaskType

    register("helmet", HelmetTaskType())


@hookimpl
def register_judges(register):
    from .alce import HelmetAlceJudge
    from .gpt4 import HelmetLongQAJudge, HelmetSummJudge
    from .metrics import HelmetQAJudge, HelmetRerankJudge

    for cls in (HelmetQAJudge, HelmetRerankJudge, HelmetAlceJudge, HelmetLongQAJudge, HelmetSummJudge):
        register(cls.name, cls, options_schema=cls.OPTIONS)


@hookimpl
def register_commands(register):
    from .report import HelmetCommand

    register("helmet", HelmetCommand())
