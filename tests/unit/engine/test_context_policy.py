"""Context policy: only the long context is cut, the budget is computed on the templated
prompt with room for every answer, and nothing overflows silently.

Checked in runs (`tests/unit/engine/served.py`): the cut is what each sample records
(`context_cut`), the text is what the backend received."""

from __future__ import annotations

from pathlib import Path

import pytest

from lceval.errors import UserError
from lceval.tokens import SAFETY_MARGIN
from lceval.types import CONTEXT_SLOT, ContextCut, Conversation, Message, Turn

from tests.conftest import ScriptedModel
from tests.unit.engine.served import serve

CONTEXT = " ".join(f"w{i}" for i in range(300))
#: what a truncate-middle cut puts where it removed text (the spec's default `context.marker`)
MARK = "[...]"
INSTRUCTION, QUESTION = "Read this: ", "\n\nquestion number 0 ?"


def conv(n_turns: int = 1, history: str = "model", cid: str = "c") -> Conversation:
    turns = [Turn(item_id=f"{cid}/q{i}", user=f"question number {i} ?", reference=f"ref {i}", question=f"q{i}")
             for i in range(n_turns)]
    turns[0] = Turn(item_id=f"{cid}/q0", user=f"{INSTRUCTION}{CONTEXT_SLOT}{QUESTION}", reference="ref 0",
                    question="q0")
    return Conversation(conv_id=cid, context=CONTEXT, context_id=f"m-{cid}", turns=turns, history=history)


def settings(policy: str, answer: int = 50, reserve: int = 50) -> str:
    return f"generation: {{max_new_tokens: {answer}}}\ncontext: {{policy: {policy}, answer_reserve: {reserve}}}\n"


def cuts(model: ScriptedModel, convs: list[Conversation], tmp_path: Path, policy: str, **kw) -> dict[str, ContextCut]:
    """The cut each conversation got in a run (its first turn's sample), by conversation id."""
    state = serve(model, convs, tmp_path, spec=settings(policy, **kw))
    return {s.conv_id: s.context_cut for s in state.tasks[0].samples if s.turn_index == 0}


def sent_context(model: ScriptedModel, item: str) -> str:
    """The context of the first turn the backend received for `item`, cut out of its prompt."""
    (request,) = [r for r in model.calls if r.request_id == item]
    text = request.messages[0].content
    assert text.startswith(INSTRUCTION) and text.endswith(QUESTION)  # instructions and question never cut
    return text[len(INSTRUCTION):-len(QUESTION)]


def test_fits_untouched(tmp_path):
    model = ScriptedModel(window=1000)
    cut = cuts(model, [conv()], tmp_path, "error")["c"]
    assert sent_context(model, "c/q0") == CONTEXT and cut.action == "none" and cut.original_tokens == 300


def test_error_policy_names_the_numbers(tmp_path):
    model = ScriptedModel(window=200)
    with pytest.raises(UserError, match="window is 200") as err:
        cuts(model, [conv()], tmp_path, "error")
    assert "truncate-middle" in err.value.render()
    assert model.calls == []


def test_skip_policy(tmp_path):
    model = ScriptedModel(window=200)
    state = serve(model, [conv()], tmp_path, spec=settings("skip"))
    (sample,) = state.tasks[0].samples
    assert sample.context_cut.action == "skipped" and sample.response is None and model.calls == []


@pytest.mark.parametrize("policy", ["truncate-middle", "truncate-left", "truncate-right"])
def test_truncation_keeps_instructions_and_question(policy, tmp_path):
    model = ScriptedModel(window=200)
    cut = cuts(model, [conv()], tmp_path, policy)["c"]
    assert cut.action == "truncated" and cut.kept_tokens < 300
    (request,) = model.calls
    assert model.count_tokens(request.messages) + 50 <= 200
    words = sent_context(model, "c/q0").split()
    kept = [w for w in words if w != MARK]
    assert len(kept) == cut.kept_tokens  # kept tokens are the context's own, the mark not counted
    if policy == "truncate-middle":
        assert words[0] == "w0" and words[-1] == "w299" and MARK in words
    elif policy == "truncate-left":
        assert words[-1] == "w299" and "w0" not in words and words[0] == MARK
    else:  # the start kept in order, the end removed, the mark where it was
        assert kept == [f"w{i}" for i in range(len(kept))] and words[-1] == MARK


