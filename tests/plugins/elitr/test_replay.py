"""The replay backend: recorded ELITR-Bench answers looked up by meeting and question."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from lceval.errors import UserError
from lceval.options import NO_OPTIONS as OPTIONS
from lceval.types import GenerationParams, GenerationRequest, Message
from lceval_plugins.elitr.replay import ReplayBackend, make_replay, register_models
from tests.paths import TEST_DATA

FIXTURE = TEST_DATA / "replay_small.json"


def request(meeting: str, qid: str, question: str | None, split: str | None = "dev",
            rid: str = "r") -> GenerationRequest:
    hints: dict[str, Any] = {"meeting_id": meeting, "question_id": qid}
    if question is not None:
        hints["question"] = question
    if split is not None:
        hints["split"] = split
    return GenerationRequest(request_id=rid, messages=[Message("user", "ignored")],
                             params=GenerationParams(), hints=hints)


def test_registers_scheme() -> None:
    got: dict[str, Any] = {}
    register_models(lambda name, factory, options_schema: got.__setitem__(name, (factory, options_schema)))
    assert got == {"replay": (make_replay, OPTIONS)}


def test_answers_with_recorded_response_and_scores() -> None:
    backend = make_replay(f"{FIXTURE}#ModelA", {})
    assert backend.context_window is None and backend.batch_size == 64
    assert backend.identity() == {"scheme": "replay", "file": "replay_small.json", "model": "ModelA", "version": 2}
    gens = backend.generate([
        request("meeting_fixture_001", "1", "Who chaired the planning call?", rid="a"),
        request("meeting_fixture_001", "2", "How many demo rooms were booked?", rid="b"),  # spaces differ
    ])
    assert [g.request_id for g in gens] == ["a", "b"]
    assert gens[0].text == "The call was chaired by PERSON2."
    assert (gens[0].prompt_tokens, gens[0].prefilled_tokens, gens[0].completion_tokens) == (0, 0, 0)
    assert gens[0].extras["recorded_scores"] == {"gpt-4-eval": 9.0, "prometheus-eval": 8.0,
                                                 "gold-human-eval": None}
    assert gens[1].extras["recorded_scores"] == {"gpt-4-eval": 10.0, "silver-human-eval": 7.4}
    assert gens[0].extras["replay_file_sha256"] == hashlib.sha256(FIXTURE.read_bytes()).hexdigest()


def test_question_id_may_be_an_int_and_question_hint_optional() -> None:
    backend = make_replay(f"{FIXTURE}#ModelB", {})
    [gen] = backend.generate([request("meeting_fixture_001", 2, None)])  # type: ignore[arg-type]
    assert gen.text == "Two."


def test_split_placeholder_picks_file_per_request(tmp_path: Path, monkeypatch) -> None:
    shutil.copy(FIXTURE, tmp_path / "small_dev.json")
    data = json.loads(FIXTURE.read_text())
    data["split"] = "test2"
    data["meetings"][0]["questions"][0]["generated-responses"][0]["generated-response"] = "Test answer."
    (tmp_path / "small_test2.json").write_text(json.dumps(data))
    monkeypatch.chdir(tmp_path)
    backend = make_replay("small_{split}.json#ModelA", {})  # relative: resolved against cwd
    q = "Who chaired the planning call?"
    dev, test2 = backend.generate([request("meeting_fixture_001", "1", q, "dev"),
                                   request("meeting_fixture_001", "1", q, "test2")])
    assert (dev.text, test2.text) == ("The call was chaired by PERSON2.", "Test answer.")
    assert dev.extras["replay_file_sha256"] != test2.extras["replay_file_sha256"]
    assert backend.identity()["file"] == "small_{split}.json"
    with pytest.raises(UserError, match="needs the request's split"):
        backend.generate([request("meeting_fixture_001", "1", q, None)])


def test_relative_file_falls_back_to_data_home(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "home"
    (home / "elitr-bench" / "generated-responses").mkdir(parents=True)
    shutil.copy(FIXTURE, home / "elitr-bench" / "generated-responses" / "x_dev.json")
    monkeypatch.setenv("LCEVAL_DATA", str(home))
    monkeypatch.chdir(tmp_path)
    backend = make_replay("generated-responses/x_{split}.json#ModelA", {})
    [gen] = backend.generate([request("meeting_fixture_002", "1", "When is the next release due?")])
    assert gen.text == "By the end of the month."


def test_split_mismatch_without_placeholder() -> None:
    backend = make_replay(f"{FIXTURE}#ModelA", {})
    with pytest.raises(UserError, match="split 'test2'.*split 'dev'"):
        backend.generate([request("meeting_fixture_001", "1", "Who chaired the planning call?", "test2")])


def test_wrong_question_set_names_everything() -> None:
    backend = make_replay(f"{FIXTURE}#ModelA", {})
    with pytest.raises(UserError) as err:
        backend.generate([request("meeting_fixture_001", "1", "Who chaired it?")])
    text = str(err.value)
    for part in ("replay_small.json", "meeting_fixture_001", "question 1", "Who chaired it?",
                 "Who chaired the planning call?"):
        assert part in text


@pytest.mark.parametrize("model, pattern", [
    ("{fixture}", "does not name a model.*ModelA, ModelB"),
    ("{fixture}#", "does not name a model.*ModelA, ModelB"),
    ("{fixture}#GPT-5", "'GPT-5' has no responses.*Models in it: ModelA, ModelB"),
    ("missing/nowhere.json#ModelA", "not found: missing/nowhere.json"),
])
def test_bad_model_strings(model: str, pattern: str) -> None:
    with pytest.raises(UserError, match=pattern):
        make_replay(model.format(fixture=FIXTURE), {})


def test_unknown_question_missing_response_and_missing_hints() -> None:
    backend = make_replay(f"{FIXTURE}#ModelB", {})
    with pytest.raises(UserError, match="no recorded question 9 of meeting meeting_fixture_001"):
        backend.generate([request("meeting_fixture_001", "9", None)])
    with pytest.raises(UserError, match="'ModelB' has no response to question 1 of meeting meeting_fixture_002"):
        backend.generate([request("meeting_fixture_002", "1", None)])
    bare = GenerationRequest(request_id="x", messages=[], params=GenerationParams(), hints={})
    with pytest.raises(UserError, match="meeting_id, question_id"):
        backend.generate([bare])


def test_options_rejected() -> None:
    with pytest.raises(UserError, match="has no option 'temperature'.*It takes no options"):
        make_replay(f"{FIXTURE}#ModelA", {"temperature": "0"})


@pytest.mark.parametrize("content, pattern", [
    ("{not json", "not valid JSON"),
    ('{"split": "dev"}', "not an ELITR-Bench generated-responses file"),
    ('{"meetings": [{"id": "m", "questions": [{"id": "1"}]}]}', "lacks 'question'"),
])
def test_malformed_files(tmp_path: Path, content: str, pattern: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(UserError, match=pattern) as err:
        ReplayBackend(f"{path}#ModelA", {})
    assert "bad.json" in str(err.value)


def test_replay_finds_files_in_the_data_home_given_with_the_flag(real_home, tmp_path, monkeypatch):
    """`--data-home` is the data home of plugins too: the relative replay file is found there."""
    from tests import cli as commands

    monkeypatch.setenv("LCEVAL_DATA", str(tmp_path / "elsewhere"))
    (run_dir, _), = commands.run(
        tasks="elitr_qa", models=["replay:generated-responses/elitr-bench-qa_{split}_st_gpt-4-eval.json#GPT-4"],
        judge="gpt4-recorded", splits=["dev"], limit=2, output=tmp_path / "runs", data_home=real_home,
        progress=False)
    assert (run_dir / "results.json").is_file()
    import os

    assert os.environ["LCEVAL_DATA"] == str(tmp_path / "elsewhere")  # restored after the run
