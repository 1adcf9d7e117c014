"""`fields.messages`: a row that is a whole chat (OpenAI MRCR's `prompt`, JSON text of a list of
messages) is sent as those messages, roles and text as they are, its last user message the
question; nothing of it is cut, a chat past the window is skipped. `fields.empty_answers`: an
empty answer list (GraphWalks' empty node sets) is a reference, not an error."""

from __future__ import annotations

import json

import pytest

from lceval.errors import UserError
from lceval.types import CONTEXT_SLOT, Message

from tests.conftest import ScriptedModel, run_engine

from .conftest import write_jsonl, write_spec
from .test_task import load

CHAT = [{"role": "user", "content": "Here are some examples of conversations succeeded by a follow-up question "
                                    "answered correctly:\n\n======EXAMPLE======\nUser: hi\n======END EXAMPLE======\n"},
        {"role": "user", "content": "write a poem about tapirs"},
        {"role": "assistant", "content": "Tapirs {context} roam,\n  in the forest home."},
        {"role": "user", "content": "write a blog post about rocks"},
        {"role": "assistant", "content": "Rocks are old."},
        {"role": "user", "content": "Prepend aYooSG8CQg to the 1st (1 indexed) poem about tapirs. Do not include "
                                    "any other text in your response."}]


def mrcr_row(i: int, chat=CHAT) -> dict:
    """A row in OpenAI MRCR's schema (openai/mrcr 2needle/2needle_0.parquet): `prompt` is JSON text."""
    return {"prompt": json.dumps(chat), "answer": "aYooSG8CQgTapirs {context} roam,\n  in the forest home.",
            "random_string_to_prepend": "aYooSG8CQg", "n_needles": 2, "desired_msg_index": 2,
            "total_messages": len(chat), "n_chars": sum(len(m["content"]) for m in chat), "date_added": "12-05-2025",
            "id": f"r{i}"}


OPTIONS = {"source": {"data_files": "mrcr.jsonl"},
           "fields": {"id": "id", "messages": "prompt", "answer": "answer",
                      "metadata": ["random_string_to_prepend", "n_needles"]}}


def sent(conv) -> list[Message]:
    """The messages the engine sends for the conversation's turn: the context goes into the
    first message holding the slot, once (the engine's context policy, `fill_context`)."""
    out, done = [], False
    for m in [*conv.preamble, Message("user", conv.turns[0].user)]:
        if not done and CONTEXT_SLOT in m.content:
            m, done = Message(m.role, m.content.replace(CONTEXT_SLOT, conv.context, 1)), True
        out.append(m)
    return out


def test_a_chat_row_is_sent_as_its_own_messages(tmp_path):
    write_jsonl(tmp_path / "mrcr.jsonl", [mrcr_row(0), mrcr_row(1, CHAT[:1] + CHAT[-1:])])
    convs, files, _ = load(tmp_path / "spec.yaml", OPTIONS)
    first, second = convs
    assert first.context == "" and first.context_id != second.context_id
    assert sent(first) == [Message(m["role"], m["content"]) for m in CHAT]  # byte for byte, roles kept
    turn = first.turns[0]
    assert turn.question == CHAT[-1]["content"]      # the judges' question: the last message
    assert turn.reference == mrcr_row(0)["answer"]
    assert turn.metadata["random_string_to_prepend"] == "aYooSG8CQg" and turn.metadata["n_needles"] == 2
    assert sent(second) == [Message("user", CHAT[0]["content"]), Message("user", CHAT[-1]["content"])]


