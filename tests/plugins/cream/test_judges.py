"""CREAM judges (paper 003, Sec. 4.1.2): sentence numbering, prompts (hash pinned), parsing of
recorded-style answers with hand-computed scores, retries and failures on a scripted judge
model, the two-step reference check, and the offline lexical reference judge."""

from __future__ import annotations

import json
from typing import Callable

import pytest

import lceval_plugins.cream.judges as cream_module
from lceval.engine import Cache, CachedModel
from lceval.judging import RETRY_SEED_STRIDE, sha256_text
from lceval.errors import UserError
from lceval.interfaces import JudgeContext, ModelBackend
from lceval.options import options_schema_of, unwrap
from lceval.engine import load_plugins
from lceval.types import Generation, GenerationRequest, JudgeInput, PairInput
from lceval_plugins.cream.judges import (
    ParseError, make_cream, make_keyfacts, make_keyfacts_lexical, minutes_facts, number_sentences, parse_alignment,
    parse_facts, parse_pair, reference_facts, split_sentences,
)
from lceval_plugins.cream.judges import prompts as P

from tests.conftest import SHARED

# -- sentences ------------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("Dr. Smith met Mr. Jones. They agreed on a budget of 3.5 million! Options were discussed, "
     "e.g. Plan A vs. Plan B. Next? Yes.",
     ["Dr. Smith met Mr. Jones.", "They agreed on a budget of 3.5 million!",
      "Options were discussed, e.g. Plan A vs. Plan B.", "Next?", "Yes."]),
    ("- First point.\n* Second point\n1. Third point. Fourth sentence.\n\n## Heading\nAction items:\n"
     "**Decisions**\n• Bullet\n-- deep one\n2) numbered",
     ["First point.", "Second point", "Third point.", "Fourth sentence.", "Bullet", "deep one", "numbered"]),
    ('He said "yes." Then he left. (See above.) [PERSON1] will send it, i.e. Monday. J. R. Smith agreed.',
     ['He said "yes."', "Then he left.", "(See above.)", "[PERSON1] will send it, i.e. Monday.",
      "J. R. Smith agreed."]),
    ("We chose plan B. It costs 2.5k. 2021 will be better.", ["We chose plan B.", "It costs 2.5k.",
                                                              "2021 will be better."]),
    # a long line ending with ":" is a sentence, a short one a heading
    ("The team agreed on the following three things after a long discussion about budgets:\nKey points:",
     ["The team agreed on the following three things after a long discussion about budgets:"]),
    ("", []),
    ("\n\n  \n", []),
])
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


def test_number_sentences():
    assert number_sentences(["a b.", "c"]) == "[1] a b.\n[2] c"
    assert number_sentences([]) == "(no sentences)"


# -- prompts ---------------------------------------------------------------------------------

PINNED = {
    "cream": "6add28ee2713ca420a5de930c99aa7bdbcafbda2aeb493414cd77b3f022857e1",
    "extraction": "fb4f3618460f1ed991b02cc050cdcbf8e6a57a80035894429f99325e9277b37a",
    "alignment": "1978c9cc5398e4a13496c6e0b6f59fcbb9e5a8ecaea3f3cca6d0ea0220e42161",
}


def test_template_hashes_are_pinned():
    """Changing a prompt's wording changes every cached verdict's meaning: do it on purpose
    (update these hashes, and the judge version if the scoring changed too)."""
    assert sha256_text(P.CREAM_TEMPLATE) == PINNED["cream"]
    assert sha256_text(P.EXTRACTION_TEMPLATE) == PINNED["extraction"]
    assert sha256_text(P.ALIGNMENT_TEMPLATE) == PINNED["alignment"]


def test_cream_prompt_holds_both_numbered_summaries_k_and_the_example():
    prompt = P.cream_prompt(["Alpha decided.", "Beta {summary_b} left."], ["Gamma agreed."], 30)
    assert "### Summary A\n[1] Alpha decided.\n[2] Beta {summary_b} left.\n\n### Summary B\n[1] Gamma agreed.\n" in prompt
    assert "at most 30 key facts" in prompt
    assert "Riverside FC beat Northgate United 2-1" in prompt and "Maya Lind" in prompt  # the one-shot example
    assert prompt.index("Riverside") < prompt.index("Alpha decided")
    assert "{max_key_facts}" not in prompt and "{summary_a}" not in prompt


