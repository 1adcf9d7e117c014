"""`lceval report --format html`: one self-contained page whose figures, tables and sample
data come from the runs' structure, with plugin panels contributed through the hook."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest

from lceval import hookimpl
from lceval.report import svgplot
from lceval.cli import main
from lceval.interfaces import ReportFigure
from lceval.engine._plugin_host import load_plugins
from lceval.report._html import build_report, load_inputs, run_labels

from tests.conftest import ScriptedModel, run_engine


class Page(HTMLParser):
    """Collects what a self-contained page must not have and what the tests look at."""

    def __init__(self) -> None:
        super().__init__()
        self.external: list[str] = []
        self.figures: list[dict[str, str]] = []
        self.scripts: dict[str, str] = {}
        self._script: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("src", "href"):
            if a.get(key) and not a[key].startswith("#"):
                self.external.append(f"{tag} {key}={a[key]}")
        if tag == "link":
            self.external.append("link")
        if tag == "figure":
            self.figures.append(a)
        if tag == "script":
            self._script = a.get("id", "")
            self.scripts.setdefault(self._script, "")

    def handle_endtag(self, tag):
        if tag == "script":
            self._script = None

    def handle_data(self, data):
        if self._script is not None:
            self.scripts[self._script] += data


@pytest.fixture
def two_runs(tiny_home, tmp_path):
    a, _, _ = run_engine(ScriptedModel(), "elitr_qa", tiny_home, tmp_path / "a")
    b, _, _ = run_engine(ScriptedModel(window=95), "elitr_qa", tiny_home, tmp_path / "b",
                         context_policy="truncate-middle", overrides={"generation.max_new_tokens": 8})
    return a, b


def test_page_is_self_contained_with_a_figure_per_group_metric_and_breakdown(two_runs, tmp_path, capsys):
    out = tmp_path / "report.html"
    assert main(["report", *map(str, two_runs), "--format", "html", "-o", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    page = Page()
    page.feed(html)
    assert page.external == []
    # no address anywhere but the SVG namespace (an identifier, never fetched)
    assert set(re.findall(r"https?://[^\s\"'<>)]+", html)) <= {"http://www.w3.org/2000/svg"}
    titles = re.findall(r"<figcaption><b>([^<]+)</b>", html)
    # score by split, then question type and answer position for dev and test2
    assert "elitr_qa: score by split" in titles
    for field in ("question_type", "answer_position"):
        for split in ("dev", "test2"):
            assert f"elitr_qa: score by {field} ({split})" in titles
    assert all(int(f["data-marks"]) > 0 for f in page.figures)
    data = json.loads(page.scripts["lceval-samples"])
    samples = [json.loads(line) for d in two_runs for line in (d / "samples.jsonl").read_text().splitlines()]
    assert len(data["samples"]) == len(samples) and data["group_fields"] == ["split"]
    cut = [s for s in data["samples"] if s["cut"]["action"] == "truncated"]
    assert cut and all(0 < s["cut"]["removed"][0] < s["cut"]["removed"][1] <= s["cut"]["original"] for s in cut)
    assert "lost_in_the_middle p" in html


def test_report_html_needs_an_output_file(two_runs, capsys):
    assert main(["report", str(two_runs[0]), "--format", "html"]) == 2
    assert "-o FILE.html" in capsys.readouterr().err


def test_plugin_panels_are_drawn_and_a_failing_one_is_reported(two_runs):
    class Panels:
        @hookimpl
        def register_report_panels(self, register):
            def good(ctx):
                plot = svgplot.category_chart(["x"], [svgplot.Series(ctx.labels[0], [svgplot.Point("x", 1.0)])])
                return [ReportFigure("my panel", plot.svg, "from a plugin", "Mine", plot.marks)]

            def bad(ctx):
                raise RuntimeError("boom")

            register("good", good)
            register("bad", bad)

    plugins = load_plugins(extra=[("panels", Panels())])
    html = build_report(load_inputs(list(two_runs)), plugins)
    assert "<b>my panel</b>" in html and '<section id="panel-0"><h2>Mine</h2>' in html
    assert "report panel &#x27;bad&#x27; failed: RuntimeError: boom" in html


def test_sample_text_cannot_close_the_data_script(two_runs, tmp_path):
    run = two_runs[0]
    lines = (run / "samples.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    rec["response"] = "</script><script>alert(1)</script><!--"
    lines[0] = json.dumps(rec)
    (run / "samples.jsonl").write_text("\n".join(lines) + "\n")
    html = build_report(load_inputs([run]), load_plugins())
    page = Page()
    page.feed(html)
    data = json.loads(page.scripts["lceval-samples"])
    assert data["samples"][0]["response"] == rec["response"]
    assert "<script>alert(1)" not in html


def test_labels_are_short_model_names_unless_two_runs_of_a_task_share_one(two_runs):
    inputs = load_inputs(list(two_runs))
    labels = run_labels(inputs.runs)
    ids = [r.run_id for r in inputs.runs]
    assert labels == [f"x ({ids[0]})", f"x ({ids[1]})"]  # same model, same task: run ids tell them apart


def test_summhay_panels_put_retrievers_budgets_and_orders_side_by_side(tmp_path):
    from lceval_plugins.summhay.template import write_template

    hay = write_template(tmp_path / "hay.json", n_subtopics=2, n_documents=8)
    tasks = "summhay_full,summhay_rag_bm25,summhay_order_random,summhay_order_top,summhay_order_bottom"
    opts = {"options.haystack": str(hay), "options.budget_tokenizer": "words"}
    a, _, _ = run_engine(ScriptedModel(), tasks, tmp_path / "data", tmp_path / "a",
                         overrides={**opts, "options.budget_tokens": 300})
    b, _, _ = run_engine(ScriptedModel(), "summhay_rag_bm25", tmp_path / "data", tmp_path / "b",
                         overrides={**opts, "options.budget_tokens": 600})
    plugins = load_plugins()
    inputs = load_inputs([a, b])
    from lceval.interfaces import ReportContext

    figs = plugins.report_panels["summhay"](ReportContext(inputs.runs, run_labels(inputs.runs)))
    assert [f.title for f in figs] == ["Coverage by retriever and budget", "Citation F1 by retriever and budget",
                                       "Joint by retriever and budget", "Position sensitivity"]
    coverage = figs[0].svg
    assert coverage.index(">full<") < coverage.index(">bm25 @300<") < coverage.index(">bm25 @600<")
    assert "Position sensitivity max(|R−T|, |R−B|): " in figs[3].caption


def test_any_breakdown_in_the_results_is_plotted_and_tabled(two_runs):
    """Breakdowns the engine adds beyond the spec's list (context-length buckets) need no code."""
    run = two_runs[0]
    results = json.loads((run / "results.json").read_text())
    dev = results["tasks"]["elitr_qa"]["metrics"]["score"]["groups"]["dev"]
    dev["breakdowns"]["context_tokens"] = {"0-4k": dev["breakdowns"]["answer_position"]["B"],
                                           "4k-8k": dev["breakdowns"]["answer_position"]["M"]}
    (run / "results.json").write_text(json.dumps(results))
    html = build_report(load_inputs([run]), load_plugins())
    assert "<b>elitr_qa: score by context_tokens (dev)</b>" in html
    assert "<h4>elitr_qa: score by context_tokens</h4>" in html and "<th>4k-8k</th>" in html
