"""LongIns (Gavin et al., 2024; Ins-Bench/LongIns-Bench): an exam of many answered questions of one
Super-NaturalInstructions task, some answered wrongly; the model must name the wrong ones. GIST
gives the task's instruction once, LIST repeats it inside every question; both at 256 to 16,384
tokens. The specs (tasks/longins/) are `documents_by_length` specs; this plugin holds the authors'
scoring (`longins`: the numbers inside brackets, set F1 against the wrong answers) and the
`longins` dataset (`lceval data fetch longins --from` converts the authors' files)."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_judges(register):
    from .metric import LongInsJudge

    register(LongInsJudge.name, LongInsJudge, options_schema=LongInsJudge.OPTIONS)


@hookimpl
def register_datasets(register):
    from .dataset import longins_dataset

    register(longins_dataset())
