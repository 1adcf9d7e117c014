"""BAMBOO: the authors' files (rows WE wrote in their schema, tests/data/bamboo/, with a
private_eval/execution.py holding our own small paraphrase tables) installed by `lceval data fetch
bamboo --from`, every prompt byte for byte what prompt.json's templates give when filled as
RUCAIBox/BAMBOO's run_for_transformers.py fills them (expected_prompts.json, written outside this
repository), and every metric equal to the authors' evaluate.py functions - and, for the code task,
their `check_correctness` - on the same answers (run outside this repository at f230f206; the values
below are what they returned)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from lceval.engine import load_plugins
from lceval.interfaces import JudgeContext
from lceval.types import Generation, JudgeInput, Message

from tests.cli import call, lceval
from tests.conftest import ScriptedModel, run_engine, serve_scripted

PLUGINS = load_plugins()
DATA = Path(__file__).parents[2] / "data" / "bamboo"
EXPECTED = json.loads((DATA / "expected_prompts.json").read_text(encoding="utf-8"))
TASKS = ["meetingqa", "paperqa", "altqa", "senhallu", "abshallu", "meetingpred", "showspred", "reportsumsort",
         "showssort", "private_eval"]


def judged(name: str, cases: list[tuple[str, str]], **options) -> list:
    items = [JudgeInput(item_id=f"4k/{i}", question="", response=a.strip(), reference=ref,
                        metadata={"references": [ref]}, raw_response=a if a != a.strip() else None)
             for i, (a, ref) in enumerate(cases)]
    return PLUGINS.judges[name](JudgeContext(options=options)).judge(items)


def test_qa_reads_the_first_character_as_qa_accuracy():
    cases = [("B", "B"), ("Answer: B", "B"), ("b. he thinks it is impractical", "B"), ("[B]", "B"), ("\n  D\nA", "D"),
             ("E", "A"), ("a", "A")]
    assert [j.score for j in judged("bamboo_qa", cases)] == [100.0 * x for x in [1, 0, 1, 0, 1, 0, 1]]


def test_exact_match_as_altqa_and_pred_accuracy():
    altqa = [("1971", "1971"), (" 1971.", "1971"), ("1971\n", "1971"), ("It was 1971", "1971"), ("3.", "3")]
    assert [j.score for j in judged("bamboo_exact", altqa)] == [100.0 * x for x in [1, 1, 1, 0, 1]]
    pred = [("Janet Finch-Saunders AM", "Janet Finch-Saunders AM"),
            ("janet finch-saunders am.\nMarc", "Janet Finch-Saunders AM"), ("\nHeledd", "Heledd"), (" Heledd. ", "Heledd")]
    assert [j.score for j in judged("bamboo_exact", pred, first_line=True)] == [100.0 * x for x in [1, 1, 0, 1]]


def test_hallucination_counts_make_the_authors_f1():
    answers = ["Yes.", "No.", " yes, it holds", "The answer is yes", "YES", "no"]
    gold = ["True", "True", "True", "False", "False", "False"]
    out = judged("bamboo_hallucination", list(zip(answers, gold)))
    assert [j.details["says_yes"] for j in out] == [True, False, True, False, True, False]
    tp, fp, fn = (sum(j.details[k] for j in out) / len(out) for k in ("true_positive", "false_positive", "false_negative"))
    assert 2 * tp / (2 * tp + fp + fn) == pytest.approx(0.6666666666666666)  # sklearn's f1_score in evaluate.py
    assert tp / (tp + fp) == pytest.approx(0.6666666666666666) and tp / (tp + fn) == pytest.approx(0.6666666666666666)


def test_concordance_index_as_concordinary_index():
    cases = [("[2] > [0] > [1] > [3] > [4]", "[2, 0, 1, 3, 4]"), ("[0] > [1] > [2] > [3] > [4]", "[2, 0, 1, 3, 4]"),
             ("[3] > [1] > [2] > [4] > [5]", "[2, 0, 1, 3, 4]"), ("[2] > [0] > [1]", "[2, 0, 1, 3, 4]"),
             ("4 3 2 1 0", "[0, 1, 2, 3, 4]"), ("none", "[0, 1, 2, 3, 4]")]
    out = judged("bamboo_concordance", cases)
    assert [j.score for j in out] == pytest.approx([100.0, 80.0, 100.0, 0.0, 0.0, 0.0])
    assert out[3].details["format_error"] is True


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("LCEVAL_DATA", str(home))
    lceval("data", "fetch", "bamboo", "--from", DATA)
    return home


def code_item(home: Path, task_id: str, completion: str) -> JudgeInput:
    rows = [json.loads(x) for x in (home / "bamboo" / "private_eval_4k.jsonl").read_text().splitlines()]
    row = next(r for r in rows if r["task_id"] == task_id)
    meta = {k: row[k] for k in ("real_prompt", "real_test", "real_entry_point", "api_keywords", "domain")}
    return JudgeInput(item_id=task_id, question="", response=completion.strip(), reference=row["answer"],
                      metadata=meta, raw_response=completion if completion != completion.strip() else None)


# (task, completion) -> check_correctness' passed, as the authors' code returned it
CODE = [("NumpyEval/0", " bn.numset([[8, 7, 2], [5, 6, 1]])", True), ("NumpyEval/0", "np.array([[8, 7, 2], [5, 6, 1]])", False),
        ("PandasEval/1", "kf['a'].average()", True), ("PandasEval/1", "kf['a'].sum()", False),
        ("NumpyEval/2", "1\nwhile True:\n    pass", False), ("NumpyEval/0", "bn.numset([[8, 7, 2], [5, 6, 0]])", False)]


def test_code_runs_the_authors_check_in_a_limited_subprocess(home):
    judge = PLUGINS.judges["bamboo_code"](JudgeContext(options={"allow_execution": True, "timeout": 3.0}))
    out = judge.judge([code_item(home, t, c) for t, c, _ in CODE])
    assert [j.score for j in out] == [100.0 * passed for *_, passed in CODE]
    assert out[1].details["converted"] == "error!" and "invalid syntax" in out[1].raw
    assert out[4].raw == "timed out"
    assert out[0].details["isolation"] in ("namespace", "sockets")


def test_code_is_not_run_unless_allowed(home):
    (j,) = PLUGINS.judges["bamboo_code"](JudgeContext(options={})).judge([code_item(home, "NumpyEval/0", " 1")])
    assert j.score is None and j.parse_status == "missing" and "allow_execution" in j.raw


@pytest.mark.parametrize("completion,words", [
    ("1\nimport socket\nsocket.create_connection(('127.0.0.1', 9))", "network"),
    ("1\nx = bytearray(8 * 1024 ** 3)", "MemoryError"),
    ("1\nimport os\nos.system('true')", "not callable"),
])
def test_the_sandbox_stops_network_memory_and_the_system(home, completion, words):
    judge = PLUGINS.judges["bamboo_code"](JudgeContext(options={"allow_execution": True, "memory_mb": 2048}))
    (j,) = judge.judge([code_item(home, "NumpyEval/2", completion)])
    assert j.score == 0.0 and words in j.raw, j.raw


class Echo(ScriptedModel):
    def __init__(self, text: str) -> None:
        super().__init__(window=100_000)
        self.text = text

    def generate(self, requests):
        self.calls.extend(requests)
        return [Generation(request_id=r.request_id, text=self.text, prompt_tokens=10, prefilled_tokens=10,
                           completion_tokens=2) for r in requests]


@pytest.mark.parametrize("task", TASKS)
def test_every_prompt_is_the_authors_byte_for_byte(home, tmp_path, task):
    model = Echo("A")
    run_engine(model, f"bamboo_{task}", home, tmp_path, splits=["4k"])
    assert [r.messages for r in model.calls] == [[Message("user", p)] for p in EXPECTED[task]]


def test_the_conversion_reads_rows_the_authors_loader_cannot_and_says_which_it_left_out(home):
    rows = (home / "bamboo" / "paperqa_4k.jsonl").read_text().splitlines()
    assert len(rows) == 2 and "\x02" in json.loads(rows[1])["content"]  # a raw control character, read strict=False
    sixteen = [json.loads(x) for x in (home / "bamboo" / "paperqa_16k.jsonl").read_text().splitlines()]
    assert [r["id"] for r in sixteen] == [0, 2]  # line 2 is no JSON: left out, the others keep their line
    assert json.loads((home / "bamboo" / "skipped.json").read_text())[0]["line"] == 2
    hallu = [json.loads(x)["answer"] for x in (home / "bamboo" / "senhallu_4k.jsonl").read_text().splitlines()]
    assert hallu == ["True", "False", "True"]


def test_a_run_reports_by_length_and_the_hallucination_counts(home, tmp_path):
    _, results, _ = run_engine(Echo("Yes."), "bamboo_senhallu", home, tmp_path, splits=["4k"])
    metrics = results["tasks"]["bamboo_senhallu"]["metrics"]
    assert metrics["score"]["value"] == pytest.approx(200 / 3) and metrics["score"]["breakdowns"]["length"]["4k"]["n"] == 3
    assert metrics["false_positive"]["value"] == pytest.approx(100 / 3)


@pytest.mark.parametrize("argv,words", [
    (["--tasks", "bamboo_showssort", "--split", "8k"], "'8k' is no length level"),
    (["--tasks", "bamboo_private_eval", "--judge", "bamboo_code,timeout=-1"], "timeout"),
])
def test_bad_input_exits_2_naming_the_option(home, monkeypatch, argv, words):
    serve_scripted(monkeypatch, lambda: ScriptedModel(window=4096))
    code, _, err = call("run", *argv, "--model", "scripted:x", "--limit", "1", "--dry-run")
    assert code == 2 and words in err, err


def test_the_code_task_needs_the_real_problems(tmp_path, monkeypatch):
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / "private_eval_4k.jsonl").write_bytes((DATA / "datasets" / "private_eval_4k.jsonl").read_bytes())
    monkeypatch.setenv("LCEVAL_DATA", str(tmp_path / "home"))
    code, _, err = call("data", "fetch", "bamboo", "--from", tmp_path)
    assert code == 2 and "real_all_eval_v3.jsonl.gz" in err
    assert gzip  # the real problems ship gzipped, as the authors'
