"""The HTML report reads without a legend key in one's head (issue 30): colour means the model
on the whole page (groups and judges are told apart by shape, in greys), every interval that
exists is drawn (a line's band needs neighbours: a point with an interval also gets its
whisker), a model that a chart leaves out is named in its caption, the intervals resample the
task's own unit and the score is named by its metric, and runs are labelled by model name."""

from __future__ import annotations

import html as htmllib
import json
import re
from pathlib import Path

import pytest

from lceval.cli import main
from lceval.report import Point, Series, charts

from tests.conftest import ScriptedModel, run_engine
from tests.paths import TEST_DATA

pytest.importorskip("altair")


def _page(paths: list[Path], out: Path) -> tuple[str, list[dict], list[str]]:
    assert main(["report", *map(str, paths), "--format", "html", "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    specs = json.loads(re.search(r'<script[^>]*id="lceval-charts"[^>]*>(.*?)</script>', text, re.S).group(1))
    captions = [htmllib.unescape(re.sub(r"<[^>]+>", " ", c)).strip()
                for c in re.findall(r"<figcaption>(.*?)</figcaption>", text, re.S)]
    return text, specs, captions


def _encodings(spec, found=None):
    """Every `encoding` mapping of a Vega-Lite spec, nested layers included."""
    found = [] if found is None else found
    if isinstance(spec, dict):
        if isinstance(spec.get("encoding"), dict):
            found.append(spec["encoding"])
        for value in spec.values():
            _encodings(value, found)
    elif isinstance(spec, list):
        for value in spec:
            _encodings(value, found)
    return found


@pytest.fixture
def two_models(tiny_home, tmp_path):
    """Two models on ELITR-Bench's two splits: one measured (a window and a tokenizer), one
    that measures no context (no window), so it has no context-length breakdown."""
    a, _, _ = run_engine(ScriptedModel(window=4096), "elitr_qa", tiny_home, tmp_path / "a")
    b, _, _ = run_engine(ScriptedModel(), "elitr_qa", tiny_home, tmp_path / "b",
                         overrides={"generation.max_new_tokens": 9})
    return a, b


def test_colour_means_the_model_on_the_whole_page(two_models, tmp_path):
    _, specs, _ = _page(list(two_models), tmp_path / "r.html")
    model_colours = set(charts.PALETTE)
    forest = None
    for spec in specs:
        for enc in _encodings(spec):
            colour = enc.get("color")
            if not isinstance(colour, dict) or "scale" not in colour:
                continue
            field, scale = colour.get("field"), colour["scale"]
            if field == "category":  # the overview's forest: its rows are the models
                forest = scale
            elif (enc.get("shape") or {}).get("field") == "series":  # series that are not models: greys
                assert not set(scale.get("range", [])) & model_colours, scale
            else:  # series in a model's colour are models, never the splits
                assert set(scale["range"]) <= model_colours and not {"dev", "test2"} & set(scale["domain"]), scale
    assert forest is not None and set(forest["range"]) <= model_colours
    shapes = [enc["shape"] for enc in _encodings(specs[0]) if "shape" in enc]
    assert shapes and shapes[0]["field"] == "series" and shapes[0]["scale"]["domain"] == ["dev", "test2"]  # splits: shapes


def test_a_point_with_an_interval_between_points_without_gets_its_whisker():
    series = [Series("m", [Point("0-4k", 2.0, None, None, missing="1 meeting only"), Point("8k-16k", 2.7, 1.86, 3.65),
                           Point("16k-32k", 3.0, None, None, missing="1 meeting only")])]
    spec = charts.intervals(["0-4k", "8k-16k", "16k-32k"], series, y_title="score", style="line",
                            colors={"m": charts.PALETTE[0]}).to_dict()
    marks = [(layer.get("mark", {}).get("type") if isinstance(layer.get("mark"), dict) else layer.get("mark"),
              layer.get("encoding", {})) for layer in spec["layer"]]
    rules = [enc for mark, enc in marks if mark == "rule"]
    assert rules and rules[0]["y"]["field"] == "low" and rules[0]["y2"]["field"] == "high"
    data = next(d for d in spec.get("datasets", {}).values()) if spec.get("datasets") else spec["data"]["values"]
    assert [(r["low"], r["high"]) for r in data if r["category"] == "8k-16k"] == [(1.86, 3.65)]


def test_a_model_missing_from_a_chart_is_named(two_models, tmp_path):
    _, _, captions = _page(list(two_models), tmp_path / "r.html")
    (length,) = [c for c in captions if "score by context length" in c]
    assert "Not drawn: x (overrides=" in length and "lent no tokenizer" in length


def test_the_unit_and_the_metric_are_the_task_s_own(tmp_path):
    pytest.importorskip("datasets")
    run, _, _ = run_engine(ScriptedModel(window=4096), str(TEST_DATA / "documents" / "notes.yaml"), tmp_path / "data",
                           tmp_path / "a")
    text, _, captions = _page([run], tmp_path / "r.html")
    assert "meetings, topics" not in text
    assert "95% intervals resample documents (notes_qa)" in text
    assert any("resampling documents" in c for c in captions)
    assert ">f1 score<" in text  # the task table's column names its metric ...
    assert any(c.startswith("notes_qa: f1 score") for c in captions)  # ... and so do its charts
