"""What every scheduler of `lceval launch` must do, written once and run against each real
one (local processes, Slurm, Ray): a 4-shard launch of ELITR-Bench-QA's recorded GPT-4
answers equals the unsharded run field by field, a second launch submits nothing, a shard
killed mid-run is submitted again and the result is still equal, Ctrl-C cancels every job.

A shard is held mid-run without slowing anything down artificially: its request cache
(`--cache DIR/cache-{shard}.sqlite`, one per shard as on a cluster's nodes) is kept locked
by the test, so the shard's process waits inside its run, at its first write to the cache,
until the test lets go (or kills it)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tests.cli import call, lceval
from tests.conftest import default_sigint, only_run
from tests.shards import assert_same_results

GENERATED = "elitr-bench/generated-responses/elitr-bench-qa_{split}_st_gpt-4-eval.json"
WAIT_S = 180.0


def run_flags(home: Path, out: Path, cache: Path | None = None) -> list[str]:
    flags = ["--tasks", "elitr_qa", "--judge", "gpt4-recorded", "--model", f"replay:{home / GENERATED}#GPT-4",
             "--data-home", str(home), "--output", str(out), "--no-progress"]
    return flags + (["--cache", str(cache)] if cache else [])


def whole_run(home: Path, tmp_path: Path) -> Path:
    lceval("run", *run_flags(home, tmp_path / "whole"))
    return only_run(tmp_path / "whole")


def merged_run(out: Path) -> Path:
    """The merged run folder a launch wrote into its --output (beside its launch folder)."""
    (run_dir,) = [p for p in out.iterdir() if not p.name.startswith((".", "launch-"))]
    return run_dir


def launch_folder(out: Path) -> Path:
    (folder,) = out.glob("launch-*")
    return folder


def record(out: Path) -> dict:
    return json.loads((launch_folder(out) / "launch.json").read_text())


def statuses(out: Path) -> dict[int, dict]:
    found = {}
    for path in out.glob("launch-*/status/*.json"):
        try:
            found[int(path.stem)] = json.loads(path.read_text())
        except ValueError:  # being replaced right now
            continue
    return found


def new_cache(path: Path) -> Path:
    """An empty lceval cache at `path`, made by `lceval cache import` of nothing (in the test's
    main thread: the in-process CLI redirects the process's stdout while it runs)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    empty = path.with_suffix(".empty.jsonl")
    empty.write_text("")
    lceval("cache", "import", empty, "--cache", path)
    return path


@contextmanager
def held_cache(path: Path) -> Iterator[sqlite3.Connection]:
    """The cache at `path` (see `new_cache`) held under an exclusive lock: a shard using it
    waits at its first write until the block ends."""
    db = sqlite3.connect(path, isolation_level=None, timeout=60)
    db.execute("BEGIN EXCLUSIVE")
    try:
        yield db
    finally:
        db.rollback()
        db.close()


def wait_for(condition, what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def check_launch_equals_whole(on: list[str], home: Path, tmp_path: Path) -> None:
    """4 shards launched, merged, equal to the unsharded run; launched again: nothing submitted."""
    whole = whole_run(home, tmp_path)
    out = tmp_path / "launched"
    flags = ["--shards", "4", "--poll", "0.2", *on, *run_flags(home, out, tmp_path / "caches" / "cache-{shard}.sqlite")]
    first = lceval("launch", *flags)
    assert first.count("submitted (") == 4 and "merged 4 shards" in first, first
    merged = merged_run(out)
    assert_same_results(whole, merged)
    shards = record(out)["shards"]
    assert sorted(c for s in shards for c in s["contexts"]) == sorted(
        json.loads((merged / "manifest.json").read_text())["merged_from"]["plan"]["weights"])
    assert all(len(s["attempts"]) == 1 and s["state"] == "done" for s in shards)
    for i in range(4):  # each shard filled its own cache on its "node"
        assert (tmp_path / "caches" / f"cache-{i}.sqlite").is_file()

    again = lceval("launch", *flags)
    assert "submitted (" not in again and again.count("finished before") == 4, again
    assert "nothing to submit" in again
    assert [p.name for p in out.iterdir() if not p.name.startswith("launch-")] == [merged.name]
    assert all(len(s["attempts"]) == 1 for s in record(out)["shards"])


def check_killed_shard_is_retried(on: list[str], home: Path, tmp_path: Path) -> str:
    """Shard 2's process killed (SIGKILL) while it is inside its run: the launcher submits it
    again and the merged run still equals the unsharded one. Returns the launch's output."""
    whole = whole_run(home, tmp_path)
    out = tmp_path / "launched"
    caches = tmp_path / "caches"
    new_cache(caches / "cache-2.sqlite")
    killed: list[dict] = []

    def kill_shard_2() -> None:
        with held_cache(caches / "cache-2.sqlite"):
            wait_for(lambda: statuses(out).get(2, {}).get("state") == "running", "shard 2 to run")
            status = statuses(out)[2]
            time.sleep(0.5)  # inside its run, waiting for its cache
            os.kill(status["pid"], signal.SIGKILL)
            killed.append(status)
            wait_for(lambda: statuses(out).get(2, {}).get("attempt") == 2, "shard 2 to be submitted again")

    killer = threading.Thread(target=kill_shard_2, daemon=True)
    killer.start()
    text = lceval("launch", "--shards", "4", "--poll", "0.2", "--retries", "1", *on,
                  *run_flags(home, out, caches / "cache-{shard}.sqlite"))
    killer.join(30)
    assert killed and killed[0]["attempt"] == 1, text
    assert "shard 2/4: failed (" in text and "submitting it again (retry 1 of 1)" in text, text
    shard = record(out)["shards"][2]
    assert [a["state"] for a in shard["attempts"]] == ["failed", "done"]
    assert_same_results(whole, merged_run(out))
    return text


def check_ctrl_c_cancels(on: list[str], home: Path, tmp_path: Path, env: dict[str, str]) -> None:
    """Ctrl-C while every shard waits inside its run: the launcher cancels its jobs (none is
    left running) and exits 130; launched again, it submits the shards and the run is equal."""
    whole = whole_run(home, tmp_path)
    out = tmp_path / "launched"
    cache = tmp_path / "shared-cache.sqlite"
    flags = ["--shards", "4", "--poll", "0.2", *on, *run_flags(home, out, cache)]
    with held_cache(new_cache(cache)):
        proc = subprocess.Popen([sys.executable, "-m", "lceval", "launch", *flags], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env={**os.environ, **env},
                                preexec_fn=default_sigint)
        try:
            wait_for(lambda: any(s.get("state") == "running" for s in statuses(out).values()), "a shard to run")
            time.sleep(0.5)
            proc.send_signal(signal.SIGINT)
            text, _ = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, text
    assert "interrupted: cancelling" in text, text
    for status in statuses(out).values():  # every shard process that started has ended
        wait_for(lambda: not _alive(status["pid"]), f"shard {status['shard']}'s process to end", 60)
    assert not any(s["state"] == "done" for s in record(out)["shards"])

    again = lceval("launch", *flags)
    assert again.count("submitted (") == 4, again
    assert_same_results(whole, merged_run(out))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (ended, not yet reaped by its parent) is not running
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def bad_input(*argv: str) -> str:
    """`lceval launch ARGV` refused with exit 2 before anything is submitted: its message."""
    code, out, err = call("launch", *argv)
    assert code == 2, (code, out, err)
    assert "submitted" not in out
    return err
