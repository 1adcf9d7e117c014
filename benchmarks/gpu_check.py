"""The GPU check: every number lceval's `hf:` path owes on a GPU, from one command, with nothing
downloaded, each figure set against the physical floor of its workload.

What it measures, in order (each section prints as it finishes):

1. The machine: the device, the versions (Python, torch, CUDA, transformers, lceval), and the
   card's own ceilings measured here: a dense matrix product in the model's dtype (FLOP/s) and a
   device-to-device copy (bytes/s, read plus written). The datasheet's figures are printed
   beside them for the cards it knows (benchmarks/gpu_machine.py measures it).
2. The model: a randomly initialised model with a real configuration (Llama-3.1-8B's by default,
   written in benchmarks/gpu_machine.py: nothing is downloaded), built on the device, saved as
   a local folder with a tokenizer trained here (a byte-level BPE of 4,096 tokens on text it
   generates; token ids above the tokenizer's size decode to nothing) and a Llama-3-style chat
   template.
3. Batched decoding over shared prefixes, side by side on the same prompt token ids: T
   transcripts of 16k tokens x 8 questions each, N new tokens per answer (every answer exactly
   N: the end token is barred), through
   - lceval's `hf:` backend as a run uses it (`lceval.engine.open_model`, every request in
     flight at once, the transcript prefilled once per transcript);
   - transformers' `generate_batch` (continuous batching, paged attention, block sharing;
     its own defaults on a GPU);
   - transformers' `generate`, one request at a time (the first `--generate-requests` requests:
     its tokens per second do not depend on how many are timed).
4. `lceval run` through the command line (in this process) on RULER's `ruler_niah_single_1`
   (noise haystack: no data) at each `--ruler-lengths` length, one run per length, the model
   folder as `hf:FOLDER`: tokens prefilled, the memory plan, and per phase (load, passes that
   prefill, passes that only decode, the rest: planning, building the samples, scoring) the wall
   seconds and the peak GPU memory, read from the run's manifest (`backend_stats`).

A section that fails (a system, a RULER length) is printed with its traceback and the check
goes on with the next; the last line names what failed, and the exit code is 1 if anything did.
With `--out DIR`, DIR/gpu_check.json holds every figure, rewritten after each section.

The floor of a workload: its prefill at the measured FLOP/s (each transcript once plus each
question's own tokens; linear layers and causal attention), its decoding at the measured
bandwidth (every pass reads the weights once and every token's keys and values once, all
requests decoding together) or FLOP/s, whichever is slower. Each system's wall time is printed
as a multiple of it, and prefill as a share of the FLOP/s ceiling.

Targets (docs/performance.md): lceval's generated tokens/s >= `generate_batch`'s; prefill at
32k >= 50% of the card's bf16 FLOP/s; the 128k run without running out of memory.

Usage (from the repository root, lceval and torch importable):

    python benchmarks/gpu_check.py --out DIR                    # one H200-class GPU, about 6 minutes
    python benchmarks/gpu_check.py --config tiny --device cpu   # the same code on a tiny model, smaller
                                                                # sizes (SIZES["tiny"]): seconds

On the device machine this workplace lends (no network, 64 MiB of files), one call runs it:
benchmarks/gpu_device_prepare.sh builds the wheels here, benchmarks/gpu_device_run.sh installs
them there and runs this script (docs/performance.md, "The GPU check").
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_machine import (  # noqa: E402  (the machine and the model folder, shared with gpu_long_context.py)
    CONFIGS, Machine, corpus, device_defaults, free_device, gib, measure_machine, quiet_offline, say, si, sync,
    write_folder)

RULER_TASK = "ruler_niah_single_1"
#: The workload's sizes: on a real configuration, and on `tiny` (the smoke run on a CPU, seconds).
SIZES = {"real": dict(transcripts=2, questions=8, transcript_tokens=16384, new_tokens=256, generate_requests=8,
                      ruler_lengths="32k,128k", ruler_limit=2),
         "tiny": dict(transcripts=2, questions=3, transcript_tokens=256, new_tokens=8, generate_requests=2,
                      ruler_lengths="1k,2k", ruler_limit=1)}


# -- floors ------------------------------------------------------------------------------------------
@dataclass
class Shape:
    """What the floor needs of a configuration."""

    layers: int
    hidden: int
    attention_width: int  # query heads x head size
    linear: int  # weights a token passes through below the output layer
    output: int  # the output layer's weights (run for sampled tokens only)
    weights_bytes: int
    kv_bytes: int  # one token's keys and values over all layers

    @classmethod
    def of(cls, config_name: str, width: int) -> "Shape":
        c = CONFIGS[config_name]
        heads, kv_heads = c["num_attention_heads"], c["num_key_value_heads"]
        head = c.get("head_dim") or c["hidden_size"] // heads
        attention = c["hidden_size"] * (heads + kv_heads) * head * 2
        linear = c["num_hidden_layers"] * (attention + 3 * c["hidden_size"] * c["intermediate_size"])
        output = c["vocab_size"] * c["hidden_size"]
        embeddings = output * (1 if c.get("tie_word_embeddings") else 2)
        return cls(c["num_hidden_layers"], c["hidden_size"], heads * head, linear, output,
                   (linear + embeddings) * width, 2 * c["num_hidden_layers"] * kv_heads * head * width)

    def prefill_flops(self, start: int, end: int) -> float:
        """Tokens at positions start..end-1, each reading the keys before it and its own."""
        n = end - start
        keys = (start + 1 + end) * n / 2  # sum of (position + 1)
        return 2 * self.linear * n + 4 * self.layers * self.attention_width * keys + 2 * self.output

    def decode(self, contexts: list[int], new: int) -> tuple[float, float]:
        """(FLOPs, bytes) of `new` tokens for each of the sequences (their prompt lengths),
        all decoding together: each pass reads the weights once and every token's keys and
        values once (a shared transcript's once for all its questions: `contexts` holds
        each distinct prefix's length once, the questions' own tokens as extra entries)."""
        passes = max(new - 1, 0)  # the first new token comes from the prefill's last pass
        rows = len(contexts)
        kv_tokens = sum(contexts) * passes + rows * passes * (passes + 1) / 2
        flops = rows * passes * (2 * self.linear + 2 * self.output) + 4 * self.layers * self.attention_width * kv_tokens
        return flops, passes * self.weights_bytes + kv_tokens * self.kv_bytes


@dataclass
class Floor:
    prefill_flops: float
    decode_flops: float
    decode_bytes: float

    def seconds(self, m: Machine) -> tuple[float, float]:
        return self.prefill_flops / m.flops, max(self.decode_flops / m.flops, self.decode_bytes / m.bandwidth)


# -- batched decoding over shared prefixes ---------------------------------------------------------
@dataclass
class Outcome:
    system: str
    requests: int
    generated: int
    seconds: float
    prefilled: int | None = None
    notes: list[str] = field(default_factory=list)


def make_prompts(folder: Path, args: argparse.Namespace) -> list[Any]:
    """The workload's chat messages: transcripts of pseudo-words cut to their token count, and
    a question of its own after each."""
    from lceval.types import Message
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    rng = random.Random(1)
    lines = corpus(rng, 3000)
    out = []
    for t in range(args.transcripts):
        text = " ".join(f"(PERSON{rng.randint(1, 6)}) {rng.choice(lines)}" for _ in range(args.transcript_tokens // 4))
        ids = tok.encode(text, add_special_tokens=False)[:args.transcript_tokens]
        transcript = tok.decode(ids)
        for q in range(args.questions):
            question = f"Question {q + 1}: what did PERSON{rng.randint(1, 6)} say about {rng.choice(lines)[:40]}?"
            out.append([Message("user", f"Meeting {t + 1}:\n{transcript}\n\n{question}")])
    return out


def run_lceval(folder: Path, messages: list[Any], args: argparse.Namespace, work: Path) -> tuple[Outcome, list[list[int]]]:
    """lceval's `hf:` backend through the request cache (an empty one), every request in flight."""
    from lceval.engine import open_model
    from lceval.types import GenerationParams, GenerationRequest, Message

    new = args.new_tokens
    params = GenerationParams(max_new_tokens=new, min_new_tokens=new, temperature=0.0)
    spec = f"hf:{folder},n_ctx={args.n_ctx},dtype={args.dtype},device={args.device}"
    with open_model(spec, cache_path=work / "lceval-a.sqlite") as model:
        began = time.perf_counter()
        model.generate([GenerationRequest("warm-up", [Message("user", "Hello.")], GenerationParams(max_new_tokens=2))])
        load = time.perf_counter() - began
        ids = [model.backend.prompt_tokens(m) for m in messages]
        requests = [GenerationRequest(f"r{i}", m, params) for i, m in enumerate(messages)]
        began = time.perf_counter()
        answers = model.generate(requests)
        seconds = time.perf_counter() - began
        stats = model.backend.stats() or {}
        batch = model.backend.max_in_flight
    free_device(args.device)
    assert all(a.completion_tokens == new for a in answers), "every answer has exactly --new-tokens tokens"
    out = Outcome(f"lceval hf: (batch {batch})", len(answers), sum(a.completion_tokens for a in answers),
                  seconds, sum(a.prefilled_tokens or 0 for a in answers))
    out.notes.append(f"load and warm-up {load:.1f}s; {stats.get('forward_passes')} passes, prefill "
                     f"{stats.get('prefill_seconds')}s, decode {stats.get('decode_seconds')}s; memory plan: "
                     f"{stats.get('memory_plan')}")
    return out, ids


