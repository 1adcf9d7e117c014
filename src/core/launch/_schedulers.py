"""What the launcher asks of a scheduler, and the simplest one: processes on this machine.

A scheduler submits one job per shard (each job runs `python -m lceval.launch JOB SHARD`),
says how each job stands, and cancels them. It does not decide whether a shard is done: a
shard is done when its run folder is in the launch folder (`LaunchFolder.finished_runs`),
whatever the scheduler says, so every scheduler gets the same retry and resume rules.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from lceval.errors import UserError
from lceval.launch._folder import LaunchFolder
from lceval.launch._settings import LaunchSettings

#: how a job stands: waiting for resources, running, ended well (exit 0), ended badly
PENDING, RUNNING, FINISHED, FAILED = "pending", "running", "finished", "failed"
#: how long a cancelled shard has to end after SIGTERM before it is killed
CANCEL_WAIT_S = 10.0


@dataclass
class Job:
    """One submission of one shard."""

    shard: int
    attempt: int
    id: str
    submitted: float = field(default_factory=time.time)
    #: the scheduler's own handle (a process, a Ray object reference)
    handle: Any = None


@dataclass
class JobState:
    state: str
    detail: str = ""


class Scheduler(Protocol):
    name: str

    def check(self) -> None:
        """Refuse (UserError naming the flag) what the scheduler cannot do, before anything is submitted."""

    def adopt(self) -> list[Job]:
        """Jobs of this launch still queued or running (submitted by a launcher that is gone)."""

    def submit(self, shards: list[int], attempt: int) -> list[Job]:
        """One job per shard, each its `attempt`-th submission."""

    def poll(self, jobs: list[Job]) -> dict[int, JobState]:
        """How each job stands, by shard."""

    def cancel(self, jobs: list[Job]) -> None:
        """End the jobs (a shard's process gets SIGTERM, then SIGKILL)."""

    def close(self) -> None:
        """Let go of the scheduler (nothing it runs is ended)."""


def worker_command(settings: LaunchSettings, folder: LaunchFolder, shard: str, attempt: str) -> list[str]:
    """The command of a shard's job (`shard`, `attempt` as text: Slurm's is a variable)."""
    return [settings.python, "-m", "lceval.launch", str(folder.job_file.resolve()), shard, "--attempt", attempt]


def die_with_parent() -> None:
    """`preexec_fn` of a shard's process: on Linux it gets SIGTERM when the process that
    started it dies (a launcher or Ray worker killed without a chance to cancel it)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def end_process(proc: subprocess.Popen[Any], wait_s: float = CANCEL_WAIT_S) -> None:
    """SIGTERM (the shard stores its answers for a later attempt), then SIGKILL."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def visible_gpus() -> list[str]:
    """This machine's GPUs, as CUDA_VISIBLE_DEVICES names them."""
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    if given is not None:
        return [d.strip() for d in given.split(",") if d.strip() and d.strip() != "-1"]
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [str(i) for i, line in enumerate(out.splitlines()) if line.startswith("GPU ")]


class LocalScheduler:
    """Shards as processes on this machine, at most `--parallel` at once, each with its own
    GPUs (CUDA_VISIBLE_DEVICES) when it asks for some: a node's GPUs without a cluster."""

    name = "local"

    def __init__(self, settings: LaunchSettings, folder: LaunchFolder) -> None:
        self.settings, self.folder = settings, folder
        self.queue: list[Job] = []
        self.running: dict[int, tuple[Job, list[str]]] = {}
        self.free: list[str] = []
        self.slots = 1

    def check(self) -> None:
        s = self.settings
        cpus = os.cpu_count() or 1
        if s.cpus_per_shard > cpus:
            raise UserError(f"a shard asks for {s.cpus_per_shard} CPUs; this machine has {cpus}",
                            field="--cpus-per-shard")
        if s.gpus_per_shard:
            self.free = visible_gpus()
            if s.gpus_per_shard > len(self.free):
                raise UserError(f"a shard asks for {s.gpus_per_shard} GPU(s); this machine has {len(self.free)} "
                                f"({'CUDA_VISIBLE_DEVICES' if 'CUDA_VISIBLE_DEVICES' in os.environ else 'nvidia-smi'})",
                                field="--gpus-per-shard")
            fits = len(self.free) // s.gpus_per_shard
        else:
            fits = max(1, cpus // s.cpus_per_shard)
        self.slots = s.parallel or fits

    def adopt(self) -> list[Job]:
        return []  # a shard's process dies with the launcher that started it

    def submit(self, shards: list[int], attempt: int) -> list[Job]:
        jobs = [Job(shard=i, attempt=attempt, id=f"local {i}.{attempt}") for i in shards]
        self.queue.extend(jobs)
        self._start()
        return jobs

    def _start(self) -> None:
        while self.queue and len(self.running) < self.slots:
            job = self.queue.pop(0)
            devices = [self.free.pop(0) for _ in range(self.settings.gpus_per_shard)]
            env = dict(os.environ)
            if self.settings.gpus_per_shard:
                env["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
            log = self.folder.log_file(job.shard, job.attempt)
            with open(log, "ab") as out:
                job.handle = subprocess.Popen(worker_command(self.settings, self.folder, str(job.shard),
                                                             str(job.attempt)),
                                              stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                              start_new_session=True, preexec_fn=die_with_parent)
            job.id = f"pid {job.handle.pid}"
            self.running[job.shard] = (job, devices)

    def poll(self, jobs: list[Job]) -> dict[int, JobState]:
        states: dict[int, JobState] = {}
        for job in jobs:
            proc = job.handle
            if proc is None:
                states[job.shard] = JobState(PENDING)
                continue
            code = proc.poll()
            if code is None:
                states[job.shard] = JobState(RUNNING)
                continue
            states[job.shard] = JobState(FINISHED) if code == 0 else JobState(FAILED, exit_text(code))
            if job.shard in self.running and self.running[job.shard][0] is job:
                self.free.extend(self.running.pop(job.shard)[1])
        self._start()
        return states

    def cancel(self, jobs: list[Job]) -> None:
        self.queue = [j for j in self.queue if j not in jobs]
        procs = [j.handle for j in jobs if j.handle is not None and j.handle.poll() is None]
        for proc in procs:
            proc.terminate()
        deadline = time.monotonic() + CANCEL_WAIT_S
        for proc in procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def close(self) -> None:
        pass


def exit_text(code: int) -> str:
    """A process's exit status in words (a negative one is the signal that ended it)."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    meaning = {1: "an internal error", 2: "bad input", 130: "interrupted", 143: "terminated (SIGTERM)"}
    return f"exit {code}" + (f" ({meaning[code]})" if code in meaning else "")