def test_reference_prompts():
    ex = P.extraction_prompt("  - Budget approved.\n\n---\n\n- Budget approved by [PERSON1].  ", 16)
    assert ex.endswith("### Minutes\n- Budget approved.\n\n---\n\n- Budget approved by [PERSON1].\n")
    assert "at most 16 key facts" in ex and "several people" in ex.lower() and "Lumo One" in ex
    al = P.alignment_prompt(["The budget was approved."], ["The budget passed.", "Lunch was good."])
    assert "### Key facts\n1. The budget was approved.\n\n### Summary\n[1] The budget passed.\n[2] Lunch was good.\n" in al


def test_the_worked_examples_are_consistent():
    """The one-shot examples are answers our parser reads, with scores one can check by hand."""
    n_a = len(split_sentences(P.EXAMPLE_SUMMARY_A))
    n_b = len(split_sentences(P.EXAMPLE_SUMMARY_B))
    assert (n_a, n_b) == (3, 3)
    answer = P.ANSWER_MARKER + "\n" + json.dumps(P.EXAMPLE_PAIR_ANSWER)
    got = parse_pair(answer, n_a, n_b, 16)
    # A supports the result, the day, the scorer (3/6) with sentences 1-2 of 3 (the weather is no fact)
    assert got.a.scores() == {"completeness": 3 / 6, "conciseness": 2 / 3}
    assert got.b.scores() == {"completeness": 4 / 6, "conciseness": 1.0}
    facts, _, over = parse_facts(P.ANSWER_MARKER + json.dumps(P.EXAMPLE_KEY_FACTS), 16)
    assert facts == P.EXAMPLE_KEY_FACTS and over == 0
    side, _ = parse_alignment(P.ANSWER_MARKER + json.dumps(P.EXAMPLE_ALIGNMENT_ANSWER), 7,
                              len(split_sentences(P.EXAMPLE_SUMMARY)))
    assert (side.completeness(), side.conciseness()) == (3 / 7, 2 / 3)


# -- parsing recorded-style answers -----------------------------------------------------------
# Summary A has 3 sentences, B has 2 in every case below.

CLEAN = """REASONING:
Both mention the budget (A [1], B [1]). Only A names the deadline; only B the venue. A [3] is chit-chat.
ANSWER:
[
  {"key fact": "The budget was approved.", "summary A lines": [1], "summary B lines": [1]},
  {"key fact": "The deadline is May 3.", "summary A lines": [2], "summary B lines": []},
  {"key fact": "The event moves to Brno.", "summary A lines": [], "summary B lines": [2]},
  {"key fact": "Ana leads the budget work.", "summary A lines": [1, 2], "summary B lines": []}
]"""

FENCED = """Sure! Let me think. Summary A [1] and Summary B [1] both state the approval.
ANSWER:
```json
[
  {"Key Fact": "The budget was approved.", "Summary A Lines": [1], "Summary B Lines": [1, 2],},
  {"key_fact": "Ana leads the budget work.", "summary_a_lines": [3], "summary_b_lines": [],},
]
```
I hope this helps."""

STRING_LINES = """ANSWER:
[{"key fact": "The budget was approved.", "summary A lines": ["[1]", "2"], "summaryBlines": "2"},
 {"key fact": "The deadline is May 3.", "summary A lines": "[3]", "summary B lines": null}]"""

OUT_OF_RANGE = """ANSWER:
[{"key fact": "The budget was approved.", "summary A lines": [1, 7], "summary B lines": [0]},
 {"key fact": "The deadline is May 3.", "summary A lines": [4], "summary B lines": [2, 2]}]"""

OVER_CAP = """ANSWER:
[{"key fact": "F1.", "summary A lines": [1], "summary B lines": []},
 {"key fact": "F2.", "summary A lines": [], "summary B lines": [1]},
 {"key fact": "F3.", "summary A lines": [2, 3], "summary B lines": [2]}]"""

SINGLE_QUOTES = """ANSWER:
[{'key fact': 'The budget was approved', 'summary A lines': [1], 'summary B lines': [2]}]"""


