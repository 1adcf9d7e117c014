"""LooGLE (Li et al., 2024): the four shipped specs read rows we wrote in the authors' 2023 schema
(one document per line, its questions as text of a Python literal in `qa_pairs`) from their Hub
dataset's files (put where huggingface_hub caches the pinned commit), ask the authors' prompt
byte for byte (bigai-nlco/LooGLE config/task2prompt.json, filled as Prediction/*.py fill it:
`prompt_format.format(**{'Q': j['Q'], 'input': raw_inputs})`), and the judges give the authors'
scores on answers we wrote (tests/data/loogle/metric_cases.json) and ask their GPT-4 prompts."""

from __future__ import annotations

import json

import pytest

from lceval.engine import load_catalog, load_plugins
from lceval.interfaces import JudgeContext, ModelBackend
from lceval.types import CONTEXT_SLOT, Generation, GenerationRequest, JudgeInput
from tests.cli import call
from tests.paths import TEST_DATA

from .conftest import load_shipped, put_in_hub_cache, write_jsonl, write_spec
from tests.conftest import spec_notes

PLUGINS = load_plugins()
CATALOG = load_catalog(PLUGINS)
REPO, COMMIT = "bigai-nlco/LooGLE", "564958bcc67c2950258b7efa1f0e36b8474c28d1"
#: bigai-nlco/LooGLE (commit 6734382) config/task2prompt.json and config/task2maxlen.json
PROMPTS = {
    "shortdep_qa": "Please answer the question based on the long texts below. \n{input}\nQuestion: {Q}\nAnswer: ",
    "longdep_qa": "Please answer the question based on the long texts below. \n{input}\nQuestion: {Q}\nAnswer: ",
    "longdep_summarization": "Please generate a summary of the below paper. \n{input}\n Summarization: ",
    "shortdep_cloze": "Please fill in the clozes based on the given long texts below. Each of the placeholder "
                      "'<mask-n>' in the question could be an entity of Person, Location or Organiocation. The same "
                      "masks represent the same entity. Output a json format answer, for example: {{'<mask-0>': "
                      "'Bob', '<mask-1>': 'Gorrosion Magazine','<mask-2>': 'Bethel Horizon'}}\n{input}\n Question: "
                      "{Q} What are the masked entities? \nAnswer:",
}
MAXLEN = {"shortdep_qa": 300, "longdep_qa": 500, "longdep_summarization": 500, "shortdep_cloze": 50}


def rows(task: str) -> list[dict]:
    """Two documents of data/<task>.json in the 2023 schema (LooGLE-testdata's layout)."""
    out = []
    for d in range(2):
        text = f" Early life {{{d}}}. Picardo was born in Jerez de la Frontera in 1919. He moved to Madrid."
        if task == "longdep_summarization":
            out.append({"input": text, "title": f"2201.0044{d}", "qa_pairs": "none", "output": f"We study Picardo {d}.",
                        "question": "none"})
            continue
        if task == "shortdep_cloze":
            qa = [{"Q": f"<mask-0> was born in <mask-1> ({d}{i}).", "S": "evidence",
                   "A": {"<mask-0>": "Picardo", "<mask-1>": "Jerez de la Frontera"}} for i in range(2)]
        elif task == "longdep_qa":
            qa = [{"Q": f"How many people were in Picardo's family ({d})?\n1. seven\n2. six", "A": "2",
                   "type": "comprehension_and_reasoning", "S": ["His father ...", "He moved ..."]},
                  {"Q": "Please order these projects by open day:\n1.Parador de Arcos\n2.Parador de Guadalupe",
                   "A": "2,1", "type": "timeline_reorder", "S": ["..."]}]
        else:
            qa = [{"S": "Picardo was born in Jerez", "Q": f"Where was Picardo born ({d}{i})?",
                   "A": "In Jerez de la Frontera."} for i in range(2)]
        out.append({"input": text, "title": f"José Luis Picardo {d}", "qa_pairs": repr(qa), "output": "None"})
    return out


