"""The `hf:` backend's batching engine on tiny randomly initialised models (no download, a
few seconds): answers equal transformers' own greedy `generate` on each prompt alone,
whatever the batch; a shared prefix is prefilled once; finished answers leave the batch and
waiting requests join; seeded sampling does not depend on the batch. Work is counted in
forward passes and prefilled tokens, never in seconds.

The models run in float64, where two different summation orders (a batch of 8 rows against
one row) differ by ~1e-16, so no near-tie between two tokens can break differently and the
equality asserted is exact by construction, not by luck."""

from __future__ import annotations

import importlib.util
import threading
from contextlib import contextmanager

import pytest

from lceval.types import GenerationParams

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed"),
    pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers not installed"),
]

VOCAB = 96
EOS = 95


def tiny_model(kind: str = "llama", **extra):
    """A 2-layer model with grouped-query attention (4 query heads, 2 key heads), weights drawn
    wide enough that its next-token choices are far from ties."""
    import torch
    import transformers

    from lceval_plugins.backends.hf_batching import ATTENTION_NAME, register_attention

    register_attention()
    config_class = {"llama": transformers.LlamaConfig, "mistral": transformers.MistralConfig,
                    "gemma2": transformers.Gemma2Config}[kind]
    config = config_class(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                          initializer_range=0.3, eos_token_id=EOS, pad_token_id=0, **extra)
    torch.manual_seed(1234)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation=ATTENTION_NAME,
                                                          dtype=torch.float64)
    return model.eval()


def reference(model, ids: list[int], new: int) -> list[int]:
    """transformers' own greedy decoding of one prompt alone (its SDPA path, a DynamicCache)."""
    import torch

    with torch.inference_mode():
        out = model.generate(torch.tensor([ids]), max_new_tokens=new, do_sample=False, eos_token_id=EOS,
                             pad_token_id=0)
    tokens = out[0, len(ids):].tolist()
    return tokens[:tokens.index(EOS)] if EOS in tokens else tokens


def engine(model, batch_size: int = 8, capacity: int = 10**6, eager: bool = False):
    from lceval_plugins.backends.hf import pick_token
    from lceval_plugins.backends.hf_batching import BatchEngine

    return BatchEngine(model, model.device, batch_size, capacity, eager=eager, pick=pick_token)


@contextmanager
def opened(model, **options):
    """An engine closed when the block ends, whatever it raised."""
    eng = engine(model, **options)
    try:
        yield eng
    finally:
        eng.close()


def job(ids: list[int], new: int = 12, stop_hit=lambda out: False, **params):
    from lceval_plugins.backends.hf_batching import Job

    return Job(list(ids), GenerationParams(max_new_tokens=new, **params), frozenset({EOS}), stop_hit)


def run_together(eng, jobs):
    """Submit every job before waiting for any (as the engine's threads do)."""
    for j in jobs:
        eng.submit(j)
    return [eng.wait(j) for j in jobs]


def prompts(prefix_len: int, questions: int, seed: int = 0) -> list[list[int]]:
    """Prompts sharing a `prefix_len`-token "transcript", each with its own question of 3-9 tokens."""
    import random

    rng = random.Random(seed)
    prefix = [rng.randrange(1, EOS) for _ in range(prefix_len)]
    return [prefix + [rng.randrange(1, EOS) for _ in range(3 + 2 * i % 7)] for i in range(questions)]


@pytest.fixture(scope="module")
def model():
    return tiny_model()


def test_batched_greedy_answers_equal_transformers_generate_alone(model):
    ps = prompts(300, 6)
    expected = [reference(model, p, 12) for p in ps]
    with opened(model) as eng:
        got = run_together(eng, [job(p) for p in ps])
    assert [j.out for j in got] == expected
    assert any(len(e) == 12 for e in expected)  # the comparison covers long answers, not only EOS at once
    assert eng.peak_batch == 6


def test_two_or_three_sampling_rows_are_padded_to_four_output_rows_on_the_cpu(model):
    """MKL's 2- and 3-row products with the output layer read its weight once per row; the
    padded rows are computed and never read, and the answers stay transformers' own."""
    from lceval_plugins.backends.hf_batching import LOGIT_ROWS

    ps = prompts(200, 3, seed=3)
    expected = [reference(model, p, 12) for p in ps]
    kept: list[int] = []

    def counting(**kwargs):
        kept.append(len(kwargs["logits_to_keep"]))
        return model(**kwargs)

    eng = engine(model)
    eng.model = counting
    try:
        got = run_together(eng, [job(p) for p in ps])
    finally:
        eng.close()
    assert [j.out for j in got] == expected
    assert LOGIT_ROWS in kept and not any(1 < k < LOGIT_ROWS for k in kept)


