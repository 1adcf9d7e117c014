"""The answers benchmark authors publish, re-scored by lceval item for item (issue 38).

Each `tests/data/<family>/published.json` holds a small sample of the authors' published model
answers (or, where their license keeps us from copying them, rows made from their own scripts'
inputs: the file says which) and the score the authors' own scorer gave each one, run as it is at
the commit the file names. Every row is scored here by the judge of the shipped spec it names
(the metric with that label; `score` or the headline's label is the spec's judge), with the spec's options (a row's
`judge_options` are laid over them where the authors' scorer takes a per-file setting), handed
over as the engine hands an answer over: stripped as `response`, and as written as
`raw_response`. A metric change that breaks agreement with the authors fails here.

The row: `task` (a shipped spec), `prediction` (as the model wrote it), `references` (what the
task type makes of the answer field), `metadata` (what the task type puts beside it), `authors`
({metric label: the authors' value}; lceval's is that times the file's `scale`). Rows on which
the authors' scorer stops are not in the samples: the specs' `report.differs_from_paper` declares
what lceval does there, and the families' tests check it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lceval.engine import load_catalog, load_plugins
from lceval.interfaces import JudgeContext
from lceval.types import JudgeInput
from tests.paths import TEST_DATA

PLUGINS = load_plugins()
CATALOG = load_catalog(PLUGINS)
FILES = sorted(TEST_DATA.glob("*/published.json"))


def judge_of(task: str, label: str, extra: dict[str, Any]) -> Any:
    spec = CATALOG.spec(task)
    if label in ("score", spec.headline_label):
        name, options = spec.judge.name, dict(spec.judge.options or {})
    else:
        (metric,) = [m for m in spec.metrics if m.label == label]
        name, options = metric.name, dict(metric.options or {})
    return PLUGINS.judges[name](JudgeContext(options={**options, **extra}))


def item(i: int, row: dict[str, Any]) -> JudgeInput:
    raw = row["prediction"]
    refs = list(row["references"])
    return JudgeInput(item_id=str(i), question=row.get("question", ""), response=raw.strip(), reference=refs[0],
                      metadata={**row.get("metadata", {}), "references": refs},
                      raw_response=raw if raw != raw.strip() else None)


def test_every_family_with_published_scores_has_a_sample():
    assert sorted(p.parent.name for p in FILES) == ["babilong", "clongeval", "infinitebench", "leval", "loogle"]


@pytest.mark.parametrize("path", FILES, ids=[p.parent.name for p in FILES])
def test_published_answers_score_as_the_authors_scored_them(path: Path):
    data = json.loads(path.read_text(encoding="utf-8"))
    assert {"repository", "commit", "license"} <= set(data["source"]) and len(data["rows"]) >= 20
    groups: dict[tuple[str, str, str], list[tuple[int, dict[str, Any]]]] = {}
    for i, row in enumerate(data["rows"]):
        for label in row["authors"]:
            key = (row["task"], label, json.dumps(row.get("judge_options") or {}, sort_keys=True))
            groups.setdefault(key, []).append((i, row))
    differ = []
    for (task, label, extra), rows in groups.items():
        judged = judge_of(task, label, json.loads(extra)).judge([item(i, row) for i, row in rows])
        for (i, row), judgment in zip(rows, judged):
            want = data["scale"] * row["authors"][label]
            if judgment.score is None or judgment.score != pytest.approx(want, rel=1e-9, abs=1e-9):
                differ.append((i, task, label, judgment.score, want, row["prediction"][:60]))
    assert not differ, f"{len(differ)} of {len(data['rows'])} rows differ: {differ[:5]}"