def test_multi_turn_reserves_room_for_every_answer(tmp_path):
    got = cuts(ScriptedModel(window=400), [conv(1, cid="one"), conv(5, cid="five"), conv(5, "gold", cid="gold")],
               tmp_path, "truncate-middle", answer=30, reserve=30)
    assert got["one"].action == "none"
    assert got["five"].action == "truncated"  # 4 earlier answers x 30 tokens + 4 questions no longer fit
    assert got["gold"].kept_tokens > got["five"].kept_tokens  # gold history is known exactly: short references


def test_model_without_tokenizer_is_passed_through(tmp_path):
    class Blind(ScriptedModel):
        def tokenize(self, text):
            return None

    model = Blind(window=None)
    cut = cuts(model, [conv()], tmp_path, "error")["c"]
    assert sent_context(model, "c/q0") == CONTEXT and cut.original_tokens is None


def test_a_cut_that_removes_fewer_tokens_than_the_mark_adds_still_reports_fewer_kept(tmp_path):
    """Kept tokens count the original context only: cutting 1 token and inserting the 3-word
    mark must not report more tokens kept than there were."""
    probe = ScriptedModel()
    c = conv()
    original = len(probe.tokenize(c.context))
    overhead = probe.count_tokens([Message("user", c.turns[0].user.replace(CONTEXT_SLOT, ""))])  # the prompt, no context
    window = overhead + original + 50 + SAFETY_MARGIN - 1  # one token too many
    model = ScriptedModel(window=window)
    cut = cuts(model, [c], tmp_path, "truncate-middle")["c"]
    assert cut.action == "truncated" and cut.original_tokens == original
    assert cut.kept_tokens < original
    (request,) = model.calls
    assert model.count_tokens(request.messages) + 50 <= window


def test_truncated_conversations_of_one_context_share_the_smallest_cut(tmp_path):
    def single(qid: str, question: str, context_id: str = "m") -> Conversation:
        turn = Turn(item_id=qid, user=f"{INSTRUCTION}{CONTEXT_SLOT}\n\n{question}", reference="r", question=question)
        return Conversation(conv_id=qid, context=CONTEXT, context_id=context_id, turns=[turn])

    def context_of(model: ScriptedModel, item: str) -> str:
        (request,) = [r for r in model.calls if r.request_id == item]
        return request.messages[0].content[len(INSTRUCTION):].rsplit("\n\n", 1)[0]

    convs = [single("short", "when ?"), single("long", "who said what about the budget and when did they say it ?"),
             single("other", "when ?", context_id="n")]
    # each conversation alone: the cut its own question leaves room for
    own, own_text = [], []
    for i, c in enumerate(convs):
        alone = ScriptedModel(window=200)
        own.append(cuts(alone, [c], tmp_path / f"alone{i}", "truncate-middle")[c.conv_id].kept_tokens)
        own_text.append(context_of(alone, c.conv_id))
    assert own[0] > own[1]  # the longer question leaves less room
    model = ScriptedModel(window=200)
    together = cuts(model, convs, tmp_path / "together", "truncate-middle")
    # one transcript for both questions of meeting m: the smaller cut, which fits both
    assert context_of(model, "short") == context_of(model, "long")
    assert together["short"].kept_tokens == together["long"].kept_tokens == own[1]
    (short,) = [r for r in model.calls if r.request_id == "short"]
    assert model.count_tokens(short.messages) + 50 <= 200
    # another meeting keeps its own cut; an uncut conversation is never cut to match
    assert together["other"].kept_tokens == own[2] and context_of(model, "other") == own_text[2]
    roomy = ScriptedModel(window=1000)
    untouched = cuts(roomy, convs[:2], tmp_path / "roomy", "truncate-middle")
    assert [c.action for c in untouched.values()] == ["none", "none"]
    assert [context_of(roomy, "short"), context_of(roomy, "long")] == [CONTEXT, CONTEXT]


def test_every_request_says_where_its_cut_context_ends(tmp_path):
    """`hints["context_end"]` ([message, offset]) points just past the context as it was sent
    (cut here), in every turn's request: where a backend that compresses the context alone (a
    KV-cache press) splits the prompt."""
    model = ScriptedModel(window=200)
    serve(model, [conv(n_turns=2)], tmp_path, spec=settings("truncate-middle", answer=10, reserve=10))
    assert len(model.calls) == 2
    for request in model.calls:
        index, offset = request.hints["context_end"]
        text = request.messages[index].content
        assert index == 0 and text[:offset].startswith(INSTRUCTION) and MARK in text[:offset]
        assert text[offset:] == QUESTION
