"""The ELITR task type builds the paper's conversations (paper 000, Fig. 4, §3, App. B.2)."""

from __future__ import annotations

import pytest

from lceval.errors import UserError
from lceval.interfaces import TaskContext
from lceval.types import CONTEXT_SLOT
from lceval_plugins.elitr.task import FIG4_PROMPT, ElitrTaskType
from tests.conftest import complete


def load(home, tmp_path, splits=None, limit=None, **options):
    seen = []
    ctx = TaskContext(spec={"type": "elitr", "options": complete(ElitrTaskType, options)}, spec_path=tmp_path / "s.yaml",
                      data_home=home, splits=splits, limit=limit, record_file=seen.append)
    return ElitrTaskType().load(ctx), seen


def test_single_turn_one_conversation_per_question(tiny_home, tmp_path):
    convs, seen = load(tiny_home, tmp_path)
    assert len(convs) == 7 and all(len(c.turns) == 1 for c in convs)
    first = convs[0].turns[0]
    prompt = FIG4_PROMPT.replace("{transcript}", CONTEXT_SLOT)
    assert first.user == prompt + "\n\n" + "Who opened the meeting?"
    assert first.metadata == {"split": "dev", "meeting_id": "meeting_en_dev_901", "question_id": "1",
                              "question_type": "who", "answer_position": "B", "question_set": "qa",
                              "language": "en", "qa_conv_differs": False}
    assert convs[0].context.startswith("(PERSON1) Hello everyone")
    assert {p.name for p in seen} >= {"elitr-bench-qa_dev.json", "meeting_en_dev_901.txt"}


def test_fig4_prompt_text():
    assert FIG4_PROMPT.startswith("The following is the transcript of a meeting with multiple participants")
    # as the authors' format_inference_prompt: the prompt ends with a blank line, and the
    # first user turn adds another one before the question (inference_llama2.py)
    assert FIG4_PROMPT.endswith("by making inferences from the provided transcript.\n\n")


def test_multi_turn_one_conversation_per_meeting(tiny_home, tmp_path):
    convs, _ = load(tiny_home, tmp_path, mode="multi-turn", splits=["dev"])
    assert [len(c.turns) for c in convs] == [3, 2]
    assert CONTEXT_SLOT in convs[0].turns[0].user
    assert convs[0].turns[1].user == "Which tool did they choose for the demo?"


def test_qa_markers(tiny_home, tmp_path):
    convs, _ = load(tiny_home, tmp_path, mode="multi-turn", qa_markers=True, splits=["dev"])
    assert convs[0].turns[0].user.endswith("transcript.\n\n\n\nQUESTION: Who opened the meeting? ANSWER:")
    assert convs[0].turns[1].user == "QUESTION: Which tool did they choose for the demo? ANSWER:"
    assert convs[0].turns[1].question == "Which tool did they choose for the demo?"


def test_system_prompt_role_as_the_gpt_inference_code(tiny_home, tmp_path):
    convs, _ = load(tiny_home, tmp_path, prompt_role="system", splits=["dev"])
    assert convs[0].preamble[0].role == "system" and CONTEXT_SLOT in convs[0].preamble[0].content
    assert convs[0].turns[0].user == "Who opened the meeting?"


def test_conv_questions_and_czech(tiny_home, tmp_path):
    convs, _ = load(tiny_home, tmp_path, question_set="conv", mode="multi-turn", splits=["dev"])
    assert convs[0].turns[2].question == "And when do they meet again?"
    cs, _ = load(tiny_home, tmp_path, language="cs", splits=["dev"])
    assert cs[0].turns[0].question == "Kdo zahájil schůzku?"


def test_conv_single_turn_is_refused(tiny_home, tmp_path):
    with pytest.raises(UserError, match="cannot be asked single-turn"):
        load(tiny_home, tmp_path, question_set="conv", mode="single-turn")


def test_unknown_split(tiny_home, tmp_path):
    with pytest.raises(UserError, match="unknown split 'test'"):
        load(tiny_home, tmp_path, splits=["test"])


def test_limit_counts_questions_per_split(tiny_home, tmp_path):
    convs, _ = load(tiny_home, tmp_path, mode="multi-turn", limit=4)
    assert [(c.metadata["split"], len(c.turns)) for c in convs] == [("dev", 3), ("dev", 1), ("test2", 2)]


def test_custom_prompt_must_hold_the_transcript(tiny_home, tmp_path):
    convs, _ = load(tiny_home, tmp_path, prompt="Meeting:\n{transcript}\nAnswer briefly.", splits=["test2"])
    assert convs[0].turns[0].user.startswith(f"Meeting:\n{CONTEXT_SLOT}\nAnswer briefly.\n\n")


def test_questions_worded_differently_in_qa_and_conv_are_flagged(tiny_home, tmp_path):
    """Paper 000 App. C.3 reports on the questions whose Conv wording differs; the tiny
    fixture's Conv set rewords question 3 of meeting 901."""
    for question_set, mode in (("qa", "single-turn"), ("conv", "multi-turn")):
        convs, _ = load(tiny_home, tmp_path, question_set=question_set, mode=mode)
        flagged = {t.item_id for c in convs for t in c.turns if t.metadata["qa_conv_differs"]}
        assert flagged == {"dev/meeting_en_dev_901/3"}


def test_no_flag_without_the_other_question_set(tiny_home, tmp_path):
    (tiny_home / "elitr-bench" / "data" / "elitr-bench-conv_dev.json").unlink()
    convs, _ = load(tiny_home, tmp_path, splits=["dev"])
    assert all("qa_conv_differs" not in t.metadata for c in convs for t in c.turns)
