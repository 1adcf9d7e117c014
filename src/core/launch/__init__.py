"""Launching a run past one machine (public API): `lceval launch` plans a run once, submits
one job per shard (`lceval run --shard I/N`'s work) to a scheduler that exists - Slurm
through `sbatch` job arrays, Ray through Ray tasks, or processes on this machine - shows
how each shard stands, submits a failed shard again up to a limit, and merges the shards
into one run folder when all are done (`lceval merge`'s own code). Launched again, it
submits only the shards without a finished run folder; Ctrl-C cancels its jobs.

- `launch(config, settings, plugins)` -> `LaunchReport`: the whole of it, for a program.
- `LaunchSettings` (its fields declare the CLI's options, `lceval.options.flags_of`) and
  `SCHEDULERS`: where the shards run and what each asks for.
- `LaunchReport`, `ShardRecord`: what a launch did, shard by shard (also in the launch
  folder's launch.json).
- `launched_runs(folder)`: the run folders a launch folder's shards were merged into.
- A shard's job runs `python -m lceval.launch LAUNCH_FOLDER/job.json SHARD`.
"""

from pathlib import Path

from lceval.launch._folder import LaunchFolder
from lceval.launch._launcher import LaunchReport, ShardRecord, launch
from lceval.launch._settings import SCHEDULERS, LaunchSettings

__all__ = ["SCHEDULERS", "LaunchReport", "LaunchSettings", "ShardRecord", "launch", "launched_runs"]


def launched_runs(folder: Path) -> tuple[list[Path], int, int] | None:
    """None when `folder` is not a launch folder; else the run folders its shards were merged
    into, and how many shards had finished of how many (`lceval report LAUNCH_FOLDER`)."""
    found = LaunchFolder(Path(folder))
    return found.merged_runs() if found.is_launch_folder() else None
