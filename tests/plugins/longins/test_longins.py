"""LongIns: the authors' files (exams WE wrote in their schema, tests/data/longins/data/) installed by
`lceval data fetch longins --from`, each length a split, every prompt byte for byte what the authors'
`load_data` (Ins-Bench/LongIns-Bench infer/data_loader.py at cf8c59b8, with config/{GIST,LIST}.yaml)
makes of the same exams (expected_prompts.json was written by running it outside this repository),
and the score equal to their eval.py on the same answers (it printed the values below)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from lceval.engine import load_plugins
from lceval.interfaces import JudgeContext
from lceval.types import Generation, JudgeInput, Message

from tests.cli import call, lceval
from tests.conftest import ScriptedModel, run_engine, serve_scripted

PLUGINS = load_plugins()
DATA = Path(__file__).parents[2] / "data" / "longins"
EXPECTED = json.loads((DATA / "expected_prompts.json").read_text(encoding="utf-8"))
ANSWERS = {
    "task768_qed_text_span_selection": "The incorrect answers are [0].",
    "task1146_country_capital": "The wrong ones: [0, 3] and [2].\n[0, 3]",
    "task1508_wordnet_antonyms": "none are wrong []",
}
# (answer, wrong questions) -> eval.py's calculate_f1_score
CASES = [("The incorrect answers are [0].", [0], 1.0), ("The wrong ones: [0, 3] and [2].\n[0, 3]", [0, 2], 0.8),
         ("none are wrong []", [], 0.0), ("[Question 0 Instruction:...] is wrong: [0]\n[1,\n2]", [0], 1.0),
         ("The incorrect answers are [3, 11] and [11].", [11, 1], 0.5), ("[0]", [0], 1.0)]


@pytest.mark.parametrize("answer,wrong,f1", CASES)
def test_the_score_is_eval_py(answer, wrong, f1):
    (j,) = PLUGINS.judges["longins"](JudgeContext(options={})).judge(
        [JudgeInput(item_id="256/t", question="", response=answer.strip(), reference=json.dumps(wrong),
                    raw_response=answer if answer != answer.strip() else None)])
    assert j.score == pytest.approx(100 * f1)


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("LCEVAL_DATA", str(home))
    lceval("data", "fetch", "longins", "--from", DATA / "data")
    return home


class Answering(ScriptedModel):
    def __init__(self, answers: dict[str, str]) -> None:
        super().__init__(window=100_000)
        self.answers = answers

    def generate(self, requests):
        self.calls.extend(requests)
        return [Generation(request_id=r.request_id, text=next(a for k, a in self.answers.items() if k in r.messages[-1]
                           .content.replace("\n", " ") or k == ""), prompt_tokens=10, prefilled_tokens=10,
                           completion_tokens=5) for r in requests]


def by_task(answers: dict[str, str]) -> dict[str, str]:
    """Answers keyed by a phrase of each exam's text."""
    phrases = {"task768_qed_text_span_selection": "harbour froze", "task1146_country_capital": "Input: France",
               "task1508_wordnet_antonyms": "Input: hot"}
    return {phrases[k]: v for k, v in answers.items()}


@pytest.mark.parametrize("task,mode", [("longins_gist", "GIST"), ("longins_list", "LIST")])
def test_every_prompt_is_the_authors_byte_for_byte(home, tmp_path, task, mode):
    model = Answering({"": "[0]"})
    run_engine(model, task, home, tmp_path, splits=["256"])
    expected = EXPECTED[f"{mode}_256"]
    assert [r.messages for r in model.calls] == [[Message("user", p)] for p in expected.values()]


def test_a_run_scores_as_eval_py_by_length_and_category(home, tmp_path):
    model = Answering({**by_task(ANSWERS), "": "[0]"})
    _, results, state = run_engine(model, "longins_gist", home, tmp_path, splits=["256", "512"])
    (task,) = state.tasks
    assert [s.item_id for s in task.samples] == ["256/task768_qed_text_span_selection", "256/task1146_country_capital",
                                                 "256/task1508_wordnet_antonyms", "512/task768_qed_text_span_selection"]
    block = results["tasks"]["longins_gist"]["metrics"]["score"]
    assert block["breakdowns"]["length"]["256"]["value"] == pytest.approx(60.0)  # eval.py's "M_256_GIST": 0.6
    assert block["breakdowns"]["length"]["512"]["value"] == 100.0
    assert block["breakdowns"]["category"]["Word Semantics"]["value"] == 0.0
    assert task.samples[1].metadata["tokens"] == 120 and task.samples[1].metadata["domain"] == "Geography"


def test_the_authors_zip_installs_like_its_folder(tmp_path, monkeypatch):
    archive = tmp_path / "data.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for path in sorted((DATA / "data").rglob("*.json")):
            z.write(path, "data/" + path.relative_to(DATA / "data").as_posix())
    monkeypatch.setenv("LCEVAL_DATA", str(tmp_path / "home"))
    lceval("data", "fetch", "longins", "--from", archive)
    rows = [json.loads(line) for line in (tmp_path / "home" / "longins" / "GIST_256.jsonl").read_text().splitlines()]
    assert [r["error"] for r in rows] == ["[0]", "[0, 2]", "[]"] and rows[0]["category"] == "Question Answering"


def test_a_file_that_is_not_the_authors_schema_is_refused(tmp_path, monkeypatch):
    (tmp_path / "GIST").mkdir()
    (tmp_path / "GIST" / "256.json").write_text(json.dumps({"task1": {"Data": "[0: x]", "error": "0"}}))
    monkeypatch.setenv("LCEVAL_DATA", str(tmp_path / "home"))
    code, _, err = call("data", "fetch", "longins", "--from", tmp_path)
    assert code == 2 and "error must be a list" in err


@pytest.mark.parametrize("argv,words", [
    (["--tasks", "longins_list", "--split", "300"], "'300' is no length level"),
    (["--tasks", "longins_gist", "--judge", "longins,references=all"], "references"),
])
def test_bad_input_exits_2_naming_the_option(home, monkeypatch, argv, words):
    serve_scripted(monkeypatch, lambda: ScriptedModel(window=4096))
    code, _, err = call("run", *argv, "--model", "scripted:x", "--limit", "1", "--dry-run")
    assert code == 2 and words in err, err
