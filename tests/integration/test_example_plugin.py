"""The third-party example package extends lceval with no core change: installed with pip,
found through its entry point, and used by `lceval run` for a model scheme and a judge."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugins.backends.test_hf_backend import folder  # noqa: F401  (the tiny model fixture)

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "lceval-example-plugin"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--target", str(target), str(EXAMPLE)],
        capture_output=True, text=True,
    )
    if proc.returncode != 0:
        pytest.fail(f"pip could not install the example plugin:\n{proc.stderr[-2000:]}")
    return target


def lceval(site: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([sys.executable, "-m", "lceval", *args], capture_output=True, text=True, env=env,
                          cwd=site)


def test_plugin_is_listed_with_its_kinds(installed):
    proc = lceval(installed, "plugins")
    line = next(l for l in proc.stdout.splitlines() if l.startswith("example"))
    assert "lceval-example-plugin" in line and "0.1.0" in line and line.endswith("ok")
    detail = lceval(installed, "plugins", "example").stdout
    assert "backend '" in detail and "judge '" in detail and "pairwise-judge '" in detail
    assert "method 'ends'" in detail and "press.KEY=VALUE" in detail  # a long-context method, with its options


def test_lceval_run_uses_the_plugins_model_and_judge(installed, tiny_home, tmp_path):
    proc = lceval(installed, "run", "--tasks", "elitr_qa", "--model", "keyword:baseline,lines=2",
                  "--judge", "contains", "--data-home", str(tiny_home), "--output", str(tmp_path / "runs"),
                  "--no-progress")
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    results = json.loads((run_dir / "results.json").read_text())
    task = results["tasks"]["elitr_qa"]
    assert results["model"] == "keyword:baseline,lines=2" and task["judge"] == {"judge": "contains"}
    # the tiny transcripts contain every answer on one line: the baseline finds most of them
    assert task["metrics"]["score"]["value"] > 5
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["versions"]["plugins"]["example"]["distribution"] == "lceval-example-plugin"


def test_plugin_window_drives_the_context_policy(installed, tiny_home, tmp_path):
    proc = lceval(installed, "run", "--tasks", "elitr_qa", "--model", "keyword:baseline,window=100",
                  "--judge", "contains", "--data-home", str(tiny_home), "--output", str(tmp_path / "r"),
                  "--context-policy", "truncate-middle", "--set", "generation.max_new_tokens=8",
                  "--no-progress")
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = (tmp_path / "r").iterdir()
    acc = json.loads((run_dir / "results.json").read_text())["tasks"]["elitr_qa"]["accounting"]
    assert acc["truncated"] > 0


def test_validate_checks_the_plugin_package_without_installing_it():
    proc = subprocess.run([sys.executable, "-m", "lceval", "validate", str(EXAMPLE)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "plugin 'example'" in proc.stdout and "model: keyword" in proc.stdout and "method: ends" in proc.stdout


def test_lceval_rank_uses_the_plugins_pairwise_judge(installed, tiny_home, tmp_path):
    proc = lceval(installed, "run", "--tasks", "cream_elitr", "--model", "keyword:baseline,lines=1",
                  "--data-home", str(tiny_home), "--output", str(tmp_path / "runs"), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    proc = lceval(installed, "rank", str(run_dir), "--judge", "word-share", "--output", str(tmp_path / "rank"),
                  "--n-boot", "100", "--format", "markdown")
    assert proc.returncode == 0, proc.stderr
    assert "### coverage" in proc.stdout and "| rank | system | Elo |" in proc.stdout
    (rank_dir,) = (tmp_path / "rank").iterdir()
    report = json.loads((rank_dir / "rankings.json").read_text())
    assert report["judge"]["identity"] == {"judge": "word-share"} and report["criteria"] == ["coverage"]
    assert sorted(report["systems"]) == ["baseline/long", "baseline/short"]
    assert report["accounting"]["ordered_judgments"] == 2 * 3  # 3 meetings, both orders
    # a criterion the judge does not score is refused with exit 2, naming the flag
    bad = lceval(installed, "rank", str(run_dir), "--judge", "word-share", "--criteria", "fluency",
                 "--output", str(tmp_path / "rank"))
    assert bad.returncode == 2 and "--criteria" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers not installed")
def test_the_plugins_method_is_a_setting_of_the_hf_backend(installed, folder, tiny_home, tmp_path):
    """`press=ends` found through the installed package's entry point, applied by `hf:` to the
    tiny model of test_hf_backend.py: the run records the press and what it kept."""
    proc = lceval(installed, "run", "--tasks", "elitr_qa", "--model", f"hf:{folder},dtype=auto,press=ends,"
                  "compression_ratio=0.5", "--data-home", str(tiny_home), "--output", str(tmp_path / "runs"),
                  "--set", "generation.max_new_tokens=4", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert "batched decoding is off" in proc.stderr  # the run says what a press turns off, and why
    (run_dir,) = (tmp_path / "runs").iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["resolved"]["model_identity"]["press"] == {"method": "ends", "version": 1, "compression_ratio": 0.5,
                                                               "sink": 4, "query_aware": False}
    stats = manifest["backend_stats"]["model"]
    assert stats["contexts_compressed"] == 3 and 0.45 < stats["kept_share"] <= 0.5  # 3 meetings, each once
