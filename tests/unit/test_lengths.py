"""Lengths as people write them (issue 44): `lceval.tokens.parse_lengths`, the one parser of
`--context-lengths` and of the lengths plugins read, and `tokens_label`, the names of the
variants (`@1m`) that it reads back."""

from __future__ import annotations

import json

import pytest

from lceval.errors import UserError
from lceval.tokens import parse_length, parse_lengths, tokens_label

from ..cli import call
from ..conftest import ScriptedModel, serve_scripted

K, M = 1024, 1024 * 1024


@pytest.mark.parametrize("text,expected", [
    ("1m", [M]), ("2M", [2 * M]), ("1.5m", [3 * M // 2]), ("128K", [128 * K]), ("128k", [128 * K]),
    ("full", [None]), ("12000", [12000]), ("0.5k", [512]),
    ("8k..1m", [2 ** n * K for n in range(3, 11)]),       # 8k 16k ... 512k 1m: powers of two
    ("4k..4k", [4 * K]),
    (" 16k, 4k,full,12000 ", [4 * K, 12000, 16 * K, None]),  # shortest first, full last
    ("1k..4k,1m,full", [K, 2 * K, 4 * K, M, None]),
])
def test_each_accepted_form(text, expected):
    assert parse_lengths(text) == expected


@pytest.mark.parametrize("text,words", [
    ("3x", "'3x' is not a length"),
    ("8k..", "needs a start and an end"),
    ("..8k", "needs a start and an end"),
    ("1m..8k", "goes down"),
    ("8k..100k", "times a power of two"),
    ("0", "no tokens"),
    ("1.1m", "not a whole number"),
    ("1.5", "not a whole number"),
    ("-4k", "not a length"),
    ("4k,4096", "given twice"),
    ("8k..32k,16k", "given twice"),
    ("", "no length given"),
])
def test_each_refusal_names_the_flag_the_value_and_what_is_accepted(text, words):
    with pytest.raises(UserError) as err:
        parse_lengths(text)
    assert err.value.field == "--context-lengths" and words in err.value.message
    assert "1m" in err.value.message or "given twice" in words  # what is accepted, in the same line


@pytest.mark.parametrize("n,label", [(M, "1m"), (2 * M, "2m"), (128 * K, "128k"), (3 * M // 2, "1536k"),
                                     (12000, "12000"), (512 * K, "512k")])
def test_labels_round_trip(n, label):
    assert tokens_label(n) == label and parse_length(label) == n


def test_authors_thousands_use_the_same_parser():
    """NeedleBench's and NoLiMa's `32K` is 32,000 (K = 1,000): the same parser, another kilo."""
    from lceval_plugins.haystack.lengths import length_of

    assert parse_length("1M", kilo=1000) == length_of("1M") == 1_000_000 and length_of("1.5K") == 1500


@pytest.mark.parametrize("value,words", [("3x", "'3x'"), ("8k..", "'8k..'"), ("1m..8k", "'1m..8k'")])
def test_bad_lengths_exit_2_in_one_line(value, words, monkeypatch, tmp_path):
    serve_scripted(monkeypatch)
    code, _, err = call("run", "--tasks", "elitr_qa", "--model", "scripted:x", "--context-lengths", value,
                        "--output", tmp_path)
    assert code == 2 and "--context-lengths" in err and words in err and "8k..1m" in err
    assert len(err.strip().splitlines()) == 1


def test_a_length_past_the_window_is_skipped_in_one_line_and_the_rest_runs(tiny_home, tmp_path, monkeypatch):
    serve_scripted(monkeypatch, lambda: ScriptedModel(window=4096))
    code, out, err = call("run", "--tasks", "elitr_qa", "--model", "scripted:x", "--context-lengths", "1k,8k..16k,full",
                          "--split", "dev", "--data-home", tiny_home, "--output", tmp_path / "runs", "--no-progress")
    assert code == 0, err
    said = [line for line in err.splitlines() if "past the model's window" in line]
    assert len(said) == 2 and "8k" in said[0] and "16k" in said[1] and "4,096" in said[0], err
    results = json.loads(next((tmp_path / "runs").glob("*/results.json")).read_text())
    assert list(results["tasks"]) == ["elitr_qa@1k", "elitr_qa"]
    assert [(s["task"], s["window"]) for s in results["skipped_lengths"]] == [("elitr_qa@8k", 4096),
                                                                             ("elitr_qa@16k", 4096)]
    assert "elitr_qa@16k: not run" in out
    # every length past the window: nothing left to run, an error naming the flag
    code, _, err = call("run", "--tasks", "elitr_qa", "--model", "scripted:x", "--context-lengths", "8k,1m",
                        "--data-home", tiny_home, "--output", tmp_path / "runs", "--dry-run")
    assert code == 2 and "--context-lengths" in err and "1m" in err
