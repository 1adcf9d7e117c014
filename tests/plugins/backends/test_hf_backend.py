"""The `hf:` backend around its batching engine, on a tiny model folder written by the test
(random float64 weights, a byte-level BPE tokenizer trained on a few sentences, a chat
template): options, the memory-sized defaults, thread-safe `generate`, and a real engine run
of ELITR-shaped questions where the scheduler sends a transcript's questions together and
every transcript is prefilled once. No download; seconds."""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path

import pytest

from lceval.errors import UserError
from lceval.types import GenerationParams, GenerationRequest, Message

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed"),
    pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers not installed"),
    pytest.mark.skipif(importlib.util.find_spec("tokenizers") is None, reason="tokenizers not installed"),
]

TEMPLATE = ("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")
CORPUS = ["(PERSON1) Hello everyone, let us start the meeting about the orange dashboard.",
          "Who opened the meeting? When is the next meeting? Friday at noon.",
          "The microphone cable broke during the test; the travel budget is exhausted."] * 20


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A llama-shaped model of 2 layers saved with its tokenizer (dtype float64, so `dtype=auto`
    runs it exactly and batched answers equal unbatched ones by construction)."""
    return tiny_folder(tmp_path_factory.mktemp("tiny-hf"))


def tiny_folder(out: Path, layers: int = 2, dtype: str = "float64") -> Path:
    """The tiny model folder: a byte-level BPE tokenizer trained on CORPUS, the chat template,
    random llama weights of `layers` layers in `dtype`."""
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

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
                                      num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                                      max_position_embeddings=2048, initializer_range=0.3,
                                      eos_token_id=fast.eos_token_id, pad_token_id=fast.eos_token_id)
    torch.manual_seed(7)
    transformers.AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype)).save_pretrained(out)
    return out


def ask(question: str, new: int = 12, context: str = CORPUS[0] * 6) -> GenerationRequest:
    return GenerationRequest(question, [Message("user", f"Meeting:\n{context}\n\nQuestion: {question}")],
                             GenerationParams(max_new_tokens=new))


QUESTIONS = ["Who opened the meeting?", "When is the next meeting?", "What broke?", "Which dashboard?"]


def test_options_are_typed_and_checked(folder):
    from lceval_plugins.backends.hf import make_hf

    backend = make_hf(str(folder), {"batch_size": "3", "attn_implementation": "EAGER"})
    assert backend.max_in_flight == 3 and backend.options["attn_implementation"] == "eager"
    assert backend.batch_size == 1  # ModelBackend's own: requests per call when max_in_flight is 1
    with pytest.raises(UserError, match="batch_size"):
        make_hf(str(folder), {"dtype": "auto", "batch_size": "0"})
    with pytest.raises(UserError, match="attn_implementation"):
        make_hf(str(folder), {"dtype": "auto", "attn_implementation": "flash"})
    with pytest.raises(UserError, match="device_map"):
        make_hf(str(folder), {"dtype": "auto", "device_map": "auto", "device": "cpu"})


def test_defaults_come_from_the_memory_plan(folder):
    """`memory_gib` stands for the free memory: the key/value capacity and the batch follow it."""
    from lceval_plugins.backends.hf import make_hf
    from lceval_plugins.backends.hf_memory import GiB, kv_bytes_per_token, scratch_bytes, weights_bytes

    probe = make_hf(str(folder), {"dtype": "auto", "n_ctx": "1024", "device": "cpu"})
    config = probe._get_config()
    per_token = kv_bytes_per_token(config, 8)  # float64 weights, dtype=auto
    assert per_token == 2 * 2 * 2 * 16 * 8  # keys and values, 2 layers, 2 key heads of 16 dims
    room = weights_bytes(config, 8) + scratch_bytes(config, 8, 1024, 1024) + 5 * 1024 * per_token
    backend = make_hf(str(folder), {"dtype": "auto", "n_ctx": "1024", "device": "cpu",
                                    "memory_gib": str(room / GiB)})
    assert backend.prefix_cache.kind == "shared" and backend.prefix_cache.shares_in_flight
    assert backend.prefix_cache.capacity_tokens == 5 * 1024  # the weights and one chunk's scratch set aside
    assert backend.max_in_flight == 5  # five window-long prompts fit
    assert "batch_size" not in backend.identity() and "attn_implementation" not in backend.identity()
    assert "memory_gib" not in backend.identity()  # how the answers are computed, not what they are


def test_generate_is_thread_safe_and_batched_answers_equal_unbatched(folder):
    from lceval_plugins.backends.hf import make_hf
    from lceval_plugins.backends.hf_batching import common_prefix

    single = make_hf(str(folder), {"dtype": "auto", "batch_size": "1"})
    batched = make_hf(str(folder), {"dtype": "auto", "batch_size": "4"})
    try:
        alone = [single.generate([ask(q)])[0] for q in QUESTIONS]
        got: dict[str, object] = {}
        threads = [threading.Thread(target=lambda q=q: got.update({q: batched.generate([ask(q)])[0]}))
                   for q in QUESTIONS]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        together = [got[q] for q in QUESTIONS]
        assert [g.text for g in together] == [g.text for g in alone]
        assert all(g.completion_tokens for g in alone)
        ids = [single.prompt_tokens(ask(q).messages) for q in QUESTIONS]
        shared = [common_prefix(before, now[:-1]) for before, now in zip(ids, ids[1:])]
        assert [g.prefilled_tokens for g in alone] == [len(ids[0])] + [len(i) - n for i, n in zip(ids[1:], shared)]
        assert min(shared) > 100  # the meeting, prefilled once
        # in the batch too the meeting is prefilled once: by the request that came first, the
        # others prefill what their prompt does not share with that one's
        first = max(range(len(QUESTIONS)), key=lambda k: together[k].prefilled_tokens)
        assert [g.prefilled_tokens for g in together] == [
            len(i) if k == first else len(i) - common_prefix(ids[first], i[:-1]) for k, i in enumerate(ids)]
        assert batched._engine.peak_batch == 4 and single._engine.peak_batch == 1
        stats = batched.stats()
        assert stats["decoded_tokens"] == sum(g.completion_tokens for g in together) - \
            sum(g.finish_reason == "length" for g in together)  # the last token of a cut answer never runs
        assert stats["forward_passes"] < single.stats()["forward_passes"]
    finally:
        single.close()
        batched.close()


def test_stop_strings_and_one_call_with_several_requests(folder):
    from lceval_plugins.backends.hf import make_hf

    backend = make_hf(str(folder), {"dtype": "auto", "batch_size": "4"})
    try:
        full = backend.generate([ask(QUESTIONS[0], new=16)])[0]
        # a stop string the answer holds (the random model writes bytes, not words)
        stop = next(c for c in full.text[2:] if c.isascii() and c.isalnum())
        several = backend.generate([GenerationRequest("a", ask(QUESTIONS[0], 16).messages,
                                                      GenerationParams(max_new_tokens=16, stop=(stop,))),
                                    ask(QUESTIONS[1], new=5)])
        assert [g.request_id for g in several] == ["a", QUESTIONS[1]]
        assert several[0].finish_reason == "stop" and several[0].text == full.text[:full.text.find(stop)].strip()
        assert several[1].completion_tokens <= 5
    finally:
        backend.close()


def test_a_closed_backend_loads_again_on_the_next_request(folder):
    from lceval_plugins.backends.hf import make_hf

    backend = make_hf(str(folder), {"dtype": "auto", "batch_size": "2"})
    first = backend.generate([ask(QUESTIONS[2])])[0]
    backend.close()
    again = backend.generate([ask(QUESTIONS[2])])[0]
    backend.close()
    assert again.text == first.text and again.prefilled_tokens == again.prompt_tokens


def test_an_engine_run_sends_a_transcripts_questions_together(folder, tiny_home, tmp_path, monkeypatch):
    """elitr_qa on the tiny ELITR fixture: the scheduler sends each meeting's questions
    together, the backend prefills each transcript once (prefill = the floor: each
    transcript once plus each question's own tokens) and the answers equal the unbatched ones."""
    from tests.conftest import run_engine

    from lceval_plugins.backends.hf import make_hf

    runs = {}
    for batch in (1, 8):
        monkeypatch.setenv("LCEVAL_CACHE", str(tmp_path / f"cache{batch}.sqlite"))  # each run generates
        backend = make_hf(str(folder), {"dtype": "auto", "batch_size": str(batch)})
        try:
            _, _, state = run_engine(backend, "elitr_qa", tiny_home, tmp_path / f"b{batch}",
                                     overrides={"generation.max_new_tokens": 8})
            runs[batch] = (state, state.model_backend_stats)
        finally:
            backend.close()
    answers = {b: [s.response for t in state.tasks for s in t.samples] for b, (state, _) in runs.items()}
    assert answers[1] == answers[8] and len(answers[8]) == 7
    assert not any(s.cached for _, (state, _) in runs.items() for t in state.tasks for s in t.samples)
    prefilled = {b: sum(s.prefilled_tokens for t in state.tasks for s in t.samples)
                 for b, (state, _) in runs.items()}
    assert prefilled[8] == prefilled[1]  # the floor either way: nothing prefilled twice
    one, eight = runs[1][1], runs[8][1]
    assert one["decoded_tokens"] == one["decoding_passes"]  # one at a time
    assert eight["decoded_tokens"] >= 3 * eight["decoding_passes"]  # a meeting's questions together, or more
    assert eight["forward_passes"] < one["forward_passes"]


def test_no_progress_silences_the_loading_bars_and_the_run_ends_with_its_report_command(folder, tiny_home, tmp_path):
    from tests.cli import call

    code, out, err = call("run", "--tasks", "elitr_qa", "--model", f"hf:{folder}", "--limit", "1", "--set",
                          "generation.max_new_tokens=2", "--data-home", tiny_home, "--output", tmp_path / "runs",
                          "--no-progress")
    assert code == 0, err
    assert "%|" not in err and "\r" not in err, err[:400]  # no bar of transformers' loading (it drew them before)
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if not p.name.startswith(".")]
    assert out.rstrip().splitlines()[-1] == f"report: lceval report {run_dir} --format html -o report.html"
