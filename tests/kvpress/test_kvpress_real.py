"""kvpress's presses through lceval's `hf:` backend against kvpress's own pipeline, for real, on
a tiny random-weight Llama (test_hf_backend.py's, 4 layers, no download): the same press gives the same
greedy answers token for token, a context's questions read one compressed cache as kvpress's
pipeline does, and the cache keeps the share of the context the ratio says.

kvpress pins transformers<5.3, so this runs in a venv of its own (`.ci/kvpress`; marked
`kvpress`, skipped where kvpress is not installed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from lceval.types import GenerationParams, GenerationRequest, Message
from tests.plugins.backends.test_hf_backend import CORPUS, tiny_folder

pytestmark = [pytest.mark.kvpress,
              pytest.mark.skipif(importlib.util.find_spec("kvpress") is None, reason="kvpress not installed")]

CONTEXT = "Meeting:\n" + " ".join(CORPUS[:9]) + "\n"
QUESTIONS = ["Question: Who opened the meeting?", "Question: What broke?", "Question: When is the next meeting?"]
NEW = 10
#: presses of each kind: scores from attention (snapkv, tova), from the keys alone (knorm), by
#: position (streaming_llm). The head-wise ones (expected_attention, adakv_snapkv: AdaKV masks
#: keys through kvpress's patched attention) are not here: on random weights kvpress's search
#: for a masking key fails ("Could not find fake keys"), in its own pipeline as in lceval.
PRESSES = ["snapkv", "tova", "knorm", "streaming_llm"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """test_hf_backend.py's tiny model, with 4 layers in float32: kvpress's pipeline does not
    stop on an end-of-text first token, lceval does; these weights give none."""
    return tiny_folder(tmp_path_factory.mktemp("tiny-llama"), layers=4, dtype="float32")


def kvpress_answers(folder: Path, press_name: str, ratio: float) -> list[str]:
    """kvpress's own pipeline, with the press as its evaluation registry builds it."""
    import torch
    import transformers
    from kvpress import KVPressTextGenerationPipeline

    from lceval_plugins.methods.kvpress import KVPressFactory, PRESSES

    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    pipe = KVPressTextGenerationPipeline(model=model, tokenizer=tokenizer, device="cpu")
    press = KVPressFactory(press_name, PRESSES[press_name])({"compression_ratio": ratio}).press
    return pipe(CONTEXT, questions=QUESTIONS, press=press, max_new_tokens=NEW)["answers"]


def request(question: str) -> GenerationRequest:
    return GenerationRequest(question, [Message("user", CONTEXT + question)], GenerationParams(max_new_tokens=NEW),
                             hints={"context_end": [0, len(CONTEXT)]})


#: the press CI compares (kvpress is a heavy stack: one short real test); the others are marked
#: `matrix` (`.ci/kvpress test -m matrix`, or pytest -m matrix in its venv, runs them)
CI_PRESS = "snapkv"


@pytest.mark.parametrize("press", [pytest.param(p, marks=[] if p == CI_PRESS else [pytest.mark.matrix]) for p in PRESSES])
def test_lceval_answers_as_kvpress_does(folder, press):
    from lceval_plugins.backends.hf import make_hf

    backend = make_hf(str(folder), {"dtype": "auto", "device": "cpu", "press": press, "compression_ratio": "0.5"})
    try:
        ours = backend.generate([request(q) for q in QUESTIONS])
        stats = backend.stats()
    finally:
        backend.close()
    assert [g.text for g in ours] == kvpress_answers(folder, press, 0.5)
    assert stats["contexts_compressed"] == 1  # the context compressed once, every question read it
    assert [g.prefilled_tokens for g in ours[1:]] == [g.prompt_tokens - ours[0].extras["context_tokens"]
                                                      for g in ours[1:]]


def test_the_cache_keeps_the_share_the_ratio_says(folder):
    from kvpress.utils import compute_n_kept

    from lceval_plugins.backends.hf import make_hf

    kept = {}
    for ratio in ("0", "0.25", "0.5", "0.75"):
        backend = make_hf(str(folder), {"dtype": "auto", "device": "cpu", "press": "knorm",
                                        "compression_ratio": ratio})
        try:
            gen = backend.generate([request(QUESTIONS[0])])[0]
        finally:
            backend.close()
        n = gen.extras["context_tokens"]
        assert gen.extras["kv_context_tokens"] == compute_n_kept(n, float(ratio))
        kept[ratio] = gen.extras["kv_cache_bytes"]
    assert kept["0"] > kept["0.25"] > kept["0.5"] > kept["0.75"]


def test_a_head_wise_press_reports_the_keys_it_masks(folder):
    """AdaKV (adakv_snapkv) keeps every position and masks keys: lceval counts the masked
    entries kvpress leaves on each attention module, which makes the kept share. Prefilled
    only: decoding through kvpress's fake keys fails on random weights (module docstring)."""
    import torch
    import transformers
    from transformers import DynamicCache

    from lceval_plugins.methods.kvpress import KVPressFactory, PRESSES

    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    ids = transformers.AutoTokenizer.from_pretrained(folder)(CONTEXT)["input_ids"]
    method = KVPressFactory("adakv_snapkv", PRESSES["adakv_snapkv"])({"compression_ratio": 0.5, "window_size": 8})
    cache = DynamicCache()
    with torch.inference_mode(), method.prefilling(model, cache):
        model.model(input_ids=torch.tensor([ids]), past_key_values=cache)
    n, heads, layers = len(ids), model.config.num_key_value_heads, model.config.num_hidden_layers
    assert cache.layers[0].keys.shape[-2] == n  # every position held
    assert method.masked_entries(model) == [heads * (n - int(n * 0.5))] * layers