def run_transformers(folder: Path, ids: list[list[int]], args: argparse.Namespace, dtype: Any) -> list[Outcome]:
    """generate_batch on every prompt, then generate one request at a time on the first ones."""
    import torch
    import transformers

    began = time.perf_counter()
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, attn_implementation="sdpa")
    model = model.to(args.device).eval()
    load = time.perf_counter() - began
    new = args.new_tokens
    outcomes = []
    if "generate_batch" in args.systems:
        gen = transformers.GenerationConfig(max_new_tokens=new, do_sample=False, eos_token_id=None, pad_token_id=0)
        # on a CPU its defaults size the paged cache from the machine's memory (minutes to set up)
        sizes = {} if args.device == "cuda" else dict(
            page_size=64, num_blocks=4 * len(ids) * (max(map(len, ids)) + new) // 64, max_batch_tokens=512)
        cb = transformers.ContinuousBatchingConfig(**sizes) if sizes else None
        with torch.inference_mode():
            model.generate_batch(ids[:1], generation_config=transformers.GenerationConfig(
                max_new_tokens=2, do_sample=False, eos_token_id=None, pad_token_id=0), continuous_batching_config=cb)
            sync(args.device)
            began = time.perf_counter()
            out = model.generate_batch(ids, generation_config=gen, continuous_batching_config=cb)
            sync(args.device)
        seconds = time.perf_counter() - began
        lengths = [len(o.generated_tokens) for o in out.values()]
        assert lengths == [new] * len(ids), f"generate_batch gave {lengths}"
        o = Outcome("transformers generate_batch", len(ids), sum(lengths), seconds)
        o.notes.append(f"load {load:.1f}s; continuous_batching_config: {sizes or 'its defaults'}")
        outcomes.append(o)
    if "generate" in args.systems:
        some = ids[:args.generate_requests]
        generated = 0
        with torch.inference_mode():
            model.generate(torch.tensor([some[0][:64]], device=args.device), max_new_tokens=2, do_sample=False)
            sync(args.device)
            began = time.perf_counter()
            for prompt in some:
                out = model.generate(torch.tensor([prompt], device=args.device), max_new_tokens=new,
                                     min_new_tokens=new, do_sample=False, pad_token_id=0)
                generated += out.shape[1] - len(prompt)
            sync(args.device)
        seconds = time.perf_counter() - began
        assert generated == new * len(some)
        outcomes.append(Outcome(f"transformers generate, one at a time ({len(some)} of {len(ids)} requests)",
                                len(some), generated, seconds, sum(map(len, some))))
    del model
    free_device(args.device)
    return outcomes


def distinct_prefixes(ids: list[list[int]]) -> list[tuple[int, int]]:
    """(start, end) of each prompt's tokens that no earlier prompt shares as a prefix: a
    transcript once, then each question's own tokens (the prefill floor)."""
    out, earlier = [], []
    for p in ids:
        shared = max((next((i for i, (x, y) in enumerate(zip(p, e)) if x != y), min(len(p), len(e)))
                      for e in earlier), default=0)
        out.append((shared, len(p)))
        earlier.append(p)
    return out


def shared_prefix_floor(shape: Shape, ids: list[list[int]], new: int) -> tuple[Floor, int]:
    spans = distinct_prefixes(ids)
    prefill = sum(shape.prefill_flops(a, b) for a, b in spans)
    flops, bytes_ = shape.decode([b - a for a, b in spans], new)
    return Floor(prefill, flops, bytes_), sum(b - a for a, b in spans)


# -- RULER through the command line ---------------------------------------------------------------
def ruler_run(folder: Path, length: str, args: argparse.Namespace, work: Path, machine: Machine,
              shape: Shape, options: str = "") -> dict[str, Any]:
    """`lceval run` of RULER at one length (in this process), read back from its run folder;
    `options`: more `,KEY=VALUE` for the `hf:` model (gpu_long_context.py's RoPE scaling)."""
    from lceval.cli import main as lceval_main

    out_dir = work / f"ruler-{length}"
    argv = ["run", "--tasks", RULER_TASK, "--context-lengths", length, "--limit", str(args.ruler_limit),
            "--model", f"hf:{folder},dtype={args.dtype},device={args.device}{options}", "--output", str(out_dir),
            "--cache", str(work / f"ruler-{length}.sqlite"), "--no-progress", "-v"]
    free_device(args.device)
    began = time.perf_counter()
    code = lceval_main(argv)
    wall = time.perf_counter() - began
    result: dict[str, Any] = {"length": length, "command": "lceval " + " ".join(argv), "exit": code, "wall_s": wall}
    if code != 0:
        raise RuntimeError(f"`{result['command']}` exited {code} after {wall:.1f}s")
    (run_dir,) = [p for p in out_dir.iterdir() if not p.name.startswith(".")]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    stats = manifest["backend_stats"]["model"]
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines() if line.strip()]
    prompts = [s["prompt_tokens"] for s in samples]
    prefilled = [s["prefilled_tokens"] for s in samples]
    completions = [s["completion_tokens"] for s in samples]
    prefill_flops = sum(shape.prefill_flops(p - n, p) for p, n in zip(prompts, prefilled))
    dec_flops, dec_bytes = shape.decode(prompts, max(completions, default=0))
    floor = Floor(prefill_flops, dec_flops, dec_bytes)
    phases = {k: stats.get(f"{k}_seconds", 0.0) for k in ("load", "prefill", "decode")}
    phases["other"] = wall - sum(phases.values())
    result.update(long_context=manifest["resolved"]["model_identity"].get("long_context"), samples=len(samples),
                  prompt_tokens=sum(prompts), prefilled=sum(prefilled),
                  generated=sum(completions), phases_s=phases, peak_bytes=stats.get("peak_memory_bytes"),
                  memory_plan=stats.get("memory_plan"), oom_retries=stats.get("oom_retries"),
                  prefill_flops=prefill_flops, floor_s=dict(zip(("prefill", "decode"), floor.seconds(machine))),
                  prefill_share=(prefill_flops / phases["prefill"] / machine.flops) if phases["prefill"] else None)
    return result


