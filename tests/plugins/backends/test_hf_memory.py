"""Memory planned from the card (`hf:`'s hf_memory): the arithmetic on Llama-3.1-8B's real
configuration with the free memory given (nothing is measured), a window that cannot fit
refused by `lceval run` with one line naming the sizes, and a model that runs out of memory
mid-run answered all the same with a smaller batch, then a smaller prompt chunk. The model
that runs out of memory is a tiny Llama registered with transformers' public Auto classes,
raising `torch.OutOfMemoryError` when a pass holds more than it allows. No download; seconds."""

from __future__ import annotations

import importlib.util
import json
import logging
import re
import shutil
from pathlib import Path

import pytest

from lceval.errors import UserError

from tests.cli import call
from tests.plugins.backends import test_hf_backend as tiny

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed"),
    pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers not installed"),
    pytest.mark.skipif(importlib.util.find_spec("tokenizers") is None, reason="tokenizers not installed"),
]

folder = tiny.folder  # the tiny model folder fixture (an assignment keeps pyflakes quiet)
GiB = 1024 ** 3

#: Llama-3.1-8B's configuration (its config.json's shape), as the GPU check builds it
LLAMA_31_8B = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                   num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=131072,
                   tie_word_embeddings=False)


@pytest.fixture(scope="module")
def llama8b():
    import transformers

    return transformers.LlamaConfig(**LLAMA_31_8B)


def plan(config, free_gib: float, window: int = 131072, **kwargs):
    from lceval_plugins.backends.hf_memory import plan_memory

    return plan_memory(config, device="cuda", width=2, window=window, chunk=1024,
                       free=(int(free_gib * GiB), "free (given by the test)"), **kwargs)


def test_the_plan_of_llama_3_1_8b_on_an_80_gb_card(llama8b):
    from lceval_plugins.backends.hf_memory import kv_bytes_per_token, weights_bytes

    assert kv_bytes_per_token(llama8b, 2) == 128 * 1024  # 2 x 32 layers x 8 key heads x 128 dims x 2 bytes
    assert weights_bytes(llama8b, 2) / 2 == pytest.approx(8.03e9, rel=0.005)  # its 8.03B parameters
    full = plan(llama8b, 80, weights_loaded=False)
    # 80% of 80 GiB = 64 GiB, less 15.0 GiB of weights and 1.2 GiB of scratch: 47.8 GiB, 2.99 windows
    assert full.kv_tokens == pytest.approx(47.8 * GiB / (128 * 1024), rel=0.005)
    assert full.batch_size == 2 and full.batch_from == "memory"
    full.check_fits()
    short = plan(llama8b, 80, window=32768, weights_loaded=False)
    assert short.batch_size == short.kv_tokens // 32768 == 12  # a smaller window: more prompts at once
    loaded = plan(llama8b, 80 - 15, weights_loaded=True)  # measured after the weights: nothing set aside
    assert loaded.weights_bytes == 0 and loaded.kv_tokens > full.kv_tokens
    given = plan(llama8b, 1, weights_loaded=True, memory_gib=40.0)  # as given, weights included
    assert given.budget_bytes == 40 * GiB and given.weights_bytes == weights_bytes(llama8b, 2)
    assert given.kv_tokens == pytest.approx((40 - 15.0 - 1.2) * GiB / (128 * 1024), rel=0.01)
    assert plan(llama8b, 80, weights_loaded=False, batch_size=7).batch_size == 7
    line = full.describe()
    assert "80% of 80.0 GiB free" in line and "15.0 GiB of weights" in line and "batch 2 (memory)" in line


def test_a_window_that_cannot_fit_is_refused_naming_the_sizes(llama8b):
    small = plan(llama8b, 24, weights_loaded=False)  # 19.2 GiB: the weights and 3.0 GiB of keys and values
    with pytest.raises(UserError) as err:
        small.check_fits()
    text = str(err.value)
    assert "\n" not in text and "n_ctx=131072" in text and "16.0 GiB" in text  # one window's keys and values
    assert f"({small.kv_tokens:,} tokens)" in text and f"n_ctx={small.kv_tokens} or less" in text
    plan(llama8b, 24, window=small.kv_tokens, weights_loaded=False).check_fits()  # what it suggests fits
    with pytest.raises(UserError, match="smaller model"):
        plan(llama8b, 10, weights_loaded=False).check_fits()  # not even the weights


def test_lceval_run_refuses_a_window_that_cannot_fit_with_exit_2(folder, tiny_home, tmp_path):
    model = f"hf:{folder},dtype=auto,device=cpu,n_ctx=2048,memory_gib=0.001"
    code, _, err = call("run", "--tasks", "elitr_qa", "--model", model, "--limit", "1", "--no-progress",
                        "--data-home", tiny_home, "--output", tmp_path / "runs")
    assert code == 2
    (line,) = err.strip().splitlines()
    assert "n_ctx=2048 cannot fit on cpu" in line and "memory_gib=0.001" in line and "MiB" in line
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


