"""LIBRA (Churin et al., 2024; ai-forever/LIBRA, data ai-forever/LIBRA): 21 Russian long-context
tasks at context lengths of 4k to 128k tokens, as `documents` specs. The `libra` judge is the
authors' eval.py: the best score over the positive answers (substring match, passage count or
token F1), less a share for each negative answer the model wrote."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_judges(register):
    from .metric import LibraJudge

    register(LibraJudge.name, LibraJudge, options_schema=LibraJudge.OPTIONS)
