"""A ruler sweep end to end with a model whose reach is known: `lceval run --tasks ... 
--context-lengths` builds each variant to its length, the run's length curves and depth
breakdowns say where the model stops finding needles, `lceval ruler report` prints the curve,
the effective length and the depth x length table, and bad input exits 2 naming the flag or
option and the value."""

from __future__ import annotations

import contextlib
import io
import json
import re

import pytest

from lceval.cli import main
from lceval.types import Generation, GenerationRequest

from tests.conftest import ScriptedModel, only_run, run_engine, serve_scripted


class ShortSighted(ScriptedModel):
    """Answers with every needle value it can see in the first `reach` words of its prompt:
    a model whose context really ends at `reach` words, whatever its window says."""

    def __init__(self, reach: int, window: int = 8192) -> None:
        super().__init__(window=window)
        self.reach = reach

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        out = []
        for r in requests:
            self.calls.append(r)
            seen = " ".join(" ".join(m.content for m in r.messages).split()[: self.reach])
            values = re.findall(r"is: (\S+?)\.(?:\s|$)", seen)
            out.append(Generation(request_id=r.request_id, text=" ".join(values) or "I do not know.",
                                  prompt_tokens=self.count_tokens(r.messages) or 0, prefilled_tokens=None,
                                  completion_tokens=3))
        return out


def call(*argv) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        rc = main([str(a) for a in argv])
    return rc, out.getvalue()


@pytest.fixture
def sweep(tmp_path):
    """A model that sees 1,500 words, swept at 1k, 2k and 4k (5 samples each, one per depth)."""
    model = ShortSighted(reach=1500)
    run_dir, results, _ = run_engine(model, "ruler_niah_single_1,ruler_niah_multikey_2", tmp_path / "home", tmp_path,
                                     context_lengths=[1024, 2048, 4096], limit=5)
    return run_dir, results, model


def test_the_run_holds_the_curve_the_depths_and_the_effective_length(sweep):
    run_dir, results, model = sweep
    assert len(model.calls) == 2 * 3 * 5
    curve = results["length_curves"]["ruler_niah_single_1"]
    values = {p["label"]: p["value"] for p in curve["points"]}
    # everything is within reach at 1k; at 4k only needles in the first ~1,500 words are
    assert values["1k"] == 100.0 and values["4k"] < values["1k"]
    assert curve["threshold"] == 85.6 and curve["effective_length"] in (1024, 2048)
    depth = results["tasks"]["ruler_niah_single_1@4k"]["metrics"]["score"]["breakdowns"]["depth"]
    assert list(depth) == ["0", "25", "50", "75", "100"]  # the spec's breakdown_order
    assert depth["0"]["value"] == 100.0 and depth["100"]["value"] == 0.0
    assert results["length_curves"]["mean"]["tasks"] == ["ruler_niah_multikey_2", "ruler_niah_single_1"]
    for line in (run_dir / "samples.jsonl").read_text().splitlines():
        meta = json.loads(line)["metadata"]
        assert 0.99 * meta["context_length"] <= meta["length_built"] <= meta["context_length"]


def test_ruler_report_prints_curve_effective_length_and_depth_table(sweep, tmp_path):
    run_dir, results, _ = sweep
    rc, text = call("ruler", "report", run_dir)
    assert rc == 0, text
    row = next(line for line in text.splitlines() if line.startswith("ruler_niah_single_1 "))
    eff = results["length_curves"]["ruler_niah_single_1"]["effective_length"] // 1024
    assert row.split()[1] == "100.0" and f"{eff}k" in row.split()
    assert "mean of 2 tasks" in text
    assert "ruler_niah_single_1: score by needle depth (rows, %) and length (columns)" in text
    table = text.split("ruler_niah_single_1: score by needle depth")[1].splitlines()
    assert table[2].split()[:2] == ["depth", "1k"] and table[3].split() == ["0", "100.0", "100.0", "100.0"]
    assert table[7].split()[0] == "100" and table[7].split()[-1] == "0.0"
    rc, text = call("ruler", "report", run_dir, "--threshold", "0", "--format", "json")
    (report,) = json.loads(text)
    assert report["curves"]["ruler_niah_single_1"]["effective_length"] == 4096  # every score >= 0
    assert report["depth_tables"]["mean"]["tasks"] == 2
    rc, md = call("ruler", "report", run_dir, "--format", "markdown")
    assert rc == 0 and "| task | 1k | 2k | 4k | effective length | n |" in md
    rc, text = call("ruler", "report", run_dir, "--threshold", "high")
    assert rc == 2 and "--threshold" in text and "'high'" in text


def test_ruler_run_from_the_command_line_and_its_bad_input(tmp_path, monkeypatch):
    serve_scripted(monkeypatch, lambda: ShortSighted(reach=100_000, window=8192))
    base = ["run", "--tasks", "ruler_niah_single_1", "--model", "scripted:x", "--output", tmp_path / "runs",
            "--data-home", tmp_path / "home", "--limit", "2"]
    rc, text = call(*base, "--context-lengths", "1k,2k")
    assert rc == 0, text
    assert re.search(r"ruler_niah_single_1\s+100\.00\s+100\.00\s+2k", text), text
    rc, text = call("ruler", "report", only_run(tmp_path / "runs"))
    assert rc == 0 and "ruler_niah_single_1" in text
    rc, text = call(*base, "--context-lengths", "16k")
    assert rc == 2 and "--context-lengths" in text and "16k" in text and "8,192" in text, text
    rc, text = call(*base, "--set", "options.depths=[0, 150]")
    assert rc == 2 and "options.depths" in text and "150" in text, text
    rc, text = call(*base, "--tasks", "ruler_niah_single_2", "--set", "options.essay=/no/such/folder")
    assert rc == 2 and "options.essay" in text and "/no/such/folder" in text, text
    rc, text = call(*base, "--tasks", "ruler_niah_single_2")  # the data home has no ELITR transcripts
    assert rc == 2 and "options.essay" in text and "lceval data fetch elitr-bench" in text, text
    assert "Traceback" not in text


def test_a_report_of_a_run_without_a_sweep_says_so(tmp_path):
    run_dir, _, _ = run_engine(ShortSighted(reach=100), "ruler_niah_single_1", tmp_path / "home", tmp_path, limit=1)
    rc, text = call("ruler", "report", run_dir)
    assert rc == 2 and "--context-lengths" in text


def test_the_suite_lists_rulers_thirteen_tasks():
    from lceval.engine import load_catalog, load_plugins

    catalog = load_catalog(load_plugins())
    assert [spec.name for spec in catalog.resolve_tasks("ruler")] == [
        "ruler_niah_single_1", "ruler_niah_single_2", "ruler_niah_single_3", "ruler_niah_multikey_1",
        "ruler_niah_multikey_2", "ruler_niah_multikey_3", "ruler_niah_multivalue", "ruler_niah_multiquery",
        "ruler_vt", "ruler_cwe", "ruler_fwe", "ruler_qa_1", "ruler_qa_2"]
    for spec in catalog.resolve_tasks("ruler"):
        report = spec.data["report"]
        assert report["effective_length_threshold"] == 85.6 and report["cluster_by"] == "haystack_id"
        mode = "part" if spec.data["type"] == "ruler_qa" else "all"  # RULER's string_match_part for qa
        assert spec.data["judge"] == {"name": "string_match", "options": {"mode": mode}}
        assert ("depth" in report.get("breakdowns", [])) == spec.data["type"].endswith("niah")
