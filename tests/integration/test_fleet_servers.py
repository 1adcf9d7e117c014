"""A fleet of three real llama-cpp-python servers (SmolLM2-135M on loopback), one of them
killed mid-run: the run still finishes with every question answered exactly once."""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from pathlib import Path

import pytest

from lceval.cli import main

from ..conftest import only_run
from ..llama_server import LlamaServer, missing_requirements, start_llama_server, stop_llama_server

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed"),
]


def kill_first_to_answer(servers: list[LlamaServer], killed: list[LlamaServer], stop: threading.Event) -> None:
    """SIGKILL the first server that answers a request: its transcript still has questions,
    so the next one is in flight or about to be sent to a dead process."""
    while not stop.is_set():
        for server in servers:
            if server.answered() >= 1:
                server.process.kill()
                killed.append(server)
                return
        time.sleep(0.05)


def test_a_fleet_with_a_server_killed_mid_run_answers_every_question_once(tiny_home: Path,
                                                                          tmp_path: Path) -> None:
    why = missing_requirements()
    if why:
        pytest.skip(why)
    servers: list[LlamaServer] = []
    stop = threading.Event()
    try:
        for _ in range(3):
            servers.append(start_llama_server(n_ctx=1024))
        killed: list[LlamaServer] = []
        watcher = threading.Thread(target=kill_first_to_answer, args=(servers, killed, stop), daemon=True)
        watcher.start()
        urls = "|".join(s.url for s in servers)
        assert main(["run", "--tasks", "elitr_qa", "--model", f"fleet:openai/smollm2,servers={urls},timeout=300",
                     "--data-home", str(tiny_home), "--output", str(tmp_path / "runs"), "--no-progress",
                     "--set", "generation.max_new_tokens=8"]) == 0
        assert len(killed) == 1
        run_dir = only_run(tmp_path / "runs")
        samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
        assert len(samples) == 7 and len({s["item_id"] for s in samples}) == 7
        assert all(s["response"] for s in samples)
        # each question answered by exactly one server: the killed one's lost request was asked again
        assert sum(s.answered() for s in servers) == 7
        manifest = json.loads((run_dir / "manifest.json").read_text())
        api = manifest["backend_stats"]["model"]
        assert api["succeeded"] == 7 and api["failed"] == 0  # charged once each
        dead = [row for row in api["fleet"]["servers"] if row["down"]]
        assert len(dead) == 1 and dead[0]["server"] == killed[0].url.split("/")[2]
        assert api["fleet"]["transcripts_moved"]["down"] == 1
        # llama.cpp's server reports no cached tokens: prefill unknown, not the whole prompt
        assert manifest["usage"]["prefilled_tokens"] is None
    finally:
        stop.set()
        for server in servers:
            stop_llama_server(server)
