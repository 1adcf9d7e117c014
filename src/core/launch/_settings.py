"""`lceval launch`'s own options (where the shards run and how many), declared once with the
flag mechanism `lceval run`'s options use (`lceval.options.flag`): the CLI builds its flags
from them (`flags_of(LaunchSettings)`) and `LaunchSettings.from_flags` turns their text into
typed settings, each bad value a `UserError` naming its flag. The run's own options are
`lceval run`'s (`engine.RunConfig`), unchanged."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from lceval.errors import UserError
from lceval.options import FlagSettings, flag, whole_number

#: the schedulers `--on` names: a real cluster's (Slurm, Ray) or this machine's processes
SCHEDULERS = ("slurm", "ray", "local")


def _flag(name: str, help: str, default: Any = None, **kind: Any) -> Any:
    if isinstance(default, list):
        return flag(name, help=help, default_factory=list, **kind)
    return flag(name, help=help, default=default, **kind)


def _seconds(text: Any) -> float:
    try:
        value = float(str(text).strip())
    except ValueError:
        raise UserError(f"--poll takes seconds, got '{text}'", field="--poll") from None
    if not 0.05 <= value <= 600:
        raise UserError(f"--poll must be between 0.05 and 600 seconds, got {value}", field="--poll")
    return value


#: Slurm's time formats: MINUTES, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$")


def _time(text: Any) -> str:
    value = str(text).strip()
    if not TIME.match(value):
        raise UserError(f"--time takes Slurm's forms (MINUTES, HH:MM:SS, D-HH:MM:SS), got '{text}'", field="--time")
    return value


@dataclass
class LaunchSettings(FlagSettings):
    """Where a run's shards go and what each asks of the scheduler."""

    on: str = _flag("--on", "the scheduler: slurm (sbatch arrays), ray (Ray tasks) or local (processes on "
                    "this machine)", required=True, choices=SCHEDULERS)
    shards: int = _flag("--shards", "how many shards (at most the run's contexts: meetings, haystacks)",
                        default=1, metavar="N", required=True, parse=whole_number("--shards", 1))
    retries: int = _flag("--retries", "times a failed shard is submitted again (default 2); a preempted Slurm "
                         "job is requeued by Slurm itself", default=2, metavar="K", parse=whole_number("--retries", 0))
    cpus_per_shard: int = _flag("--cpus-per-shard", "CPUs each shard asks for (default 1)", default=1,
                                metavar="C", parse=whole_number("--cpus-per-shard", 1))
    gpus_per_shard: int = _flag("--gpus-per-shard", "GPUs each shard asks for (default 0); a vLLM model uses them "
                                "with its own tensor/data parallelism", default=0, metavar="G",
                                parse=whole_number("--gpus-per-shard", 0))
    partition: str | None = _flag("--partition", "slurm: the partition (default: the cluster's default)")
    time_limit: str | None = _flag("--time", "slurm: each shard's time limit, e.g. 04:00:00", metavar="TIME",
                                   parse=_time)
    sbatch_args: list[str] = _flag("--sbatch-arg", "slurm: a further sbatch option, e.g. --sbatch-arg=--mem=32G "
                                   "(repeatable)", default=[], metavar="OPTION", repeat=True)
    ray_address: str | None = _flag("--ray-address", "ray: the cluster's address, e.g. 10.0.0.1:6379 or auto "
                                    "(default: $RAY_ADDRESS, else a Ray started on this machine)", metavar="ADDRESS")
    parallel: int | None = _flag("--parallel", "local: shards run at once (default: CPUs / --cpus-per-shard, or "
                                 "GPUs / --gpus-per-shard)", metavar="P", parse=whole_number("--parallel", 1))
    poll_s: float = _flag("--poll", "seconds between looks at the shards (default 2)", default=2.0,
                          metavar="SECONDS", parse=_seconds)
    #: the Python that runs each shard (this one: a cluster shares the environment's path)
    python: str = field(default_factory=lambda: sys.executable)

    def check(self) -> None:
        """What only the combination of flags can get wrong (settings built by code too)."""
        if self.on not in SCHEDULERS:
            raise UserError(f"--on takes {', '.join(SCHEDULERS)}, got '{self.on}'", field="--on")
        if self.shards < 1:
            raise UserError(f"--shards must be at least 1, got {self.shards}", field="--shards")
        only = {"--partition": (self.partition, "slurm"), "--time": (self.time_limit, "slurm"),
                "--sbatch-arg": (self.sbatch_args, "slurm"), "--ray-address": (self.ray_address, "ray"),
                "--parallel": (self.parallel, "local")}
        for flag, (value, scheduler) in only.items():
            if value and self.on != scheduler:
                raise UserError(f"{flag} is for --on {scheduler}, not --on {self.on}", field=flag)
        if not os.path.isfile(self.python):
            raise UserError(f"the Python to run shards with does not exist: {self.python}", field="python")
