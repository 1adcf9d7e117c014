"""Slurm, through its own commands: `sbatch` submits the shards as one job array (`--array`
with the shards' indices, `--requeue` so that Slurm itself puts a preempted or node-failed
shard back in the queue), `squeue` says how each array task stands, `scancel` cancels them.
A launch's jobs are named after its folder (`lceval-KEY`), so a launcher started again
finds the jobs an earlier one left queued or running and waits for them instead of
submitting them twice.

Before anything is submitted, the cluster is asked whether it can run the shards at all:
`sinfo` (is the controller reachable, does the partition exist, has any node of it the CPUs
and GPUs a shard asks for), then `sbatch --test-only` with the very options of the array.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from lceval.errors import UserError
from lceval.launch._folder import LaunchFolder
from lceval.launch._schedulers import FAILED, FINISHED, PENDING, RUNNING, Job, JobState, worker_command
from lceval.launch._settings import LaunchSettings

COMMANDS = ("sbatch", "squeue", "scancel", "sinfo")
TIMEOUT_S = 60
WAITING = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING", "SUSPENDED",
           "PREEMPTED", "RESV_DEL_HOLD", "STOPPED"}
ACTIVE = {"RUNNING", "COMPLETING", "SIGNALING", "STAGE_OUT"}


def _run(args: list[str], *, flag: str = "--on", why: str = "") -> str:
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"Slurm is not reachable: `{' '.join(args[:2])}` failed ({exc})", field=flag) from None
    if out.returncode != 0:
        said = (out.stderr or out.stdout).strip().splitlines()
        raise UserError(f"{why}`{shlex.join(args[:3])} ...` failed: {said[-1] if said else f'exit {out.returncode}'}",
                        field=flag)
    return out.stdout


def gpu_count(gres: str) -> int:
    """GPUs in a node's GRES (`gpu:4`, `gpu:a100:4(S:0-1)`, `gpu:2,shard:8`)."""
    total = 0
    for item in gres.split(","):
        parts = re.sub(r"\(.*?\)", "", item).split(":")
        if parts[0] == "gpu" and parts[-1].isdigit() and len(parts) > 1:
            total += int(parts[-1])
    return total


