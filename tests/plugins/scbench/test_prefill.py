"""The real SmolLM2 model (llama.cpp, 2k window) on SCBench's Retr.KV rows in the real schema:
the shared context is prefilled once per session in both modes, within 1.1 x the floor - in
multi-request mode each context once plus each question's own tokens, in multi-turn mode the
whole conversation once (each turn adds its golden answer and its question to what the cache
already holds)."""

from __future__ import annotations

import json

import pytest

from tests import cli as commands

pytestmark = pytest.mark.slow


def run(name: str, tmp_path) -> tuple[list[dict], int]:
    ((run_dir, _),) = commands.run(tasks=name, models=["smollm2,n_ctx=2048"], output=tmp_path / name,
                                   overrides={"generation.max_new_tokens": 8}, progress=False)
    results = json.loads((run_dir / "results.json").read_text())
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    return samples, results["tasks"][name]["accounting"]["tokens"]["prefilled"]


def test_a_shared_context_is_prefilled_once_per_session(scbench_hub, tmp_path):
    pytest.importorskip("llama_cpp")
    samples, prefilled = run("scbench_kv_multi_request", tmp_path)
    assert len(samples) == 7  # 5 of the first session's 6 questions, 2 of the second
    contexts = {s["metadata"]["document_id"]: s["context_cut"]["kept_tokens"] for s in samples}
    own = sum(s["prompt_tokens"] - s["context_cut"]["kept_tokens"] for s in samples)
    floor = sum(contexts.values()) + own
    print(f"multi-request: prefilled {prefilled}, floor {floor}, prompts {sum(s['prompt_tokens'] for s in samples)}")
    assert prefilled <= 1.1 * floor, (prefilled, floor)
    assert prefilled < sum(s["prompt_tokens"] for s in samples) * 0.6  # far below prefilling every prompt

    samples, prefilled = run("scbench_kv", tmp_path)
    last: dict[str, int] = {}
    for s in samples:  # the last turn's prompt holds the whole conversation
        last[s["conv_id"]] = max(last.get(s["conv_id"], 0), s["prompt_tokens"])
    floor = sum(last.values())
    print(f"multi-turn: prefilled {prefilled}, floor {floor}, prompts {sum(s['prompt_tokens'] for s in samples)}")
    assert prefilled <= 1.1 * floor, (prefilled, floor)
