"""Ada-LEval: the authors' files (rows WE wrote in their schema, tests/data/ada_leval/) installed by
`lceval data fetch ada_leval --from`, each length level a split, every prompt byte for byte what the
authors' `build_prompt` makes of the same rows (expected_prompts.json was written by running
open-compass/Ada-LEval's `ada_leval/dataset.py` at 2154258d on these rows, outside this repository),
and the answer extraction and accuracy equal to their `evaluate` on the same predictions (the
expected values below are what it printed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lceval.engine import load_catalog, load_plugins
from lceval.interfaces import JudgeContext
from lceval.types import Generation, JudgeInput, Message

from tests.cli import call, lceval
from tests.conftest import ScriptedModel, run_engine, serve_scripted

PLUGINS = load_plugins()
CATALOG = load_catalog(PLUGINS)
DATA = Path(__file__).parents[2] / "data" / "ada_leval"
EXPECTED = json.loads((DATA / "expected_prompts.json").read_text(encoding="utf-8"))

# (answer, number of answers, gold) -> right, as StackSelect.evaluate extracted it
BESTANSWER = [
    ("Answer: A3", 4, "A3", True), ("A12 is better than A3", 12, "A2", False), ("The best is answer 7", 12, "A7", True),
    ("I cannot tell.", 4, "A1", False), ("Answer: A2", 12, "A2", True), ("A1 is good but A2 is better", 2, "A2", True),
    ("Answer: A1", 12, "A1", True), ("2023 was a good year", 12, "A2", False), ("Answer: A10", 12, "A1", False),
    ("", 4, "A1", False),
]
EXTRACTED = ["A3", "A12", "A7", "???", "A2", "A2", "A1", "A3", "A10", "???"]
# (answer, gold order as the row holds it) -> right, as TextSort.evaluate scored each alone
TSORT = [
    ("Answer: [3, 4, 1, 2]", [3, 4, 1, 2], True), ("The order is 3,4,1,2.", [3, 4, 1, 2], True),
    ("2 1 4 3 then 1", [2, 1, 4, 3], False), ("Answer: [3, 4]", [3, 4, 1, 2], True), ("Answer: []", [2, 4, 3, 1], True),
    ("Answer: [2, 4, 1, 3]", "[2, 4, 3, 1]", False), ("Answer:\n[2, 4, 3, 1]\nBecause the night comes first.", [2, 4, 3, 1], True),
    ("I think 2, then 4, then 3, then 1", "[2, 4, 3, 1]", True), ("Answer: 2 4 3 1 Answer: [1, 2, 3, 4]", [2, 4, 3, 1], True),
    ("no idea", [1, 2, 3, 4], False),
]


def judge(name: str, **options):
    return PLUGINS.judges[name](JudgeContext(options=options))


def test_bestanswer_extraction_and_accuracy_are_the_authors():
    items = [JudgeInput(item_id=f"2k/{i}", question="", response=a.strip(), reference=gold,
                        metadata={"references": [gold], "num_choice": n}, raw_response=a if a != a.strip() else None)
             for i, (a, n, gold, _) in enumerate(BESTANSWER)]
    out = judge("ada_leval_bestanswer").judge(items)
    assert [j.details["extracted"] for j in out] == EXTRACTED
    assert [j.score for j in out] == [100.0 * right for *_, right in BESTANSWER]
    assert sum(j.score for j in out) / len(out) == 50.0  # the authors' "StackSelect 2k Accuracy: 50.0%"


def test_tsort_extraction_and_accuracy_are_the_authors():
    items = [JudgeInput(item_id=f"2k/{i}", question="", response=a.strip(), reference=json.dumps(gold) if
                        isinstance(gold, list) else gold, metadata={}, raw_response=a if a != a.strip() else None)
             for i, (a, gold, _) in enumerate(TSORT)]
    out = judge("ada_leval_tsort").judge(items)
    assert [j.score for j in out] == [100.0 * right for *_, right in TSORT]
    assert sum(j.score for j in out) / len(out) == 70.0  # "TextSort 2k Accuracy: 70.0%"
    exact = judge("ada_leval_tsort", compare="exact").judge(items)
    assert [j.score for j in exact][3:5] == [0.0, 0.0]  # LOOM-Scope's whole-list equality


@pytest.mark.parametrize("answer", ["Answer: 1234", "Answer: null"])
def test_a_json_value_zip_cannot_pair_is_wrong_where_the_authors_stop(answer):
    (j,) = judge("ada_leval_tsort").judge([JudgeInput(item_id="2k/0", question="", response=answer,
                                                      reference="[1, 2, 3, 4]")])
    assert j.score == 0.0 and j.parse_status == "ok"


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("LCEVAL_DATA", str(home))
    out = lceval("data", "fetch", "ada_leval", "--from", DATA)
    assert "ada_leval" in out
    return home


class Echo(ScriptedModel):
    """Answers every prompt with `text` and keeps the requests."""

    def __init__(self, text: str, window: int = 100_000) -> None:
        super().__init__(window=window)
        self.text = text

    def generate(self, requests):
        self.calls.extend(requests)
        return [Generation(request_id=r.request_id, text=self.text, prompt_tokens=10, prefilled_tokens=10,
                           completion_tokens=2) for r in requests]


@pytest.mark.parametrize("task,file", [("ada_leval_bestanswer", "stackselect_2k"), ("ada_leval_tsort", "textsort_2k")])
def test_every_prompt_is_the_authors_byte_for_byte(home, tmp_path, task, file):
    model = Echo("Answer: A2")
    run_engine(model, task, home, tmp_path, splits=["2k"])
    assert [r.messages for r in model.calls] == [[Message("user", p)] for p in EXPECTED[file]]


def test_each_level_is_a_split_reported_by_length_and_take_keeps_the_first_rows(home, tmp_path):
    model = Echo("Answer: A2")
    _, results, state = run_engine(model, "ada_leval_bestanswer", home, tmp_path, splits=["2k", "4k"],
                                   overrides={"options.take": {"2k": 2}})
    (task,) = state.tasks
    assert [s.item_id for s in task.samples] == ["2k/48211_A3", "2k/9071_A2", "4k/48211_A3", "4k/9071_A2"]
    assert [s.metadata["length"] for s in task.samples] == ["2k", "2k", "4k", "4k"]
    block = results["tasks"]["ada_leval_bestanswer"]["metrics"]["score"]
    assert block["breakdowns"]["length"]["2k"]["value"] == 50.0 and block["breakdowns"]["length"]["4k"]["value"] == 50.0


def test_a_prompt_past_the_window_is_skipped_not_cut(home, tmp_path):
    model = Echo("Answer: [3, 4, 1, 2]", window=1024 + 60)  # answers reserve 1024 tokens
    _, results, state = run_engine(model, "ada_leval_tsort", home, tmp_path, splits=["2k"])
    (task,) = state.tasks
    by_id = {s.item_id: s for s in task.samples}
    assert by_id["2k/pg1342_120_121_122_123"].context_cut.action == "skipped"
    assert by_id["2k/pg84_7_8_9_10"].judgments[0].score == 0.0  # [3, 4, 1, 2] is not [2, 4, 3, 1]


def test_the_installed_rows_carry_the_authors_keys(home):
    rows = [json.loads(line) for line in (home / "ada_leval" / "textsort_2k.jsonl").read_text().splitlines()]
    assert [r["index"] for r in rows] == ["pg1342_120_121_122_123", "pg84_7_8_9_10"]
    assert [r["answer"] for r in rows] == ["[3, 4, 1, 2]", "[2, 4, 3, 1]"]
    first = json.loads((home / "ada_leval" / "stackselect_2k.jsonl").read_text().splitlines()[1])
    assert first["num_choice"] == 12 and first["index"] == "9071_A2"


@pytest.mark.parametrize("argv,words", [
    (["--tasks", "ada_leval_tsort", "--split", "3k"], "'3k' is no length level"),
    (["--tasks", "ada_leval_tsort", "--set", "options.take={5k: 10}"], "options.take"),
    (["--tasks", "ada_leval_tsort", "--set", "options.source.data_files=ada_leval/textsort.jsonl"], "{length}"),
    (["--tasks", "ada_leval_tsort", "--judge", "ada_leval_tsort,compare=prefix"], "compare"),
])
def test_bad_input_exits_2_naming_the_option(home, monkeypatch, argv, words):
    serve_scripted(monkeypatch, lambda: ScriptedModel(window=4096))
    code, _, err = call("run", *argv, "--model", "scripted:x", "--limit", "1", "--dry-run")
    assert code == 2 and words in err, err


def test_a_folder_without_the_authors_files_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("LCEVAL_DATA", str(tmp_path / "home"))
    code, _, err = call("data", "fetch", "ada_leval", "--from", tmp_path)
    assert code == 2 and "no Ada-LEval file" in err