def test_the_shared_prefix_is_prefilled_once_and_counted_once(model):
    ps = prompts(300, 5, seed=1)
    with opened(model) as eng:
        got = run_together(eng, [job(p, new=4) for p in ps])
    own = [len(p) - 300 for p in ps]
    # one request prefilled its whole prompt (the transcript), the others only their own tokens
    assert sorted(j.prefilled for j in got) == sorted(own[1:] + [len(ps[0])]) or \
        sum(j.prefilled for j in got) == 300 + sum(own)
    assert sum(j.prefilled for j in got) == 300 + sum(own)


def test_one_at_a_time_gives_the_same_answers_and_still_reuses_the_prefix(model):
    ps = prompts(200, 4, seed=2)
    batched = engine(model, batch_size=4)
    single = engine(model, batch_size=1)
    try:
        together = run_together(batched, [job(p) for p in ps])
        alone = run_together(single, [job(p) for p in ps])
    finally:
        batched.close()
        single.close()
    assert [j.out for j in together] == [j.out for j in alone]
    assert [j.prefilled for j in alone] == [len(ps[0])] + [len(p) - 200 for p in ps[1:]]
    assert single.peak_batch == 1
    # decoding together takes fewer forward passes than one question after the other
    assert batched.steps < single.steps - 20


def test_a_finished_answer_leaves_and_a_waiting_request_joins(model):
    """Batch of 2, four requests: a short answer frees its place for the next request
    while the long ones still decode (continuous batching), and every answer is right."""
    ps = prompts(100, 4, seed=3)
    news = [2, 16, 3, 16]
    expected = [reference(model, p, n) for p, n in zip(ps, news)]
    with opened(model, batch_size=2) as eng:
        got = run_together(eng, [job(p, new=n) for p, n in zip(ps, news)])
    assert [j.out for j in got] == expected
    assert eng.peak_batch == 2
    # two at a time, the next joining as soon as one leaves: about 16 + 16 decoding steps
    # plus prefills, against 2 + 16 + 3 + 16 one after the other
    assert eng.steps <= 16 + 16 + 8


def test_transcripts_in_one_batch_each_read_only_their_own_prefix(model):
    a, b = prompts(150, 3, seed=4), prompts(220, 3, seed=5)
    mixed = [a[0], b[0], a[1], b[1], a[2], b[2]]
    expected = [reference(model, p, 10) for p in mixed]
    with opened(model) as eng:
        got = run_together(eng, [job(p, new=10) for p in mixed])
    assert [j.out for j in got] == expected
    assert sum(j.prefilled for j in got) == 150 + 220 + sum(len(p) - 150 for p in a[1:]) + \
        sum(len(p) - 220 for p in b[1:]) + (len(a[0]) - 150) + (len(b[0]) - 220)


def test_a_conversation_turn_by_turn_prefills_only_the_new_turn(model):
    """Turn 2's prompt is turn 1's prompt, its answer and a new question: the idle arena is
    re-rooted on it, so only the answer and the question are prefilled (the old loop's reuse)."""
    first = prompts(250, 1, seed=6)[0]
    with opened(model) as eng:
        (one,) = run_together(eng, [job(first, new=6)])
        second = first + one.out + [7, 8, 9, 10]
        (two,) = run_together(eng, [job(second, new=6)])
        (again,) = run_together(eng, [job(second, new=6)])
    assert one.prefilled == len(first)
    assert two.prefilled == len(second) - len(first)
    assert two.out == reference(model, second, 6)
    assert again.prefilled == 1 and again.out == two.out  # identical prompt: only its last token re-runs


def test_a_long_prompt_is_prefilled_in_chunks_beside_other_sequences_decoding(model, monkeypatch):
    from lceval_plugins.backends import hf_batching

    monkeypatch.setattr(hf_batching, "STEP_TOKENS", 64)
    short, long = prompts(40, 1, seed=7)[0], prompts(500, 1, seed=8)[0]
    expected = [reference(model, short, 12), reference(model, long, 12)]
    with opened(model) as eng:
        first = eng.submit(job(short))
        second = eng.submit(job(long))
        got = [eng.wait(first), eng.wait(second)]
    assert [j.out for j in got] == expected
    assert eng.steps >= len(long) // 64  # no pass ran more prompt tokens than a chunk


def test_seeded_sampling_does_not_depend_on_the_batch(model):
    ps = prompts(120, 4, seed=9)
    sampled = dict(temperature=0.9, top_p=0.95, repeat_penalty=1.1, seed=7)
    alone = engine(model, batch_size=1)
    together = engine(model, batch_size=4)
    try:
        one = run_together(alone, [job(ps[2], new=16, **sampled)])[0]
        batch = run_together(together, [job(p, new=16, **sampled) for p in ps])
        other_seed = run_together(together, [job(ps[2], new=16, **{**sampled, "seed": 8})])[0]
    finally:
        alone.close()
        together.close()
    assert batch[2].out == one.out
    assert other_seed.out != one.out  # the seed is what decides the draw


