"""Transcript noise (paper 001, App. A): alignment, corpora, rules, injection at a target WER."""

from __future__ import annotations

import json
import random
import sys
import types
from pathlib import Path

import pytest

from lceval.errors import UserError
from lceval_plugins.transcript_noise.align import align, edit_counts
from lceval_plugins.transcript_noise.corpus import Corpus, canonical_sha256, read_corpus
from lceval_plugins.transcript_noise.inject import inject, measure
from lceval_plugins.transcript_noise.rules import build_rules, load_rules, write_rules
from lceval_plugins.transcript_noise.text import PROTECTED, normalize, words
from tests.paths import TEST_DATA

DATA = TEST_DATA / "noise"
CORPUS = DATA / "espeak_pocketsphinx.jsonl"

jiwer = pytest.importorskip("jiwer")


@pytest.fixture(scope="module")
def shipped_rules(tmp_path_factory) -> Path:
    """Rules from the shipped espeak-ng -> pocketsphinx corpus (real recognition errors)."""
    path = tmp_path_factory.mktemp("rules") / "rules.json"
    write_rules(build_rules(read_corpus(str(CORPUS))), path)
    return path


def test_alignment_is_minimal_as_jiwer_counts_it():
    rng = random.Random(7)
    vocab = ["a", "b", "c", "the", "then", "them", "meeting", "meet"]
    for _ in range(300):
        ref = [rng.choice(vocab) for _ in range(rng.randint(1, 12))]
        hyp = [rng.choice(vocab) for _ in range(rng.randint(0, 12))]
        counts = edit_counts(align(ref, hyp))
        out = jiwer.process_words(" ".join(ref), " ".join(hyp) if hyp else "")
        assert counts["substitution"] + counts["deletion"] + counts["insertion"] == (
            out.substitutions + out.deletions + out.insertions), (ref, hyp)
        assert counts["match"] + counts["substitution"] + counts["deletion"] == len(ref)


def test_alignment_pairs_similar_words_among_equal_cost_paths():
    edits = align(["the", "earlier", "meeting"], ["early", "meeting"])
    assert [(e.ref, e.hyp) for e in edits] == [("the", None), ("earlier", "early"), ("meeting", "meeting")]


def test_normalisation_is_the_wer_one():
    assert normalize("(PERSON3)") == "person3" and normalize("it's,") == "its" and normalize("--") == ""
    assert words("Hi [PERSON12], yeah - it works.") == ["hi", "person12", "yeah", "it", "works"]
    assert all(PROTECTED.search(t) for t in ["(PERSON3)", "[ORGANIZATION11].", "<laugh/>", "IW[PROJECT2]"])
    assert not PROTECTED.search("(yes)") and not PROTECTED.search("[sic]")


def test_corpus_formats(tmp_path):
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text('{"reference": "a b", "hypothesis": "a c"}\n\n'
                     '{"truth": "Early bird", "asr_hypothesis": ["early", "bird."]}\n')
    corpus = read_corpus(str(jsonl))
    assert corpus.pairs == [("a b", "a c"), ("Early bird", "early bird.")] and corpus.sha256_of == "file"
    tsv = tmp_path / "c.tsv"
    tsv.write_text("reference\thypothesis\nthe cat\tthe hat\n")
    assert read_corpus(str(tsv)).pairs == [("the cat", "the hat")]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"reference": "a"}\n')
    with pytest.raises(UserError) as err:
        read_corpus(str(bad))
    assert err.value.file == str(bad) and err.value.line == 1
    (tmp_path / "bad.tsv").write_text("only one column\n")
    with pytest.raises(UserError, match="2 tab-separated columns"):
        read_corpus(str(tmp_path / "bad.tsv"))


def test_red_ace_through_datasets_all_splits(monkeypatch):
    calls = []

    def load_dataset(name):
        calls.append(name)
        return {"train": [{"truth": "one two", "asr_hypothesis": ["one", "too"]}],
                "validation": [{"truth": "three", "asr_hypothesis": []}],
                "test": [{"truth": "four", "asr_hypothesis": ["four", "for"]}]}

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    corpus = read_corpus("hf:google/red_ace_asr_error_detection_and_correction")
    assert calls == ["google/red_ace_asr_error_detection_and_correction"]
    assert corpus.pairs == [("four", "four for"), ("one two", "one too"), ("three", "")]  # splits sorted
    assert corpus.sha256 == canonical_sha256(corpus.pairs) and corpus.sha256_of == "canonical-jsonl"
    with pytest.raises(UserError, match="no split"):
        read_corpus("hf:google/red_ace_asr_error_detection_and_correction:dev")


