"""RULER's answer prefix goes where its authors put it (issue 31): after the chat template's
assistant header, as the start of the assistant's message that the model continues. A backend
that cannot continue one gets it at the end of the question, and every sample says which."""

from __future__ import annotations

from pathlib import Path

from lceval.engine import RunConfig
from tests.conftest import ScriptedModel, execute_config, plugins_with_model


class Continuing(ScriptedModel):
    continues_assistant = True


def run(model: ScriptedModel, tmp_path: Path, place: str | None = None):
    overrides = {"options.answer_prefix": place} if place else {}
    config = RunConfig(tasks="ruler_niah_single_1", models=["scripted:x"], limit=2, progress=False,
                       cache_path=tmp_path / "c.sqlite", overrides={"options.length": 512, **overrides})
    state = execute_config(config, plugins_with_model(model), tmp_path)
    return [s for t in state.tasks for s in t.samples]


def test_a_backend_that_continues_gets_the_prefix_as_the_assistants_start(tmp_path: Path) -> None:
    model = Continuing(window=4096)
    samples = run(model, tmp_path)
    last = model.calls[0].messages
    assert last[-1].role == "assistant" and "mentioned in the provided text" in last[-1].content
    assert "mentioned in the provided text is" not in last[-2].content
    assert all(s.metadata["answer_prefix_in"] == "assistant" for s in samples)


def test_a_backend_that_cannot_gets_it_in_the_question_and_says_so(tmp_path: Path) -> None:
    model = ScriptedModel(window=4096)
    samples = run(model, tmp_path)
    last = model.calls[0].messages
    assert last[-1].role == "user" and last[-1].content.rstrip().endswith("mentioned in the provided text is")
    assert all(s.metadata["answer_prefix_in"] == "user" for s in samples)


def test_the_user_placement_is_an_option(tmp_path: Path) -> None:
    model = Continuing(window=4096)
    samples = run(model, tmp_path, place="user")
    assert model.calls[0].messages[-1].role == "user"
    assert all("answer_prefix_in" not in s.metadata for s in samples)