def test_parse_clean():
    got = parse_pair(CLEAN, 3, 2, 16)
    assert got.facts[0] == "The budget was approved." and len(got.facts) == 4
    assert got.a.scores() == {"completeness": 3 / 4, "conciseness": 2 / 3}
    assert got.b.scores() == {"completeness": 2 / 4, "conciseness": 1.0}
    assert got.reasoning.startswith("Both mention the budget") and got.facts_over_cap == 0


def test_parse_fenced_with_prose_and_trailing_commas():
    got = parse_pair(FENCED, 3, 2, 16)
    assert got.facts == ["The budget was approved.", "Ana leads the budget work."]
    assert got.a.scores() == {"completeness": 1.0, "conciseness": 2 / 3}
    assert got.b.scores() == {"completeness": 0.5, "conciseness": 1.0}
    assert "both state the approval" in got.reasoning


def test_parse_string_line_numbers():
    got = parse_pair(STRING_LINES, 3, 2, 16)
    assert got.a.lines == [[1, 2], [3]] and got.b.lines == [[2], []]
    assert got.a.scores() == {"completeness": 1.0, "conciseness": 1.0}
    assert got.b.scores() == {"completeness": 0.5, "conciseness": 0.5}


def test_parse_out_of_range_lines_are_dropped_and_counted():
    got = parse_pair(OUT_OF_RANGE, 3, 2, 16)
    assert (got.a.invalid_lines, got.b.invalid_lines) == (2, 1)
    # A: fact 1 via [1]; fact 2 only via [4] (dropped) -> unsupported
    assert got.a.scores() == {"completeness": 0.5, "conciseness": 1 / 3}
    assert got.b.scores() == {"completeness": 0.5, "conciseness": 0.5}


def test_parse_more_facts_than_the_cap_keeps_the_first():
    got = parse_pair(OVER_CAP, 3, 2, 2)
    assert got.facts == ["F1.", "F2."] and got.facts_over_cap == 1
    assert got.a.scores() == {"completeness": 0.5, "conciseness": 1 / 3}
    assert got.b.scores() == {"completeness": 0.5, "conciseness": 0.5}


def test_parse_single_quotes_and_no_marker():
    assert parse_pair(SINGLE_QUOTES, 3, 2, 16).b.lines == [[2]]
    no_marker = "Facts: A [1] says it.\n" + json.dumps([{"key fact": "X.", "summary A lines": [1],
                                                         "summary B lines": []}])
    got = parse_pair(no_marker, 3, 2, 16)
    assert got.facts == ["X."] and got.reasoning == "Facts: A [1] says it."


def test_zero_sentence_summary_scores_zero():
    got = parse_pair(CLEAN, 0, 2, 16)
    assert got.a.scores() == {"completeness": 0.0, "conciseness": 0.0}
    assert got.a.invalid_lines == 4


@pytest.mark.parametrize("text, why", [
    ("I cannot judge these summaries.", "no ANSWER"),
    ("ANSWER:\n[]", "no key fact"),
    ('ANSWER:\n[{"key fact": "x", "summary A lines": [1]', "not closed"),
    ('ANSWER:\n[{"key fact": "x", "summary A lines": [1]}]', "required"),
    ('ANSWER:\n[{"summary A lines": [1], "summary B lines": []}]', "'key fact'"),
    ('ANSWER:\n{"key fact": "x"}', "no JSON list"),
    ('ANSWER:\n[{"key fact": "x", "summary A lines": [true], "summary B lines": []}]', "numbers"),
])
def test_parse_failures(text, why):
    with pytest.raises(ParseError, match=why):
        parse_pair(text, 3, 2, 16)


