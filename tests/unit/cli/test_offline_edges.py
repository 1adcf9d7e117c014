"""Offline and first-contact edges (issue 46, deliverable 5), each through the command where a
user meets it: `lceval --version`; `validate` of a family file; `data pack --skip-missing`;
every "data not here" naming the fetch and pack/unpack, from `run` too; the network never
asked with HF_HUB_OFFLINE=1 (a subprocess in a namespace without network, every connect
recorded); the cache beside `$LCEVAL_DATA` (moved there without loss); `report` of a launch
folder and of a folder of runs; `tasks --families` saying which families need a download."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import lceval
from tests import elitr_tiny
from tests.cli import call
from tests.conftest import ScriptedModel, run_engine
from tests.paths import REPO


def test_version_prints_and_exits_0():
    res = subprocess.run([sys.executable, "-m", "lceval", "--version"], capture_output=True, text=True, timeout=120)
    assert (res.returncode, res.stdout.strip(), res.stderr) == (0, f"lceval {lceval.__version__}", "")


def test_validate_checks_a_family_file_as_one(tmp_path):
    code, out, err = call("validate", REPO / "tasks" / "nolima" / "_family.yaml")
    assert code == 0, out + err
    assert out.startswith(f"ok      {REPO / 'tasks' / 'nolima' / '_family.yaml'} (family file of ") and "task(s)" in out
    assert "unknown field 'defaults'" not in out
    bad = tmp_path / "fam" / "_family.yaml"
    bad.parent.mkdir()
    bad.write_text("defaults:\n  splts: [dev]\n", encoding="utf-8")
    code, out, _ = call("validate", bad)
    assert code == 2 and out.startswith(f"invalid {bad}:2") and "splts" in out


def test_pack_skip_missing_packs_what_is_here_and_lists_the_rest(tmp_path):
    home = elitr_tiny.build(tmp_path / "data")
    out = tmp_path / "x.tar"
    code, said, err = call("data", "pack", "elitr_qa,helmet_nq", "-o", out, "--data-home", home)
    assert code == 2 and not out.exists()
    assert "--skip-missing" in err and "helmet" in err
    code, said, err = call("data", "pack", "elitr_qa,helmet_nq", "-o", out, "--data-home", home, "--skip-missing")
    assert code == 4, said + err
    assert "not packed  helmet_nq: " in said and "`lceval data fetch helmet --from FOLDER`" in said
    assert "1 task(s) not packed" in said
    with tarfile.open(out) as tar:
        manifest = json.load(tar.extractfile("lceval-pack.json"))
    assert list(manifest["tasks"]) == ["elitr_qa"]
    code, said, err = call("data", "pack", "helmet_nq", "-o", out, "--data-home", home, "--skip-missing")
    assert code == 2 and "nothing to pack" in err


def test_run_without_data_names_the_fetch_and_pack_unpack(tmp_path, monkeypatch):
    code, out, err = call("run", "--tasks", "summhay_full", "--model", "replay:x", "--dry-run",
                          "--data-home", tmp_path / "empty", "--output", tmp_path / "runs")
    assert code == 2 and "Traceback" not in err
    assert "`lceval data fetch summhay --from FOLDER`" in err, err
    assert "`lceval data pack summhay_full -o FILE`" in err and "`lceval data unpack FILE`" in err


FRESH = r"""
import json, socket, sys
tried = []
def refuse(*args, **kwargs):
    tried.append(repr(args[1:] if args and isinstance(args[0], socket.socket) else args)[:200])
    raise OSError("network unreachable (test)")
if sys.argv[2] == "no-network":
    socket.socket.connect = refuse
    socket.socket.connect_ex = refuse
    socket.create_connection = refuse
    socket.getaddrinfo = refuse
from lceval.cli import main
out = []
for argv in json.loads(sys.argv[1]):
    before = len(tried)
    code = main(argv)
    out.append({"argv": argv, "code": code, "connects": tried[before:]})
print("RESULT " + json.dumps(out))
"""


def _fresh(commands: list[list[str]], env: dict[str, str], cwd: Path, no_network: bool = False
           ) -> tuple[list[dict], str]:
    """The commands through `lceval.cli.main` in a new Python (nothing imported before lceval
    imports it); `no_network`: in a network namespace when `unshare -n` works here, and every
    connect, create_connection and getaddrinfo recorded and refused."""
    prefix = ["unshare", "-n"] if no_network and shutil.which("unshare") and subprocess.run(
        ["unshare", "-n", "true"], capture_output=True).returncode == 0 else []
    res = subprocess.run([*prefix, sys.executable, "-c", FRESH, json.dumps(commands),
                          "no-network" if no_network else "network"], capture_output=True, text=True, env=env,
                         timeout=300, cwd=cwd)
    line = next((ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, res.stderr[-3000:]
    return json.loads(line[len("RESULT "):]), res.stderr


def test_offline_mode_never_opens_a_socket(tmp_path):
    """HF_HUB_OFFLINE=1 with a data home that lacks ELITR-Bench: a run (whose first use would
    fetch it from GitHub), `data fetch` and `data status` try no connection at all; they say
    what to do instead."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LCEVAL_AUTO_FETCH": "1", "NO_COLOR": "1",
           "LCEVAL_DATA": str(tmp_path / "data"), "LCEVAL_CACHE": str(tmp_path / "cache.sqlite")}
    commands = [["run", "--tasks", "elitr_qa", "--model", "replay:x", "--output", str(tmp_path / "runs")],
                ["data", "fetch", "elitr-bench"], ["data", "fetch", "elitr_qa,longbench_trec"],
                ["data", "status", "elitr_qa"]]
    results, err = _fresh(commands, env, tmp_path, no_network=True)
    assert [r["connects"] for r in results] == [[]] * len(commands), results
    assert [r["code"] for r in results] == [2, 2, 2, 4], err[-3000:]
    assert "Traceback" not in err
    assert "the network is off here" in err and "`lceval data pack elitr_qa -o FILE`" in err
    assert "lceval data fetch elitr-bench --from elitr-bench-archives" in err


