"""What the engine lends a task type beyond its spec: the evaluated model's tokenizer (built
once for the whole run, only when asked), the target length of a `--context-lengths`
variant, and a place to say where the data came from (kept in the manifest)."""

from __future__ import annotations

import json
from pathlib import Path

from lceval import hookimpl
from lceval.engine import RunConfig, execute, load_catalog, plan_run
from lceval.engine import load_plugins
from lceval.engine import Cache
from lceval.interfaces import TaskContext, TaskType
from lceval.results import write_run
from lceval.types import CONTEXT_SLOT, Conversation, Turn

from tests.conftest import ScriptedModel

SPEC = """name: sized
description: contexts built to a length in the model's tokens
type: sized
report: {group_by: split}
"""


class SizedTaskType(TaskType):
    """Builds one context of `ctx.context_length` tokens of the model (or 12 words)."""

    options_schema = {"type": "object", "properties": {}}
    seen: list[tuple[int | None, int | None]] = []

    def load(self, ctx: TaskContext) -> list[Conversation]:
        tokenizer = ctx.model_tokenizer()
        target = ctx.context_length or 12
        words = " ".join(f"w{i}" for i in range(target))
        ids = tokenizer.tokenize(words) if tokenizer is not None else None
        SizedTaskType.seen.append((ctx.context_length, len(ids) if ids is not None else None))
        ctx.record_source({"dataset": "synthetic", "seed": ctx.seed, "length": target})
        return [Conversation(conv_id=f"c{target}", context=words, context_id=f"ctx{target}",
                             turns=[Turn(item_id=f"q{target}", user=f"{CONTEXT_SLOT}\n\nHow long?", reference="x",
                                         question="How long?")],
                             metadata={"split": "all"})]


def test_a_task_type_builds_to_the_models_tokens_and_the_model_loads_once(tmp_path: Path):
    built: list[ScriptedModel] = []

    class Plugin:
        @hookimpl
        def register_models(self, register):
            register("scripted", lambda name, options: built.append(ScriptedModel(window=4096)) or built[-1])

        @hookimpl
        def register_task_types(self, register):
            register("sized", SizedTaskType())

    spec = tmp_path / "sized.yaml"
    spec.write_text(SPEC)
    plugins = load_plugins(extra=[("sized", Plugin())])
    config = RunConfig(tasks=str(spec), models=["scripted:x"], progress=False, context_lengths=[16, 32])
    plan = plan_run(config, plugins, load_catalog(plugins))
    SizedTaskType.seen.clear()
    cache = Cache(tmp_path / "cache.sqlite")
    try:
        state = execute(plan, plan.models[0], plugins, cache, tmp_path / "data")
    finally:
        cache.close()
    assert SizedTaskType.seen == [(16, 16), (32, 32)]  # each variant's target, in the model's tokens
    assert len(built) == 1 and len(built[0].calls) == 2  # one model: lent its tokenizer, then answered
    run_dir, _ = write_run(state, plugins, tmp_path / "runs")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["data_sources"] == {"sized@16": [{"dataset": "synthetic", "seed": 0, "length": 16}],
                                        "sized@32": [{"dataset": "synthetic", "seed": 0, "length": 32}]}


def test_a_task_type_that_never_asks_gets_no_model_before_its_data(tmp_path: Path, tiny_home: Path):
    """The ELITR type never asks for the tokenizer: a missing dataset is reported before any
    model is built (nothing loaded for nothing)."""
    import pytest

    from lceval.errors import UserError

    built: list[ScriptedModel] = []

    class Plugin:
        @hookimpl
        def register_models(self, register):
            register("scripted", lambda name, options: built.append(ScriptedModel(window=4096)) or built[-1])

    plugins = load_plugins(extra=[("scripted", Plugin())])
    config = RunConfig(tasks="elitr_qa", models=["scripted:x"], progress=False)
    plan = plan_run(config, plugins, load_catalog(plugins))
    cache = Cache(tmp_path / "cache.sqlite")
    try:
        with pytest.raises(UserError, match="not found"):
            execute(plan, plan.models[0], plugins, cache, tmp_path / "empty-home")
    finally:
        cache.close()
    assert built == []