def test_parse_alignment_rules():
    text = ('ANSWER: [{"key fact": "a", "response": "Yes", "line numbers": [2]},'
            ' {"key fact": "b", "Response": "no", "Line Numbers": [1]},'
            ' {"key fact": "c", "response": "YES", "line numbers": []}]')
    side, _ = parse_alignment(text, 3, 2)
    # FineSurE: completeness counts "Yes" (2 of 3); lines given with a "No" are not aligned
    assert side.supported == [True, False, True] and side.aligned_lines() == [2]
    assert (side.completeness(), side.conciseness()) == (2 / 3, 1 / 2)
    with pytest.raises(ParseError, match="2 entries for 3"):
        parse_alignment('ANSWER: [{"key fact": "a", "response": "Yes"}, {"key fact": "b", "response": "No"}]', 3, 2)
    with pytest.raises(ParseError, match="Yes or No"):
        parse_alignment('ANSWER: [{"key fact": "a", "response": "Partly", "line numbers": [1]}]', 1, 2)


# -- the pairwise judge on a scripted model -------------------------------------------------


class FakeModel:
    """A judge model whose outputs a test writes: `script(request, call_index) -> text or
    Generation`. Records each generate() call (one per attempt round)."""

    identity = {"scheme": "fake-judge"}

    def __init__(self, script: Callable[[GenerationRequest, int], object]) -> None:
        self.script = script
        self.calls: list[list[GenerationRequest]] = []

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        self.calls.append(list(requests))
        out = []
        for r in requests:
            value = self.script(r, len(self.calls) - 1)
            out.append(value if isinstance(value, Generation) else Generation(request_id=r.request_id, text=value))
        return out


PAIR = PairInput(unit_id="dev/m1", system_a="short", system_b="long",
                 text_a="The budget was approved. The deadline is May 3. Nice weather today.",
                 text_b="- The budget was approved.\n- The event moves to Brno.")
PAIR2 = PairInput(unit_id="dev/m2", system_a="short", system_b="long", text_a="One fact.", text_b="Other fact.")


def cream_over(script, seed=7, **options):
    model = FakeModel(script)
    return make_cream(JudgeContext(options=options, model=model, seed=seed)), model


def test_cream_judgment_scores_both_sides_and_details():
    judge, model = cream_over(lambda r, k: CLEAN)
    [j] = judge.compare([PAIR])
    assert j.parse_status == "ok" and j.attempts == 1 and j.unit_id == "dev/m1" and j.judge == "cream"
    assert j.scores_a == {"completeness": 0.75, "conciseness": 2 / 3}
    assert j.scores_b == {"completeness": 0.5, "conciseness": 1.0}
    d = j.details
    assert d["n_sentences_a"] == 3 and d["n_sentences_b"] == 2 and d["n_key_facts"] == 4
    assert d["key_facts"][3] == {"fact": "Ana leads the budget work.", "a_lines": [1, 2], "b_lines": []}
    assert d["attempt_outputs"] == [CLEAN] and d["attempt_seeds"] == [7] and d["reasoning"]
    [req] = model.calls[0]
    assert req.request_id == "dev/m1" and req.hints["judge"] == "cream" and req.params.temperature == 0.0
    assert len(req.messages) == 1 and "[3] Nice weather today." in req.messages[0].content
    assert "### Summary B\n[1] The budget was approved.\n[2] The event moves to Brno." in req.messages[0].content


def test_cream_retries_with_new_seeds_when_sampling():
    def script(req, call):
        return "no idea" if req.request_id == "dev/m2" and call == 0 else CLEAN
    judge, model = cream_over(script, seed=11, temperature=0.6, max_attempts=3)
    j1, j2 = judge.compare([PAIR, PAIR2])
    assert [len(c) for c in model.calls] == [2, 1]  # both at once, then only the failed one
    assert model.calls[1][0].params.seed - model.calls[0][0].params.seed == RETRY_SEED_STRIDE
    assert j1.attempts == 1 and j2.attempts == 2 and j2.parse_status == "ok"
    assert j2.details["attempt_seeds"] == [11, 11 + RETRY_SEED_STRIDE]
    assert j2.details["attempt_outputs"] == ["no idea", CLEAN]


def test_cream_parse_failure_keeps_raw_outputs():
    judge, model = cream_over(lambda r, k: f"garbage {k}", temperature=0.6, max_attempts=2)
    [j] = judge.compare([PAIR])
    assert j.parse_status == "parse_failure" and j.scores_a is None and j.scores_b is None
    assert j.attempts == 2 and j.details["attempt_outputs"] == ["garbage 0", "garbage 1"]
    assert "ANSWER" in j.details["failure"]
    greedy, model = cream_over(lambda r, k: "garbage")  # temperature 0: a retry would replay it
    [g] = greedy.compare([PAIR])
    assert g.parse_status == "parse_failure" and g.attempts == 1 and len(model.calls) == 1


