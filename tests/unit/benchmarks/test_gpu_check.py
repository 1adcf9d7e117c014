"""benchmarks/gpu_check.py, the GPU check, run whole on a tiny configuration on the CPU so it
cannot rot unseen before a GPU is at hand: the model folder it writes (random weights, its own
tokenizer), the three systems on shared-prefix prompts, `lceval run` of RULER through the
command line at two lengths, and the floors. Work is counted (tokens), never timed."""

from __future__ import annotations

import importlib.util

import pytest

from tests.paths import benchmark_script

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed"),
    pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers not installed"),
    pytest.mark.skipif(importlib.util.find_spec("tokenizers") is None, reason="tokenizers not installed"),
]


@pytest.fixture
def gpu_check():
    with benchmark_script("gpu_machine"), benchmark_script("gpu_check") as module:
        yield module


def test_the_gpu_check_runs_whole_on_a_tiny_model_on_the_cpu(gpu_check, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    # the smoke run docs/performance.md shows: its sizes are the script's own for `tiny`; the
    # --work folder does not exist yet (the script makes it)
    work = tmp_path / "not-yet" / "work"
    got = gpu_check.main(["--config", "tiny", "--device", "cpu", "--work", str(work), "--out", str(tmp_path / "out")])
    assert work.is_dir()
    new, transcripts, questions = (gpu_check.SIZES["tiny"][k] for k in ("new_tokens", "transcripts", "questions"))
    printed = capsys.readouterr().out
    assert got["errors"] == {} and "failed: nothing" in printed
    assert got["machine"]["device"] == "cpu" and got["machine"]["flops"] > 0 and got["machine"]["bandwidth"] > 0
    assert set(got["machine"]["versions"]) == {"python", "torch", "cuda", "transformers", "lceval"}
    assert got["model"]["tokenizer_size"] <= gpu_check.CONFIGS["tiny"]["vocab_size"]

    decoding = got["decoding"]
    lceval, batch, one = decoding["outcomes"]
    assert lceval["system"].startswith("lceval hf:") and "generate_batch" in batch["system"]
    requests = transcripts * questions
    assert (lceval["requests"], batch["requests"], one["requests"]) == (requests, requests, 2)
    assert gpu_check.SIZES["tiny"]["generate_requests"] == 2 and gpu_check.SIZES["tiny"]["ruler_lengths"] == "1k,2k"
    assert (lceval["generated"], batch["generated"], one["generated"]) == (requests * new, requests * new, 2 * new)
    # lceval prefills each transcript once: the floor, but for the chat template's first tokens,
    # which the two transcripts share and each prefills for itself
    floor = decoding["floor_tokens"]
    assert floor <= lceval["prefilled"] <= floor + 32 and decoding["prompt_tokens"] > 2 * floor
    assert decoding["floor"]["prefill_flops"] > 0 and decoding["floor"]["decode_bytes"] > 0
    assert "x generate_batch's" in printed and "x the floor" in printed

    assert [r["length"] for r in got["ruler"]] == ["1k", "2k"]
    for r, length in zip(got["ruler"], (1024, 2048)):
        assert r["exit"] == 0 and r["samples"] == 1 and r["oom_retries"] == 0
        budget = length - 128  # RULER's length holds the prompt and its 128 answer tokens
        assert 0.97 * budget <= r["prompt_tokens"] <= budget and r["prefilled"] == r["prompt_tokens"]
        assert r["memory_plan"].startswith("cpu: ") and "batch" in r["memory_plan"]
        assert set(r["phases_s"]) == {"load", "prefill", "decode", "other"} and r["peak_bytes"] is None
        assert r["prefill_flops"] > 0 and r["prefill_share"] is not None
    assert (tmp_path / "out" / "gpu_check.json").is_file()
    assert not any(p.name.startswith("lceval-gpu-check-") for p in tmp_path.iterdir())  # its work folder is removed