class SlurmScheduler:
    name = "slurm"

    def __init__(self, settings: LaunchSettings, folder: LaunchFolder) -> None:
        self.settings, self.folder = settings, folder
        self.job_name = f"lceval-{folder.path.name.removeprefix('launch-')}"

    # -- before submitting ----------------------------------------------------------------
    def check(self) -> None:
        missing = [c for c in COMMANDS if shutil.which(c) is None]
        if missing:
            raise UserError(f"Slurm's commands are not installed here (no {', '.join(missing)})", field="--on",
                            hint="Launch from a machine of the cluster (a login node), or pick another --on.")
        conf = os.environ.get("SLURM_CONF")
        if conf and not os.path.isfile(conf):  # sinfo would look for it for a minute
            raise UserError(f"Slurm is not reachable: $SLURM_CONF names {conf}, which does not exist", field="--on")
        s = self.settings
        rows = [line.split("|") for line in _run(["sinfo", "-h", "-o", "%P|%c|%G|%a"], why="Slurm is not reachable: ").splitlines() if line.strip()]
        partitions: dict[str, list[list[str]]] = {}
        default = None
        for row in rows:
            if len(row) < 4:
                continue
            name = row[0].rstrip("*")
            if row[0].endswith("*"):
                default = name
            partitions.setdefault(name, []).append(row)
        if not partitions:
            raise UserError("Slurm answers but lists no partition", field="--on")
        wanted = s.partition or default
        if s.partition and s.partition not in partitions:
            raise UserError(f"the cluster has no partition '{s.partition}'", field="--partition",
                            hint=f"Its partitions: {', '.join(sorted(partitions))}.")
        nodes = partitions.get(wanted or "", [r for rs in partitions.values() for r in rs])
        cpus = max((int(re.sub(r"\D.*", "", r[1]) or 0) for r in nodes), default=0)
        gpus = max((gpu_count(r[2]) for r in nodes), default=0)
        where = f"partition '{wanted}'" if wanted else "the cluster"
        if s.cpus_per_shard > cpus:
            raise UserError(f"a shard asks for {s.cpus_per_shard} CPUs; the nodes of {where} have at most {cpus}",
                            field="--cpus-per-shard")
        if s.gpus_per_shard > gpus:
            raise UserError(f"a shard asks for {s.gpus_per_shard} GPU(s); the nodes of {where} have at most {gpus}",
                            field="--gpus-per-shard")
        test = subprocess.run(["sbatch", "--test-only", *self._options(), "--wrap", "true"], capture_output=True,
                              text=True, timeout=TIMEOUT_S)
        if test.returncode != 0:
            why = (test.stderr or test.stdout).strip().splitlines()
            message = why[-1] if why else f"exit {test.returncode}"
            flag = "--time" if "time limit" in message.lower() and s.time_limit else \
                "--sbatch-arg" if s.sbatch_args else "--partition" if s.partition else "--on"
            raise UserError(f"Slurm would not run a shard: {message}", field=flag)

    def _options(self) -> list[str]:
        s = self.settings
        out = [f"--job-name={self.job_name}", "--requeue", f"--cpus-per-task={s.cpus_per_shard}"]
        if s.partition:
            out.append(f"--partition={s.partition}")
        if s.gpus_per_shard:
            out.append(f"--gres=gpu:{s.gpus_per_shard}")
        if s.time_limit:
            out.append(f"--time={s.time_limit}")
        return out + list(s.sbatch_args)

    # -- the jobs -------------------------------------------------------------------------
    def script(self) -> str:
        """The array's batch script: shard = the array index, attempt = its argument."""
        command = shlex.join(worker_command(self.settings, self.folder, "__SHARD__", "__ATTEMPT__"))
        command = command.replace("__SHARD__", '"$SLURM_ARRAY_TASK_ID"').replace("__ATTEMPT__", '"$1"')
        return ("#!/bin/bash\n# one shard of an lceval launch: the array index is the shard, $1 the launcher's "
                f"attempt\nexec {command}\n")

    def submit(self, shards: list[int], attempt: int) -> list[Job]:
        script = self.folder.path / "shard.sbatch"
        script.write_text(self.script(), encoding="utf-8")
        log = self.folder.path / "logs" / f"shard-%a.attempt-{attempt}.slurm-%A.log"
        out = _run(["sbatch", "--parsable", f"--array={','.join(map(str, shards))}", f"--output={log}",
                    *self._options(), str(script), str(attempt)])
        array = out.strip().split(";")[0]
        return [Job(shard=i, attempt=attempt, id=f"{array}_{i}") for i in shards]

    def _queue(self) -> dict[str, tuple[str, str]] | None:
        """This launch's array tasks Slurm knows (finished ones too, until it forgets them):
        task id -> (state, node); None when squeue does not answer now."""
        try:
            out = subprocess.run(["squeue", "-h", "-r", "-t", "all", "-n", self.job_name, "-o", "%i|%T|%N"],
                                 capture_output=True, text=True, timeout=TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if out.returncode != 0:
            return None
        rows = [line.split("|") for line in out.stdout.splitlines() if line.count("|") == 2]
        return {row[0]: (row[1], row[2]) for row in rows}

    def adopt(self) -> list[Job]:
        queue = self._queue() or {}
        jobs = []
        for task, (state, _) in queue.items():
            array, _, index = task.partition("_")
            if index.isdigit() and (state in WAITING or state in ACTIVE):
                jobs.append(Job(shard=int(index), attempt=0, id=task))
        return jobs

    def poll(self, jobs: list[Job]) -> dict[int, JobState]:
        queue = self._queue()
        states: dict[int, JobState] = {}
        for job in jobs:
            if queue is None:  # squeue did not answer: nothing changed as far as we know
                states[job.shard] = JobState(RUNNING, "squeue did not answer")
                continue
            state, node = queue.get(job.id, ("", ""))
            if state in WAITING:
                states[job.shard] = JobState(PENDING, state.lower())
            elif state in ACTIVE:
                states[job.shard] = JobState(RUNNING, node)
            elif state == "COMPLETED":
                states[job.shard] = JobState(FINISHED)
            elif state:
                states[job.shard] = JobState(FAILED, f"Slurm state {state}")
            else:  # Slurm forgot it (MinJobAge): the run folder decides
                states[job.shard] = JobState(FINISHED, "no longer in Slurm's queue")
        return states

    def cancel(self, jobs: list[Job]) -> None:
        if jobs:
            subprocess.run(["scancel", *[j.id for j in jobs]], capture_output=True, timeout=TIMEOUT_S)

    def close(self) -> None:
        pass
