"""kvpress's presses through lceval's `hf:` backend against kvpress's own pipeline, for real, on
a tiny random-weight Llama written by the test (no download): the same press gives the same
greedy answers token for token, a context's questions read one compressed cache as kvpress's
pipeline does, and the cache keeps the share of the context the ratio says.

kvpress pins transformers<5.3, so this runs in a venv of its own (`.ci/kvpress`; marked
`kvpress`, skipped where kvpress is not installed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from lceval.types import GenerationParams, GenerationRequest, Message

pytestmark = [pytest.mark.kvpress,
              pytest.mark.skipif(importlib.util.find_spec("kvpress") is None, reason="kvpress not installed")]

TEMPLATE = ("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")
CORPUS = ["(PERSON1) Hello everyone, let us start the meeting about the orange dashboard.",
          "Who opened the meeting? When is the next meeting? Friday at noon.",
          "The microphone cable broke during the test; the travel budget is exhausted."] * 20
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
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    out = tmp_path_factory.mktemp("tiny-llama")
    specials = ["<|end|>", "<|user|>", "<|system|>", "<|assistant|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=320, special_tokens=specials,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|end|>")
    fast.chat_template = TEMPLATE
    fast.save_pretrained(out)
    config = transformers.LlamaConfig(vocab_size=len(fast), hidden_size=64, intermediate_size=128,
                                      num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                                      max_position_embeddings=2048, initializer_range=0.3,
                                      eos_token_id=fast.eos_token_id, pad_token_id=fast.eos_token_id)
    torch.manual_seed(7)
    transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32).save_pretrained(out)
    return out


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


@pytest.mark.parametrize("press", PRESSES)
def test_lceval_answers_as_kvpress_does(folder, press):
    from lceval_plugins.backends.hf import make_hf

    backend = make_hf(str(folder), {"dtype": "float32", "device": "cpu", "press": press, "compression_ratio": "0.5"})
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
        backend = make_hf(str(folder), {"dtype": "float32", "device": "cpu", "press": "knorm",
                                        "compression_ratio": ratio})
        try:
            gen = backend.generate([request(QUESTIONS[0])])[0]
        finally:
            backend.close()
        n = gen.extras["context_tokens"]
        assert gen.extras["kv_context_tokens"] == compute_n_kept(n, float(ratio))
        kept[ratio] = gen.extras["kv_cache_bytes"]
    assert kept["0"] > kept["0.25"] > kept["0.5"] > kept["0.75"]