def test_hub_backed_commands_with_a_huggingface_hub_that_imports_no_submodule(tmp_path):
    """huggingface_hub 1.x imports `constants` only when asked: `validate` and `data status`
    of HELMET's Hub-backed tasks ended in AttributeError (exit 1) in a fresh process."""
    pytest.importorskip("huggingface_hub")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"),
           "LCEVAL_DATA": str(tmp_path / "data"), "LCEVAL_CACHE": str(tmp_path / "cache.sqlite")}
    commands = [["validate", "helmet_asqa", "helmet_qampari"], ["data", "status", "helmet"],
                ["data", "status", "babilong_qa1"]]
    results, err = _fresh(commands, env, tmp_path)
    assert [r["code"] for r in results] == [4, 4, 4], err[-3000:]
    assert "Traceback" not in err and "AttributeError" not in err


def _cache_with(path: Path, answers: int) -> None:
    from lceval.engine import Cache

    cache = Cache(path)
    cache.close()
    db = sqlite3.connect(str(path))
    db.executemany("INSERT INTO entries (key, kind, value, created) VALUES (?, 'generate', ?, 0)",
                   [(f"k{i}", json.dumps({"text": f"a{i}"})) for i in range(answers)])
    db.commit()
    db.close()


def _count(path: Path) -> int:
    db = sqlite3.connect(str(path))
    try:
        return db.execute("SELECT COUNT(*) FROM entries").fetchone()[0]
    finally:
        db.close()


def test_the_cache_follows_the_data_home_and_is_moved_there_whole(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("LCEVAL_CACHE")
    monkeypatch.setenv("LCEVAL_DATA", str(tmp_path / "x"))
    code, out, _ = call("data", "paths")
    new = tmp_path / "x" / "cache.sqlite"
    assert code == 0 and f"cache:     {new}  [beside the data home, $LCEVAL_DATA" in out
    from lceval.engine import Cache

    old = Cache.user_path()
    assert str(old).startswith(str(tmp_path / "xdg"))
    _cache_with(old, 3)
    code, out, _ = call("data", "paths")
    assert "the next command that opens the cache moves it here" in out and str(old) in out
    code, out, err = call("cache", "export", tmp_path / "answers.jsonl")
    assert code == 0, err
    assert f"moved the request cache from {old} to {new}" in err
    assert not old.exists() and _count(new) == 3 and "exported 3 answers" in out
    _cache_with(old, 2)  # both places hold one: neither is touched
    code, out, err = call("cache", "export", tmp_path / "again.jsonl")
    assert code == 0 and f"`lceval cache import {old}`" in err
    assert _count(old) == 2 and _count(new) == 3


def test_report_reads_a_launch_folder_and_a_folder_of_runs(tiny_home, tmp_path):
    run_dir, _, _ = run_engine(ScriptedModel(window=4096), "elitr_qa", tiny_home, tmp_path, limit=1)
    runs = run_dir.parent
    launch = runs / "launch-0123abcd"
    (launch / "shards").mkdir(parents=True)
    (launch / "job.json").write_text("{}", encoding="utf-8")
    (launch / "launch.json").write_text(json.dumps({"shards": [{"index": 1, "runs": ["x"]}],
                                                    "merged": [f"elsewhere/{run_dir.name}"]}), encoding="utf-8")
    for given in ([launch], [runs], [f"{runs}/{run_dir.name}", launch]):
        code, out, err = call("report", *given)
        assert code == 0, err
        assert out.count(f"## {run_dir.name}") == 1, out
    (launch / "launch.json").write_text(json.dumps({"shards": [{"index": 1, "runs": ["x"]}, {"index": 2}],
                                                    "merged": []}), encoding="utf-8")
    code, _, err = call("report", launch)
    assert code == 2 and "not merged into a run yet (1 of 2 shard(s) finished)" in err and "lceval launch" in err


def test_tasks_families_says_which_need_a_download_and_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv("LCEVAL_DATA", str(tmp_path / "empty"))
    code, out, _ = call("tasks", "--families")
    assert code == 0
    header = out.splitlines()[0]
    assert "data" in header.split()
    lines = {line.split()[0]: line for line in out.splitlines()[2:] if line.strip()}
    assert "download: lceval data fetch elitr-bench" in next(v for k, v in lines.items() if k.startswith("ELITR"))
    assert "your files: lceval data fetch helmet --from FOLDER" in out
    elitr_tiny.build(tmp_path / "empty")
    code, out, _ = call("tasks", "--families")
    assert " here " in next(line for line in out.splitlines() if line.startswith("ELITR"))
