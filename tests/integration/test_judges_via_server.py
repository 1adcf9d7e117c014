"""Issue 3, "done when": the paper's judges (rubric, Figs. 5-6; prometheus, Figs. 7-8) score a
SmolLM2 run end to end through a local OpenAI-compatible server (llama-cpp-python's, on
loopback), as a stage of its own (`lceval score`), with every judgment accounted for and
a rerun served entirely from the cache."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from lceval.cli import main

from .. import llama_server as _server
from ..conftest import only_run
from ..llama_server import LlamaServer

llama_server = _server.llama_server

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed"),
]



def _read(run_dir: Path) -> tuple[dict, dict, list[dict]]:
    return (json.loads((run_dir / "results.json").read_text()), json.loads((run_dir / "manifest.json").read_text()),
            [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()])


@pytest.mark.parametrize("judge", ["rubric", "prometheus"])
def test_paper_judges_score_a_smollm2_run_through_the_server(llama_server: LlamaServer, tiny_home: Path,
                                                            tmp_path: Path, judge: str) -> None:
    server = llama_server.spec(concurrency="2", context_window="4096")
    gen = ["run", "--tasks", "elitr_qa", "--model", server, "--data-home", str(tiny_home), "--limit", "1",
           "--no-progress", "--set", "generation.max_new_tokens=32", "--output", str(tmp_path / "gen")]
    assert main(gen) == 0
    source = only_run(tmp_path / "gen")
    judge_flag = f"{judge},max_new_tokens=96,max_attempts=2"
    assert main(["score", str(source), "--judge", judge_flag, "--judge-model", server,
                 "--output", str(tmp_path / "scored")]) == 0
    results, manifest, samples = _read(only_run(tmp_path / "scored"))
    task = results["tasks"]["elitr_qa"]
    acc = task["accounting"]
    assert acc["answered"] == 2 == len(samples)
    # every answer has exactly one verdict: a score, or a counted failure - never a placeholder
    assert task["metrics"]["score"]["n"] + acc["judge_parse_failures"] + acc["judge_missing"] == acc["answered"]
    for s in samples:
        (j,) = s["judgments"]
        assert 1 <= j["attempts"] <= 2 and len(j["details"]["attempt_outputs"]) == j["attempts"]
        if j["parse_status"] == "ok":
            assert 1 <= j["score"] <= 10 and (judge == "rubric" or j["score"] % 2 == 0)
        else:
            assert j["score"] is None
    assert manifest["source_run"]["path"] == str(source.resolve())
    sent = manifest["backend_stats"]["judge"]["attempts"]
    assert sent == sum(s["judgments"][0]["attempts"] for s in samples)  # one request per attempt
    assert manifest["judge_usage"]["generated"] == sent and manifest["usage"]["generated"] == 0

    # the same command again: every judge call comes from the cache, nothing reaches the server
    assert main(["score", str(source), "--judge", judge_flag, "--judge-model", server,
                 "--output", str(tmp_path / "again")]) == 0
    _, again, again_samples = _read(only_run(tmp_path / "again"))
    assert again["backend_stats"]["judge"]["attempts"] == 0
    assert again["judge_usage"]["cache_hits"] == sent
    assert [s["judgments"][0]["raw"] for s in again_samples] == [s["judgments"][0]["raw"] for s in samples]
