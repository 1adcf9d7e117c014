"""`lceval launch`: a run's shards on a scheduler, watched, retried, merged.

The run is planned once here (`Session.work_plan`: the fingerprinted plan each shard
records), everything the scheduler is asked for is checked (exit 2 naming the flag) before
anything is submitted, then one job per shard goes to the scheduler. Each poll asks the
scheduler how the jobs stand and the launch folder whether a shard's run folder is there:
a shard is done only when it is, so "finished" never rests on the scheduler's word alone. A
shard whose job failed is submitted again up to `--retries` times; when every shard is done
the shards are merged with `lceval merge`'s own code into one run folder in `--output`.
Launched again, the same command finds the launch folder and the shards finished in it
and submits only the rest; Ctrl-C cancels every job it is waiting for.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from lceval.engine import Plugins, RunConfig, Session, assign, load_plugins
from lceval.errors import UserError
from lceval.io import check_writable
from lceval.launch._folder import LaunchFolder, launch_key, read_json, write_json
from lceval.launch._schedulers import FAILED, FINISHED, PENDING, RUNNING, Job, JobState, LocalScheduler, Scheduler
from lceval.launch._settings import LaunchSettings

Say = Callable[[str], None]
#: how long a job that ended well may take to show its run folder (a shared file system's lag)
FOLDER_GRACE_S = 60.0


def make_scheduler(settings: LaunchSettings, folder: LaunchFolder) -> Scheduler:
    if settings.on == "slurm":
        from lceval.launch._slurm import SlurmScheduler

        return SlurmScheduler(settings, folder)
    if settings.on == "ray":
        from lceval.launch._ray import RayScheduler

        return RayScheduler(settings, folder)
    return LocalScheduler(settings, folder)


@dataclass
class ShardRecord:
    """One shard of a launch: its share of the plan, each submission, and its run folders."""

    index: int
    contexts: list[str]
    weight: int
    attempts: list[dict[str, Any]] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    state: str = PENDING

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "contexts": self.contexts, "weight": self.weight, "state": self.state,
                "runs": self.runs, "attempts": self.attempts}


@dataclass
class LaunchReport:
    """What a launch did: its folder, each shard, how many jobs it submitted, the merged run
    folders (one per model; none while a shard failed for good), and its timings."""

    folder: Path
    shards: list[ShardRecord]
    submitted: int
    merged: list[Path]
    failed: list[int]
    timing: dict[str, float]


def _env() -> dict[str, str]:
    """The LCEVAL_* variables of the launching shell, which every shard gets (Slurm passes the
    environment on, a Ray worker has its own)."""
    return {k: v for k, v in os.environ.items() if k.startswith("LCEVAL_")}


def _cache_template(path: Path | None) -> str | None:
    """`--cache` for the shards: filled in on each node ({shard}, $VARIABLES); a relative
    path is taken from here (a shard's process may start elsewhere: Ray's in its session)."""
    if path is None:
        return None
    text = str(path)
    return text if text.startswith(("$", "~")) or path.is_absolute() else str(Path.cwd() / text)


def launch(config: RunConfig, settings: LaunchSettings, plugins: Plugins | None = None, *, say: Say = print,
           overrides: Iterable[str] = (), command: list[str] | None = None) -> LaunchReport:
    """Launch `config`'s run as `settings.shards` shards on `settings.on`, wait for them
    (retrying failed ones), merge them into `config.output`; see the module's docstring."""
    began = time.time()
    settings.check()
    if config.shard is not None:
        raise UserError("lceval launch makes the shards itself", field="--shard", hint="Drop --shard.")
    plugins = plugins if plugins is not None else load_plugins(config.disabled_plugins, overrides=overrides)
    output = Path(config.output)
    check_writable(output)
    with Session(config, plugins) as session:
        work = session.work_plan()
    count, fingerprint = settings.shards, work["fingerprint"]
    if count > len(work["weights"]):
        raise UserError(f"{count} shards for {len(work['weights'])} contexts (meetings, haystacks): a context is "
                        "never split, so a shard would get no work", field="--shards",
                        hint=f"Use --shards {len(work['weights'])} or fewer.")
    shares = assign(work["weights"], count)
    folder = LaunchFolder(output / f"launch-{launch_key(config, count, fingerprint)}")
    records = [ShardRecord(i, share, sum(work["weights"][c] for c in share)) for i, share in enumerate(shares)]
    planned = time.time()
    if config.dry_run:
        say(_split_text(records, work, folder))
        return LaunchReport(folder, records, 0, [], [], {"plan_s": planned - began})
    scheduler = make_scheduler(settings, folder)
    try:
        scheduler.check()
        return Launch(config, settings, plugins, folder, records, work, scheduler, say, list(overrides),
                      command or ["lceval", "launch"], {"plan_s": planned - began,
                                                        "check_s": time.time() - planned}).go(began)
    finally:
        scheduler.close()