# -- the report --------------------------------------------------------------------------------------
def report_decoding(outcomes: list[Outcome], floor: Floor, floor_tokens: int, machine: Machine,
                    args: argparse.Namespace) -> list[str]:
    prefill_s, decode_s = floor.seconds(machine)
    lines = [f"{args.transcripts} transcripts x {args.questions} questions, {args.transcript_tokens:,}-token "
             f"transcripts, {args.new_tokens} new tokens each; prefill floor {floor_tokens:,} tokens "
             f"({si(floor.prefill_flops, 'FLOP')}: {prefill_s:.3f}s), decode floor {decode_s:.3f}s "
             f"({si(floor.decode_bytes, 'B')} read)"]
    batch = next((o for o in outcomes if "generate_batch" in o.system), None)
    for o in outcomes:
        rate = o.generated / o.seconds if o.seconds else 0.0
        whole = prefill_s + decode_s
        if o.requests < args.transcripts * args.questions:  # a share of the requests: its share of the floor
            whole *= o.requests / (args.transcripts * args.questions)
        vs = f", {rate / (batch.generated / batch.seconds):.2f}x generate_batch's" if batch and batch.seconds else ""
        lines.append(f"  {o.system}: {o.seconds:.2f}s, {rate:,.1f} generated tok/s{vs}, wall "
                     f"{o.seconds / whole:.1f}x the floor" + (f", prefilled {o.prefilled:,}" if o.prefilled else ""))
        lines += [f"    {n}" for n in o.notes]
    return lines


