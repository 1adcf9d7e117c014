"""The original needle in a haystack (Kamradt, 2023; gkamradt/LLMTest_NeedleInAHaystack): one
needle, one question, a grid of needle depths x context lengths in the evaluated model's own
tokens (`--context-lengths`), drawn by `lceval report` as a heatmap. Task type `niah`; specs
`niah` (string match) and `niah_rubric` (an LLM judge on the author's 1-10 rubric)."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_task_types(register):
    from .task import NiahTaskType

    register("niah", NiahTaskType())
