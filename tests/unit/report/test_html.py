"""`lceval report --format html`: one self-contained page, the overview first, every number as
results.json and the console give it, Vega-Lite charts built from the runs' structure, plugin
panels through the hook, and the samples for the browser. (The page in a real browser:
tests/integration/test_html_browser.py.)"""

from __future__ import annotations

import json
import re
import sys
from html.parser import HTMLParser

import pytest

from lceval import hookimpl
from lceval.cli import main
from lceval.engine import load_plugins
from lceval.interfaces import ReportContext
from lceval.report import (Point, ReportInputs, Series, build_report, charts, figure, interval_cell, metric_point,
                           numeric_order, run_labels, seeds_text)
from lceval.results import effective_said, format_table, load_run

from tests.conftest import ScriptedModel, run_engine


class Page(HTMLParser):
    """What a self-contained page must not have, and what the tests look at: sections in
    order, figures, scripts, table headers."""

    def __init__(self) -> None:
        super().__init__()
        self.external: list[str] = []
        self.figures: list[dict[str, str]] = []
        self.sections: list[str] = []
        self.scripts: dict[str, str] = {}
        self.titles: list[str] = []
        self._script: str | None = None
        self._title = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("src", "href"):
            if a.get(key) and not a[key].startswith("#"):
                self.external.append(f"{tag} {key}={a[key]}")
        if tag == "link":
            self.external.append("link")
        if tag == "section":
            self.sections.append(a["id"])
        if tag == "figure":
            self.figures.append(a)
        if tag == "b" and a.get("id", "").startswith("fig-"):
            self._title = True
            self.titles.append("")
        if tag == "script":
            self._script = a.get("id", "")
            self.scripts.setdefault(self._script, "")

    def handle_endtag(self, tag):
        if tag == "script":
            self._script = None
        if tag == "b":
            self._title = False

    def handle_data(self, data):
        if self._script is not None:
            self.scripts[self._script] += data
        if self._title:
            self.titles[-1] += data


def plotted(spec: dict) -> list[dict]:
    """The rows a chart plots (its data named `points`, wherever altair put it: the spec's own
    `data` or a nested view's)."""
    def inline(node) -> list[dict]:  # every inline data object of a spec, nested views included
        if isinstance(node, dict):
            own = [node["data"]] if isinstance(node.get("data"), dict) and "values" in node["data"] else []
            return own + [d for k, v in node.items() if k != "data" for d in inline(v)]
        if isinstance(node, list):
            return [d for v in node for d in inline(v)]
        return []

    return next(d["values"] for d in inline(spec) if d.get("name") == "points")


def html_inputs(run_dirs) -> ReportInputs:
    """The page's inputs from run directories (what `lceval report --format html` reads from each:
    its results, manifest and samples)."""
    return ReportInputs(runs=[load_run(d) for d in run_dirs])


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    return page


@pytest.fixture
def two_runs(tiny_home, tmp_path):
    a, _, _ = run_engine(ScriptedModel(), "elitr_qa", tiny_home, tmp_path / "a")
    b, _, _ = run_engine(ScriptedModel(window=95), "elitr_qa", tiny_home, tmp_path / "b",
                         context_policy="truncate-middle", overrides={"generation.max_new_tokens": 8})
    return a, b


