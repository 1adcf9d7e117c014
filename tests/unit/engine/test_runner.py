"""The flow of a run on a scripted model: scheduling, history, caching and resume."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.conftest import ScriptedModel, run_engine


def test_single_turn_groups_questions_of_a_meeting_back_to_back(tiny_home, tmp_path):
    model = ScriptedModel()
    run_engine(model, "elitr_qa", tiny_home, tmp_path)
    meetings = [r.hints["meeting_id"] for r in model.calls]
    assert len(model.calls) == 7
    # each meeting's questions are consecutive: the transcript prefix is shared back to back
    changes = sum(1 for a, b in zip(meetings, meetings[1:]) if a != b)
    assert changes == 2
    first = model.calls[0].messages
    assert len(first) == 1 and first[0].role == "user"
    assert first[0].content.endswith("\n\nWho opened the meeting?")
    assert "(PERSON1) Hello everyone" in first[0].content


def test_multi_turn_keeps_order_and_model_history(tiny_home, tmp_path):
    model = ScriptedModel()
    run_engine(model, "elitr_qa_mt", tiny_home, tmp_path, splits=["dev"])
    calls = [r for r in model.calls if r.hints["meeting_id"] == "meeting_en_dev_901"]
    assert [r.hints["question_id"] for r in calls] == ["1", "2", "3"]
    assert [len(r.messages) for r in calls] == [1, 3, 5]  # a turn never sees later questions
    third = calls[2].messages
    assert [m.role for m in third] == ["user", "assistant", "user", "assistant", "user"]
    assert third[1].content.startswith("answer:")  # the model's own earlier answer
    assert third[2].content == "Which tool did they choose for the demo?"  # later turns: the question alone


def test_multi_turn_gold_history_uses_references(tiny_home, tmp_path):
    model = ScriptedModel()
    run_engine(model, "elitr_qa_mt_gold", tiny_home, tmp_path, splits=["dev"])
    third = [r for r in model.calls if r.hints["meeting_id"] == "meeting_en_dev_901"][2].messages
    assert third[1].content == "[PERSON1]"
    assert third[3].content == "The orange dashboard"


def test_second_run_is_served_from_cache(tiny_home, tmp_path):
    run_engine(ScriptedModel(), "elitr_qa", tiny_home, tmp_path)
    again = ScriptedModel()
    run_dir, _, state = run_engine(again, "elitr_qa", tiny_home, tmp_path)
    assert again.calls == []
    assert state.usage["cache_hits"] == 7 and state.usage["generated"] == 0
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["usage"]["cache_hits"] == 7
    read = {Path(p).name: h for p, h in manifest["data_files"].items()}
    expected = hashlib.sha256((tiny_home / "elitr-bench/data/elitr-bench-qa_dev.json").read_bytes()).hexdigest()
    assert read["elitr-bench-qa_dev.json"] == expected and "meeting_en_dev_901.txt" in read
    assert manifest["resolved"]["tasks"]["elitr_qa"]["spec"]["options"]["mode"] == "single-turn"


def test_interrupted_run_resumes_without_recomputing(tiny_home, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        run_engine(ScriptedModel(fail_after=3), "elitr_qa_mt", tiny_home, tmp_path)
    assert not (tmp_path / "runs").exists()  # no partial run directory was written
    resumed = ScriptedModel()
    _, results, state = run_engine(resumed, "elitr_qa_mt", tiny_home, tmp_path)
    assert state.usage["cache_hits"] == 3
    assert len(resumed.calls) == 7 - 3
    first_done = {r.hints["item_id"] for r in resumed.calls}
    assert "dev/meeting_en_dev_901/1" not in first_done
    assert results["tasks"]["elitr_qa_mt"]["n_samples"] == 7


def test_results_report_splits_breakdowns_and_welch(tiny_home, tmp_path):
    run_dir, results, _ = run_engine(ScriptedModel(), "elitr_qa", tiny_home, tmp_path)
    score = results["tasks"]["elitr_qa"]["metrics"]["score"]
    assert set(score["groups"]) == {"dev", "test2"}
    assert score["mean_of_groups"] == pytest.approx(
        (score["groups"]["dev"]["value"] + score["groups"]["test2"]["value"]) / 2)
    assert set(score["breakdowns"]["answer_position"]) == {"B", "M", "E", "S"}
    assert score["tests"]["lost_in_the_middle"]["n_a"] == 3
    lines = (run_dir / "samples.jsonl").read_text().splitlines()
    sample = json.loads(lines[0])
    assert sample["metadata"]["question_type"] and sample["metadata"]["answer_position"]
    assert sample["prompt_hash"] and sample["judgments"][0]["judge"] == "lexical"


def test_several_seeds_report_mean_and_sample_std(tiny_home, tmp_path):
    _, results, _ = run_engine(ScriptedModel(), "elitr_qa", tiny_home, tmp_path, seeds=[1, 2, 3])
    seeds = results["tasks"]["elitr_qa"]["metrics"]["score"]["across_seeds"]
    assert seeds["n_seeds"] == 3 and seeds["std"] == 0.0  # greedy scripted model: identical runs


def test_limit_caps_items_per_split(tiny_home, tmp_path):
    model = ScriptedModel()
    _, results, _ = run_engine(model, "elitr_qa", tiny_home, tmp_path, limit=1)
    assert results["tasks"]["elitr_qa"]["n_samples"] == 2
    assert {r.hints["item_id"] for r in model.calls} == {"dev/meeting_en_dev_901/1", "test2/meeting_en_test2_901/1"}


def test_truncation_is_recorded_and_reported(tiny_home, tmp_path):
    model = ScriptedModel(window=120)
    run_dir, results, _ = run_engine(model, "elitr_qa", tiny_home, tmp_path, context_policy="truncate-middle",
                                     overrides={"generation.max_new_tokens": 40})
    acc = results["tasks"]["elitr_qa"]["accounting"]
    assert acc["truncated"] > 0 and acc["truncated_share"] == acc["truncated"] / 7
    for r in model.calls:
        assert model.count_tokens(r.messages) + 40 <= 120
    cut = json.loads((run_dir / "samples.jsonl").read_text().splitlines()[0])["context_cut"]
    assert cut["action"] == "truncated" and cut["kept_tokens"] < cut["original_tokens"]


def test_system_prompt_carries_the_context(tiny_home, tmp_path):
    model = ScriptedModel()
    run_engine(model, "elitr_qa_mt", tiny_home, tmp_path, splits=["test2"],
               overrides={"options.prompt_role": "system"})
    first, second = model.calls[0].messages, model.calls[1].messages
    assert [m.role for m in first] == ["system", "user"] and "(PERSON2) I will write the report." in first[0].content
    assert first[1].content == "Who will write the report?"
    assert [m.role for m in second] == ["system", "user", "assistant", "user"]


def test_conversation_stops_when_answers_outgrow_their_reserve(tiny_home, tmp_path):
    """Answers longer than `answer_reserve` leave no room for the last turn: it is skipped
    and counted, never sent past the window."""

    class Verbose(ScriptedModel):
        def generate(self, requests):
            gens = super().generate(requests)
            for g in gens:
                g.text = "word " * 60
            return gens

    model = Verbose(window=260)
    run_dir, results, _ = run_engine(model, "elitr_qa_mt", tiny_home, tmp_path, splits=["dev"],
                                     overrides={"generation.max_new_tokens": 60, "context.answer_reserve": 5})
    for r in model.calls:
        assert model.count_tokens(r.messages) + 60 <= 260
    samples = [json.loads(l) for l in (run_dir / "samples.jsonl").read_text().splitlines()]
    answered = [s for s in samples if s["response"] is not None]
    skipped = [s for s in samples if s["response"] is None]
    assert answered and skipped
    assert all(s["context_cut"]["action"] != "skipped" for s in answered)
    assert all(s["context_cut"]["action"] == "skipped" for s in skipped)
    assert results["tasks"]["elitr_qa_mt"]["accounting"]["skipped"] == len(skipped)


def test_judge_model_for_a_judge_that_ignores_it_is_refused(tiny_home, tmp_path):
    from lceval.errors import UserError

    with pytest.raises(UserError, match="does not call a model"):
        run_engine(ScriptedModel(), "elitr_qa", tiny_home, tmp_path, judge_model="scripted:judge")