def test_cream_backend_error_is_missing():
    judge, _ = cream_over(lambda r, k: Generation(request_id=r.request_id, text="", finish_reason="error",
                                                  extras={"error": "rate limited"}), temperature=0.6)
    [j] = judge.compare([PAIR])
    assert j.parse_status == "missing" and j.scores_a is None and j.details["judge_error"] == "rate limited"


def test_cream_identity_options_and_model_requirement():
    judge, _ = cream_over(lambda r, k: CLEAN, max_key_facts="30", system_prompt="Be careful.")
    ident = judge.identity()
    assert ident["template_sha256"] == PINNED["cream"] and ident["max_key_facts"] == 30
    assert ident["judge_model"] == {"scheme": "fake-judge"} and ident["params"]["temperature"] == 0.0
    assert ident["system_prompt_sha256"] == sha256_text("Be careful.")
    assert judge.pair_messages(["a"], ["b"])[0].role == "system"
    assert "at most 30 key facts" in judge.pair_messages(["a"], ["b"])[1].content
    with pytest.raises(UserError) as err:
        make_cream(JudgeContext(options={}, model=None))
    assert err.value.field == "--judge-model"


@pytest.mark.parametrize("options, field", [
    ({"k": 3}, "judge.options.k"),
    ({"max_key_facts": 0}, "judge.options.max_key_facts"),
    ({"max_key_facts": "many"}, "judge.options.max_key_facts"),
    ({"max_key_facts": 2.5}, "judge.options.max_key_facts"),
    ({"temperature": -1}, "judge.options.temperature"),
    ({"top_p": 0}, "judge.options.top_p"),
    ({"max_attempts": 0}, "judge.options.max_attempts"),
    ({"system_prompt": 3}, "judge.options.system_prompt"),
])
def test_option_errors(options, field):
    for make in (make_cream, make_keyfacts):
        with pytest.raises(UserError) as err:
            make(JudgeContext(options=options, model=FakeModel(lambda r, k: ""), seed=0))
        assert err.value.field == field


def test_hooks_register_the_judges_with_their_options():
    plugins = load_plugins(disabled=["cream_judges"], extra=[("cream_test", cream_module)])
    for table, name, factory in ((plugins.pairwise_judges, "cream", make_cream), (plugins.judges, "keyfacts", make_keyfacts),
                                 (plugins.judges, "keyfacts-lexical", make_keyfacts_lexical),
                                 (plugins.pairwise_judges, "cream-lexical", make_cream_lexical)):
        assert unwrap(table[name]) is factory and options_schema_of(table[name])["properties"]
    assert options_schema_of(plugins.judges["keyfacts"])["properties"]["max_key_facts"]["default"] == 16


# -- keyfacts: two steps against the minutes --------------------------------------------------

MINUTES = "- The budget was approved.\n- The event moves to Brno.\n\n---\n\n- Budget approved by the board."
FACTS_OUT = 'REASONING: both versions report the budget.\nANSWER:\n["The budget was approved.", "The event moves to Brno."]'


def align_out(lines_1, lines_2):
    return "ANSWER: " + json.dumps([
        {"key fact": "The budget was approved.", "response": "Yes" if lines_1 else "No", "line numbers": lines_1},
        {"key fact": "The event moves to Brno.", "response": "Yes" if lines_2 else "No", "line numbers": lines_2}])


def keyfacts_script(req, call):
    prompt = req.messages[-1].content
    if req.hints["step"] == "extraction":
        return FACTS_OUT
    return align_out([1], [2]) if "[2] The event" in prompt else align_out([2], [])


ITEMS = [JudgeInput(item_id="m1/short", question="", response="Budget: approved. Lunch was late.", reference=MINUTES),
         JudgeInput(item_id="m1/long", question="", response="The budget passed.\nThe event moves to Brno.",
                    reference=MINUTES)]


