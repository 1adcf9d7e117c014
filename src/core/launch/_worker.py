"""One shard of a launch, as a scheduler's job runs it on some node:
`python -m lceval.launch LAUNCH/job.json SHARD --attempt K`.

It is `lceval run --shard SHARD/N` with the settings the launcher planned (job.json holds
RunConfig's manifest form, so nothing is re-parsed from a command line), through the same
engine `Session`, writing its run folder into the launch folder. Around the run it says
where it runs and how it ended (status/SHARD.json), and it moves answers across nodes:
answers earlier attempts of this shard stored (answers/SHARD-*.jsonl.gz) are added to this
node's cache first, and the answers this attempt stores are written there when it ends,
finished or not (SIGTERM, which Slurm sends before it kills a preempted or cancelled job,
ends it like Ctrl-C), so a retry on another node pays only for what was never answered.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Sequence

from lceval.launch._folder import LaunchFolder, write_json


class Terminated(KeyboardInterrupt):
    """SIGTERM: the scheduler ends the job (preempted, cancelled, out of time)."""


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated()


def scheduler_job() -> str | None:
    """The scheduler's id for this job, when it gives one."""
    if os.environ.get("SLURM_ARRAY_JOB_ID"):
        return f"{os.environ['SLURM_ARRAY_JOB_ID']}_{os.environ.get('SLURM_ARRAY_TASK_ID', '')}"
    return os.environ.get("SLURM_JOB_ID")


def cache_path(template: str | None, shard: int) -> Path | None:
    """The shard's cache on this node: `--cache` with `{shard}` and $VARIABLES filled in here
    (e.g. '$TMPDIR/lceval-{shard}.sqlite'), else $LCEVAL_CACHE or the user cache dir."""
    if not template:
        return None
    return Path(os.path.expandvars(template.replace("{shard}", str(shard))))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lceval.launch",
                                     description="Run one shard of an `lceval launch` (the scheduler's job does).")
    parser.add_argument("job_file", type=Path)
    parser.add_argument("shard", type=int)
    parser.add_argument("--attempt", type=int, default=1)
    args = parser.parse_args(argv)
    job = json.loads(args.job_file.read_text(encoding="utf-8"))
    folder = LaunchFolder(args.job_file.parent)
    os.environ.update(job.get("env") or {})
    signal.signal(signal.SIGTERM, _terminate)
    status: dict[str, Any] = {
        "state": "running", "shard": args.shard, "attempt": args.attempt, "host": socket.gethostname(),
        "pid": os.getpid(), "job": scheduler_job(), "restarts": int(os.environ.get("SLURM_RESTART_COUNT") or 0),
        "started": time.time()}
    write_json(folder.status_file(args.shard), status)
    code, error = 1, None
    try:
        status["runs"] = run_shard(job, folder, args.shard, status)
        code = 0
    except Terminated:
        code, error = 143, "terminated (SIGTERM)"
    except KeyboardInterrupt:
        code, error = 130, "interrupted"
    except Exception as exc:  # noqa: BLE001 - the launcher is told how the shard ended, whatever ended it
        from lceval.errors import UserError

        if isinstance(exc, UserError):
            code, error = 2, exc.render()
        else:
            code, error = 1, traceback.format_exc(limit=-3).strip()
        print(f"lceval: shard {args.shard}: {error}", file=sys.stderr)
    status.update(state="done" if code == 0 else "failed", exit=code, error=error, ended=time.time())
    write_json(folder.status_file(args.shard), status)
    return code


def run_shard(job: dict[str, Any], folder: LaunchFolder, shard: int, status: dict[str, Any]) -> list[str]:
    from lceval.engine import RunConfig, Session, load_plugins
    from lceval.results import run_and_write

    count = int(job["shards"])
    output = folder.shard_output(shard)
    config = RunConfig.from_manifest(
        job["config"], shard=(shard, count), output=output, cache_path=cache_path(job.get("cache"), shard),
        data_home=Path(job["data_home"]) if job.get("data_home") else None, progress=False,
        command=["lceval", "launch", "(shard)", f"{shard}/{count}", "--output", str(output)])
    plugins = load_plugins(job.get("disabled") or [], overrides=job.get("overrides") or [])
    since = time.time()
    with Session(config, plugins) as session:
        imported = [session.cache.import_from(path) for path in folder.answers(shard)]
        status["imported_answers"] = sum(c["added"] for c in imported)
        try:
            done = run_and_write(session)
        finally:
            answers = folder.answers_file(shard)
            status["exported_answers"] = session.cache.export(answers, since=since)
            if not status["exported_answers"]:
                answers.unlink()
    for run_dir, results, state in done:
        print(f"shard {shard}/{count}: wrote {run_dir} ({state.usage.get('requests')} requests, "
              f"{state.usage.get('cache_hits')} from the cache)")
    return [str(run_dir) for run_dir, _, _ in done]
