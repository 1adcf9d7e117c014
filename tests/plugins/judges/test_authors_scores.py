"""Every answer of tests/data/judges/authors_scores.json, scored by lceval's metric judges with the
options of the shipped spec of its task, gives the score the benchmark authors' own code gave it,
item for item (THUDM/LongBench eval.py + metrics.py and LongBench v2 pred.py at 2e00731,
OpenBMB/InfiniteBench compute_scores.py at 88b3daa, NVIDIA/RULER at c3f5e3b: the file says how).

An answer reaches the judge as the engine hands it over: stripped as `response`, and as the
model wrote it as `raw_response` when that differs. References are what the `documents` task
type makes of the answer field (text; a number as its digits; a list of values as JSON);
InfiniteBench's choice labels `[option, letter]` become the option and its letter."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lceval.engine import load_catalog, load_plugins
from lceval.interfaces import JudgeContext
from lceval.types import JudgeInput, Judgment
from tests.paths import TEST_DATA

PLUGINS = load_plugins()
CATALOG = load_catalog(PLUGINS)
DATA = json.loads((TEST_DATA / "judges" / "authors_scores.json").read_text(encoding="utf-8"))
CASES = DATA["cases"]

#: Cases whose metric lceval does not ship, with why.
_JIEBA = "LongBench's Chinese tasks tokenise with jieba; lceval ships the English tasks only"
NOT_SHIPPED = {("longbench", "vcsum"): _JIEBA, ("longbench", "multifieldqa_zh"): _JIEBA}


def label_artefact(case: dict[str, Any]) -> str | None:
    """Why a case's expected score depends on the Python type of the label as a file was read,
    which lceval's references (always text) do not carry; None for every other case."""
    label = case.get("authors_label")
    if case["task"] == "kv_retrieval" and isinstance(label, list):
        return "a list around kv_retrieval's key never matches (`label in words`); the published labels are strings"
    if case["task"] == "code_run" and isinstance(label, list) and all(isinstance(v, str) for v in label):
        return "a string code_run value never equals int(...); the published labels are integers"
    return None


def judge_and_options(case: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The judge of the shipped spec of the case's task (InfiniteBench: the GPT-4 route for GPT-4's
    answers, the open-model route for the others; they differ in math_calc's first number only)."""
    family, task = case["family"], case["task"]
    if family == "ruler":
        return "string_match", {"mode": "part" if case["authors_metric"] == "string_match_part" else "all"}
    if family == "infinitebench" and task == "longbook_qa_chn":  # no shipped spec: the metric alone
        return "f1", {"normalize": "infinitebench_zh"}
    if family == "longbench":
        name = f"longbench_{task.replace('-', '_')}"
    elif family == "longbench_v2":
        name = "longbench_v2"
    else:
        name = f"infinitebench_{task}" + ("" if case["model_name"] == "gpt4" else "_open")
    spec = CATALOG.spec(name)
    return spec.judge.name, dict(spec.judge.options or {})


def lceval_references(value: Any) -> list[str]:
    """What the documents task type makes of an answer field (plugins/documents/records.py)."""
    values = value if isinstance(value, list) else [value]
    return [v if isinstance(v, str) else json.dumps(v) if isinstance(v, (list, dict)) else str(v) for v in values]


def judge_input(case: dict[str, Any]) -> JudgeInput:
    raw = case["prediction"]
    metadata: dict[str, Any] = {}
    refs = list(case["references"])
    label = case.get("authors_label")
    if case["task"] in ("longbook_choice_eng", "code_debug"):
        refs, metadata["answer_letter"] = [label[0]], label[1]
    elif case["family"] == "infinitebench":
        refs = lceval_references(label)
    if case.get("all_classes"):
        metadata["all_classes"] = case["all_classes"]
    metadata["references"] = refs
    return JudgeInput(item_id="i", question="q", response=raw.strip(), reference=refs[0], metadata=metadata,
                      raw_response=raw if raw != raw.strip() else None)


def scored(case: dict[str, Any]) -> Judgment:
    name, options = judge_and_options(case)
    (judgment,) = PLUGINS.judges[name](JudgeContext(options=options)).judge([judge_input(case)])
    return judgment


def case_id(case: dict[str, Any]) -> str:
    return f"{case['family']}-{case['task']}-{CASES.index(case)}"


RUN = [c for c in CASES if (c["family"], c["task"]) not in NOT_SHIPPED and not label_artefact(c)
       and not c.get("authors_raises") and not c.get("authors_omitted")]


def test_the_fixture_is_whole():
    assert len(CASES) == 219
    assert len(RUN) == 219 - 2 - 2 - 1 - 1
    assert {c["family"] for c in RUN} == {"longbench", "infinitebench", "longbench_v2", "ruler"}


@pytest.mark.parametrize("case", RUN, ids=case_id)
def test_lceval_gives_the_authors_score(case):
    judgment = scored(case)
    assert judgment.parse_status == "ok"
    expected = 100 * case["authors_score"]
    if case["family"] == "ruler":  # RULER rounds the task's score (here one item) to 2 decimals
        assert round(judgment.score, 2) == pytest.approx(expected, abs=1e-9), case["note"]
    else:
        assert judgment.score == pytest.approx(expected, rel=0, abs=1e-9), case["note"]


def test_an_empty_longbench_v2_answer_is_left_out_as_pred_py_leaves_it_out():
    (case,) = [c for c in CASES if c.get("authors_omitted")]
    judgment = scored(case)
    assert judgment.score is None and judgment.parse_status == "missing"
    white = scored({**case, "prediction": "  \n"})  # not empty as written: no letter, wrong, counted
    assert white.parse_status == "ok" and white.score == 0.0


def test_where_the_authors_code_raises_the_answer_is_wrong():
    (case,) = [c for c in CASES if c.get("authors_raises")]
    assert "ValueError" in case["authors_raises"]  # math_find: int("88.0") against the label 88
    assert scored(case).score == 0.0


@pytest.mark.parametrize("case", [c for c in CASES if label_artefact(c)], ids=case_id)
def test_label_type_artefacts_score_as_the_published_labels(case):
    """lceval holds the key and the value as text, so it scores these answers as the authors'
    code scores them against the published labels (a bare key, an integer)."""
    bare = case["authors_label"][0]
    fixed = {**case, "authors_label": bare if case["task"] == "kv_retrieval" else int(bare)}
    assert scored(case).score == scored(fixed).score == 100.0


def test_the_two_routes_differ_in_math_calc_only():
    """GPT-4's math_calc drops the answer's first number (compute_scores.py, model_name "gpt4")."""
    for task in ("passkey", "number_string", "kv_retrieval", "longbook_sum_eng", "longbook_choice_eng",
                 "longbook_qa_eng", "longdialogue_qa_eng", "math_find", "code_run", "code_debug"):
        gpt4, open_ = CATALOG.spec(f"infinitebench_{task}"), CATALOG.spec(f"infinitebench_{task}_open")
        assert (gpt4.judge.name, gpt4.judge.options) == (open_.judge.name, open_.judge.options), task
    assert CATALOG.spec("infinitebench_math_calc").judge.options["drop_first_number"] is True
    assert "drop_first_number" not in (CATALOG.spec("infinitebench_math_calc_open").judge.options or {})