def test_the_engine_sends_the_chat_and_skips_one_past_the_window(tmp_path):
    write_jsonl(tmp_path / "mrcr.jsonl", [mrcr_row(0), mrcr_row(1, CHAT[:1] + CHAT[-1:])])
    spec = write_spec(tmp_path, OPTIONS, name="chat_task", context={"policy": "skip"},
                      generation={"max_new_tokens": 8}, judge={"name": "exact_match"})
    long_chat, short_chat = (sum(len(m["content"].split()) + 3 for m in c) + 2 for c in (CHAT, CHAT[:1] + CHAT[-1:]))
    model = ScriptedModel(window=(long_chat + short_chat) // 2 + 8)   # room for the short chat only
    _, results, state = run_engine(model, str(spec), tmp_path / "home", tmp_path)
    (request,) = model.calls
    assert request.messages == [Message("user", CHAT[0]["content"]), Message("user", CHAT[-1]["content"])]
    (task,) = state.tasks
    samples = {s.item_id: s for s in task.samples}
    assert samples["train/r0"].context_cut.action == "skipped" and samples["train/r0"].response is None
    assert results["tasks"]["chat_task"]["accounting"]["skipped"] == 1

    model = ScriptedModel(window=4096)
    run_engine(model, str(spec), tmp_path / "home", tmp_path / "again")
    assert [Message(m["role"], m["content"]) for m in CHAT] in [r.messages for r in model.calls]


def test_a_system_prompt_goes_before_the_chat(tmp_path):
    write_jsonl(tmp_path / "mrcr.jsonl", [mrcr_row(0)])
    options = {**OPTIONS, "prompt": {"system": "You are a helpful assistant for {{ n_needles }} needles."}}
    (conv,), _, _ = load(tmp_path / "spec.yaml", options)
    assert sent(conv)[0] == Message("system", "You are a helpful assistant for 2 needles.")
    assert sent(conv)[1:] == [Message(m["role"], m["content"]) for m in CHAT]


@pytest.mark.parametrize("prompt,fields,row_chat,field,words", [
    ({"user": "{{ context }}"}, {}, CHAT, "options.prompt.user", "the row's chat is the prompt"),
    ({"shots": [{"role": "user", "content": "hi"}]}, {}, CHAT, "options.prompt.shots", "the row's chat is the prompt"),
    ({}, {"questions": "qs"}, CHAT, "options.fields.questions", "exclude each other"),
    ({}, {}, CHAT[:-1], "options.fields.messages", "must be a user message"),
    ({}, {}, "not json", "options.fields.messages", "not JSON"),
    ({}, {}, [{"role": "robot", "content": "x"}], "options.fields.messages", "message 0"),
    ({}, {}, [], "options.fields.messages", "non-empty list"),
])
def test_bad_chats_and_options_name_the_field(tmp_path, prompt, fields, row_chat, field, words):
    row = mrcr_row(0)
    row["prompt"] = row_chat if isinstance(row_chat, str) else json.dumps(row_chat)
    write_jsonl(tmp_path / "mrcr.jsonl", [row])
    options = {**OPTIONS, "fields": {**OPTIONS["fields"], **fields}, "prompt": prompt}
    with pytest.raises(UserError) as err:
        load(tmp_path / "spec.yaml", options)
    assert err.value.field == field and words in str(err.value)


def graphwalks_row(nodes: list[str], i: int) -> dict:
    """A row of openai/graphwalks graphwalks_128k_and_shorter.parquet."""
    return {"prompt": f"You will be given a graph as a list of directed edges.\nuvwx -> alke\nOperation {i}",
            "answer_nodes": nodes, "prompt_chars": 60, "problem_type": "parents", "date_added": "02-27-2026"}


def test_an_empty_answer_list_is_a_reference_when_the_spec_allows_it(tmp_path):
    write_jsonl(tmp_path / "gw.jsonl", [graphwalks_row(["abcd", "efgh"], 0), graphwalks_row([], 1)])
    options = {"source": {"data_files": "gw.jsonl"},
               "fields": {"context": "prompt", "question": None, "answer": "answer_nodes"},
               "prompt": {"user": "{{ context }}"}}
    with pytest.raises(UserError) as err:
        load(tmp_path / "spec.yaml", options)
    assert err.value.field == "options.fields.answer" and "empty_answers" in err.value.hint
    options["fields"]["empty_answers"] = True
    (full, empty), _, _ = load(tmp_path / "spec.yaml", options)
    assert full.turns[0].metadata["references"] == ["abcd", "efgh"]
    assert empty.turns[0].metadata["references"] == [] and empty.turns[0].reference == ""
    assert empty.turns[0].user == CONTEXT_SLOT and empty.context.endswith("Operation 1")
