"""`lceval launch --on ray` against a real one-node Ray cluster (`ray start --head` on
127.0.0.1, started by tests/clusters.py): Ray tasks asking for the shard's CPUs, cancelled
on Ctrl-C.

CI runs the first test only (a heavy stack gets one short real test there); the scenarios after
it are marked `matrix` (`pytest -m matrix tests/launch` runs them), and every one of them runs
in CI on the local launcher (tests/launch/test_local.py), which shares their code (scenarios.py)."""

from __future__ import annotations

import pytest

from .scenarios import (bad_input, check_ctrl_c_cancels, check_killed_shard_is_retried, check_launch_equals_whole,
                        run_flags)


def on(ray) -> list[str]:
    return ["--on", "ray", "--ray-address", ray.address]


def test_four_shards_equal_the_whole_run_and_a_second_launch_submits_nothing(ray, real_home, tmp_path):
    check_launch_equals_whole(on(ray), real_home, tmp_path)


@pytest.mark.matrix
def test_a_killed_shard_is_submitted_again(ray, real_home, tmp_path):
    out = check_killed_shard_is_retried(on(ray), real_home, tmp_path)
    assert "killed by SIGKILL" in out


@pytest.mark.matrix
def test_ctrl_c_cancels_the_tasks(ray, real_home, tmp_path):
    check_ctrl_c_cancels(on(ray), real_home, tmp_path, ray.env)


@pytest.mark.matrix
def test_what_the_cluster_lacks_is_refused_before_anything_is_submitted(ray, real_home, tmp_path):
    flags = ["--shards", "2", *run_flags(real_home, tmp_path / "l")]
    assert "field '--gpus-per-shard'" in bad_input(*on(ray), "--gpus-per-shard", "1", *flags)
    assert "field '--cpus-per-shard'" in bad_input(*on(ray), "--cpus-per-shard", "64", *flags)
    host = ray.address.rsplit(":", 1)[0]
    from tests.clusters import free_port

    err = bad_input("--on", "ray", "--ray-address", f"{host}:{free_port()}", *flags)
    assert "field '--ray-address'" in err and "nothing answers" in err
    assert not (tmp_path / "l").exists()
