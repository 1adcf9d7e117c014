"""What `lceval launch` costs on top of the work: one run of ELITR-Bench-QA (the published
GPT-4 answers replayed, the recorded GPT-4 judge: 271 questions, 18 meetings) unsharded with
`lceval run`, then in N shards with `lceval launch` on each scheduler available here: this
machine's processes, a one-node Slurm cluster and a one-node Ray cluster (both started by
tests/clusters.py, exactly as the tests start them; a scheduler that cannot be started is
left out and said so).

Replayed answers cost next to nothing, so the seconds are the launcher's and the
scheduler's own: planning (reading the data once), the scheduler's check, submitting, each
shard's wait in the queue (submitted -> its process running), each shard's run (its process,
Python's start included), the merge, and the wall time of the whole launch, against the
unsharded run. A shard's balance is its weight (the plan's estimate of its tokens) against
the mean. Seconds depend on the machine and its load (printed); counts do not.

    python benchmarks/launch_overhead.py --shards 4 [--schedulers local,slurm,ray] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.clusters import start_ray, start_slurm, stop_ray, stop_slurm  # noqa: E402
from tests.paths import SHARED  # noqa: E402

GENERATED = "elitr-bench/generated-responses/elitr-bench-qa_{split}_st_gpt-4-eval.json"


def data_home(root: Path) -> Path:
    home = root / "data"
    (home / "elitr-bench").mkdir(parents=True)
    for sub in ("data", "transcripts", "generated-responses"):
        (home / "elitr-bench" / sub).symlink_to(SHARED / "elitr-bench" / sub)
    return home


def lceval(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "lceval", *args], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"lceval {' '.join(args[:3])} failed:\n{out.stdout}\n{out.stderr}")
    return time.perf_counter() - t, out.stdout


def one(scheduler: str, on: list[str], shards: int, root: Path, env: dict[str, str]) -> dict:
    home = data_home(root)
    flags = ["--tasks", "elitr_qa", "--judge", "gpt4-recorded", "--model", f"replay:{home / GENERATED}#GPT-4",
             "--data-home", str(home), "--no-progress"]
    cache = {**env, "LCEVAL_CACHE": str(root / "whole.sqlite")}
    whole, _ = lceval(["run", *flags, "--output", str(root / "whole")], cache)
    wall, _ = lceval(["launch", "--shards", str(shards), "--poll", "0.2", *on, *flags, "--output", str(root / "l"),
                      "--cache", str(root / "nodes" / "cache-{shard}.sqlite")], env)
    record = json.loads(next((root / "l").glob("launch-*/launch.json")).read_text())
    again, _ = lceval(["launch", "--shards", str(shards), "--poll", "0.2", *on, *flags, "--output", str(root / "l"),
                       "--cache", str(root / "nodes" / "cache-{shard}.sqlite")], env)
    attempts = [s["attempts"][-1] for s in record["shards"]]
    weights = [s["weight"] for s in record["shards"]]
    return {
        "scheduler": scheduler, "whole_s": whole, "launch_s": wall, "again_s": again,
        "plan_s": record["timing"]["plan_s"], "check_s": record["timing"]["check_s"],
        "submit_s": record["timing"]["submit_s"], "merge_s": record["timing"]["merge_s"],
        "queue_s": [a["started"] - a["submitted"] for a in attempts],
        "shard_s": [a["ended"] - a["started"] for a in attempts],
        "balance": [w / statistics.mean(weights) for w in weights],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--schedulers", default="local,slurm,ray")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    if not (SHARED / "elitr-bench" / "data").is_dir():
        raise SystemExit(f"the real ELITR-Bench data is not at {SHARED} (set LCEVAL_SHARED_DATASETS)")
    rows = []
    for name in args.schedulers.split(","):
        cluster, stop, on, env = None, None, ["--on", name], dict(os.environ)
        try:
            if name == "slurm":
                cluster, stop = start_slurm(), stop_slurm
                on += ["--partition", cluster.partition]
                env.update(cluster.env)
            elif name == "ray":
                cluster, stop = start_ray(), stop_ray
                on += ["--ray-address", cluster.address]
                env.update(cluster.env)
        except BaseException as exc:  # noqa: BLE001 - pytest's skip included: say why and go on
            print(f"{name}: not measured ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})")
            continue
        try:
            for _ in range(args.repeat):
                with tempfile.TemporaryDirectory() as tmp:
                    rows.append(one(name, on, args.shards, Path(tmp), env))
        finally:
            stop(cluster) if stop else None
    print(f"\n{args.shards} shards of elitr_qa (replayed GPT-4 answers), {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f} at the end\n")
    print("| scheduler | unsharded run | launch (wall) | plan | check | submit | queue wait per shard | "
          "shard process | merge | launched again | heaviest shard / mean |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['scheduler']} | {r['whole_s']:.1f} s | {r['launch_s']:.1f} s | {r['plan_s']:.2f} s | "
              f"{r['check_s']:.2f} s | {r['submit_s']:.2f} s | {min(r['queue_s']):.1f}-{max(r['queue_s']):.1f} s | "
              f"{min(r['shard_s']):.1f}-{max(r['shard_s']):.1f} s | {r['merge_s']:.2f} s | {r['again_s']:.1f} s | "
              f"{max(r['balance']):.3f}x |")


if __name__ == "__main__":
    main()
