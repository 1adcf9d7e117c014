"""Context policy: only the long context is cut, the budget is computed on the templated
prompt with room for every answer, and nothing overflows silently."""

from __future__ import annotations

import pytest

from lceval.engine._context_policy import CUT_MARK, fill_context, fit, full_transcript
from lceval.errors import UserError
from lceval.types import CONTEXT_SLOT, Conversation, Turn

from tests.conftest import ScriptedModel

CONTEXT = " ".join(f"w{i}" for i in range(300))


def conv(n_turns: int = 1, history: str = "model") -> Conversation:
    turns = [Turn(item_id=f"q{i}", user=f"question number {i} ?", reference=f"ref {i}", question=f"q{i}")
             for i in range(n_turns)]
    turns[0] = Turn(item_id="q0", user=f"Read this: {CONTEXT_SLOT}\n\nquestion number 0 ?", reference="ref 0",
                    question="q0")
    return Conversation(conv_id="c", context=CONTEXT, context_id="m", turns=turns, history=history)


def test_fits_untouched():
    text, cut = fit(conv(), ScriptedModel(window=1000), "error", 50, 50)
    assert text == CONTEXT and cut.action == "none" and cut.original_tokens == 300


def test_error_policy_names_the_numbers():
    with pytest.raises(UserError, match="window is 200") as err:
        fit(conv(), ScriptedModel(window=200), "error", 50, 50)
    assert "truncate-middle" in err.value.render()


def test_skip_policy():
    text, cut = fit(conv(), ScriptedModel(window=200), "skip", 50, 50)
    assert text is None and cut.action == "skipped"


@pytest.mark.parametrize("policy", ["truncate-middle", "truncate-left"])
def test_truncation_keeps_instructions_and_question(policy):
    model = ScriptedModel(window=200)
    c = conv()
    text, cut = fit(c, model, policy, 50, 50)
    assert cut.action == "truncated" and cut.kept_tokens < 300
    messages = fill_context(full_transcript(c, []), text)
    assert messages[0].content.startswith("Read this: ")
    assert messages[0].content.endswith("question number 0 ?")
    assert model.count_tokens(messages) + 50 <= 200
    words = text.split()
    if policy == "truncate-middle":
        assert words[0] == "w0" and words[-1] == "w299" and CUT_MARK.strip() in text
    else:
        assert words[-1] == "w299" and "w0" not in words


def test_multi_turn_reserves_room_for_every_answer():
    one = fit(conv(1), ScriptedModel(window=400), "truncate-middle", 30, 30)[1]
    five = fit(conv(5), ScriptedModel(window=400), "truncate-middle", 30, 30)[1]
    assert one.action == "none"
    assert five.action == "truncated"  # 4 earlier answers x 30 tokens + 4 questions no longer fit
    gold = fit(conv(5, history="gold"), ScriptedModel(window=400), "truncate-middle", 30, 30)[1]
    assert gold.kept_tokens > five.kept_tokens  # gold history is known exactly: short references


def test_model_without_tokenizer_is_passed_through():
    class Blind(ScriptedModel):
        def tokenize(self, text):
            return None

    text, cut = fit(conv(), Blind(window=None), "error", 50, 50)
    assert text == CONTEXT and cut.original_tokens is None


def test_a_cut_that_removes_fewer_tokens_than_the_mark_adds_still_reports_fewer_kept():
    """Kept tokens count the original context only: cutting 1 token and inserting the 3-word
    mark must not report more tokens kept than there were."""
    model = ScriptedModel(window=200)
    c = conv()
    original = len(model.tokenize(c.context))
    overhead = model.count_tokens(fill_context(full_transcript(c, []), ""))
    window = overhead + original + 50 + 8 - 1  # one token too many
    model = ScriptedModel(window=window)
    text, cut = fit(c, model, "truncate-middle", 50, 50)
    assert cut.action == "truncated" and cut.original_tokens == original
    assert cut.kept_tokens < original
    assert model.count_tokens(fill_context(full_transcript(c, []), text)) + 50 <= window


def test_truncated_conversations_of_one_context_share_the_smallest_cut():
    from lceval.engine._context_policy import share_cuts

    model = ScriptedModel(window=200)

    def single(qid: str, question: str, context_id: str = "m") -> Conversation:
        turn = Turn(item_id=qid, user=f"Read this: {CONTEXT_SLOT}\n\n{question}", reference="r", question=question)
        return Conversation(conv_id=qid, context=CONTEXT, context_id=context_id, turns=[turn])

    convs = [single("short", "when ?"), single("long", "who said what about the budget and when did they say it ?"),
             single("other", "when ?", context_id="n")]
    ids = {c.context_id: model.tokenize(c.context) for c in convs}
    fitted = [(c, *fit(c, model, "truncate-middle", 50, 50, context_ids=ids[c.context_id])) for c in convs]
    own = [cut.kept_tokens for _, _, cut in fitted]
    assert own[0] > own[1]  # the longer question leaves less room
    shared = share_cuts(fitted, model, ids)
    (t_short, c_short), (t_long, c_long), (t_other, c_other) = shared
    # one transcript for both questions of meeting m: the smaller cut, which fits both
    assert t_short == t_long and c_short.kept_tokens == c_long.kept_tokens == own[1]
    assert model.count_tokens(fill_context(full_transcript(convs[0], []), t_short)) + 50 <= 200
    # another meeting keeps its own cut; an uncut conversation is never cut to match
    assert c_other.kept_tokens == own[2] and t_other == fitted[2][1]
    roomy = ScriptedModel(window=1000)
    untouched = [(c, *fit(c, roomy, "truncate-middle", 50, 50)) for c in convs[:2]]
    assert [t for t, _ in share_cuts(untouched, roomy, ids)] == [CONTEXT, CONTEXT]
