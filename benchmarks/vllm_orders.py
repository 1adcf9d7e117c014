"""The same ELITR-Bench questions on one vLLM engine in three orders, side by side.

- ``lceval``: lceval's own scheduler (`runner.generate_task`) and the `vllm:` backend as a
  run uses them;
- ``lm-eval``: lm-evaluation-harness's vLLM order: every request at once, longest prompt
  first (its Collator), into one batch;
- ``authors``: the ELITR-Bench authors' protocol: one question at a time, in the data's order.

One engine serves all three (vLLM starts in minutes on a CPU); its prefix cache is emptied
before each order, and a warm-up request that shares nothing with the transcripts goes
first. For each order it prints the requests, the prompt tokens sent, the tokens vLLM really
prefilled (prompt minus `RequestOutput.num_cached_tokens`), the floor (each transcript once
plus each question's own tokens: every request pays only what no earlier prompt had as a
prefix), prefilled / floor, requests per second and wall seconds. vLLM caches whole blocks
(128 tokens on a CPU, 16 on a GPU), so a request past the first on a transcript pays up to a
block's remainder more than the floor.

    python benchmarks/vllm_orders.py --data-home DIR --model /path/to/hf-folder \\
        --meetings test2/meeting_en_test2_005,dev/meeting_en_dev_007 --questions 3 \\
        --options enforce_eager=true,max_model_len=2048

Counts are stable across machines; seconds are not.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from lceval.cache import Cache, CachedModel
from lceval.interfaces import ModelBackend, PrefixCache, TaskContext
from lceval.models import make_model, parse_model_spec
from lceval.plugins import load_plugins
from lceval.registry import load_registry
from lceval.runner import generate_task
from lceval.spec import with_overrides
from lceval.types import Conversation, Generation, GenerationParams, GenerationRequest, Message

ORDERS = ("lceval", "lm-eval", "authors")


class Recorder(ModelBackend):
    """The vLLM backend as lceval's engine sees it, recording what it was sent, in order."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.sent: list[GenerationRequest] = []
        self.answers: list[Generation] = []
        self._lock = threading.Lock()
        self.batch_size = inner.batch_size
        self.max_in_flight = inner.max_in_flight

    @property  # type: ignore[override]
    def context_window(self) -> int:
        return self.inner.context_window

    @property  # type: ignore[override]
    def prefix_cache(self) -> PrefixCache:
        return self.inner.prefix_cache

    def identity(self) -> dict[str, Any]:
        return self.inner.identity()

    def count_tokens(self, messages: list[Message]) -> int:
        return self.inner.count_tokens(messages)

    def tokenize(self, text: str) -> list[int]:
        return self.inner.tokenize(text)

    def detokenize(self, tokens: list[int]) -> str:
        return self.inner.detokenize(tokens)

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        with self._lock:
            self.sent.extend(requests)
        answers = self.inner.generate(requests)
        with self._lock:
            self.answers.extend(answers)
        return answers


def load_questions(args: argparse.Namespace) -> tuple[Any, list[Conversation]]:
    plugins = load_plugins()
    spec = load_registry(plugins).spec("elitr_qa")
    spec = with_overrides(spec, {"generation": {"max_new_tokens": args.max_new_tokens},
                                 "context": {"policy": "truncate-middle"}})
    ctx = TaskContext(spec=spec.data, spec_path=spec.path, data_home=Path(args.data_home), splits=None,
                      limit=None, record_file=lambda p: None)
    wanted = [m.strip() for m in args.meetings.split(",") if m.strip()]
    kept: list[Conversation] = []
    per_meeting: dict[str, int] = {}
    for conv in plugins.get("task-type", "elitr").load(ctx):
        if not any(conv.context_id.endswith(m) for m in wanted):
            continue
        if per_meeting.get(conv.context_id, 0) >= args.questions:
            continue
        per_meeting[conv.context_id] = per_meeting.get(conv.context_id, 0) + 1
        kept.append(conv)
    if not kept:
        raise SystemExit(f"no questions selected (meetings: {args.meetings})")
    return spec, kept


