"""benchmarks/gpu_long_context.py, the long-context GPU check, run whole on the CPU on the tiny
configuration at 1k tokens, so it is known to work before a GPU is lent: the memory plan read
from the machine (a length that cannot fit is skipped with the plan's reason, not run), RULER
through `lceval run` with `rope_scaling` on the `hf:` model, and the long-context settings the
run recorded. Work is counted, never timed."""

from __future__ import annotations

import importlib.util
import json

import pytest

from tests.paths import benchmark_script

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed"),
    pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers not installed"),
    pytest.mark.skipif(importlib.util.find_spec("tokenizers") is None, reason="tokenizers not installed"),
]


@pytest.fixture
def check():
    with benchmark_script("gpu_machine"), benchmark_script("gpu_check"), benchmark_script("gpu_long_context") as module:
        yield module


def test_the_long_context_check_runs_whole_on_a_tiny_model_on_the_cpu(check, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    # 100,000k tokens: no machine's memory holds one such prompt's attention scratch
    got = check.main(["--config", "tiny", "--device", "cpu", "--lengths", "1k,100000k", "--work", str(tmp_path),
                      "--out", str(tmp_path / "out")])
    printed = capsys.readouterr().out
    assert got["errors"] == {} and "failed: nothing" in printed
    assert check.parse([]).lengths == "128k,512k" and check.parse([]).config == "llama-3.2-1b"
    assert check.parse([]).rope_scaling == "yarn:4"

    small, huge = got["plans"]
    assert small["fits"] and small["window"] == 1024 and small["free_bytes"] > 0
    assert small["kv_bytes"] == 1024 * 2 * 2 * 2 * 16 * 4  # keys and values, 2 layers, 2 key heads of 16, float32
    assert not huge["fits"] and "cannot fit" in got["skipped"]["100000k"] and "skipped: " in printed

    (r,) = got["ruler"]  # the length that fits ran; the other never started
    assert r["length"] == "1k" and r["exit"] == 0 and r["samples"] == 1 and r["oom_retries"] == 0
    assert "rope_scaling=yarn:4,n_ctx=1024" in r["command"]
    assert 0.97 * (1024 - 128) <= r["prompt_tokens"] <= 1024 - 128 and r["prefilled"] == r["prompt_tokens"]
    # what the loaded model held: YaRN x4 over the tiny config's 8,192 positions, the run's window
    assert r["long_context"]["window"] == 1024 and r["long_context"]["position_embeddings"] == 4 * 8192
    assert r["long_context"]["rope"] == {"type": "yarn", "factor": 4.0, "original_window": 8192}
    saved = json.loads((tmp_path / "out" / "gpu_long_context.json").read_text())
    assert saved["ruler"][0]["long_context"] == r["long_context"] and not (tmp_path / "out" / "gpu_check.json").exists()
    assert not any(p.name.startswith("lceval-long-context-") for p in tmp_path.iterdir())  # its work folder is removed
