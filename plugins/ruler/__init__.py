"""RULER's synthetic tasks (Hsieh et al., 2024; NVIDIA/RULER), generated offline at any length
in the evaluated model's own tokens: needle in a haystack (single, multi-key, multi-value,
multi-query), variable tracking, common- and frequent-words extraction. Task types
`ruler_niah`, `ruler_vt`, `ruler_cwe`, `ruler_fwe`, and question answering over SQuAD and
HotpotQA, `ruler_qa` (specs in tasks/ruler/, suite `ruler`), and
`lceval ruler report` for the score against length, the effective length and the depth x
length table."""

from __future__ import annotations

from lceval import hookimpl


@hookimpl
def register_task_types(register):
    from .task import TASK_TYPES

    for name, make in TASK_TYPES.items():
        register(name, make())


@hookimpl
def register_datasets(register):
    from .essays import ruler_essays
    from .qa import DATASETS

    register(ruler_essays())
    for dataset in DATASETS.values():
        register(dataset)


@hookimpl
def register_commands(register):
    from .commands import RulerCommand

    register("ruler", RulerCommand())