def common(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    differ = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(differ[0]) if len(differ) else n


def floor_tokens(prompts: list[list[int]]) -> int:
    """Each transcript once plus each question's own tokens (instructions shared across
    transcripts count once too)."""
    total = 0
    for i, tokens in enumerate(prompts):
        total += len(tokens) - max((common(tokens, e) for e in prompts[:i]), default=0)
    return total


def measure(name: str, backend: Any, send: Callable[[], list[Generation]]) -> dict[str, Any]:
    """Run `send` from an empty prefix cache; what it sent, prefilled and took."""
    backend.reset_prefix_cache()
    start = time.perf_counter()
    answers = send()
    wall = time.perf_counter() - start
    return {"order": name, "requests": len(answers), "sent": sum(g.prompt_tokens for g in answers),
            "prefilled": sum(g.prefilled_tokens for g in answers), "seconds": round(wall, 1),
            "requests_per_s": round(len(answers) / wall, 3),
            "answers": {g.request_id: g.text for g in answers}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-home", required=True)
    ap.add_argument("--model", required=True, help="a Hugging Face model folder or hub id")
    ap.add_argument("--options", default="enforce_eager=true,max_model_len=2048",
                    help="vllm: options, comma-separated key=value")
    ap.add_argument("--meetings", default="test2/meeting_en_test2_005,dev/meeting_en_dev_007",
                    help="context ids (or their ends), comma-separated")
    ap.add_argument("--questions", type=int, default=3, help="at most this many per meeting")
    ap.add_argument("--orders", default=",".join(ORDERS))
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args()

    spec, convs = load_questions(args)
    plugins = load_plugins()
    model_spec = parse_model_spec(f"vllm:{args.model},{args.options}".rstrip(","), load_registry(plugins))
    backend = make_model(model_spec, plugins)
    rows: list[dict[str, Any]] = []
    try:
        start = time.perf_counter()
        warm_up = GenerationRequest("warm-up", [Message("user", "Hi.")], GenerationParams(max_new_tokens=2))
        backend.generate([warm_up])  # starts the engine; shares no prefix with the transcripts
        print(f"engine up in {time.perf_counter() - start:.0f} s; {json.dumps(backend.stats())}", flush=True)
        recorder = Recorder(backend)
        names = [o.strip() for o in args.orders.split(",") if o.strip()]

        def lceval_order() -> list[Generation]:
            with tempfile.TemporaryDirectory() as tmp:
                cache = Cache(Path(tmp) / "cache.sqlite")  # empty: every request reaches vLLM
                try:
                    generate_task(spec, convs, CachedModel(recorder, cache, model_spec.canonical), args.seed,
                                  progress=False)
                finally:
                    cache.close()
            return recorder.answers

        # always first: the other orders send the very prompts lceval's context policy built
        lceval_row = measure("lceval", backend, lceval_order)
        requests = list(recorder.sent)
        prompts = {r.request_id: backend.prompt_tokens(r.messages) for r in requests}
        floor = floor_tokens([prompts[r.request_id] for r in requests])
        meetings = sorted({c.context_id for c in convs})
        print(f"{len(requests)} questions about {len(meetings)} transcripts ({', '.join(meetings)}); "
              f"floor {floor:,} tokens; vLLM cache block {backend.stats().get('block_size')} tokens", flush=True)
        data_order = {c.turns[0].item_id: i for i, c in enumerate(convs)}
        for name in names:
            if name == "lceval":
                row = lceval_row
            elif name == "lm-eval":
                longest_first = sorted(requests, key=lambda r: -len(prompts[r.request_id]))
                row = measure(name, backend, lambda: backend.generate(longest_first))
            elif name == "authors":
                in_data_order = sorted(requests, key=lambda r: data_order[r.request_id])
                row = measure(name, backend, lambda: [backend.generate([r])[0] for r in in_data_order])
            else:
                raise SystemExit(f"unknown order {name} (known: {', '.join(ORDERS)})")
            row["floor"] = floor
            rows.append(row)
            print(f"{name:8s} requests={row['requests']} sent={row['sent']:,} prefilled={row['prefilled']:,} "
                  f"floor={floor:,} ({row['prefilled'] / floor:.3f}x) requests/s={row['requests_per_s']} "
                  f"wall={row['seconds']} s", flush=True)
    finally:
        backend.close()
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