def report_ruler(r: dict[str, Any], machine: Machine) -> list[str]:
    ph, peaks = r["phases_s"], r["peak_bytes"] or {}
    share = f"{r['prefill_share']:.0%}" if r["prefill_share"] is not None else "n/a"
    return [f"RULER {RULER_TASK} at {r['length']}: {r['samples']} samples, {r['prompt_tokens']:,} prompt tokens, "
            f"prefilled {r['prefilled']:,}, generated {r['generated']:,}, exit {r['exit']}, "
            f"out-of-memory retries {r['oom_retries']}",
            f"  wall {r['wall_s']:.1f}s: load {ph['load']:.1f}s (peak {gib(peaks.get('load'))}), prefill "
            f"{ph['prefill']:.1f}s (peak {gib(peaks.get('prefill'))}), decode {ph['decode']:.1f}s (peak "
            f"{gib(peaks.get('decode'))}), other {ph['other']:.1f}s",
            f"  prefill {si(r['prefill_flops'], 'FLOP')} at {share} of the measured "
            f"{si(machine.flops, 'FLOP/s')} (floor {r['floor_s']['prefill']:.3f}s); decode floor "
            f"{r['floor_s']['decode']:.3f}s",
            f"  memory plan: {r['memory_plan']}"]


def decoding(folder: Path, args: argparse.Namespace, dtype: Any, work: Path, machine: Machine,
             shape: Shape, results: dict[str, Any]) -> None:
    """The three systems on the shared-prefix workload, each in a section of its own."""
    messages = make_prompts(folder, args)
    outcomes: list[Outcome] = []
    ids: list[list[int]] = []
    if "lceval" in args.systems:
        got = section(results, "lceval", lambda: run_lceval(folder, messages, args, work))
        if got is not None:
            outcomes.append(got[0])
            ids = got[1]
    if not ids:  # the same prompt ids without lceval: the chat template's text, tokenized
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(folder)
        ids = [tok.encode(tok.apply_chat_template([{"role": x.role, "content": x.content} for x in m],
                                                  add_generation_prompt=True, tokenize=False),
                          add_special_tokens=False) for m in messages]
    if {"generate_batch", "generate"} & set(args.systems):
        outcomes += section(results, "transformers", lambda: run_transformers(folder, ids, args, dtype)) or []
    floor, floor_tokens = shared_prefix_floor(shape, ids, args.new_tokens)
    for line in report_decoding(outcomes, floor, floor_tokens, machine, args):
        say(line)
    results["decoding"] = {"outcomes": [asdict(o) for o in outcomes], "floor": asdict(floor),
                           "floor_tokens": floor_tokens, "prompt_tokens": sum(map(len, ids))}


