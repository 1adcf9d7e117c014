"""LongMemEval (Wu et al., 2025): long-term memory of a chat assistant. The tasks are `documents`
specs (tasks/longmemeval/); this plugin adds the `longmemeval` judge, the authors' per-type
yes/no prompts of src/evaluation/evaluate_qa.py (xiaowu0162/LongMemEval, commit 9e0b455)."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_judges(register):
    from .judge import OPTIONS, make_judge

    register("longmemeval", make_judge, options_schema=OPTIONS)
