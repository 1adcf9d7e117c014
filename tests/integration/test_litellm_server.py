"""The litellm backend against a real OpenAI-compatible server: llama-cpp-python's server
around SmolLM2-135M on loopback (tests/llama_server.py), end to end through `lceval run`."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from lceval.cli import main
from lceval.types import GenerationParams, GenerationRequest, Message

from .. import llama_server as _server
from ..conftest import only_run
from ..llama_server import SMOLLM2, LlamaServer

llama_server = _server.llama_server  # the module-scoped fixture: one server for this module

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed"),
]



def test_tokens_are_the_models_own(llama_server: LlamaServer) -> None:
    """The API's usage counts what the model really read: the same number of tokens the
    llamacpp backend computes from the GGUF's own chat template and tokenizer, and the same
    greedy answer."""
    from lceval_plugins.backends.litellm_api import make_litellm
    from lceval_plugins.backends.llamacpp import make_llamacpp

    api = make_litellm(f"openai/{llama_server.alias}", {"api_base": llama_server.url, "concurrency": "2"})
    local = make_llamacpp(SMOLLM2, {"n_ctx": "4096", "n_threads": "1"})
    try:
        requests = [GenerationRequest(request_id=str(i), messages=[Message("user", q)],
                                      params=GenerationParams(max_new_tokens=12))
                    for i, q in enumerate(["What is the capital of France? Answer in one word.",
                                           "Name a primary colour."])]
        gens = api.generate(requests)
        assert [g.prompt_tokens for g in gens] == [local.count_tokens(r.messages) for r in requests]
        assert all(1 <= g.completion_tokens <= 12 and g.text for g in gens)
        assert gens[0].text == local.generate(requests[:1])[0].text
        stats = api.stats()
        assert stats["attempts"] == 2 and stats["failed"] == 0
        assert stats["prompt_tokens"] == sum(g.prompt_tokens for g in gens)
    finally:
        local.close()


def test_elitr_run_end_to_end_then_fully_cached(llama_server: LlamaServer, tiny_home: Path,
                                                tmp_path: Path) -> None:
    argv = ["run", "--tasks", "elitr_qa", "--model", llama_server.spec(concurrency="2", context_window="4096"),
            "--data-home", str(tiny_home), "--no-progress", "--set", "generation.max_new_tokens=24"]
    assert main([*argv, "--output", str(tmp_path / "first")]) == 0
    run_dir = only_run(tmp_path / "first")
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 7 and all(s["response"] for s in samples)
    # the Fig. 4 prompt plus a transcript: well over 100 real tokens each, as the server counted
    assert all(100 < s["prompt_tokens"] < 4096 and 1 <= s["completion_tokens"] <= 24 for s in samples)
    # llama.cpp's server reports no cached prompt tokens: prefill unknown, not the whole prompt
    assert all(s["prefilled_tokens"] is None for s in samples)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    api = manifest["backend_stats"]["model"]
    assert api["attempts"] == 7 and api["succeeded"] == 7 and api["failed"] == 0
    assert api["prompt_tokens"] == sum(s["prompt_tokens"] for s in samples) == manifest["usage"]["prompt_tokens"]
    assert manifest["usage"]["prefilled_tokens"] is None and api["responses_without_cached_tokens"] == 7
    assert api["sampling"]["sent"]["repeat_penalty"] == [1.0]  # sent: the server's 1.1 never applies
    assert api["completion_tokens"] == sum(s["completion_tokens"] for s in samples)

    assert main([*argv, "--output", str(tmp_path / "again")]) == 0
    again = json.loads((only_run(tmp_path / "again") / "manifest.json").read_text())
    assert again["usage"]["cache_hits"] == 7 and again["usage"]["generated"] == 0
    assert again["backend_stats"]["model"]["attempts"] == 0  # nothing sent to the server


def test_context_policy_cuts_with_the_models_own_tokenizer(llama_server: LlamaServer, tiny_home: Path,
                                                           tmp_path: Path) -> None:
    """tokenizer=llamacpp:GGUF lends the API model its tokenizer and chat template, so
    truncate-middle can cut to a window; the server's own count proves every prompt fit."""
    window, answer = 160, 24
    spec = llama_server.spec(tokenizer=f"llamacpp:{SMOLLM2}", context_window=str(window))
    assert main(["run", "--tasks", "elitr_qa", "--model", spec, "--data-home", str(tiny_home),
                 "--output", str(tmp_path / "runs"), "--no-progress", "--context-policy", "truncate-middle",
                 "--set", f"generation.max_new_tokens={answer}"]) == 0
    samples = [json.loads(line) for line in (only_run(tmp_path / "runs") / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 7 and all(s["response"] for s in samples)
    assert all(s["prompt_tokens"] + answer <= window for s in samples), [s["prompt_tokens"] for s in samples]
    cut = {s["metadata"]["meeting_id"] for s in samples if s["context_cut"]["action"] == "truncated"}
    assert {"meeting_en_dev_901", "meeting_en_dev_902"} <= cut  # their full prompts need 193 and 164
