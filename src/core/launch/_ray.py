"""Ray, through its own client: each shard is a Ray task that asks for the CPUs and GPUs a
shard needs (`num_cpus`, `num_gpus`: Ray sets CUDA_VISIBLE_DEVICES for it) and runs the
shard's process; `max_retries` lets Ray run it again when the worker or its node dies, and
the launcher submits a shard again when its process fails. Ctrl-C cancels the tasks; a
cancelled task ends its shard's process (SIGTERM, then SIGKILL).

Ray is imported only here, when `--on ray` is asked for.
"""

from __future__ import annotations

import os
import socket
import subprocess
from typing import Any

from lceval.errors import UserError
from lceval.launch._folder import LaunchFolder
from lceval.launch._schedulers import (CANCEL_WAIT_S, FAILED, FINISHED, PENDING, RUNNING, Job, JobState,
                                       end_process, exit_text, worker_command)
from lceval.launch._settings import LaunchSettings

CONNECT_TIMEOUT_S = 10.0


def run_shard(command: list[str], log: str) -> int:
    """The body of a shard's Ray task: the shard's process, ended if the task is cancelled."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        try:
            return proc.wait()
        except BaseException:  # ray.cancel raises KeyboardInterrupt here
            end_process(proc)
            raise


def _reachable(address: str) -> str | None:
    """Why `host:port` cannot be reached (None when it can): a wrong address fails at once,
    not after Ray's own minute of retries."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return f"'{address}' is not HOST:PORT"
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        return f"nothing answers at {host}:{port} ({exc.strerror or exc})"
    return None


class RayScheduler:
    name = "ray"

    def __init__(self, settings: LaunchSettings, folder: LaunchFolder) -> None:
        self.settings, self.folder = settings, folder
        self.ray: Any = None
        self.started_here = False

    def check(self) -> None:
        try:
            import ray
        except ImportError:
            raise UserError("Ray is not installed here", field="--on", hint="pip install ray") from None
        s = self.settings
        address = s.ray_address or os.environ.get("RAY_ADDRESS")
        flag = "--ray-address" if s.ray_address else "--on"
        if address and address != "auto":
            why = _reachable(address)
            if why:
                raise UserError(f"the Ray cluster is not reachable: {why}", field=flag)
        try:
            if address:
                ray.init(address=address, log_to_driver=False, logging_level="warning")
            else:
                ray.init(log_to_driver=False, logging_level="warning", include_dashboard=False)
                self.started_here = True
        except Exception as exc:  # noqa: BLE001 - Ray's connection errors have several types
            raise UserError(f"cannot connect to Ray: {str(exc).strip().splitlines()[0] if str(exc) else exc!r}",
                            field=flag) from None
        self.ray = ray
        nodes = [n.get("Resources") or {} for n in ray.nodes() if n.get("Alive")]
        cpus = max((n.get("CPU", 0) for n in nodes), default=0)
        gpus = max((n.get("GPU", 0) for n in nodes), default=0)
        if s.cpus_per_shard > cpus:
            raise UserError(f"a shard asks for {s.cpus_per_shard} CPUs; the Ray cluster's nodes have at most "
                            f"{cpus:g}", field="--cpus-per-shard")
        if s.gpus_per_shard > gpus:
            raise UserError(f"a shard asks for {s.gpus_per_shard} GPU(s); the Ray cluster's nodes have at most "
                            f"{gpus:g}", field="--gpus-per-shard")

    def adopt(self) -> list[Job]:
        return []  # a driver's tasks end with it

    def submit(self, shards: list[int], attempt: int) -> list[Job]:
        s = self.settings
        task = self.ray.remote(num_cpus=s.cpus_per_shard, num_gpus=s.gpus_per_shard, max_retries=s.retries,
                               name="lceval-shard")(run_shard)
        jobs = []
        for i in shards:
            ref = task.remote(worker_command(s, self.folder, str(i), str(attempt)),
                              str(self.folder.log_file(i, attempt).resolve()))
            jobs.append(Job(shard=i, attempt=attempt, id=f"ray task {ref.task_id().hex()[:12]}", handle=ref))
        return jobs

    def poll(self, jobs: list[Job]) -> dict[int, JobState]:
        refs = [j.handle for j in jobs]
        ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0) if refs else ([], [])
        done = {r.hex() for r in ready}
        states: dict[int, JobState] = {}
        for job in jobs:
            if job.handle.hex() not in done:
                status = self.folder.status(job.shard)
                running = status.get("attempt") == job.attempt and status.get("state") == "running"
                states[job.shard] = JobState(RUNNING, status.get("host", "")) if running else JobState(PENDING)
                continue
            try:
                code = self.ray.get(job.handle)
            except Exception as exc:  # noqa: BLE001 - a task Ray gave up on (worker died, cancelled)
                states[job.shard] = JobState(FAILED, f"Ray: {str(exc).strip().splitlines()[0] if str(exc) else exc!r}")
                continue
            states[job.shard] = JobState(FINISHED) if code == 0 else JobState(FAILED, exit_text(code))
        return states

    def cancel(self, jobs: list[Job]) -> None:
        refs = [j.handle for j in jobs]
        for ref in refs:
            self.ray.cancel(ref)  # KeyboardInterrupt in the task: it ends the shard's process
        if refs:
            self.ray.wait(refs, num_returns=len(refs), timeout=CANCEL_WAIT_S + 5)

    def close(self) -> None:
        if self.ray is not None:
            self.ray.shutdown()
            self.ray = None
