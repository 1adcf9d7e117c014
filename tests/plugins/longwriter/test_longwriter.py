"""LongWriter (Bai et al., 2024): the shipped specs read rows we wrote in the authors' schema from
GitHub's archive of THUDM/LongWriter at the pinned commit (put in the data home), send the request
as the whole user message, and score our answers as the authors' evaluation/ scripts scored them:
count_words and eval_length.py's score on every answer, eval_quality.py's judge prompt (the same
bytes), its tries and its parsing of scripted judge outputs, its totals
(tests/data/longwriter/cases.json says how those numbers were computed)."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import pytest

from lceval.engine import load_catalog, load_plugins
from lceval.interfaces import JudgeContext
from lceval.types import CONTEXT_SLOT, Generation, GenerationRequest, JudgeInput
from lceval_plugins.longwriter.metric import count_words, length_score
from tests.plugins.graphwalks.test_graphwalks import Answering
from tests.plugins.judges.test_llm_judges import ScriptedJudgeModel, plugins_with_models
from tests.plugins.documents.conftest import load_shipped
from tests.paths import TEST_DATA
from tests.conftest import spec_notes

PLUGINS = load_plugins()
CATALOG = load_catalog(PLUGINS)
COMMIT = "3fcfdff43deceb49f7936c6bf25ad88d61df0bfa"
CASES = json.loads((TEST_DATA / "longwriter" / "cases.json").read_text(encoding="utf-8"))
ITEMS = CASES["items"]


def archive(home: Path, files: dict[str, list[dict]]) -> Path:
    """GitHub's zip of the commit: every file under LongWriter-<commit>/."""
    home.mkdir(parents=True, exist_ok=True)
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as zf:
        for name, rows in files.items():
            zf.writestr(f"LongWriter-{COMMIT}/evaluation/{name}",
                        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    path = home / f"LongWriter-{COMMIT}.zip"
    path.write_bytes(data.getvalue())
    return home


ROWS = [{k: it[k] for k in ("prompt", "type", "length")} for it in ITEMS]


def load(name: str, home: Path):
    return load_shipped(CATALOG, PLUGINS, name, home)


def test_three_specs_a_suite_and_a_family():
    assert CATALOG.suites["longwriter_all"] == ["longwriter", "longwriter_ruler"]
    assert CATALOG.family("longwriter").citation == "Bai et al., 2024"
    for name in ("longwriter", "longwriter_en", "longwriter_ruler"):
        spec = CATALOG.spec(name)
        assert spec.data["generation"]["max_new_tokens"] == 32768 and spec.data["generation"]["temperature"] == 0.5
        assert spec.data["context"]["policy"] == "error" and "THUDM/LongWriter" in spec_notes(spec)


@pytest.mark.parametrize("name, file", [("longwriter", "longbench_write.jsonl"), ("longwriter_en", "longbench_write_en.jsonl"),
                                        ("longwriter_ruler", "longwrite_ruler.jsonl")])
def test_the_request_is_the_whole_user_message_with_its_range_and_language(name, file, tmp_path):
    home = archive(tmp_path / "home", {file: ROWS})
    spec, convs = load(name, home)
    assert len(convs) == len(ROWS)
    for conv, row in zip(convs, ROWS):
        (turn,) = conv.turns
        assert conv.preamble == [] and turn.user.replace(CONTEXT_SLOT, conv.context) == row["prompt"]
        assert turn.question == row["prompt"] and turn.reference == str(row["length"])
    ranges = [c.turns[0].metadata["length_range"] for c in convs]
    assert ranges == ["0-500", "0-500", "500-2k", "2k-4k", "500-2k"]  # 100, 300, 1000, 2000, 500: half open
    assert [c.turns[0].metadata["language"] for c in convs] == ["en", "zh", "en", "en", "en"]


@pytest.mark.parametrize("item", ITEMS, ids=[it["prompt"][:4] for it in ITEMS])
def test_the_length_score_is_the_authors(item):
    judge = PLUGINS.judges["longwriter_length"](JudgeContext(options={}))
    raw = item["response"]
    (j,) = judge.judge([JudgeInput(item_id="q", question=item["prompt"], response=raw.strip(), reference="",
                                   metadata={"length": item["length"]}, raw_response=raw if raw != raw.strip() else None)])
    assert j.details["output_words"] == item["authors"]["response_length"]
    assert j.score == pytest.approx(item["authors"]["length_score"], abs=1e-12)


def test_count_words_and_an_answer_without_words():
    assert count_words("café naïve approach 2024 年 hello-world don't Привет") == 6  # the authors' regexes
    assert length_score(1000, 0) == 0.0 and length_score(1000, 4000) == 0.0 and length_score(1000, 333) == 0.0
    assert length_score(1000, 1500) == pytest.approx(83.33333333333334)


class Writer(Answering):
    """Answers each request with the answer the case wrote for it (the rest like the scripted model)."""

    def generate(self, requests):
        self.calls.extend(requests)
        return [Generation(request_id=r.request_id, text=next(a for k, a in self.answers.items()
                                                              if k in r.messages[-1].content),
                           prompt_tokens=10, prefilled_tokens=10, completion_tokens=5) for r in requests]


def judge_script(request: GenerationRequest) -> str:
    prompt = request.messages[-1].content
    item = next(it for it in ITEMS if f"<User Request>\n\n{it['prompt'][:4]}" in prompt)
    outputs = item["judge_outputs"]
    return outputs[min(request.hints["attempt"], len(outputs) - 1)]


def test_a_run_gives_the_authors_scores_tries_and_totals(tmp_path):
    from lceval.engine import RunConfig
    from lceval.results import write_run
    from tests.conftest import execute_config

    home = archive(tmp_path / "home", {"longbench_write.jsonl": ROWS})
    writer = Writer({it["prompt"]: it["response"] for it in ITEMS}, window=40000)
    judge_model = ScriptedJudgeModel(judge_script)
    plugins = plugins_with_models(writer, judge_model)
    cfg = RunConfig(tasks="longwriter", models=["scripted:x"], judge_model="judge:x", progress=False)
    state = execute_config(cfg, plugins, home)
    _, results = write_run(state, plugins, tmp_path / "runs")
    # the judge sent the authors' prompt bytes, as often as the authors' loop asked
    for it in ITEMS:
        sent = [r.messages for r in judge_model.calls if f"<User Request>\n\n{it['prompt'][:4]}" in r.messages[-1].content]
        assert len(sent) == it["authors"]["judge_calls"], it["prompt"]
        assert len(sent[0]) == 1 and sent[0][0].role == "user"
        assert hashlib.sha256(sent[0][0].content.encode()).hexdigest() == it["authors"]["prompt_sha256"]
    params = judge_model.calls[0].params
    assert (params.temperature, params.max_new_tokens) == (0.5, 1024)
    (task,) = state.tasks
    samples = {s.judgments[0].item_id: s for s in task.samples}
    assert len(samples) == len(ITEMS)
    block = results["tasks"]["longwriter"]
    totals = CASES["authors_totals"]
    assert block["accounting"]["judge_parse_failures"] == sum(1 for it in ITEMS if it["authors"]["scores"] is None)
    assert block["metrics"]["length_score"]["value"] == pytest.approx(totals["length_score"], abs=1e-9)
    assert block["metrics"]["quality_score"]["value"] == pytest.approx(totals["total"], abs=1e-9)
    for dim in ("Relevance", "Accuracy", "Coherence", "Clarity", "Breadth and Depth", "Reading Experience"):
        assert block["metrics"][dim.lower().replace(" ", "_")]["value"] == pytest.approx(totals[dim], abs=1e-9)
    judged = [it for it in ITEMS if it["authors"]["scores"] is not None]
    overall = sum((it["authors"]["length_score"] + sum((float(v) - 1) * 25 for k, v in it["authors"]["scores"].items()
                                                       if k != "Analysis") / 6) / 2 for it in judged) / len(judged)
    assert block["metrics"]["score"]["value"] == pytest.approx(overall, abs=1e-9)
    assert list(block["metrics"]["length_score"]["breakdowns"]["length_range"]) == ["0-500", "500-2k", "2k-4k"]


def test_the_quality_judge_needs_a_judge_model(tmp_path, monkeypatch, capsys):
    from lceval.cli import main
    from tests.conftest import serve_scripted

    serve_scripted(monkeypatch)
    home = archive(tmp_path / "home", {"longbench_write.jsonl": ROWS})
    monkeypatch.setenv("LCEVAL_DATA", str(home))
    assert main(["run", "--tasks", "longwriter", "--model", "scripted:x", "--output", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert "--judge-model" in err and "longwriter" in err, err


def test_a_length_field_the_items_lack_names_the_option():
    from lceval.errors import UserError

    judge = PLUGINS.judges["longwriter_length"](JudgeContext(options={"length_field": "words"}))
    with pytest.raises(UserError) as err:
        judge.judge([JudgeInput(item_id="test/0", question="Write.", response="Done.", reference="100",
                                metadata={"length": 100})])
    assert err.value.field == "judge.options.length_field" and "test/0" in str(err.value) and "None" in str(err.value)
