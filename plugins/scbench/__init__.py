"""SCBench (Li et al., 2025): shared-context multi-turn tasks. The tasks are `documents` specs
(tasks/scbench/); this plugin adds the `scbench` metric, each task scored as the authors'
scbench/compute_scores.py scores it (microsoft/MInference, commit fb56c91)."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_judges(register):
    from .metrics import ScbenchJudge

    register(ScbenchJudge.name, ScbenchJudge, options_schema=ScbenchJudge.OPTIONS)