def test_eager_attention_gives_the_same_answers(model, monkeypatch):
    from lceval_plugins.backends import hf_batching

    monkeypatch.setattr(hf_batching, "SMALL_QUERY", 0)  # SDPA for every query block ...
    ps = prompts(90, 3, seed=10)
    sdpa = engine(model)
    eager = engine(model, eager=True)  # ... against plain matrix products everywhere
    try:
        a = run_together(sdpa, [job(p) for p in ps])
        b = run_together(eager, [job(p) for p in ps])
    finally:
        sdpa.close()
        eager.close()
    assert [j.out for j in a] == [j.out for j in b] == [reference(model, p, 12) for p in ps]


def test_sliding_window_layers_see_only_their_window():
    model = tiny_model("mistral", sliding_window=24)
    ps = prompts(80, 3, seed=11)
    expected = [reference(model, p, 10) for p in ps]
    with opened(model) as eng:
        got = run_together(eng, [job(p, new=10) for p in ps])
    assert [j.out for j in got] == expected
    full = tiny_model("mistral")  # same weights, no window: the window really changes answers
    assert [reference(full, p, 10) for p in ps] != expected


def test_soft_capped_scores_and_alternating_windows_as_in_gemma2():
    model = tiny_model("gemma2", sliding_window=24, attn_logit_softcapping=5.0, final_logit_softcapping=None,
                       head_dim=16, query_pre_attn_scalar=16)
    ps = prompts(80, 3, seed=15)
    expected = [reference(model, p, 10) for p in ps]
    with opened(model) as eng:
        got = run_together(eng, [job(p, new=10) for p in ps])
    assert [j.out for j in got] == expected


def test_stop_and_length_end_an_answer(model):
    p = prompts(60, 1, seed=12)[0]
    full = reference(model, p, 12)
    assert len(full) >= 4
    with opened(model) as eng:
        stopped = run_together(eng, [job(p, stop=("three",), stop_hit=lambda out: len(out) == 3)])[0]
        short = run_together(eng, [job(p, new=2)])[0]
        none = run_together(eng, [job(p, new=0)])[0]
    assert (stopped.out, stopped.finish) == (full[:3], "stop")
    assert (short.out, short.finish) == (full[:2], "length")
    assert (none.out, none.finish) == ([], "length")


def test_finished_tails_are_compacted_and_idle_arenas_evicted(model):
    from lceval_plugins.backends.hf_batching import DEAD

    ps = prompts(64, 40, seed=13)
    with opened(model, batch_size=4, capacity=2000) as eng:
        run_together(eng, [job(p, new=16) for p in ps])
        (arena,) = eng._arenas
        assert (arena.owner[:arena.used] == DEAD).sum() == 0  # idle: only its root is kept
        assert arena.used == arena.root_len == len(ps[0])
        for seed in range(14, 24):  # ten other transcripts: the oldest idle arenas go
            run_together(eng, [job(prompts(300, 1, seed=seed)[0], new=2)])
        assert sum(a.cap for a in eng._arenas) <= 2000 + max(a.cap for a in eng._arenas)
        assert len(eng._arenas) < 10


def test_a_failing_step_fails_its_requests_and_the_engine_goes_on(model, monkeypatch):
    eng = engine(model)
    calls = {"n": 0}
    forward = eng.model

    def flaky(**kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("out of memory (simulated)")
        return forward(**kwargs)

    eng.model = flaky
    ps = prompts(50, 3, seed=30)
    try:
        jobs = [eng.submit(job(p)) for p in ps]
        for j in jobs:
            with pytest.raises(RuntimeError, match="simulated"):
                eng.wait(j)
        (after,) = run_together(eng, [job(ps[0])])
        assert after.out == reference(model, ps[0], 12) and after.prefilled == len(ps[0])
    finally:
        eng.close()


def test_close_fails_waiting_requests_and_refuses_new_ones(model):
    eng = engine(model, batch_size=1)
    ps = prompts(400, 4, seed=31)
    jobs = [eng.submit(job(p, new=64)) for p in ps]
    closer = threading.Thread(target=eng.close)
    closer.start()
    closer.join(timeout=60)
    assert not closer.is_alive()
    assert all(j.done.is_set() for j in jobs)
    assert any(j.error is not None for j in jobs)
    with pytest.raises(RuntimeError, match="closed"):
        eng.submit(job(ps[0]))