def test_page_is_self_contained_overview_first_with_a_chart_per_group_and_breakdown(two_runs, tmp_path):
    out = tmp_path / "report.html"
    assert main(["report", *map(str, two_runs), "--format", "html", "-o", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    page = parse(html)
    assert page.external == []
    assert page.sections[:2] == ["overview", "task-elitr_qa"] and page.sections[-2:] == ["samples", "runs"]
    for expected in ("elitr_qa: lexical score per model and split", "elitr_qa: lexical score by split",
                     "elitr_qa: lexical score by context length (pooled dev + test2)"):
        assert expected in page.titles, page.titles
    for field in ("question_type", "answer_position"):
        for split in ("dev", "test2"):
            assert f"elitr_qa: lexical score by {field} ({split})" in page.titles
    specs = json.loads(page.scripts["lceval-charts"])
    assert len(specs) == len(page.figures) == len(page.titles)
    assert all(int(f["data-points"]) > 0 for f in page.figures)
    assert not any("$schema" in s for s in specs)  # an address the page would never fetch
    assert "window.vegaEmbed=" in html  # Vega, Vega-Lite and vega-embed inlined from vl-convert
    data = json.loads(page.scripts["lceval-samples"])
    lines = [json.loads(line) for d in two_runs for line in (d / "samples.jsonl").read_text().splitlines()]
    assert len(data["samples"]) == len(lines) and data["group_fields"] == ["split"]
    assert len(data["items"]) == len(lines) // 2  # one question and reference per item, not per model
    cut = [s for s in data["samples"] if s["cut"]["action"] == "truncated"]
    assert cut and all(0 < s["cut"]["removed"][0] < s["cut"]["removed"][1] <= s["cut"]["original"] for s in cut)


def test_every_number_is_the_console_s_with_its_label(two_runs):
    """The headline, each split's value and interval and each split's test are the console
    table's strings; a test pooled over the splits appears only labelled as pooled."""
    html = build_report(html_inputs(list(two_runs)), load_plugins())
    results = json.loads((two_runs[0] / "results.json").read_text())
    score = results["tasks"]["elitr_qa"]["metrics"]["score"]
    console = format_table(results)
    overview = html[html.index('id="overview"'):html.index('id="task-elitr_qa"')]
    assert f"<b>{score['mean_of_groups']:.2f}</b>" in overview
    assert f"elitr_qa  mean of groups            {score['mean_of_groups']:.2f}" in console
    for split in ("dev", "test2"):
        block = score["groups"][split]
        spread = block["spread"]
        ci = f"[{spread['ci_low']:.2f}, {spread['ci_high']:.2f}]" if spread["ci_low"] is not None else None
        assert f"{block['value']:.2f}" in overview and (ci is None or ci in overview)
        test = block["tests"]["lost_in_the_middle"]
        shown = f"p={test['p_value']:.3f}" if test["p_value"] is not None else "n/a: "
        assert f"elitr_qa  {split} lost_in_the_middle" in console and shown in console
        task = html[html.index('id="task-elitr_qa"'):]
        assert f"{split} lost_in_the_middle" in task and shown in task
    pooled = score["tests"]["lost_in_the_middle"]
    folded = html.index("<summary>Tests pooled over the groups</summary>")
    heads = re.findall(r'<th scope="col"[^>]*>([^<]*lost_in_the_middle[^<]*)</th>', html)
    assert heads[:2] == ["dev lost_in_the_middle", "test2 lost_in_the_middle"]
    assert set(heads[2:]) == {"lost_in_the_middle pooled (dev + test2)"}  # never a bare, unlabelled pooled test
    assert html.index("lost_in_the_middle pooled (dev + test2)") > folded
    if pooled["p_value"] is not None:
        assert f"p={pooled['p_value']:.3f}" in html[folded:]


def test_a_missing_interval_says_why_next_to_its_n():
    one = {"value": 6.0, "n": 3, "spread": {"clusters": 1, "ci_low": None, "ci_high": None}}
    assert "no interval: 1 meeting only" in interval_cell(one, unit="meeting") and "n=3" in interval_cell(one)
    assert "no interval: no score" in interval_cell({"value": None, "n": 0, "spread": None}) or \
        "no score" in interval_cell({"value": None, "n": 0, "spread": None})
    point = metric_point(one, "M", unit="meeting")
    assert point.low is None and point.missing == "1 meeting only" and point.note == "n=3"
    assert seeds_text([2023], None) == "1 seed (2023)"
    assert seeds_text([1, 2, 3], {"mean": 6.4, "std": 0.2}) == "3 seeds (1, 2, 3): 6.40 ± 0.20"


def test_buckets_come_in_numeric_order_in_tables_and_charts(two_runs):
    assert numeric_order(["8k-16k", "4k-8k", ">128k", "16k-32k", "0-4k"]) == \
        ["0-4k", "4k-8k", "8k-16k", "16k-32k", ">128k"]
    assert numeric_order(["100%", "25-50%", "0-25%"]) == ["0-25%", "25-50%", "100%"]
    assert numeric_order(["full", "2k", "1k"]) == ["1k", "2k", "full"]
    run = two_runs[0]
    results = json.loads((run / "results.json").read_text())
    score = results["tasks"]["elitr_qa"]["metrics"]["score"]
    b, m = score["groups"]["dev"]["breakdowns"]["answer_position"]["B"], score["breakdowns"]["answer_position"]["M"]
    for block in (score, score["groups"]["dev"]):  # in the order a merge of runs left them
        block["breakdowns"]["context_tokens"] = {"8k-16k": b, "4k-8k": m, "16k-32k": b}
    (run / "results.json").write_text(json.dumps(results))
    html = build_report(html_inputs([run]), load_plugins())
    assert html.index("<th scope=\"col\">4k-8k</th>") < html.index("<th scope=\"col\">8k-16k</th>") < \
        html.index("<th scope=\"col\">16k-32k</th>")
    page = parse(html)
    spec = json.loads(page.scripts["lceval-charts"])[page.titles.index("elitr_qa: lexical score by context length (pooled dev + test2)")]
    assert spec["layer"][0]["encoding"]["x"]["sort"] == ["4k-8k", "8k-16k", "16k-32k"]
    assert [r["category"] for r in plotted(spec)] == ["4k-8k", "8k-16k", "16k-32k"]


def _sweep(run_dir, curve_values: list[float | None]) -> dict:
    """A run made into a --context-lengths sweep of elitr_qa at 1k and 2k, with `length_curves`
    and a `depth` breakdown in each variant, as the engine writes them."""
    results = json.loads((run_dir / "results.json").read_text())
    base = results["tasks"]["elitr_qa"]
    for label, budget, value in (("1k", 1024, curve_values[0]), ("2k", 2048, curve_values[1])):
        variant = json.loads(json.dumps(base))
        variant.update(spec_name="elitr_qa", context_max_tokens=budget)
        block = variant["metrics"]["score"]
        block["breakdowns"]["depth"] = {"50%": dict(block["breakdowns"]["answer_position"]["B"], value=value),
                                        "10%": dict(block["breakdowns"]["answer_position"]["B"], value=9.0)}
        results["tasks"][f"elitr_qa@{label}"] = variant
    points = [{"length": 1024, "label": "1k", "task": "elitr_qa@1k", "value": curve_values[0], "ci": [1.0, 9.0], "n": 9},
              {"length": 2048, "label": "2k", "task": "elitr_qa@2k", "value": curve_values[1], "ci": None, "n": 9},
              {"length": None, "label": "full", "task": "elitr_qa", "value": 4.0, "ci": [2.0, 6.0], "n": 9}]
    results["length_curves"] = {"elitr_qa": {"metric": "score", "points": points, "threshold": 5.0,
                                             "effective_length": 1024 if curve_values[0] >= 5 else None}}
    (run_dir / "results.json").write_text(json.dumps(results))
    return results


def test_a_length_sweep_is_a_curve_per_model_with_the_console_s_effective_length(two_runs):
    first = _sweep(two_runs[0], [8.0, 3.0])
    _sweep(two_runs[1], [4.0, 2.0])
    html = build_report(html_inputs(list(two_runs)), load_plugins())
    page = parse(html)
    specs = json.loads(page.scripts["lceval-charts"])
    spec = specs[page.titles.index("elitr_qa: score by context length")]
    line = spec["layer"][1]
    assert line["mark"]["type"] == "line" and line["encoding"]["x"]["sort"] == ["1k", "2k", "full"]
    rows = plotted(spec)
    assert len({r["series"] for r in rows}) == 2 and len(rows) == 6  # one line per model
    assert spec["layer"][2]["mark"]["type"] == "rule"  # the threshold
    console = format_table(first)
    assert "1k (>= 5)" in console and "1k (&gt;= 5)" in html  # the effective length, in the console's words
    assert "none (&lt; 5 at the shortest)" in html
    assert "elitr_qa: effective length" in html  # a column of the overview
    # the variants are drawn on their task's curve and heatmap, not as tasks of their own
    assert "task-elitr_qa-1k" not in page.sections
    heat = [t for t in page.titles if t.startswith("elitr_qa: score by depth x context length")]
    assert len(heat) == 2
    cells = plotted(specs[page.titles.index(heat[0])])
    assert {(c["row"], c["column"]) for c in cells} == {(d, x) for d in ("10%", "50%") for x in ("1k", "2k")}
    assert specs[page.titles.index(heat[0])]["layer"][0]["encoding"]["y"]["sort"] == ["10%", "50%"]


def test_one_chart_puts_every_task_of_a_run_on_the_length_axis_with_the_bins_table(tiny_home, tmp_path):
    bins = {"field": "tokens", "edges": [300, 100000], "threshold": 0}
    run_dir, _, _ = run_engine(ScriptedModel(window=100000), "elitr_qa", tiny_home, tmp_path,
                               overrides={"report.length_bins": bins})
    results = _sweep(run_dir, [8.0, 3.0])  # and a --context-lengths curve of the same run
    page = parse(html := build_report(html_inputs([run_dir]), load_plugins()))
    assert page.sections[:2] == ["overview", "lengths"]
    specs = json.loads(page.scripts["lceval-charts"])
    title = next(t for t in page.titles if t.endswith(": score against length, all tasks"))
    rows = plotted(specs[page.titles.index(title)])
    binned = [p["length"] for p in results["length_bins"]["elitr_qa"]["points"]]
    assert {r["series"] for r in rows} == {"elitr_qa", "elitr_qa (swept)"}  # one line per curve, one chart
    assert len(rows) == len(binned) + 2  # every bin, and the sweep's budgets (its uncut point has no length)
    assert "length bins" in format_table(results) and "score by length bin" in html
    assert effective_said(results["length_bins"]["elitr_qa"]).replace(">", "&gt;") in html


def test_plugin_panels_are_drawn_and_a_failing_one_is_reported(two_runs):
    class Panels:
        @hookimpl
        def register_report_panels(self, register):
            def good(ctx):
                chart = charts.intervals(["x"], [Series(ctx.labels[0], [Point("x", 1.0, 0.5, 1.5)])], y_title="s")
                return [figure(chart, "my panel", "from a plugin", "Mine"),
                        figure({"mark": "point", "data": {"values": [{"a": 1}, {"a": 2}]},
                                "encoding": {"x": {"field": "a", "type": "quantitative"}}}, "by hand", "", "Mine")]

            def bad(ctx):
                raise RuntimeError("boom")

            register("good", good)
            register("bad", bad)

    plugins = load_plugins(extra=[("panels", Panels())])
    html = build_report(html_inputs(list(two_runs)), plugins)
    page = parse(html)
    assert "panel-Mine" in page.sections and {"my panel", "by hand"} <= set(page.titles)
    assert [int(f["data-points"]) for f, t in zip(page.figures, page.titles) if t in ("my panel", "by hand")] == [1, 2]
    assert "report panel &#x27;bad&#x27; failed: RuntimeError: boom" in html


def test_without_altair_the_html_report_says_which_extra_to_install(two_runs, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "altair", None)  # import altair -> ImportError
    assert main(["report", str(two_runs[0]), "--format", "html", "-o", str(tmp_path / "r.html")]) == 2
    assert "pip install 'lceval[report]'" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


def test_report_html_needs_an_output_file(two_runs, capsys):
    assert main(["report", str(two_runs[0]), "--format", "html"]) == 2
    assert "-o FILE.html" in capsys.readouterr().err


def test_sample_text_cannot_close_the_data_script(two_runs):
    run = two_runs[0]
    lines = (run / "samples.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    rec["response"] = "</script><script>alert(1)</script><!--"
    lines[0] = json.dumps(rec)
    (run / "samples.jsonl").write_text("\n".join(lines) + "\n")
    html = build_report(html_inputs([run]), load_plugins())
    data = json.loads(parse(html).scripts["lceval-samples"])
    assert data["samples"][0]["response"] == rec["response"]
    assert "<script>alert(1)" not in html


def test_labels_are_short_model_names_unless_two_runs_of_a_task_share_one(two_runs):
    inputs = html_inputs(list(two_runs))
    labels = run_labels(inputs.runs)
    # same model, same task: the setting they differ in tells them apart, never a run id (issue 30)
    assert labels == ["x (context-policy=default)", "x (context-policy=truncate-middle)"]
    again = html_inputs([two_runs[0], two_runs[0]])
    assert run_labels(again.runs) == ["x", "x #2"]  # the same run twice: a number


def test_summhay_panels_put_retrievers_budgets_and_orders_side_by_side(tmp_path):
    from lceval_plugins.summhay.template import write_template

    hay = write_template(tmp_path / "hay.json", n_subtopics=2, n_documents=8)
    tasks = "summhay_full,summhay_rag_bm25,summhay_order_random,summhay_order_top,summhay_order_bottom"
    opts = {"options.haystack": str(hay), "options.budget_tokenizer": "words"}
    a, _, _ = run_engine(ScriptedModel(), tasks, tmp_path / "data", tmp_path / "a",
                         overrides={**opts, "options.budget_tokens": 300})
    b, _, _ = run_engine(ScriptedModel(), "summhay_rag_bm25", tmp_path / "data", tmp_path / "b",
                         overrides={**opts, "options.budget_tokens": 600})
    inputs = html_inputs([a, b])
    figs = load_plugins().report_panels["summhay"](ReportContext(inputs.runs, run_labels(inputs.runs)))
    assert [f.title for f in figs] == ["Coverage by retriever and budget", "Citation F1 by retriever and budget",
                                       "Joint by retriever and budget", "Position sensitivity"]
    bars = figs[0].spec["layer"][0]
    assert bars["encoding"]["x"]["sort"] == ["full", "bm25 @300", "bm25 @600"]
    assert bars["encoding"]["y"]["scale"]["domain"] == [0, 100]
    assert figs[0].points == len(plotted(figs[0].spec)) > 0
    assert "Position sensitivity max(|R−T|, |R−B|): " in figs[3].caption
