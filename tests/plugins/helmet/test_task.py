"""The helmet task type end to end: a shipped spec run through the engine over our rows, the
authors' end-of-context cut in the model's tokens, and bad input refused with exit 2 naming the
spec, the field and the value."""

from __future__ import annotations

import copy
import json
import shutil

import pytest

import yaml

from lceval.types import CONTEXT_SLOT, Conversation, Generation, Message, Turn

from lceval_plugins.helmet.task import fit

from tests.cli import call
from tests.conftest import ScriptedModel, run_engine

from .helpers import CATALOG, HOME, load


class Answering(ScriptedModel):
    """Answers by the question the prompt ends with."""

    def __init__(self, answers: dict[str, str], window: int | None = None) -> None:
        super().__init__(window=window)
        self.answers = answers

    def generate(self, requests):
        out = []
        for r in requests:
            self.calls.append(r)
            text = next((a for k, a in self.answers.items() if r.messages[-1].content.endswith(k)), "Answer: none")
            out.append(Generation(request_id=r.request_id, text=text, prompt_tokens=10, prefilled_tokens=10,
                                  completion_tokens=3))
        return out


def test_a_rag_spec_runs_and_reports_by_length_and_depth(tmp_path):
    model = Answering({"who wrote the harbor song": "Answer: Ana Ruiz\nQuestion: next",
                       "when did the ferry start": " It began in 1921.",
                       "what is the capital of nowhere": "Answer: Atlantis"}, window=65536)
    _, results, state = run_engine(model, "helmet_nq", HOME, tmp_path, splits=["8k"])
    (task,) = state.tasks
    assert len(task.samples) == 6 and all(len(r.messages) == 1 and r.messages[0].role == "user" for r in model.calls)
    assert all(r.params.max_new_tokens == 20 and r.params.temperature == 0.0 for r in model.calls)
    block = results["tasks"]["helmet_nq"]["metrics"]["score"]
    assert abs(block["value"] - 100 * 4 / 6) < 1e-9
    assert set(block["breakdowns"]["depth"]) == {"0.0", "0.6"}


def conv(cid: str, words: int, question: str) -> Conversation:
    context = " ".join(f"c{i}" for i in range(words))
    turn = Turn(item_id=f"8k/{question}", user=f"Read {CONTEXT_SLOT} and answer {question}", reference="x",
                question=question, metadata={})
    return Conversation(conv_id=turn.item_id, context=context, context_id=cid, turns=[turn])


def test_the_cut_keeps_the_contexts_start_and_shares_the_smallest_cut():
    model = ScriptedModel()  # words as tokens; a message costs 3 more, a prompt 2 more
    one, two, alone = conv("doc", 100, "q"), conv("doc", 100, "a much longer question"), conv("other", 10, "q")
    fit([one, two, alone], model, length=60, max_new_tokens=10)  # the prompt may have 50 tokens
    assert one.context == two.context == " ".join(f"c{i}" for i in range(38))  # 50 - 12 for the longer question
    assert one.turns[0].metadata["helmet_cut"] == {"original_tokens": 100, "kept_tokens": 38}
    assert alone.context.split() == [f"c{i}" for i in range(10)] and "helmet_cut" not in alone.turns[0].metadata


def test_a_window_below_the_length_is_left_to_the_engine_to_skip():
    model = ScriptedModel(window=40)
    long = conv("doc", 100, "q")
    fit([long], model, length=60, max_new_tokens=10)
    assert len(long.context.split()) == 100


def test_a_window_of_exactly_the_length_keeps_lcevals_margin():
    model = ScriptedModel(window=60)
    long = conv("doc", 100, "q")
    fit([long], model, length=60, max_new_tokens=10)
    assert model.count_tokens([Message("user", long.turns[0].user.replace(CONTEXT_SLOT, long.context))]) <= 60 - 10 - 8


def test_limit_takes_the_first_drawn_rows_of_each_length():
    convs = load("helmet_json_kv", ["8k"], limit=2)
    assert len(convs) == 2


def bad_spec(tmp_path, change) -> str:
    data = copy.deepcopy(CATALOG.spec("helmet_json_kv").data)
    change(data)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_bad_input_exits_2_naming_the_field(tmp_path, monkeypatch):
    shutil.copytree(HOME, tmp_path / "home")
    monkeypatch.setenv("LCEVAL_DATA", str(tmp_path / "home"))
    cases = [
        (lambda d: d["options"].update(loader="nope"), "options.loader"),
        (lambda d: d["options"].update(user_template="{context} {question.__class__}"), "options.user_template"),
        (lambda d: d["options"].update(user_template="{context} {nothing}"), "nothing"),
        (lambda d: d["options"]["lengths"].update({"1k": 5}), "options.lengths"),
        (lambda d: d["options"].update(style="plain"), "options.style"),
    ]
    for i, (change, needle) in enumerate(cases):
        folder = tmp_path / str(i)
        folder.mkdir()
        code, out, err = call("validate", bad_spec(folder, change))
        said = out + err
        assert code == 2 and needle in said and "bad.yaml" in said, (needle, said)


def test_the_category_report_averages_as_collect_results(tmp_path):
    model = Answering({"who wrote the harbor song": "Answer: Ana Ruiz"}, window=65536)
    run_dir, _, _ = run_engine(model, "helmet_nq,helmet_json_kv", HOME, tmp_path, splits=["8k"])
    code, out, err = call("helmet", "report", str(run_dir), "--format", "json")
    assert code == 0, err
    (row,) = json.loads(out)
    nq = 100 * 2 / 6  # question 0 right at both depths
    assert row["length"] == "8k" and row["RAG"] == pytest.approx(nq) and row["RAG_n"] == "1/4"
    assert row["Recall"] == pytest.approx(0.0) and row["Cite"] is None
    assert row["Average"] == pytest.approx(nq / 2) and row["categories"] == 2
    code, out, _ = call("helmet", "report", str(run_dir))
    assert code == 0 and "RAG" in out and "(1/4)" in out
    code, _, err = call("helmet", "report", str(tmp_path / "nothing"))
    assert code == 2 and "results.json" in err
