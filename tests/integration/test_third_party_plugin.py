"""Done-when of the plugin contract: a package written from the plugin guide alone
(tests/data/thirdparty_plugin), installed with pip into a scratch folder, gets typed options
for free, needs no `lceval_plugins` import, and can neither break nor silently shadow a
built-in: its clashes are printed on every command and recorded, an override is explicit,
and its plugin that fails halfway keeps nothing."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import only_run

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "tests" / "data" / "thirdparty_plugin"
#: The modules the plugin guide (docs/plugins.md) documents as lceval's public API.
PUBLIC = {"lceval", "lceval.interfaces", "lceval.types", "lceval.errors", "lceval.options", "lceval.judging",
          "lceval.tokens", "lceval.stats", "lceval.compare", "lceval.pairwise", "lceval.svgplot",
          "lceval.report_figures", "lceval.hookspecs"}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    source = tmp_path_factory.mktemp("src") / "pkg"
    shutil.copytree(PACKAGE, source)  # pip builds in the source tree: keep the repository clean
    target = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                           "--target", str(target), str(source)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"pip could not install the third-party package:\n{proc.stderr[-2000:]}")
    return target


def lceval(site: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([sys.executable, "-m", "lceval", *args], capture_output=True, text=True, env=env, cwd=site)


def warnings_of(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("lceval: warning: ")]


#: Characters of window: Fig. 4's prompt, a question and 8 answer tokens fit, not the longer transcripts.
WINDOW = 540


def validate(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lceval", "validate", str(folder)], capture_output=True, text=True)


def test_it_is_written_against_the_public_api_alone(tmp_path):
    for path in (PACKAGE / "src").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lceval"):
                assert node.module in PUBLIC, (path.name, node.module)
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("lceval_plugins") for a in node.names), path.name
    broken = validate(PACKAGE)
    assert broken.returncode == 2 and "plugin 'demo_broken' failed: register_retrievers failed" in broken.stdout
    folder = tmp_path / "pkg"  # the same package without its broken plugin
    shutil.copytree(PACKAGE, folder)
    pyproject = folder / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('demo_broken = "lceval_demo.broken"\n', ""))
    proc = validate(folder)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok      plugin 'demo'" in proc.stdout and "imports lceval_plugins" not in proc.stdout
    assert "warning judge 'lexical': plugin 'demo' (in-process) also provides it and is ignored" in proc.stdout
    assert "warning task 'elitr_qa': plugin 'demo' (in-process) also provides it" in proc.stdout


def test_listing_shows_the_clashes_and_the_plugin_that_failed(site):
    proc = lceval(site, "plugins")
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line for line in proc.stdout.splitlines() if line.strip()}
    assert rows["demo"].endswith("ok") and "lceval-demo-plugin" in rows["demo"] and "0.3.0" in rows["demo"]
    assert "demo-graded, lexical" in rows["demo"]
    below = proc.stdout.replace("\n  ", " ")
    assert "clash: judge 'lexical': plugin 'demo' (lceval-demo-plugin 0.3.0) also provides it" in below
    assert "FAILED" in rows["demo_broken"]
    assert ("demo_broken: FAILED: register_retrievers failed: RuntimeError: the retriever index is missing"
            in below)
    assert "demo-half" not in proc.stdout  # registered before the failing hook: dropped with it
    lines = warnings_of(proc)
    assert len(lines) == 2, proc.stderr
    assert any(line.startswith("lceval: warning: judge 'lexical': plugin 'demo' (lceval-demo-plugin 0.3.0) also "
                               "provides it and is ignored; using plugin 'lexical' (built-in)") for line in lines)
    assert any("task 'elitr_qa': plugin 'demo'" in line and "using the built-in catalog" in line for line in lines)


def test_typed_options_for_free(site, tiny_home, tmp_path):
    shown = lceval(site, "plugins", "demo-echo").stdout
    assert "window  integer (>= 32)" in shown and "role    answer | judge" in shown and "'answer'" in shown
    typo = lceval(site, "run", "--tasks", "demo_qa", "--model", "demo-echo:m,windw=100", "--data-home", str(tiny_home))
    assert typo.returncode == 2 and "Did you mean 'window'?" in typo.stderr and "Traceback" not in typo.stderr
    small = lceval(site, "run", "--tasks", "demo_qa", "--model", "demo-echo:m,window=8", "--data-home", str(tiny_home))
    assert small.returncode == 2 and "window=8: 8 is less than the minimum of 32" in small.stderr
    bad_judge = lceval(site, "run", "--tasks", "demo_qa", "--model", "demo-echo:m", "--judge", "demo-graded,scale=1",
                       "--judge-model", "demo-echo:j,role=judge", "--data-home", str(tiny_home))
    assert bad_judge.returncode == 2 and "scale=1" in bad_judge.stderr and "--judge" in bad_judge.stderr


def test_a_run_uses_its_backend_judge_and_specs_and_records_the_clashes(site, tiny_home, tmp_path):
    proc = lceval(site, "run", "--tasks", "demo_qa,elitr_qa", "--model", f"demo-echo:m,window={WINDOW}",
                  "--context-policy", "truncate-middle", "--set", "generation.max_new_tokens=8",
                  "--judge", "demo-graded,max_attempts=2,scale=7",
                  "--judge-model", "demo-echo:j,role=judge,flaky=yes", "--data-home", str(tiny_home),
                  "--output", str(tmp_path / "runs"), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert len(warnings_of(proc)) == 2
    run_dir = only_run(tmp_path / "runs")
    results = json.loads((run_dir / "results.json").read_text())
    assert results["tasks"]["elitr_qa"]["description"] != "DEMO SHADOW of elitr_qa"  # the built-in spec ran
    for task in ("demo_qa", "elitr_qa"):
        judge = results["tasks"][task]["judge"]
        assert judge["judge"] == "demo-graded" and judge["scale"] == 7 and judge["max_attempts"] == 2
        assert judge["params"]["temperature"] == 0.7  # the declared default, as a float
        accounting = results["tasks"][task]["accounting"]
        assert accounting["truncated"] > 0 and accounting["skipped"] == 0, accounting  # its tokenizer let the policy cut
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert samples and all(s["judgments"][0]["attempts"] == 2 for s in samples)  # the flaky first verdict retried
    assert all(s["judgments"][0]["score"] == 1 + 9 * 6 / 6 for s in samples)  # SCORE: 7 on a 1-7 scale -> 10
    # the plugin's own spec (qa_markers: true) framed each question: the echo ends with its marker
    assert {s["response"].endswith("ANSWER:") for s in samples if s["task"] == "demo_qa"} == {True}
    manifest = json.loads((run_dir / "manifest.json").read_text())
    clashes = {(c["kind"], c["name"]): c for c in manifest["plugin_clashes"]}
    assert set(clashes) == {("judge", "lexical"), ("task", "elitr_qa")}
    assert clashes[("judge", "lexical")]["why"] == "built-in" and clashes[("judge", "lexical")]["ignored_plugin"] == "demo"
    assert "the retriever index is missing" in manifest["versions"]["plugins"]["demo_broken"]["error"]


def test_its_retriever_plugs_in_with_typed_options(site, tiny_home, tmp_path):
    hay = tmp_path / "hay.json"
    assert lceval(site, "summhay", "synth", str(hay), "--template", "--documents", "8").returncode == 0
    common = ["--tasks", "summhay_rag_bm25", "--model", "demo-echo:m", "--retriever", "demo-longest",
              "--set", f"options.haystack={hay}", "--set", "options.budget_tokenizer=words",
              "--set", "options.budget_tokens=300", "--data-home", str(tiny_home), "--no-progress"]
    proc = lceval(site, "run", *common, "--set", "options.retriever_options={reverse: true}",
                  "--output", str(tmp_path / "runs"))
    assert proc.returncode == 0, proc.stderr
    samples = [json.loads(line) for line in (only_run(tmp_path / "runs") / "samples.jsonl").read_text().splitlines()]
    assert samples and all(s["metadata"]["retriever"] == "demo-longest" for s in samples)
    typo = lceval(site, "run", *common, "--set", "options.retriever_options={revers: true}")
    assert typo.returncode == 2 and "Did you mean 'reverse'?" in typo.stderr


def test_an_explicit_override_replaces_the_builtin_and_is_recorded(site, tiny_home, tmp_path):
    proc = lceval(site, "-p", "override:demo", "run", "--tasks", "elitr_qa", "--model", "demo-echo:m",
                  "--judge", "lexical", "--limit", "2", "--data-home", str(tiny_home),
                  "--output", str(tmp_path / "runs"), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert any("judge 'lexical': using plugin 'demo' (lceval-demo-plugin 0.3.0) instead of plugin 'lexical' "
               "(built-in), as -p override:demo asks" in line for line in warnings_of(proc))
    run_dir = only_run(tmp_path / "runs")
    results = json.loads((run_dir / "results.json").read_text())
    assert results["tasks"]["elitr_qa"]["judge"] == {"judge": "demo-generous"}
    assert results["tasks"]["elitr_qa"]["description"] == "DEMO SHADOW of elitr_qa"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["versions"]["plugins"]["demo"]["overriding"] is True
    assert {c["why"] for c in manifest["plugin_clashes"]} == {"override"}


def test_its_tokenizer_keeps_the_context_policys_rules(site):
    code = ("from lceval_demo import EchoBackend; from lceval.tokens import tokenizer_problems; "
            "print(tokenizer_problems(EchoBackend('m', {'window': 100, 'role': 'answer', 'flaky': False})))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(site)})
    assert proc.stdout.strip() == "[]", proc.stderr
