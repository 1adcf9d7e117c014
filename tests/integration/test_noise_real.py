"""Transcript noise on the real ELITR transcripts, and a real ASR corpus made here
(espeak-ng -> pocketsphinx on sentences of the transcripts; nothing is committed from them)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lceval.io import sha256_file
from lceval_plugins.transcript_noise.corpus import read_corpus
from lceval_plugins.noise.report import table5_from_transcripts
from lceval_plugins.transcript_noise.rules import build_rules, write_rules
from lceval_plugins.transcript_noise.text import PROTECTED
from lceval_plugins.transcript_noise.transcripts import noisy_transcript

pytest.importorskip("jiwer")
CORPUS = Path(__file__).resolve().parents[1] / "data" / "noise" / "espeak_pocketsphinx.jsonl"
LEVELS = [0.2, 0.4, 0.6, 0.8, 1.0]


def protected(text: str) -> list[str]:
    return [t for t in text.split() if PROTECTED.search(t)]


@pytest.fixture(scope="module")
def rules(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("rules") / "rules.json"
    return write_rules(build_rules(read_corpus(str(CORPUS))), path)


def test_effective_wer_rises_with_the_target_on_every_meeting(real_home, rules, tmp_path):
    paths = sorted((real_home / "elitr-bench" / "transcripts").glob("*.txt"))
    assert len(paths) == 18
    rows = table5_from_transcripts(paths, rules, LEVELS, seed=0, protect=True, data_home=tmp_path)
    effective = [r.effective_wer for r in rows]
    assert effective == sorted(effective)
    # the shape of paper 001's Table 5: near the target at 20%, far below it at 100%
    assert 0.17 < effective[0] < 0.22 and 0.65 < effective[-1] < 0.82
    assert all(r.effective_wer <= r.applied_rate <= r.target_wer + 0.01 for r in rows)
    exact = table5_from_transcripts(paths[:3], rules, [0.2, 1.0], 0, True, tmp_path, calibration="exact")
    assert [r.applied_rate for r in exact] == pytest.approx([0.2, 1.0], abs=0.02)  # the target, as edits
    for path in paths:  # per meeting too, and nothing protected was touched
        clean = path.read_text(encoding="utf-8")
        wers = []
        for level in LEVELS:
            noisy, facts = noisy_transcript(clean, rules, level, 0, True, tmp_path)
            text = noisy.read_text(encoding="utf-8")
            assert protected(text) == protected(clean), (path.name, level)
            assert text.count("\n") == clean.count("\n")
            wers.append(facts["effective_wer"])
        assert wers == sorted(wers), path.name


def test_same_seed_same_bytes_in_a_fresh_data_home(real_home, rules, tmp_path):
    clean = (real_home / "elitr-bench" / "transcripts" / "meeting_en_test2_001.txt").read_text(encoding="utf-8")
    a, fa = noisy_transcript(clean, rules, 0.6, 7, True, tmp_path / "home_a")
    b, fb = noisy_transcript(clean, rules, 0.6, 7, True, tmp_path / "home_b")
    c, _ = noisy_transcript(clean, rules, 0.6, 8, True, tmp_path / "home_a")
    assert a.read_bytes() == b.read_bytes() and fa == fb
    assert c.read_bytes() != a.read_bytes()
    assert sha256_file(a) == fa["noisy_sha256"]


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng not installed (apt-get install espeak-ng)")
@pytest.mark.skipif(importlib.util.find_spec("pocketsphinx") is None, reason="pocketsphinx not installed")
def test_a_real_asr_corpus_from_the_transcripts(real_home, tmp_path):
    out = tmp_path / "corpus.jsonl"
    run = subprocess.run([sys.executable, "-m", "lceval", "noise", "corpus", "--elitr", "--split", "test2",
                          "--sentences", "3", "--data-home", str(real_home), "--quiet", "-o", str(out)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    pairs = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(pairs) == 3 and [p["voice"] for p in pairs] == ["en-us", "en-gb", "en-us"]
    transcripts = " ".join(p.read_text(encoding="utf-8") for p in (real_home / "elitr-bench" / "transcripts").glob("*.txt"))
    for p in pairs:
        assert p["reference"] in transcripts and not PROTECTED.search(p["reference"])
        assert p["asr"].startswith("pocketsphinx") and p["tts"].startswith("espeak-ng")
        assert p["hypothesis"] == p["hypothesis"].lower()  # what the recogniser wrote, lower case
    assert any(p["hypothesis"] for p in pairs)
    rules_path = tmp_path / "rules.json"
    made = subprocess.run([sys.executable, "-m", "lceval", "noise", "rules", str(out), "-o", str(rules_path)],
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    rules = json.loads(rules_path.read_text())
    assert rules["corpus"]["sha256"] == sha256_file(out) and rules["corpus"]["pairs"] == 3