def section(results: dict[str, Any], name: str, work: Any) -> Any:
    """`work()`, or None when it failed: the failure is printed and kept in results["errors"],
    and the check goes on (a GPU lent for minutes should give every number it can)."""
    import traceback

    try:
        return work()
    except Exception as exc:  # noqa: BLE001  (reported, then the next section)
        traceback.print_exc()
        results["errors"][name] = f"{type(exc).__name__}: {exc}"
        say(f"[{name}] FAILED: {results['errors'][name]}")
        return None
    finally:
        save(results)  # what is known so far, should the next section not finish


def save(results: dict[str, Any]) -> None:
    """results as gpu_check.json (or the settings' `out_file`) in --out, when it is given."""
    if results["settings"].get("out"):
        out = Path(results["settings"]["out"])
        out.mkdir(parents=True, exist_ok=True)
        name = results["settings"].get("out_file", "gpu_check.json")
        (out / name).write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    dtype = getattr(torch, args.dtype)
    results: dict[str, Any] = {"settings": vars(args).copy(), "errors": {}}
    began = time.perf_counter()
    machine = measure_machine(args.device, dtype)
    results["machine"] = asdict(machine)
    sheet = (f"; datasheet {si(machine.datasheet[0], 'FLOP/s')}, {si(machine.datasheet[1], 'B/s')}"
             if machine.datasheet else "")
    say(f"device: {args.device} ({machine.name}); " + ", ".join(f"{k} {v}" for k, v in machine.versions.items()))
    say(f"measured: {args.dtype} matrix product {si(machine.flops, 'FLOP/s')}, copy "
        f"{si(machine.bandwidth, 'B/s')} (read + written){sheet}")
    say(f"settings: {json.dumps(results['settings'])}")
    if args.work:  # a folder named for the work need not exist yet (tempfile would fail on it)
        Path(args.work).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lceval-gpu-check-", dir=args.work) as tmp:
        work = Path(tmp)
        folder = work / f"model-{args.config}"
        folder.mkdir()
        results["model"] = m = write_folder(folder, args.config, dtype, args.device)
        say(f"model: random {args.config} ({m['parameters']:,} parameters, {args.dtype}), tokenizer of "
            f"{m['tokenizer_size']} tokens; built {m['build_s']:.1f}s, saved {si(m['folder_bytes'], 'B')} in "
            f"{m['save_s']:.1f}s")
        shape = Shape.of(args.config, dtype.itemsize)
        if args.systems:
            section(results, "decoding", lambda: decoding(folder, args, dtype, work, machine, shape, results))
        results["ruler"] = []
        for length in [x for x in args.ruler_lengths.split(",") if x]:
            r = section(results, f"ruler {length}", lambda: ruler_run(folder, length, args, work, machine, shape))
            if r is not None:
                results["ruler"].append(r)
                for line in report_ruler(r, machine):
                    say(line)
    results["total_s"] = time.perf_counter() - began
    say(f"total {results['total_s']:.0f}s; failed: {', '.join(results['errors']) or 'nothing'}")
    save(results)
    return results


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", choices=sorted(CONFIGS), default="llama-3.1-8b")
    p.add_argument("--device", default=None, help="cuda when torch sees one, else cpu")
    p.add_argument("--dtype", default=None, help="default: bfloat16 on cuda, float32 on cpu")
    p.add_argument("--systems", default="lceval,generate_batch,generate",
                   help="comma-separated, of lceval, generate_batch, generate (empty: RULER only)")
    sizes = ", ".join(f"{k}: {' '.join(f'{n}={v}' for n, v in d.items())}" for k, d in SIZES.items())
    p.add_argument("--transcripts", type=int)
    p.add_argument("--questions", type=int)
    p.add_argument("--transcript-tokens", type=int)
    p.add_argument("--new-tokens", type=int)
    p.add_argument("--n-ctx", type=int, default=32768, help="lceval's window for the decoding workload")
    p.add_argument("--generate-requests", type=int, help="requests timed through plain generate")
    p.add_argument("--ruler-lengths", help="comma-separated (empty: none)")
    p.add_argument("--ruler-limit", type=int, help=f"samples per length. Defaults of the sizes: {sizes}")
    p.add_argument("--work", default=None, help="where the model folder and runs go, made if missing (default: the temp dir)")
    p.add_argument("--out", default=None, help="write gpu_check.json here")
    args = p.parse_args(argv)
    for name, value in SIZES["tiny" if args.config == "tiny" else "real"].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    device_defaults(args)
    args.systems = [s for s in args.systems.split(",") if s]
    unknown = set(args.systems) - {"lceval", "generate_batch", "generate"}
    if unknown:
        p.error(f"unknown systems: {sorted(unknown)}")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    quiet_offline()
    return run(parse(argv))


if __name__ == "__main__":
    sys.exit(1 if main(sys.argv[1:])["errors"] else 0)
