"""What the engine lends a task type beyond its spec: the evaluated model's tokenizer (built
once for the whole run, only when asked), the target length of a `--context-lengths`
variant, and a place to say where the data came from (kept in the manifest)."""

from __future__ import annotations

import json
from pathlib import Path

from lceval import hookimpl
from lceval.engine import RunConfig
from lceval.engine import load_plugins

from lceval.interfaces import TaskContext, TaskType
from lceval.results import write_run
from lceval.types import CONTEXT_SLOT, Conversation, Turn

from tests.conftest import ScriptedModel, session_answer

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
    SizedTaskType.seen.clear()
    state = session_answer(config, plugins, tmp_path / "cache.sqlite", tmp_path / "data")
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
    with pytest.raises(UserError, match="is not in the data home"):
        session_answer(config, plugins, tmp_path / "cache.sqlite", tmp_path / "empty-home")
    assert built == []


def test_an_unscored_turn_is_asked_and_kept_but_never_judged(tmp_path: Path):
    """A chain of thought: the reasoning turn is asked (its answer is in the history of the
    next turn and in samples.jsonl) but the judge sees only the answer turn."""
    from lceval.interfaces import Judge
    from lceval.types import JudgeInput, Judgment

    judged: list[str] = []

    class Recording(Judge):
        name = "recording"
        scale = (0.0, 1.0)

        def judge(self, items: list[JudgeInput]) -> list[Judgment]:
            judged.extend(i.item_id for i in items)
            return [Judgment(item_id=i.item_id, judge=self.name, score=1.0) for i in items]

    class TwoSteps(TaskType):
        options_schema = {"type": "object", "properties": {}}

        def load(self, ctx: TaskContext) -> list[Conversation]:
            turns = [Turn(item_id="q/reasoning", user=f"{CONTEXT_SLOT}\n\nThink.", reference="x", question="q",
                          metadata={"scored": False}),
                     Turn(item_id="q/answer", user="Answer.", reference="x", question="q")]
            return [Conversation(conv_id="q", context="a b c", context_id="doc", turns=turns,
                                 metadata={"split": "all"})]

    model = ScriptedModel(window=4096)

    class Plugin:
        @hookimpl
        def register_models(self, register):
            register("scripted", lambda name, options: model)

        @hookimpl
        def register_task_types(self, register):
            register("two_steps", TwoSteps())

        @hookimpl
        def register_judges(self, register):
            register("recording", lambda ctx: Recording())

    spec = tmp_path / "two.yaml"
    spec.write_text("name: two\ndescription: d\ntype: two_steps\njudge: {name: recording}\n")
    plugins = load_plugins(extra=[("two", Plugin())])
    state = session_answer(RunConfig(tasks=str(spec), models=["scripted:x"], progress=False), plugins, tmp_path / "cache.sqlite", tmp_path / "data")
    assert judged == ["q/answer"] and len(model.calls) == 2  # both asked, one judged
    assert [s.item_id for s in state.tasks[0].samples] == ["q/reasoning", "q/answer"]
    _, results = write_run(state, plugins, tmp_path / "runs")
    assert results["tasks"]["two"]["n_samples"] == 1 and results["tasks"]["two"]["metrics"]["score"]["n"] == 1
