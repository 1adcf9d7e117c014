"""Real schedulers for the launch tests, started on this machine and stopped after them:
a one-node Slurm cluster from Debian's packages (munged, slurmctld and slurmd on 127.0.0.1,
with the process tracking and task plugins a container allows) and a one-node Ray cluster
(`ray start --head` on 127.0.0.1). Nothing here imitates a scheduler: when the packages are
missing the tests that need them are skipped, unless $LCEVAL_REQUIRE_CLUSTERS is set (CI,
whose .ci/run installs them), where they fail instead.

Every daemon runs from a private temporary folder with its own ports, key and sockets, so
nothing of the machine's own Slurm, munge or Ray setup is read or changed, and each is
stopped by its own process id.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SLURM_DAEMONS = ("munged", "slurmctld", "slurmd")
START_TIMEOUT_S = 60.0


def unavailable(why: str) -> None:
    """Skip, or fail where the clusters are required (CI)."""
    if os.environ.get("LCEVAL_REQUIRE_CLUSTERS"):
        pytest.fail(f"$LCEVAL_REQUIRE_CLUSTERS is set but {why}")
    pytest.skip(why)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _which(name: str) -> str | None:
    return shutil.which(name) or next((str(p) for p in (Path("/usr/sbin") / name, Path("/sbin") / name)
                                       if p.is_file()), None)


def _wait(check, what: str, logs: list[Path]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    tails = "\n".join(f"--- {p}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-15:])
                      for p in logs if p.is_file())
    raise RuntimeError(f"{what} did not come up in {START_TIMEOUT_S:.0f} s\n{tails}")


def _pid(path: Path, what: str, logs: list[Path]) -> int:
    """The process id a daemon wrote to `path` (waiting until it is written whole)."""
    def written() -> bool:
        try:
            return path.read_text().strip().isdigit()
        except OSError:
            return False

    _wait(written, what, logs)
    return int(path.read_text().strip())


def _stop(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 15
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@dataclass
class Slurm:
    """A running one-node cluster: `env` holds the SLURM_CONF its commands read."""

    root: Path
    node: str
    partition: str
    cpus: int
    env: dict[str, str] = field(default_factory=dict)
    pids: list[int] = field(default_factory=list)

    def squeue(self, *args: str) -> str:
        return subprocess.run(["squeue", "-h", *args], capture_output=True, text=True, timeout=60,
                              env={**os.environ, **self.env}).stdout


SLURM_CONF = """\
ClusterName=lceval-test
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
# a container has no cgroups to give: Linux's /proc tracks a job's processes, no task binding
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
# finished jobs stay in squeue long enough for the launcher to see how they ended
MinJobAge=600
KillWait=5
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName={partition} Nodes={node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
"""


def start_slurm() -> Slurm:
    """munged with its own key and socket, then slurmctld and slurmd, all as root (a
    container's root: slurmd must start jobs as their user)."""
    missing = [d for d in SLURM_DAEMONS if _which(d) is None] + \
              [c for c in ("sbatch", "squeue", "scancel", "sinfo") if shutil.which(c) is None]
    if missing:
        unavailable(f"Slurm is not installed (no {', '.join(missing)}): apt-get install slurm-wlm munge")
    if os.geteuid() != 0:
        unavailable("the one-node Slurm cluster needs root (slurmd starts jobs as their user)")
    root = Path(tempfile.mkdtemp(prefix="lceval-slurm-"))
    for sub in ("munge", "state", "spool", "log"):
        (root / sub).mkdir()
    (root / "munge").chmod(0o700)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    cluster = Slurm(root=root, node=socket.gethostname().split(".")[0], partition="lceval", cpus=os.cpu_count() or 1)
    conf = root / "slurm.conf"
    conf.write_text(SLURM_CONF.format(node=cluster.node, root=root, ctld_port=free_port(), d_port=free_port(),
                                      cpus=cluster.cpus, partition=cluster.partition), encoding="utf-8")
    cluster.env = {"SLURM_CONF": str(conf)}
    env = {**os.environ, **cluster.env}
    try:
        subprocess.run([_which("munged"), "--force", f"--key-file={key}", f"--socket={root}/munge/socket",
                        f"--pid-file={root}/munge/pid", f"--seed-file={root}/munge/seed",
                        f"--log-file={root}/munge/log"], check=True, env=env, capture_output=True, timeout=60)
        cluster.pids.append(_pid(root / "munge" / "pid", "munged", [root / "munge" / "log"]))
        for daemon in ("slurmctld", "slurmd"):
            subprocess.run([_which(daemon), "-f", str(conf)], check=True, env=env, capture_output=True, timeout=60)
            cluster.pids.insert(0, _pid(root / f"{daemon}.pid", daemon, [root / "log" / f"{daemon}.log"]))

        def idle() -> bool:
            out = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, env=env, timeout=30)
            return out.returncode == 0 and out.stdout.strip() in ("idle", "mix", "alloc")

        _wait(idle, "the Slurm node", [root / "log" / "slurmctld.log", root / "log" / "slurmd.log"])
    except BaseException:
        _stop(cluster.pids)
        raise
    return cluster


def stop_slurm(cluster: Slurm) -> None:
    """Every job cancelled and gone (so no job step outlives its slurmd), then the daemons."""
    subprocess.run(["scancel", "--full", "--partition", cluster.partition], capture_output=True, timeout=60,
                   env={**os.environ, **cluster.env})
    try:
        _wait(lambda: not cluster.squeue("-t", "pending,running,completing,suspended", "-o", "%i").strip(),
              "the cancelled jobs to end", [])
    except RuntimeError:
        pass
    _stop(cluster.pids)
    shutil.rmtree(cluster.root, ignore_errors=True)


@dataclass
class Ray:
    """A running one-node Ray cluster at `address`; `env` is what a client needs to join it."""

    address: str
    root: Path
    process: subprocess.Popen
    env: dict[str, str] = field(default_factory=dict)


def start_ray(cpus: int = 2) -> Ray:
    """`ray start --head --block` on 127.0.0.1 in a private temporary folder; token
    authentication off (a test cluster reachable only from this machine)."""
    try:
        import ray  # noqa: F401
    except ImportError:
        unavailable("Ray is not installed: pip install ray")
    ray_cli = Path(sys.executable).parent / "ray"
    if not ray_cli.is_file():
        unavailable(f"Ray's command is not beside {sys.executable}")
    root = Path(tempfile.mkdtemp(prefix="lcray-", dir="/tmp"))  # short: Ray's sockets live under it
    port = free_port()
    env = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    log = open(root / "ray-start.log", "wb")
    process = subprocess.Popen(
        [str(ray_cli), "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={port}",
         f"--num-cpus={cpus}", "--num-gpus=0", "--include-dashboard=false", "--disable-usage-stats",
         f"--temp-dir={root}"], stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **env},
        start_new_session=True)
    cluster = Ray(address=f"127.0.0.1:{port}", root=root, process=process, env=env)

    def up() -> bool:
        if process.poll() is not None:
            raise RuntimeError("ray start ended:\n" + (root / "ray-start.log").read_text(errors="replace")[-3000:])
        return b"Ray runtime started" in (root / "ray-start.log").read_bytes()

    try:
        _wait(up, "Ray", [root / "ray-start.log"])
    except BaseException:
        stop_ray(cluster)
        raise
    return cluster


def stop_ray(cluster: Ray) -> None:
    """SIGTERM to `ray start --block`, which stops the processes it started."""
    cluster.process.terminate()
    try:
        cluster.process.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(cluster.process.pid, signal.SIGKILL)
        cluster.process.wait()
    shutil.rmtree(cluster.root, ignore_errors=True)