def test_keyfacts_two_steps_share_one_extraction():
    model = FakeModel(keyfacts_script)
    judge = make_keyfacts(JudgeContext(options={}, model=model, seed=3))
    short, long_ = judge.judge(ITEMS)
    assert [len(c) for c in model.calls] == [1, 2]  # one extraction for the meeting, two alignments
    assert model.calls[0][0].hints["step"] == "extraction" and "Budget approved by the board" in \
        model.calls[0][0].messages[-1].content
    assert short.score == 0.5 and short.details["conciseness"] == 0.5 and short.details["aligned_lines"] == [2]
    assert long_.score == 1.0 and long_.details["conciseness"] == 1.0
    assert long_.details["key_facts"] == [{"fact": "The budget was approved.", "supported": True, "lines": [1]},
                                          {"fact": "The event moves to Brno.", "supported": True, "lines": [2]}]
    assert short.attempts == 2 and short.details["extraction_outputs"] == [FACTS_OUT]
    assert judge.identity()["template_sha256"] == {"extraction": PINNED["extraction"],
                                                   "alignment": PINNED["alignment"]}


def test_keyfacts_extraction_is_cached_across_systems(tmp_path):
    class Backend(ModelBackend):
        def __init__(self):
            self.requests: list[GenerationRequest] = []

        def identity(self):
            return {"scheme": "scripted"}

        def generate(self, requests):
            self.requests.extend(requests)
            return [Generation(request_id=r.request_id, text=keyfacts_script(r, 0)) for r in requests]

    backend = Backend()
    model = CachedModel(backend, Cache(tmp_path / "c.sqlite"), "judge:x")
    judge = make_keyfacts(JudgeContext(options={}, model=model, seed=3))
    judge.judge([ITEMS[0]])
    judge.judge([ITEMS[1]])  # another system's summary of the same meeting
    steps = [r.hints["step"] for r in backend.requests]
    assert steps == ["extraction", "alignment", "alignment"]


def test_keyfacts_failures_and_empty_summary():
    def bad_extraction(req, call):
        return "nothing useful" if req.hints["step"] == "extraction" else align_out([1], [])
    [j] = make_keyfacts(JudgeContext(options={}, model=FakeModel(bad_extraction))).judge([ITEMS[0]])
    assert j.parse_status == "parse_failure" and j.score is None and j.details["step"] == "extraction"
    assert j.details["extraction_outputs"] == ["nothing useful"]

    def short_alignment(req, call):
        if req.hints["step"] == "extraction":
            return FACTS_OUT
        return 'ANSWER: [{"key fact": "x", "response": "Yes", "line numbers": [1]}]' if call == 1 else align_out([1], [])
    model = FakeModel(short_alignment)
    [j] = make_keyfacts(JudgeContext(options={"temperature": 0.5}, model=model, seed=5)).judge([ITEMS[0]])
    assert j.parse_status == "ok" and j.attempts == 3  # 1 extraction + 2 alignments
    assert j.details["alignment_seeds"] == [5, 5 + RETRY_SEED_STRIDE]

    model = FakeModel(keyfacts_script)
    empty = JudgeInput(item_id="m1/empty", question="", response="  \n", reference=MINUTES)
    [j] = make_keyfacts(JudgeContext(options={}, model=model)).judge([empty])
    assert j.score == 0.0 and j.details["conciseness"] == 0.0 and j.details["n_sentences"] == 0
    assert [r.hints["step"] for c in model.calls for r in c] == ["extraction"]

    with pytest.raises(UserError, match="no reference minutes"):
        make_keyfacts(JudgeContext(options={}, model=model)).judge(
            [JudgeInput(item_id="x", question="", response="a", reference=" ")])


def test_keyfacts_backend_error_is_missing():
    def script(req, call):
        if req.hints["step"] == "extraction":
            return FACTS_OUT
        return Generation(request_id=req.request_id, text="", finish_reason="error", extras={"error": "timeout"})
    [j] = make_keyfacts(JudgeContext(options={}, model=FakeModel(script))).judge([ITEMS[0]])
    assert j.parse_status == "missing" and j.details["judge_error"] == "timeout" and j.details["step"] == "alignment"


# -- keyfacts-lexical -------------------------------------------------------------------------

