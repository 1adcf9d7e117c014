"""benchmarks/serving_orders.py without a real model: the token accounting of the three
orders on hand-made token lists, and the whole comparison on the `vllm:` backend driven by
the fake engine of test_vllm_backend (block-granular prefix cache, counted computation):
one engine serves every order, each order starts from an empty cache, and the baseline
orders send exactly the prompts lceval sends. The counts on the real transcripts are checked
in tests/integration/test_serving_orders.py (`--simulate`)."""

from __future__ import annotations

from typing import Any

import pytest

from lceval.interfaces import ModelBackend
from lceval.types import Generation, GenerationParams, GenerationRequest, Message

from tests.plugins.backends import test_vllm_backend as fake_vllm
from tests.paths import benchmark_script

model_folder = fake_vllm.model_folder  # the fixture (an assignment keeps pyflakes quiet)


@pytest.fixture(scope="module")
def orders() -> Any:
    """The benchmark script as a module."""
    with benchmark_script("serving_orders") as module:
        yield module


class Ids:
    """A tokenizer whose prompt is its own ids: the message text is space-separated numbers."""

    def prompt_tokens(self, messages: list[Message]) -> list[int]:
        return [int(w) for m in messages for w in m.content.split()]


def ask(rid: str, transcript: range, question: list[int]) -> GenerationRequest:
    text = " ".join(str(i) for i in [*transcript, *question])
    return GenerationRequest(rid, [Message("user", text)], GenerationParams())


def test_floor_last_prompt_cache_and_length_sort(orders):
    tokens = orders.Tokens(Ids())
    a, b = range(0, 20), range(100, 121)  # two transcripts of nearly equal length
    grouped = [ask("a1", a, [1000]), ask("a2", a, [1001, 1002]), ask("b1", b, [1003, 1004, 1005]),
               ask("b2", b, [1006])]
    floor = orders.floor_tokens(grouped, tokens)
    assert floor == 20 + 1 + 2 + 21 + 3 + 1
    assert orders.floor_tokens(grouped[::-1], tokens) == floor  # distinct prefixes: any order
    assert orders.last_prompt_prefill(grouped, tokens) == floor
    sorted_ = orders.by_length(grouped, tokens)
    assert [r.request_id for r in sorted_] == ["b1", "a2", "b2", "a1"]  # the meetings interleave
    assert orders.last_prompt_prefill(sorted_, tokens) == sum(len(tokens(r)) for r in grouped)


class Counting(ModelBackend):
    """Answers at once and records the size of every call."""

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size
        self.calls: list[list[str]] = []

    def identity(self) -> dict[str, Any]:
        return {"scheme": "counting"}

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        self.calls.append([r.request_id for r in requests])
        return [Generation(request_id=r.request_id, text="x") for r in requests]


@pytest.mark.parametrize("batch, slots, calls", [(1, 5, 5), (1, 1, 5), (256, 5, 1), (2, 5, 3), (256, 1, 5)])
def test_send_batches_only_what_goes_at_once(orders, tmp_path, batch, slots, calls):
    backend = Counting(batch)
    cache = orders.Cache(tmp_path / "c.sqlite")
    model = orders.Recording(backend, cache, "counting:x")
    order = [ask(f"q{i}", range(3), [i]) for i in range(5)]
    orders.send(model, order, slots)
    cache.close()
    assert len(backend.calls) == calls and sorted(sum(backend.calls, [])) == [f"q{i}" for i in range(5)]
    if calls == 1 or slots == 1:
        assert sum(backend.calls, []) == [r.request_id for r in order]  # one call, or one at a time: in order


def test_vllm_backend_one_engine_every_order_cold(orders, model_folder, tiny_home, capsys):
    for i, path in enumerate(sorted((tiny_home / "elitr-bench" / "transcripts").iterdir())):
        path.write_text(fake_vllm.transcript(120, offset=100 * i) + " " + path.read_text(), encoding="utf-8")
    starter = fake_vllm.Starter()
    backend = fake_vllm.backend(model_folder, start=starter)
    args = orders.parser().parse_args(["--data-home", str(tiny_home), "--backend", "vllm", "--model", "tiny",
                                       "--meetings", "", "--questions", "2"])
    target = orders.vllm(args)
    assert target.spec == "vllm:tiny,enforce_eager=true,max_model_len=4096"
    try:
        result = orders.compare(args, target, backend)
    finally:
        backend.close()
    rows = {r["order"]: r for r in result["rows"]}
    assert list(rows) == ["lceval", "lm-eval", "authors"] and starter.starts == 1
    assert "cache block 4 tokens" in capsys.readouterr().out
    lceval = rows["lceval"]
    n, floor = result["questions"], result["floor"]
    assert n == 6 and len(result["meetings"]) == 3
    for r in rows.values():
        assert r["requests"] == n and r["sent"] == lceval["sent"] and r["failed"] == 0
        assert sorted(r["answers"]) == sorted(lceval["answers"]) and "warm-up" not in r["answers"]
        # vLLM V1 shares a block once allocated, so every order prefills each transcript once,
        # and a question after the first pays at most a block's remainder above the floor;
        # an order that inherited the previous one's cache would prefill far less
        assert floor <= r["prefilled"] <= floor + n * (fake_vllm.BLOCK - 1)
    assert lceval["prefilled"] < lceval["sent"] / 2
    spec, convs = orders.load_questions(args)
    assert rows["authors"]["sent_order"] == [c.turns[0].item_id for c in convs]
    tokens = orders.Tokens(backend)
    planned = orders.plan(spec, convs, args.seed, backend)
    assert rows["lm-eval"]["sent_order"] == [r.request_id for r in orders.by_length(planned, tokens)]
    assert len(tokens(orders.by_length(planned, tokens)[0])) > len(tokens(orders.by_length(planned, tokens)[-1]))
