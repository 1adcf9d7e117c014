"""A run of the engine over conversations a test hands it, through the public doors only.

Tests of the context policy, the scheduler and the judging pool used to call those private
modules directly. They now watch them do their work in a real run: a task type plugin
(`served`) gives the engine the test's conversations, a model scheme (`served:`) gives it the
test's backend (`served:judge` its judge model), two judges (`served`, `served_metric`) the
test's judges, and a `Session` answers them, with the context policy, the scheduler, the
request cache and the judging exactly as `lceval run` has them. What the test looks at is
what a user could: the requests the backend received, the samples (their `context_cut`,
their answers) and the usage counters.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from lceval import hookimpl
from lceval.engine import Plugins, RunConfig, RunState, Session, load_plugins
from lceval.interfaces import Judge, ModelBackend, TaskContext, TaskType
from lceval.types import Conversation

#: the spec of the served task; a test adds its `generation:`, `context:` or `judge:` sections
SPEC = "name: served\ndescription: conversations handed in by a test\ntype: served\n"


class _ServedTask(TaskType):
    options_schema: dict[str, Any] = {"type": "object", "properties": {}}

    def __init__(self) -> None:
        self.conversations: list[Conversation] = []

    def load(self, ctx: TaskContext) -> list[Conversation]:
        return list(self.conversations)


#: the judges a spec may name (`judge: {name: served}`, `metrics: [{name: served_metric}]`)
JUDGES = ("served", "served_metric")


class _ServedPlugin:
    """What the current test serves: its conversations, its backend, its judge model and its
    judges."""

    def __init__(self) -> None:
        self.task = _ServedTask()
        self.model: ModelBackend | None = None
        self.judge_model: ModelBackend | None = None
        self.judges: dict[str, Judge] = {}

    @hookimpl
    def register_task_types(self, register):
        register("served", self.task)

    @hookimpl
    def register_models(self, register):
        register("served", lambda name, options: self.judge_model if name == "judge" else self.model)

    @hookimpl
    def register_judges(self, register):
        for name in JUDGES:
            register(name, lambda ctx, name=name: self.judges[name])


_PLUGIN = _ServedPlugin()
_LOADED: list[Plugins] = []


def served_plugins() -> Plugins:
    """The installed plugins plus the served task type, model scheme and judges (loaded once)."""
    if not _LOADED:
        _LOADED.append(load_plugins(extra=[("served", _PLUGIN)]))
    return _LOADED[0]


def serve(model: ModelBackend, conversations: list[Conversation], folder: Path, *, spec: str = "",
          judges: dict[str, Judge] | None = None, judge_model: ModelBackend | None = None,
          cache: Path | None = None, **config: Any) -> RunState:
    """One run of `conversations` answered by `model`, judged by `judges` where the spec names
    them (`JUDGES`) with `judge_model` as the run's `--judge-model` when given, its request
    cache at `cache` (default: a fresh one in `folder`); returns the RunState (nothing
    written). Errors of the run propagate."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "served.yaml"
    path.write_text(SPEC + spec)
    _PLUGIN.model, _PLUGIN.judge_model, _PLUGIN.judges = model, judge_model, dict(judges or {})
    _PLUGIN.task.conversations = list(conversations)
    if judge_model is not None:
        config["judge_model"] = "served:judge"
    run_config = RunConfig(tasks=str(path), models=["served:x"], progress=False,
                           cache_path=cache or folder / f"cache-{uuid.uuid4().hex}.sqlite",
                           data_home=folder / "data", **config)
    with Session(run_config, served_plugins()) as session:
        (planned,) = session.plan().models
        return session.answer(planned)