def _split_text(records: list[ShardRecord], work: dict[str, Any], folder: LaunchFolder) -> str:
    total = sum(work["weights"].values())
    mean = total / len(records)
    lines = [f"{len(records)} shards of {len(work['weights'])} contexts (estimated tokens {total:,}); launch folder "
             f"{folder.path}"]
    for r in records:
        lines.append(f"shard {r.index}: {len(r.contexts)} contexts, weight {r.weight:,} ({r.weight / mean:.3f}x the "
                     f"mean): {', '.join(r.contexts)}")
    return "\n".join(lines)


class Launch:
    """One launch under way: the scheduler's jobs and what each shard has come to."""

    def __init__(self, config: RunConfig, settings: LaunchSettings, plugins: Plugins, folder: LaunchFolder,
                 records: list[ShardRecord], work: dict[str, Any], scheduler: Scheduler, say: Say,
                 overrides: list[str], command: list[str], timing: dict[str, float]) -> None:
        self.config, self.settings, self.plugins, self.folder = config, settings, plugins, folder
        self.records, self.work, self.scheduler = records, work, scheduler
        self.count, self.fingerprint = len(records), work["fingerprint"]
        self.overrides, self.command, self.timing = overrides, command, timing
        self.models = config.run_models()  # a --press-sweep: each model once per ratio
        self.jobs: dict[int, Job] = {}
        self.tries: dict[int, int] = {}
        self.waiting_for_folder: dict[int, float] = {}
        self.submitted = 0
        self.merged: list[str] = []
        self._say = say
        self.t0 = time.time()

    def say(self, text: str) -> None:
        self._say(f"[{time.time() - self.t0:6.1f}s] {text}")

    # -- the launch folder ----------------------------------------------------------------
    def _prepare(self) -> None:
        self.folder.create()
        write_json(self.folder.job_file, {
            "config": self.config.to_manifest(), "shards": self.count, "fingerprint": self.fingerprint,
            "models": self.models, "cache": _cache_template(self.config.cache_path),
            "data_home": str(Path(self.config.data_home).resolve()) if self.config.data_home else None,
            "disabled": list(self.config.disabled_plugins), "overrides": self.overrides, "env": _env(),
            "python": self.settings.python})
        before = read_json(self.folder.record_file) or {}
        for old in before.get("shards") or []:
            if isinstance(old, dict) and isinstance(old.get("index"), int) and old["index"] < self.count:
                self.records[old["index"]].attempts = list(old.get("attempts") or [])
        self.merged = [p for p in before.get("merged") or [] if (Path(p) / "results.json").is_file()]

    def _save(self) -> None:
        write_json(self.folder.record_file, {
            "scheduler": self.settings.on, "shards": [r.as_dict() for r in self.records], "count": self.count,
            "fingerprint": self.fingerprint, "models": self.models, "merged": self.merged, "timing": self.timing,
            "settings": {k: v for k, v in vars(self.settings).items() if k != "python"}})

    def _finished(self, record: ShardRecord) -> bool:
        runs = self.folder.finished_runs(record.index, self.count, self.fingerprint, self.models)
        if runs is None:
            return False
        record.runs, record.state = [str(p) for p in runs], "done"
        return True

    # -- the jobs -------------------------------------------------------------------------
    def _submit(self, shards: list[int]) -> None:
        if not shards:
            return
        by_attempt: dict[int, list[int]] = {}
        for i in shards:
            by_attempt.setdefault(len(self.records[i].attempts) + 1, []).append(i)
        for attempt, group in sorted(by_attempt.items()):
            for job in self.scheduler.submit(group, attempt):
                self._track(job, "submitted")

    def _track(self, job: Job, how: str) -> None:
        record = self.records[job.shard]
        self.jobs[job.shard] = job
        self.tries[job.shard] = self.tries.get(job.shard, 0) + (how == "submitted")
        self.submitted += how == "submitted"
        record.state = PENDING
        record.attempts.append({"attempt": job.attempt, "job": job.id, how: job.submitted, "state": PENDING})
        self.say(f"shard {job.shard}/{self.count}: {how} ({job.id}; {len(record.contexts)} contexts)")

    def go(self, began: float) -> LaunchReport:
        self._prepare()
        todo = [r.index for r in self.records if not self._finished(r)]
        for r in self.records:
            if r.state == "done":
                self.say(f"shard {r.index}/{self.count}: finished before ({', '.join(r.runs)})")
        merged_already = not todo and len(self.merged) == len(self.models)
        try:
            for job in self.scheduler.adopt():
                if job.shard in todo and job.shard not in self.jobs:
                    job.attempt = len(self.records[job.shard].attempts) or 1
                    self._track(job, "adopted")
            t = time.time()
            self._submit([i for i in todo if i not in self.jobs])
            self.timing["submit_s"] = time.time() - t
            self._save()
            self._watch()
        except KeyboardInterrupt:
            live = [j for i, j in self.jobs.items() if self.records[i].state in (PENDING, RUNNING)]
            self.say(f"interrupted: cancelling {len(live)} job(s): {', '.join(j.id for j in live) or 'none'}")
            self.scheduler.cancel(live)
            for j in live:
                self._ended(j, "cancelled", "cancelled by Ctrl-C")
            self._save()
            raise
        failed = [r.index for r in self.records if r.state != "done"]
        self.timing["wall_s"] = time.time() - began
        if failed:
            self._save()
            return self._report(failed)
        if merged_already:
            self.say(f"nothing to submit: all {self.count} shards were finished and merged: {', '.join(self.merged)}")
        else:
            t = time.time()
            self.merged = [str(p) for p in self._merge()]
            self.timing["merge_s"] = time.time() - t
        self.timing["wall_s"] = time.time() - began
        self._save()
        return self._report([])

    def _report(self, failed: list[int]) -> LaunchReport:
        return LaunchReport(self.folder.path, self.records, self.submitted, [Path(p) for p in self.merged], failed,
                            dict(self.timing))

    def _watch(self) -> None:
        while any(r.state in (PENDING, RUNNING) for r in self.records):
            time.sleep(self.settings.poll_s)
            live = [j for i, j in self.jobs.items() if self.records[i].state in (PENDING, RUNNING)]
            again: list[int] = []
            for shard, state in self.scheduler.poll(live).items():
                if self._changed(self.jobs[shard], state):
                    again.append(shard)
            self._submit(again)
            self._save()

    def _changed(self, job: Job, state: JobState) -> bool:
        """Record what happened to `job`; True when its shard is to be submitted again."""
        record = self.records[job.shard]
        attempt = record.attempts[-1]
        if state.state == RUNNING and record.state != RUNNING:
            record.state = attempt["state"] = RUNNING
            status = self.folder.status(job.shard)
            host = status.get("host") or state.detail
            if status.get("attempt") == job.attempt and status.get("started"):
                attempt["started"] = status["started"]
            self.say(f"shard {job.shard}/{self.count}: running" + (f" on {host}" if host else "") + f" ({job.id})")
        elif state.state == FINISHED:
            if self._finished(record):
                self._ended(job, "done", "")
                seconds = attempt.get("ended", time.time()) - attempt.get("started", job.submitted)
                self.say(f"shard {job.shard}/{self.count}: done in {seconds:.1f} s ({', '.join(record.runs)})")
                return False
            first = self.waiting_for_folder.setdefault(job.shard, time.time())
            if time.time() - first < FOLDER_GRACE_S and self.folder.status(job.shard).get("state") == "done":
                return False  # the shard says it wrote it: the file system has yet to show it here
            self.waiting_for_folder.pop(job.shard, None)
            return self._failed(job, state.detail or "its job ended without writing its run folder")
        elif state.state == FAILED:
            return self._failed(job, state.detail)
        return False

    def _ended(self, job: Job, how: str, detail: str) -> None:
        record = self.records[job.shard]
        attempt = record.attempts[-1]
        status = self.folder.status(job.shard)
        if status.get("attempt") == job.attempt:
            for key in ("host", "started", "ended", "exit", "error", "imported_answers", "exported_answers"):
                if status.get(key) is not None:
                    attempt[key] = status[key]
        attempt.setdefault("ended", time.time())
        attempt["state"] = how
        if detail:
            attempt["detail"] = detail
        record.state = how if how != "cancelled" else FAILED

    def _failed(self, job: Job, detail: str) -> bool:
        self._ended(job, FAILED, detail)
        record = self.records[job.shard]
        error = record.attempts[-1].get("error")
        log = self.folder.log_file(job.shard, job.attempt)
        why = f"{detail}" + (f": {error.splitlines()[-1]}" if error else "")
        if self.tries.get(job.shard, 0) <= self.settings.retries:
            self.say(f"shard {job.shard}/{self.count}: failed ({why}); submitting it again "
                     f"(retry {self.tries[job.shard]} of {self.settings.retries})")
            return True
        self.say(f"shard {job.shard}/{self.count}: failed ({why}); no retries left (--retries "
                 f"{self.settings.retries}); its log: {log if log.exists() else self.folder.path / 'logs'}")
        return False

    # -- the end --------------------------------------------------------------------------
    def _merge(self) -> list[Path]:
        from lceval.results import load_run, merge_runs, write_run  # scoring's libraries, only when merging

        out = []
        for k, model in enumerate(self.models):
            runs = [load_run(Path(r.runs[k])) for r in self.records]
            with Session.reopen(runs[0], self.plugins, command=self.command) as session:
                run_dir, _ = write_run(merge_runs(runs, session), self.plugins, Path(self.config.output))
            self.say(f"merged {self.count} shards of {model}: {run_dir}")
            out.append(run_dir)
        return out