FIXTURE_MINUTES = """[PROJECT5] Remote Meeting
Thur, the 6th of June 2020
Date: 06. 05. 2020
Attendees: [PERSON14], [PERSON10], [PERSON5]
Purpose of meeting: Preparation for demo
Agenda:
* Playing the video at the same time for each participant
- Status of plan A [PERSON1]:
-- [PERSON1] is afraid of the copyright rules.
#LB it is rather [PERSON14] who presented it
\t2) [PERSON9] to show [PERSON10] how to inject text.
[PERSON3], [PERSON10], [PERSON6]
40 min
•\tThe demo is postponed to June.
Minutes submitted by: [ANNOTATOR2]
"""


def test_minutes_facts_on_a_fixture():
    assert minutes_facts(FIXTURE_MINUTES) == [
        "Playing the video at the same time for each participant",
        "[PERSON1] is afraid of the copyright rules.",
        "[PERSON9] to show [PERSON10] how to inject text.",
        "The demo is postponed to June.",
    ]


def test_reference_facts_join_annotators_without_duplicates():
    joined = "Title\n- The demo is postponed to June.\n- Budget was approved.\n\n---\n\nOther title\n" \
             "* the demo is postponed to June\n* Plan C uses ffmpeg streaming."
    assert reference_facts(joined) == ["The demo is postponed to June.", "Budget was approved.",
                                       "Plan C uses ffmpeg streaming."]


def test_keyfacts_lexical_scores():
    judge = make_keyfacts_lexical(JudgeContext(options={}))
    reference = "Minutes\n- The demo is postponed to June.\n- Budget was approved by the board.\n- Plan C uses ffmpeg streaming."
    item = JudgeInput(item_id="m", question="", reference=reference,
                      response="The demo moves to June. The board approved the budget.\nWe had lunch.")
    [j] = judge.judge([item])
    # fact 1: 2 of {demo, postpone, june}; fact 2: all of {budget, approve, board} (stemmed);
    # fact 3 none. Sentences 1-2 of 3 aligned
    assert j.score == pytest.approx(2 / 3) and j.details["conciseness"] == pytest.approx(2 / 3)
    assert [f["lines"] for f in j.details["key_facts"]] == [[1], [2], []]
    assert j.details["aligned_lines"] == [1, 2] and j.details["n_sentences"] == 3
    strict = make_keyfacts_lexical(JudgeContext(options={"threshold": "1.0"}))
    assert strict.judge([item])[0].score == pytest.approx(1 / 3)  # only the budget sentence has every word of its fact
    assert judge.identity() == {"judge": "keyfacts-lexical", "version": 1, "threshold": 0.5}
    assert not judge.uses_model


@pytest.mark.parametrize("options", [{"threshold": 1.5}, {"threshold": 0}, {"threshold": "x"}, {"k": 1}])
def test_keyfacts_lexical_option_errors(options):
    with pytest.raises(UserError):
        make_keyfacts_lexical(JudgeContext(options=options))


def test_keyfacts_lexical_on_real_minutes():
    folder = SHARED / "elitr-bench" / "minutes" / "meeting_en_dev_002"
    if not folder.is_dir():
        pytest.skip(f"real minutes not found at {folder}")
    orig = (folder / "minutes_ORIG.txt").read_text(encoding="utf-8")
    facts = minutes_facts(orig)
    assert facts[0] == "[PERSON14] will join only for a very short time at the beginning"
    assert not any(f.startswith(("Test session", "#LB", "Status of plan")) for f in facts)
    annot = (folder / "minutes_GENER_annot07.txt").read_text(encoding="utf-8")
    annot_facts = minutes_facts(annot)
    assert annot_facts[0] == "Playing the video at the same time for each participant"
    assert not any(f.split(":")[0] in ("Date", "Attendees", "Purpose of meeting", "Minutes submitted by")
                   for f in annot_facts)
    joined = "\n\n---\n\n".join([annot, orig])
    assert reference_facts(joined) == annot_facts + facts
    [j] = make_keyfacts_lexical(JudgeContext(options={})).judge([JudgeInput(
        item_id="dev/m", question="", reference=joined,
        response="- [PERSON14] will join only for a very short time at the beginning.\n- We forget plan A.")])
    assert j.details["n_key_facts"] == len(annot_facts + facts)
    assert j.details["key_facts"][len(annot_facts)]["lines"] == [1] and 0 < j.score < 0.2


