"""One cache file, several processes: opening never fails while another process creates or
upgrades the database, two runs of the same work pay for each request once, and a claimer
killed mid-request is taken over."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.paths import REPO

#: a process that opens the cache at a given moment and asks six requests of a slow model
WORKER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from lceval.engine import Cache, CachedModel
    from lceval.interfaces import ModelBackend
    from lceval.types import Generation, GenerationParams, GenerationRequest, Message

    path, start, delay, out = Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), Path(sys.argv[4])
    n = int(sys.argv[5]) if len(sys.argv) > 5 else 6

    class Slow(ModelBackend):
        generated = []
        def identity(self):
            return {"scheme": "slow"}
        def generate(self, requests):
            time.sleep(delay)
            Slow.generated.extend(r.request_id for r in requests)
            return [Generation(request_id=r.request_id, text="answer " + r.request_id) for r in requests]

    time.sleep(max(0.0, start - time.time()))  # every process opens at the same moment
    cache = Cache(path)
    model = CachedModel(Slow(), cache, "slow:x")
    requests = [GenerationRequest(request_id=f"q{i}", messages=[Message("user", f"question {i}")],
                                  params=GenerationParams()) for i in range(n)]
    answers = model.generate(requests) if n else []
    cache.close()
    out.write_text(json.dumps({"generated": Slow.generated, "answers": [a.text for a in answers],
                               "hits": model.usage.cache_hits}))
""")


def _spawn(tmp_path: Path, name: str, cache: Path, start: float, delay: float, n: int = 6) -> tuple:
    out = tmp_path / f"{name}.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", WORKER, str(cache), str(start), str(delay), str(out), str(n)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    return proc, out


def test_eight_processes_open_a_new_cache_together_without_failing(tmp_path):
    failures = []
    for attempt in range(10):  # each try ~1.6 s, nearly all of it waiting for the interpreters to start
        cache = tmp_path / f"new{attempt}" / "cache.sqlite"
        start = time.time() + 1.5  # time for the interpreters to start, then all at once
        procs = [_spawn(tmp_path, f"open{attempt}-{i}", cache, start, 0.0, n=0) for i in range(8)]
        for proc, _ in procs:
            _, err = proc.communicate(timeout=120)
            if proc.returncode != 0:
                failures.append(err.strip().splitlines()[-1] if err.strip() else f"exit {proc.returncode}")
    assert failures == []


def test_two_runs_of_the_same_work_generate_each_request_once(tmp_path):
    cache = tmp_path / "cache.sqlite"
    start = time.time() + 1.5
    procs = [_spawn(tmp_path, name, cache, start, 0.3) for name in ("a", "b")]
    for proc, _ in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    results = [json.loads(out.read_text()) for _, out in procs]
    generated = [q for r in results for q in r["generated"]]
    assert sorted(generated) == [f"q{i}" for i in range(6)]  # each distinct request once, in all
    assert all(r["answers"] == [f"answer q{i}" for i in range(6)] for r in results)  # both got every answer
    assert sum(r["hits"] for r in results) == 6  # what one generated, the other was served


def test_a_claimer_killed_mid_request_is_taken_over(tmp_path):
    cache = tmp_path / "cache.sqlite"
    now = time.time()
    stuck, _ = _spawn(tmp_path, "stuck", cache, now, 600.0, n=1)  # claims q0, then hangs in the backend
    deadline = time.time() + 60
    while time.time() < deadline:  # wait until its claim is in the cache
        if cache.exists():
            import sqlite3

            with sqlite3.connect(cache, timeout=30) as db:
                try:
                    if db.execute("SELECT COUNT(*) FROM leases").fetchone()[0]:
                        break
                except sqlite3.OperationalError:
                    pass
        time.sleep(0.1)
    else:
        pytest.fail("the first process never claimed its request")
    waiter, out = _spawn(tmp_path, "waiter", cache, time.time(), 0.0, n=1)
    time.sleep(1.0)
    assert waiter.poll() is None  # waiting for the stuck process's answer
    os.kill(stuck.pid, signal.SIGKILL)
    stuck.communicate(timeout=30)
    _, err = waiter.communicate(timeout=60)
    assert waiter.returncode == 0, err
    result = json.loads(out.read_text())
    assert result["generated"] == ["q0"] and result["answers"] == ["answer q0"]  # nothing lost