def test_rules_counts_and_distributions(tmp_path):
    corpus = Corpus("mem", "0" * 64, "file", [("the earlier meeting", "the early meeting"),
                                               ("the earlier one", "earlier one um"),
                                               ("earlier", "earliest")])
    rules = build_rules(corpus)
    assert rules["counts"] == {"reference_words": 7, "correct": 4, "substitutions": 2, "deletions": 1,
                               "insertions": 1}
    assert rules["rules"]["earlier"] == {"seen": 3, "counts": {"earliest": 1, "early": 1},
                                         "p": {"earliest": 0.5, "early": 0.5}}
    assert rules["rules"]["the"]["counts"] == {"": 1}  # a deletion is the empty replacement
    assert rules["insertions"]["counts"] == {"um": 1} and rules["insertions"]["rate"] == round(1 / 7, 6)
    assert "meeting" not in rules["rules"]  # never wrong, so no rule
    loaded = load_rules(write_rules(rules, tmp_path / "r.json"))
    assert loaded.n_rules == 2 and loaded.vocabulary == ("earliest", "early")


def test_bad_rules_files_are_user_errors(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(UserError) as err:
        load_rules(path)
    assert err.value.field == "format"
    path.write_text(json.dumps({"format": "lceval-asr-rules", "version": 1,
                                "counts": {"reference_words": 1, "substitutions": 1, "deletions": 0, "insertions": 0},
                                "rules": {"a": {"counts": {"a": 1}}}}))
    with pytest.raises(UserError, match="own replacement"):
        load_rules(path)


TEXT = ("(PERSON1) Hello everyone, we should start the meeting now.\n"
        "(PERSON2) Yes. [PERSON1] asked [ORGANIZATION3] about the demo <laugh/> and the budget.\n\n"
        "  (PERSON1) The earlier plan was to meet on Friday at noon, okay?\n") * 40


def protected_tokens(text: str) -> list[str]:
    return [t for t in text.split() if PROTECTED.search(t)]


def test_level_zero_returns_the_same_bytes(shipped_rules):
    out = inject(TEXT, load_rules(shipped_rules), 0.0, seed=3)
    assert out.text == TEXT and out.applied_rate == 0


def test_same_seed_same_bytes_other_seed_other_text(shipped_rules):
    rules = load_rules(shipped_rules)
    a, b, c = (inject(TEXT, rules, 0.4, seed=s).text for s in (1, 1, 2))
    assert a == b and a != c and a != TEXT


def test_placeholders_and_lines_intact_unless_asked(shipped_rules):
    rules = load_rules(shipped_rules)
    for level in (0.2, 0.6, 1.0):
        noisy = inject(TEXT, rules, level, seed=0).text
        assert protected_tokens(noisy) == protected_tokens(TEXT)
        assert noisy.count("\n") == TEXT.count("\n")
    loose = inject(TEXT, rules, 1.0, seed=0, protect=False).text
    assert protected_tokens(loose) != protected_tokens(TEXT)


def test_exact_calibration_applies_the_target_and_wer_rises(shipped_rules):
    rules = load_rules(shipped_rules)
    effective = []
    for level in (0.2, 0.4, 0.6, 0.8, 1.0):
        out = inject(TEXT, rules, level, seed=0, calibration="exact")
        # the expected edits are the target's share of all words (tags included)
        assert out.applied_rate == pytest.approx(level, abs=0.06)
        wer = measure(TEXT, out.text)["wer"]
        assert wer <= out.applied_rate + 1e-9  # WER counts the fewest edits: never more than applied
        effective.append(wer)
    assert effective == sorted(effective) and effective[0] > 0.1


def test_simulator_calibration_plans_fewer_edits_at_high_rates(shipped_rules):
    rules = load_rules(shipped_rules)
    applied = [inject(TEXT, rules, level, seed=0).applied_rate for level in (0.2, 1.0)]
    assert applied[0] == pytest.approx(0.2, abs=0.05)
    assert 0.6 < applied[1] < 0.9  # the simulator's formula under-delivers at 100% (paper Table 5)
    with pytest.raises(UserError, match="calibration"):
        inject(TEXT, rules, 0.2, seed=0, calibration="magic")


def test_measure_counts_against_clean_with_jiwer():
    m = measure("The cat sat.\n(PERSON1) on the mat\n", "the hat sat\n(PERSON1) on mat extra\n")
    # "the mat" -> "mat extra" is two edits whichever way they are aligned; tags count as words
    assert m["substitutions"] + m["deletions"] + m["insertions"] == 3
    assert m["hits"] + m["substitutions"] + m["deletions"] == 7
    assert m["wer"] == pytest.approx(3 / 7)