# -- cream-lexical: the pairwise procedure with word overlap ----------------------------------

from lceval_plugins.cream.judges import make_cream_lexical, pair_facts  # noqa: E402


def test_lexical_pair_facts_put_consensus_first_and_alternate_sides():
    a = ["The team chose the orange dashboard.", "Lunch was nice.", "The budget is exhausted."]
    b = ["They chose the orange dashboard for the demo.", "Maria will write the report."]
    facts = pair_facts(a, b, threshold=0.5, cap=16)
    # stated by both first; then A1.. B1.. alternately (A2 "Lunch was nice" has 2 content words)
    assert facts == ["The team chose the orange dashboard.", "Lunch was nice.", "Maria will write the report.",
                     "The budget is exhausted."]
    assert pair_facts(a, b, threshold=0.5, cap=2) == facts[:2]
    assert pair_facts(["Ok."], ["Yes."], 0.5, 16) == []


def test_lexical_pairwise_scores_are_hand_computable_and_symmetric():
    judge = make_cream_lexical(JudgeContext(options={"max_key_facts": 3}))
    a = "The team chose the orange dashboard. Lunch was nice. The budget is exhausted."
    b = "They chose the orange dashboard for the demo. Maria will write the report."
    forward, backward = judge.compare([PairInput("u", "A", "B", a, b), PairInput("u", "B", "A", b, a)])
    # facts (cap 3): dashboard (A1, B1), lunch (A2), Maria (B2): A supports 2/3, B 2/3;
    # A's sentences 1, 2 support a fact, 3 (budget, beyond the cap) none: conciseness 2/3; B 2/2
    assert forward.scores_a == pytest.approx({"completeness": 2 / 3, "conciseness": 2 / 3})
    assert forward.scores_b == pytest.approx({"completeness": 2 / 3, "conciseness": 1.0})
    assert backward.scores_a == forward.scores_b and backward.scores_b == forward.scores_a
    assert forward.details["n_key_facts"] == 3 and forward.details["key_facts"][0]["b_lines"] == [1]
    empty = judge.compare([PairInput("u", "A", "B", "Ok.", "Yes.")])[0]
    assert empty.parse_status == "parse_failure" and empty.scores_a is None


def test_lexical_pairwise_options_are_checked():
    with pytest.raises(UserError, match="has no option 'k'"):
        make_cream_lexical(JudgeContext(options={"k": 3}))
    with pytest.raises(UserError, match="threshold"):
        make_cream_lexical(JudgeContext(options={"threshold": 0}))
    assert "cream-lexical" in load_plugins().pairwise_judges


#: What SmolLM2-135M-Instruct answered as the `cream` judge (lceval rank on its own short and
#: long summaries of meeting_en_test2_001, greedy): it echoes numbered summary sentences and
#: never writes the ANSWER: JSON. Recorded from a real run, abridged.
SMOLLM2_OUTPUTS = [
    "[\n\n[1] The purpose of this meeting was to discuss the topic of the workshop, the outcome of which "
    "was the final presentation.\n[2] The decision to hold a webinar was made to provide a platform for the "
    "workshop to be presented to the public.\n[3] The decision to hold a meeting was made to discuss the topic "
    "of the workshop with the audience.\n]",
    "[1] The main decision was to have a professional meeting focused on a topic that involves professional "
    "and professional development.\n[2] The action items were to have a professional meeting.\n[3] The decision "
    "to hold a webinar was made to provide a platform for the workshop to be presented to the audience.",
]


@pytest.mark.parametrize("output", SMOLLM2_OUTPUTS)
def test_a_small_models_real_outputs_are_parse_failures_not_scores(output):
    with pytest.raises(ParseError):
        parse_pair(output, 3, 3, 16)
    judge, _ = cream_over(lambda r, k: output)
    [j] = judge.compare([PAIR])
    assert j.parse_status == "parse_failure" and j.scores_a is None and j.scores_b is None
    assert j.details["attempt_outputs"] == [output] and j.details["failure"]
