"""LongSafety (Lu et al., 2025): long-context safety of open-ended generation. The `longsafety`
task type asks each instance's harmful instruction before and after its long context
(thu-coai/LongSafety's gen_model_response.py); the `longsafety` judge is the authors' multi-agent
LLM judge (multi_agent_eval.py) and safety rates (show_result.py)."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_task_types(register):
    from .task import LongSafetyTaskType

    register("longsafety", LongSafetyTaskType())


@hookimpl
def register_judges(register):
    from .judge import OPTIONS, make_judge

    register("longsafety", make_judge, options_schema=OPTIONS)
