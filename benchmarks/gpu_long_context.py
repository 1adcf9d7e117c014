"""The long-context GPU check (issue 44, part 6): RULER at 128k and 512k tokens on a 1B model
stretched past its window with RoPE scaling, through `lceval run` and the `hf:` backend, with
the memory planned from the card before anything runs.

What it does, in order (each part prints as it finishes):

1. The machine, as benchmarks/gpu_machine.py measures it for both GPU checks: the device's name,
   the versions, its matrix-product FLOP/s and copy bandwidth (the floors below are set against
   them).
2. The model: Llama-3.2-1B's real configuration (`gpu_machine.CONFIGS["llama-3.2-1b"]`, written
   there as a dict: nothing is downloaded) with random weights, saved as a local folder with a
   tokenizer trained here. Its config stretches 8,192 trained positions to 131,072 with Llama 3's
   own `llama3` scaling; the runs replace it with `rope_scaling=yarn:4` (default `--rope-scaling`),
   which stretches the 131,072 to 524,288: the window 512k needs.
3. The memory plan of each length, from the card: the free memory read now
   (`torch.cuda.mem_get_info`, or the machine's available memory on a CPU) and the plan the
   `hf:` backend itself makes for that window (`hf_memory.plan_memory`: the weights, one
   1,024-token prompt chunk's attention scratch at the full window, and the keys and values of
   one window-long prompt). A length whose plan does not fit is skipped with the plan's reason,
   never started to run out of memory an hour later.
4. `lceval run --tasks ruler_niah_single_1 --context-lengths L` for each length that fits
   (`gpu_check.ruler_run`, the model as `hf:FOLDER,rope_scaling=yarn:4,n_ctx=L`), read back from
   its run folder: tokens, phases, peak GPU memory, prefill against the FLOP/s ceiling, and the
   long-context settings the run recorded (the scaling the loaded model really held).

Random weights answer nothing right: the point is what a 512k prompt costs on the card (time,
memory) and that it runs, not a score. With `--out DIR`, DIR/gpu_long_context.json holds every
figure, rewritten after each part; the exit code is 1 if a part failed.

Usage (from the repository root, lceval and torch importable):

    python benchmarks/gpu_long_context.py --out DIR                     # one GPU
    python benchmarks/gpu_long_context.py --config tiny --device cpu --lengths 1k,2k   # the same code, seconds

On the device machine this workplace lends, the call is
`CHECK=gpu_long_context bash benchmarks/gpu_device_run.sh` (docs/performance.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_check  # noqa: E402  (the floors, the RULER run, its report lines, the sections and their saving)
import gpu_machine  # noqa: E402  (the machine, the model folder, the figures' printing, the device defaults)

say = gpu_machine.say


def tokens(length: str) -> int:
    """`128k` -> 131072 (k = 1024 tokens, as `--context-lengths` reads it)."""
    return int(length[:-1]) * 1024 if length.lower().endswith("k") else int(length)


def plan_lengths(folder: Path, lengths: list[str], device: str, width: int) -> list[dict[str, Any]]:
    """Per length, the memory plan the `hf:` backend makes for a window of that length from
    the memory free now, and whether one window-long prompt fits it. RoPE scaling changes no
    byte of it, so the saved config serves."""
    from transformers import AutoConfig

    from lceval.errors import UserError
    from lceval_plugins.backends.hf_batching import STEP_TOKENS
    from lceval_plugins.backends.hf_memory import free_memory, plan_memory

    config = AutoConfig.from_pretrained(folder)
    free = free_memory(device)
    plans = []
    for length in lengths:
        plan = plan_memory(config, device=device, width=width, window=tokens(length), chunk=STEP_TOKENS,
                           free=free, weights_loaded=False)
        try:
            plan.check_fits()
            why = None
        except UserError as exc:
            why = exc.message
        plans.append({"length": length, "window": plan.window, "free_bytes": free[0], "free_from": free[1],
                      "plan": plan.describe(), "fits": why is None, "why_not": why,
                      "kv_bytes": plan.window * plan.kv_bytes_per_token, "weights_bytes": plan.weights_bytes,
                      "scratch_bytes": plan.scratch_bytes})
    return plans


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    dtype = getattr(torch, args.dtype)
    results: dict[str, Any] = {"settings": {**vars(args), "out_file": "gpu_long_context.json"}, "errors": {},
                               "skipped": {}, "ruler": []}
    began = time.perf_counter()
    machine = gpu_machine.measure_machine(args.device, dtype)
    results["machine"] = asdict(machine)
    say(f"device: {args.device} ({machine.name}); " + ", ".join(f"{k} {v}" for k, v in machine.versions.items()))
    say(f"measured: {args.dtype} matrix product {gpu_machine.si(machine.flops, 'FLOP/s')}, copy "
        f"{gpu_machine.si(machine.bandwidth, 'B/s')} (read + written)")
    with tempfile.TemporaryDirectory(prefix="lceval-long-context-", dir=args.work) as tmp:
        work = Path(tmp)
        folder = work / f"model-{args.config}"
        folder.mkdir()
        results["model"] = m = gpu_machine.write_folder(folder, args.config, dtype, args.device)
        say(f"model: random {args.config} ({m['parameters']:,} parameters, {args.dtype}), rope_scaling="
            f"{args.rope_scaling} over its config's {gpu_machine.CONFIGS[args.config]['max_position_embeddings']:,} "
            "positions")
        shape = gpu_check.Shape.of(args.config, dtype.itemsize)
        lengths = [x for x in args.lengths.split(",") if x]
        results["plans"] = gpu_check.section(
            results, "memory plan", lambda: plan_lengths(folder, lengths, args.device, dtype.itemsize)) or []
        for plan in results["plans"]:
            say(f"memory plan at {plan['length']}: {plan['plan']}")
            if not plan["fits"]:
                results["skipped"][plan["length"]] = plan["why_not"]
                say(f"  skipped: {plan['why_not']}")
                continue
            options = f",rope_scaling={args.rope_scaling},n_ctx={plan['window']}"
            r = gpu_check.section(results, f"ruler {plan['length']}", lambda p=plan, o=options: gpu_check.ruler_run(
                folder, p["length"], args, work, machine, shape, o))
            if r is not None:
                results["ruler"].append(r)
                for line in gpu_check.report_ruler(r, machine):
                    say(line)
                say(f"  long-context settings recorded: {json.dumps(r['long_context'])}")
            gpu_check.save(results)
    results["total_s"] = time.perf_counter() - began
    say(f"total {results['total_s']:.0f}s; skipped: {', '.join(results['skipped']) or 'nothing'}; failed: "
        f"{', '.join(results['errors']) or 'nothing'}")
    gpu_check.save(results)
    return results


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", choices=sorted(gpu_machine.CONFIGS), default="llama-3.2-1b")
    p.add_argument("--device", default=None, help="cuda when torch sees one, else cpu")
    p.add_argument("--dtype", default=None, help="default: bfloat16 on cuda, float32 on cpu")
    p.add_argument("--lengths", default="128k,512k", help="RULER lengths, comma-separated (k = 1024 tokens)")
    p.add_argument("--rope-scaling", default="yarn:4", help="the hf: option rope_scaling=TYPE:FACTOR of every run")
    p.add_argument("--ruler-limit", type=int, default=1, help="samples per length")
    p.add_argument("--work", default=None, help="where the model folder and runs go (default: the temp dir)")
    p.add_argument("--out", default=None, help="write gpu_long_context.json here")
    args = p.parse_args(argv)
    gpu_machine.device_defaults(args)
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    gpu_machine.quiet_offline()
    return run(parse(argv))


if __name__ == "__main__":
    sys.exit(1 if main(sys.argv[1:])["errors"] else 0)