@pytest.fixture
def hub(_isolated_hf):
    put_in_hub_cache(_isolated_hf / "hub", REPO, COMMIT, {
        f"data/{t}.json": "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows(t)).encode() for t in PROMPTS})
    return _isolated_hf


def load(name: str, tmp_path):
    return load_shipped(CATALOG, PLUGINS, name, tmp_path)


def test_four_tasks_a_suite_and_a_family():
    assert sorted(n for n in CATALOG.specs if n.startswith("loogle_")) == sorted(f"loogle_{t}" for t in PROMPTS)
    assert sorted(CATALOG.suites["loogle"]) == sorted(f"loogle_{t}" for t in PROMPTS)
    for task in PROMPTS:
        spec = CATALOG.spec(f"loogle_{task}")
        assert spec.data["family"] == "loogle" and "bigai-nlco/LooGLE" in spec_notes(spec)
        assert spec.data["generation"]["max_new_tokens"] == MAXLEN[task]
        assert spec.data["context"] == {"policy": "truncate-middle", "cut": "prompt", "marker": ""}


@pytest.mark.parametrize("task", sorted(PROMPTS))
def test_each_task_asks_the_authors_prompt(task, hub, tmp_path):
    spec, convs = load(f"loogle_{task}", tmp_path)
    expected = []
    for row in rows(task):
        if task == "longdep_summarization":
            expected.append((row, None, row["output"]))
        else:
            import ast

            expected += [(row, j["Q"], j["A"]) for j in ast.literal_eval(row["qa_pairs"])]
    assert len(convs) == len(expected)
    for conv, (row, question, answer) in zip(convs, expected):
        prompt = PROMPTS[task].format(**{"Q": question, "input": row["input"]})
        assert conv.preamble == [] and conv.turns[0].user.replace(CONTEXT_SLOT, conv.context) == prompt
        reference = json.dumps(answer, ensure_ascii=False) if isinstance(answer, dict) else answer
        assert conv.turns[0].reference == reference
    if task != "longdep_summarization":  # a document's questions share it
        assert convs[0].context_id == convs[1].context_id != convs[2].context_id
    if task == "longdep_qa":
        assert [c.turns[0].metadata["type"] for c in convs[:2]] == ["comprehension_and_reasoning", "timeline_reorder"]


CASES = json.loads((TEST_DATA / "loogle" / "metric_cases.json").read_text(encoding="utf-8"))


def score(judge, prediction: str, reference: str) -> float:
    (j,) = judge.judge([JudgeInput(item_id="q", question="?", response=prediction.strip(), reference=reference,
                                   metadata={"references": [reference]},
                                   raw_response=prediction if prediction != prediction.strip() else None)])
    return j.score


@pytest.mark.parametrize("case", CASES["sim"], ids=[str(i) for i in range(len(CASES["sim"]))])
def test_bleu_and_rouge_are_the_authors(case):
    spec = CATALOG.spec("loogle_shortdep_qa")
    assert [m["label"] for m in spec.data["metrics"]] == ["bleu1", "bleu4", "rouge1", "rouge2", "rougeL"]
    for metric in spec.data["metrics"]:
        judge = PLUGINS.judges["loogle"](JudgeContext(options=metric["options"]))
        got = score(judge, case["prediction"], case["reference"])
        want = 100 * case["authors"][metric["label"]]
        assert got == pytest.approx(want, rel=1e-9, abs=1e-300), (metric["label"], case)


@pytest.mark.parametrize("case", CASES["cloze"], ids=[str(i) for i in range(len(CASES["cloze"]))])
def test_the_cloze_matches_are_the_authors(case):
    reference = json.dumps(case["reference"], ensure_ascii=False)  # what the documents type makes of the dict
    for mode, key in (("exact", "exact"), ("partial", "partial")):
        judge = PLUGINS.judges["loogle_cloze"](JudgeContext(options={"mode": mode}))
        prediction = case["prediction"]
        (j,) = judge.judge([JudgeInput(item_id="q", question="?", response=prediction.strip(), reference=reference,
                                       metadata={"references": [reference]},
                                       raw_response=prediction if prediction != prediction.strip() else None)])
        # get_partial_match stops on a mask value that is no text; lceval scores that mask 0
        matched, masks = case["authors"][key] or case["lceval_where_authors_raise"][key]
        assert (j.details["matched"], j.details["masks"]) == (matched, masks)
        assert j.score == pytest.approx(100 * matched / masks)


class Replies(ModelBackend):
    def __init__(self, replies: list[str]) -> None:
        self.replies, self.calls = list(replies), []

    def identity(self) -> dict:
        return {"scheme": "replies"}

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        self.calls.extend(requests)
        return [Generation(request_id=r.request_id, text=self.replies.pop(0), completion_tokens=1) for r in requests]


def test_the_gpt4_judge_asks_llm_score_py_prompts():
    model = Replies(["True", "False", "True."])
    judge = PLUGINS.judges["loogle_gpt4"](JudgeContext(options={"task": "qa"}, model=model, seed=3))
    items = [JudgeInput(item_id=str(i), question="Where was he born?", response=r, reference="In Jerez.")
             for i, r in enumerate(["Jerez", "Madrid", "Jerez de la Frontera"])]
    a, b, c = judge.judge(items)
    assert (a.score, b.score, c.score, c.parse_status) == (100.0, 0.0, None, "parse_failure")
    first = model.calls[0]
    assert [(m.role, m.content) for m in first.messages] == [
        ("system", "Given one question, there is a groundtruth and a predict_answer. Please decide whether they are "
                   "the same or not in semantic. Please only output 'True' or 'False' ."),
        ("user", "Question: Where was he born?\ngroudtruth = In Jerez.\npredict_answer = Jerez")]
    assert first.params.temperature == 0.0 and first.params.top_p == 1.0 and first.params.max_new_tokens == 10
    model = Replies([" 85\n", "Score: 70"])
    judge = PLUGINS.judges["loogle_gpt4"](JudgeContext(options={"task": "summarization"}, model=model, seed=3))
    s1, s2 = judge.judge([JudgeInput(item_id="s", question="", response="Our {summary}.", reference="The {abstract}."),
                          JudgeInput(item_id="t", question="", response="x", reference="y")])
    assert (s1.score, s2.score, s2.parse_status) == (85.0, None, "parse_failure")
    assert [(m.role, m.content) for m in model.calls[0].messages] == [("system", (
        "There is a groundtruth summary of a arxiv paper and a auto-generated summary .Please Compare generated "
        "summary with the goundtruth and evaluate the generated summary from the perspectives of information "
        "completeness, consistency, fluency, and grammar by giving a score within the range of 0 to 100. "
        "\nGroundtruth = {} \nGenerated = {} \nScore = ").format("The {abstract}.", "Our {summary}."))]


def test_a_bad_metric_exits_2_naming_spec_field_and_value(tmp_path, capsys):
    from lceval.cli import main

    write_jsonl(tmp_path / "rows.jsonl", rows("shortdep_qa"))
    spec = write_spec(tmp_path, {"source": {"data_files": "rows.jsonl"},
                                 "fields": {"context": "input", "questions": "qa_pairs", "question": "Q",
                                            "answer": "A"}},
                      name="loogle_typo", metrics=[{"name": "loogle", "options": {"metric": "rouge4"}}])
    assert main(["validate", str(spec)]) == 2
    out = capsys.readouterr().out
    assert str(spec) in out and "metric" in out and "rouge4" in out, out


@pytest.mark.parametrize("case", CASES["cloze_eval_only"], ids=[str(i) for i in range(len(CASES["cloze_eval_only"]))])
def test_an_answer_only_pythons_eval_reads_is_no_dict_here(case):
    """lceval never runs a model's answer: code that builds a dict (dict(...), 'a' + 'b') is
    no Python literal, so 0 masks, where the authors' eval counts it (the fixture's scores)."""
    reference = json.dumps(case["reference"], ensure_ascii=False)
    for mode in ("exact", "partial"):
        judge = PLUGINS.judges["loogle_cloze"](JudgeContext(options={"mode": mode}))
        (j,) = judge.judge([JudgeInput(item_id="q", question="?", response=case["prediction"], reference=reference,
                                       metadata={"references": [reference]})])
        assert j.details == {"matched": 0, "masks": len(case["reference"]), "parsed": False} and j.score == 0.0


def test_the_eval_departure_is_declared_with_the_effect_its_cases_measure():
    cases = CASES["cloze_eval_only"]
    masks = sum(c["authors"]["exact"][1] for c in cases)
    exact = 100 * sum(c["authors"]["exact"][0] for c in cases) / masks
    partial = 100 * sum(c["authors"]["partial"][0] for c in cases) / masks
    why = CATALOG.spec("loogle_shortdep_cloze").report.differs_from_paper
    assert "eval" in why and f"exact match {exact:.1f} and partial match {partial:.1f}" in why
    assert f"on {len(cases)} crafted answers" in why
    code, out, _ = call("tasks", "show", "loogle_shortdep_cloze")
    assert code == 0 and "literal_eval" in out