# -- running out of memory -----------------------------------------------------------------------
def _oom_classes():
    """A Llama that raises torch's out-of-memory error when a pass samples more than
    `oom_over_rows` sequences or runs more than `oom_over_tokens` tokens (config fields),
    registered under its own model type with transformers' Auto classes."""
    import torch
    import transformers

    class OomConfig(transformers.LlamaConfig):
        model_type = "lceval-oom-test"

    class OomLlama(transformers.LlamaForCausalLM):
        config_class = OomConfig

        def forward(self, input_ids=None, logits_to_keep=0, **kwargs):
            rows = len(set(logits_to_keep.tolist())) if torch.is_tensor(logits_to_keep) else 1
            tokens = input_ids.shape[1] if input_ids is not None else 0
            if rows > getattr(self.config, "oom_over_rows", 10**9) or \
                    tokens > getattr(self.config, "oom_over_tokens", 10**9):
                raise torch.OutOfMemoryError(f"out of memory (test): {rows} rows, {tokens} tokens")
            return super().forward(input_ids=input_ids, logits_to_keep=logits_to_keep, **kwargs)

    transformers.AutoConfig.register(OomConfig.model_type, OomConfig)
    transformers.AutoModelForCausalLM.register(OomConfig, OomLlama)


@pytest.fixture(scope="module")
def oom_folder(folder, tmp_path_factory):
    """make(**limits): the tiny model's folder, its weights and tokenizer, as an OomLlama."""
    _oom_classes()
    made: dict[str, Path] = {}

    def make(**limits: int) -> Path:
        out = tmp_path_factory.mktemp("oom")
        shutil.copytree(folder, out, dirs_exist_ok=True)
        config = json.loads((out / "config.json").read_text())
        config.update(model_type="lceval-oom-test", architectures=["OomLlama"], **limits)
        (out / "config.json").write_text(json.dumps(config))
        made[str(limits)] = out
        return out

    return make


def test_a_batch_that_runs_out_of_memory_goes_on_smaller_and_loses_nothing(folder, oom_folder, tiny_home,
                                                                          tmp_path, monkeypatch):
    """elitr_qa on the tiny ELITR fixture with a batch of 4 on a model that cannot sample two
    sequences in one pass: every answer comes back, the same as one request at a time, and the
    manifest's backend stats say what happened."""
    from tests.conftest import run_engine

    from lceval_plugins.backends.hf import make_hf

    said: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())
    hf_log = logging.getLogger("lceval.hf")  # what `lceval -v` prints (the CLI stops propagation)
    hf_log.addHandler(handler)
    answers, stats = {}, {}
    try:
        for name, path, batch in (("plain", folder, 1), ("oom", oom_folder(oom_over_rows=1), 4)):
            monkeypatch.setenv("LCEVAL_CACHE", str(tmp_path / f"{name}.sqlite"))
            backend = make_hf(str(path), {"dtype": "auto", "batch_size": str(batch)})
            try:
                run_dir, _, state = run_engine(backend, "elitr_qa", tiny_home, tmp_path / name,
                                               overrides={"generation.max_new_tokens": 8})
            finally:
                backend.close()
            answers[name] = [s.response for t in state.tasks for s in t.samples]
            stats[name] = json.loads((run_dir / "manifest.json").read_text())["backend_stats"]["model"]
    finally:
        hf_log.removeHandler(handler)
    assert answers["oom"] == answers["plain"] and len(answers["oom"]) == 7 and all(a is not None for a in answers["oom"])
    oom = stats["oom"]
    assert oom["oom_retries"] >= 1 and oom["batch_size_after_oom"] == 1 and oom["prompt_chunk_after_oom"] == 1024
    assert stats["plain"]["oom_retries"] == 0 and "batch 1 (batch_size)" in stats["plain"]["memory_plan"]
    # the batch it had when memory ran out depends on what the plan found free: each retry says
    # it goes on with a smaller one
    retries = [re.search(r"out of memory .*\(batch (\d+),.*going on with batch (\d+)", line) for line in said]
    retries = [(int(m.group(1)), int(m.group(2))) for m in retries if m]
    assert retries and all(after < before for before, after in retries), said


def test_a_prompt_chunk_that_runs_out_of_memory_is_halved_down_to_the_floor(oom_folder):
    """A pass of more than 300 tokens runs out: a 500-token prompt is prefilled in chunks of
    256. A model that cannot run even 64 tokens stops with one line naming the sizes."""
    from lceval_plugins.backends.hf import make_hf

    halved = make_hf(str(oom_folder(oom_over_tokens=300)), {"dtype": "auto", "batch_size": "1"})
    try:
        long = tiny.ask("Who opened the meeting?", context=tiny.CORPUS[0] * 20)
        got = halved.generate([long])[0]
        assert got.prompt_tokens > 500 and got.prefilled_tokens == got.prompt_tokens and got.completion_tokens
        assert halved.stats()["prompt_chunk_after_oom"] == 256 and halved.stats()["oom_retries"] == 2
    finally:
        halved.close()
    stuck = make_hf(str(oom_folder(oom_over_tokens=10)), {"dtype": "auto", "batch_size": "1"})
    try:
        with pytest.raises(UserError) as err:
            stuck.generate([long])
    finally:
        stuck.close()
    assert "\n" not in str(err.value) and "prompt chunks of 64 tokens" in str(err.value)
    assert "memory plan: cpu:" in str(err.value) and "in the cache" in str(err.value)
