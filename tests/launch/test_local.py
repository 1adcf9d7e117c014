"""`lceval launch --on local`: the shards as processes on this machine, and everything a
launch refuses before it submits anything (exit 2 naming the flag), whatever the scheduler."""

from __future__ import annotations

import copy
import json
import shutil

import pytest

from tests import elitr_tiny
from tests.clusters import free_port
from tests.cli import lceval
from tests.conftest import only_run
from tests.shards import assert_same_results

from .scenarios import (bad_input, check_ctrl_c_cancels, check_killed_shard_is_retried, check_launch_equals_whole,
                        launch_folder, merged_run, record)

LOCAL = ["--on", "local", "--parallel", "2"]


def tiny_replay(home) -> str:
    """Recorded answers for the tiny fixture's seven questions (ours), as ELITR-Bench publishes them."""
    for name, data in (("dev", elitr_tiny.DEV), ("test2", elitr_tiny.TEST2)):
        recorded = copy.deepcopy(data)
        for meeting in recorded["meetings"]:
            for q in meeting["questions"]:
                q["generated-responses"] = [{"model": "Tiny", "generated-response": f"I think: {q['groundtruth-answer']}",
                                             "gpt-4-eval_score": str(3 + len(q["question"]) % 7)}]
        (home / f"tiny-replay_{name}.json").write_text(json.dumps(recorded), encoding="utf-8")
    return f"replay:{home}/tiny-replay_{{split}}.json#Tiny"


def test_three_shards_of_the_tiny_fixture_equal_the_whole_run(tiny_home, tmp_path):
    flags = ["--tasks", "elitr_qa", "--judge", "gpt4-recorded", "--model", tiny_replay(tiny_home),
             "--data-home", str(tiny_home), "--no-progress"]
    lceval("run", *flags, "--output", tmp_path / "whole")
    out = lceval("launch", "--on", "local", "--shards", "3", "--poll", "0.1", *flags, "--output", tmp_path / "l",
                 "--cache", tmp_path / "node-{shard}.sqlite")  # a cache per shard, as on a cluster's nodes
    assert out.count("submitted (") == 3 and "merged 3 shards" in out
    assert_same_results(only_run(tmp_path / "whole"), merged_run(tmp_path / "l"))
    shards = record(tmp_path / "l")["shards"]
    assert sorted(len(s["contexts"]) for s in shards) == [1, 1, 1]
    # the answers each shard paid for are kept in the launch folder for a later attempt elsewhere
    answers = sorted((launch_folder(tmp_path / "l") / "answers").iterdir())
    assert len(answers) == 3
    imported = lceval("cache", "import", *answers, "--cache", tmp_path / "elsewhere.sqlite")
    assert imported.count("answers added") == 3
    again = lceval("run", *flags, "--output", tmp_path / "again", "--cache", tmp_path / "elsewhere.sqlite")
    usage = json.loads((only_run(tmp_path / "again") / "manifest.json").read_text())["usage"]
    assert usage["requests"] == usage["cache_hits"] == 7 and usage["generated"] == 0, again


def test_dry_run_shows_the_split_and_submits_nothing(tiny_home, tmp_path):
    out = lceval("launch", "--on", "local", "--shards", "2", "--tasks", "elitr_qa", "--model", tiny_replay(tiny_home),
                 "--judge", "gpt4-recorded", "--data-home", str(tiny_home), "--output", tmp_path / "l", "--dry-run")
    assert out.startswith("2 shards of 3 contexts") and "shard 1: " in out
    assert not (tmp_path / "l").exists()


def test_bad_input_is_refused_before_anything_is_submitted(tiny_home, tmp_path, monkeypatch):
    out = tmp_path / "l"
    flags = ["--tasks", "elitr_qa", "--model", tiny_replay(tiny_home), "--judge", "gpt4-recorded",
             "--data-home", str(tiny_home), "--output", str(out)]
    assert "field '--shards'" in bad_input("--on", "local", "--shards", "4", *flags)  # 3 meetings
    assert "Use --shards 3 or fewer" in bad_input("--on", "local", "--shards", "4", *flags)
    assert "field '--shards'" in bad_input("--on", "local", "--shards", "0", *flags)
    assert "field '--shard'" in bad_input("--on", "local", "--shards", "2", "--shard", "0/2", *flags)
    assert "field '--partition'" in bad_input("--on", "local", "--shards", "2", "--partition", "gpu", *flags)
    assert "field '--ray-address'" in bad_input("--on", "slurm", "--shards", "2", "--ray-address", "x:1", *flags)
    assert "field '--cpus-per-shard'" in bad_input("--on", "local", "--shards", "2", "--cpus-per-shard", "4096",
                                                   *flags)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert "field '--gpus-per-shard'" in bad_input("--on", "local", "--shards", "2", "--gpus-per-shard", "1", *flags)
    assert "field '--time'" in bad_input("--on", "slurm", "--shards", "2", "--time", "soon", *flags)
    # an unreachable scheduler: Slurm's commands with no cluster to ask, a Ray address nothing answers at
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "no-such-slurm.conf"))
    assert "field '--on'" in bad_input("--on", "slurm", "--shards", "2", *flags)
    if shutil.which("sinfo"):  # a controller that does not answer
        (tmp_path / "dead.conf").write_text(f"ClusterName=dead\nSlurmctldHost=localhost\nSlurmctldPort={free_port()}\n"
                                            "NodeName=localhost CPUs=1\nPartitionName=p Nodes=localhost\n")
        monkeypatch.setenv("SLURM_CONF", str(tmp_path / "dead.conf"))
        assert "Slurm is not reachable" in bad_input("--on", "slurm", "--shards", "2", *flags)
    err = bad_input("--on", "ray", "--shards", "2", "--ray-address", "127.0.0.1:9", *flags)
    assert "field '--ray-address'" in err or "Ray is not installed" in err
    assert "field '--tasks'" in bad_input("--on", "local", "--shards", "2", *flags[:1], "no_such_task", *flags[2:])
    assert not out.exists()  # nothing created, nothing submitted


@pytest.mark.usefixtures("shared_datasets")
def test_four_shards_equal_the_whole_run_and_a_second_launch_submits_nothing(real_home, tmp_path):
    check_launch_equals_whole(LOCAL, real_home, tmp_path)


def test_a_killed_shard_is_submitted_again(real_home, tmp_path):
    out = check_killed_shard_is_retried(LOCAL, real_home, tmp_path)
    assert "killed by SIGKILL" in out


def test_ctrl_c_cancels_every_shard(real_home, tmp_path):
    check_ctrl_c_cancels(LOCAL, real_home, tmp_path, {})


def test_every_run_option_is_a_launch_option(capsys):
    """`lceval launch` takes `lceval run`'s options from their one declaration, plus its own."""
    from lceval.cli import main

    helps = []
    for command in ("run", "launch"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        helps.append(capsys.readouterr().out)
    run_help, launch_help = helps
    for flag in ("--tasks", "--model", "--judge", "--limit", "--contexts", "--set", "--cache", "--seed", "--dry-run"):
        assert flag in run_help and flag in launch_help
    for flag in ("--on", "--shards", "--retries", "--partition", "--gpus-per-shard", "--ray-address"):
        assert flag in launch_help and flag not in run_help
