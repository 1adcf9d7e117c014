"""`lceval launch --on slurm` against a real one-node Slurm cluster (Debian's slurm-wlm and
munge, started by tests/clusters.py): sbatch arrays, squeue, scancel, Slurm's own requeue.

CI runs the first test only (a heavy stack gets one short real test there); the scenarios after
it are marked `matrix` (`pytest -m matrix tests/launch` runs them), and every one of them runs
in CI on the local launcher (tests/launch/test_local.py), which shares their code (scenarios.py)."""

from __future__ import annotations

import subprocess
import threading

import pytest

from tests.cli import lceval
from tests.shards import assert_same_results

from .scenarios import (bad_input, check_ctrl_c_cancels, check_killed_shard_is_retried, check_launch_equals_whole,
                        held_cache, merged_run, new_cache, record, run_flags, statuses, wait_for, whole_run)


def on(slurm) -> list[str]:
    return ["--on", "slurm", "--partition", slurm.partition]


def test_four_shards_equal_the_whole_run_and_a_second_launch_submits_nothing(slurm, real_home, tmp_path):
    check_launch_equals_whole(on(slurm), real_home, tmp_path)
    assert slurm.squeue("-t", "pending,running", "-o", "%j") == ""


@pytest.mark.matrix
def test_a_killed_shard_is_submitted_again(slurm, real_home, tmp_path):
    out = check_killed_shard_is_retried(on(slurm), real_home, tmp_path)
    assert "Slurm state FAILED" in out


@pytest.mark.matrix
def test_ctrl_c_cancels_the_jobs(slurm, real_home, tmp_path):
    check_ctrl_c_cancels(on(slurm), real_home, tmp_path, slurm.env)
    assert slurm.squeue("-t", "pending,running", "-o", "%j") == ""


@pytest.mark.matrix
def test_a_requeued_shard_is_slurms_own_retry(slurm, real_home, tmp_path):
    """`scontrol requeue` (what a preemption does to a job submitted with --requeue): Slurm
    puts the shard back in the queue and runs it again under the same job id; the launcher
    waits for it, submits nothing more, and the result is equal."""
    whole = whole_run(real_home, tmp_path)
    out = tmp_path / "launched"
    caches = tmp_path / "caches"
    new_cache(caches / "cache-1.sqlite")
    flags = ["--shards", "4", "--poll", "0.2", *on(slurm), *run_flags(real_home, out, caches / "cache-{shard}.sqlite")]

    def requeue_shard_1() -> None:
        with held_cache(caches / "cache-1.sqlite"):
            wait_for(lambda: statuses(out).get(1, {}).get("state") == "running", "shard 1 to run")
            job = statuses(out)[1]["job"]
            subprocess.run(["scontrol", "requeue", job], check=True, capture_output=True)
            # Slurm makes a requeued job wait two minutes (Reason=BeginTime); the test needs no wait
            wait_for(lambda: "PENDING" in slurm.squeue("-j", job, "-o", "%T"), "shard 1 to be pending again")
            subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], check=True, capture_output=True)
            wait_for(lambda: statuses(out).get(1, {}).get("restarts") == 1, "shard 1 to run again")

    thread = threading.Thread(target=requeue_shard_1, daemon=True)
    thread.start()
    text = lceval("launch", *flags)
    thread.join(30)
    assert text.count("submitted (") == 4 and "failed" not in text, text
    shard = record(out)["shards"][1]
    assert len(shard["attempts"]) == 1 and shard["attempts"][0]["state"] == "done"
    assert_same_results(whole, merged_run(out))


@pytest.mark.matrix
def test_what_the_cluster_lacks_is_refused_before_anything_is_submitted(slurm, real_home, tmp_path):
    flags = ["--shards", "2", *run_flags(real_home, tmp_path / "l")]
    err = bad_input("--on", "slurm", "--partition", "gpu-a100", *flags)
    assert "field '--partition'" in err and slurm.partition in err
    assert "field '--gpus-per-shard'" in bad_input(*on(slurm), "--gpus-per-shard", "1", *flags)
    assert "field '--cpus-per-shard'" in bad_input(*on(slurm), "--cpus-per-shard", str(slurm.cpus + 1), *flags)
    assert "field '--sbatch-arg'" in bad_input(*on(slurm), "--sbatch-arg=--mem=99999999", *flags)
    assert "field '--shards'" in bad_input(*on(slurm), "--shards", "19", *flags[2:])
    assert not (tmp_path / "l").exists()
    assert slurm.squeue("-o", "%j") == ""
