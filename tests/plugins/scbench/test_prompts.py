"""Every shipped SCBench spec, run through the engine on rows in the real schema, sends the
requests the authors' code sends: the full text of each request (ChatML chat template) equals
what their eval_utils.py `create_multiturn_prompt` (multi-turn, golden history) and
`create_scdq_prompt` (multi-request) build from the same rows, byte for byte - their
"This paper" continuation of summaries, Math.Find's list and its last-turn prefix, the first 5
turns of a longer session, `str(answer)` of a list in the history, the context and the query
of a multi-request joined with no separator."""

from __future__ import annotations

import pytest

from lceval.engine import RunConfig, load_catalog, load_plugins
from lceval.types import Message

from tests.conftest import ScriptedModel, execute_config, plugins_with_model, spec_notes

from .conftest import AUTHORS_PROMPTS, ROWS

CATALOG = load_catalog(load_plugins())
SPECS = sorted(n for n in CATALOG.specs if n.startswith("scbench_"))


class ContinuingModel(ScriptedModel):
    """The scripted model of the engine tests, as a local backend that continues a last
    assistant message (the authors append "This paper" after the assistant header)."""

    continues_assistant = True


def chatml(messages: list[Message]) -> str:
    """The text a ChatML chat template makes of the messages, as the authors' run renders them:
    a generation prompt after a user message, a last assistant message left open."""
    text = ""
    for i, m in enumerate(messages):
        text += f"<|im_start|>{m.role}\n{m.content}"
        if not (m.role == "assistant" and i == len(messages) - 1):
            text += "<|im_end|>\n"
    return text + ("<|im_start|>assistant\n" if messages[-1].role != "assistant" else "")


def test_every_task_in_both_modes_is_shipped_with_a_suite():
    tasks = {c.removeprefix("scbench_") for c in ROWS}
    assert set(SPECS) == {f"scbench_{t}" for t in tasks} | {f"scbench_{t}_multi_request" for t in tasks}
    assert len(SPECS) == 24
    assert set(CATALOG.suites["scbench"]) == {f"scbench_{t}" for t in tasks}
    assert set(CATALOG.suites["scbench_multi_request"]) == {f"scbench_{t}_multi_request" for t in tasks}
    for name in SPECS:
        spec = CATALOG.spec(name)
        assert spec.data["family"] == "scbench" and "Li et al." in spec.data["citation"]
        assert "fb56c917f618e8645f1cfc37535afd7424d78f0d" in spec_notes(spec)


@pytest.mark.parametrize("name", SPECS)
def test_each_request_is_the_authors_text(name, scbench_hub, tmp_path):
    model = ContinuingModel(window=100_000)
    config = RunConfig(tasks=name, models=["scripted:x"], progress=False)
    state = execute_config(config, plugins_with_model(model), tmp_path / "home")
    mode = "multi-request" if name.endswith("_multi_request") else "multi-turn"
    config_name = name.removesuffix("_multi_request")
    sent = {r.request_id: chatml(r.messages) for r in model.calls}
    expected = {}
    for row in ROWS[config_name]:
        for k, text in enumerate(AUTHORS_PROMPTS[f"{config_name}/{row['id']}/{mode}"]):
            expected[f"test/{row['id']}/{k}"] = text
    assert sent.keys() == expected.keys()  # the first 5 turns of each session (kv's first has 6)
    for item, text in expected.items():
        assert sent[item] == text, item
    (task,) = state.tasks
    assert all(s.judgments and s.judgments[0].score is not None for s in task.samples)
