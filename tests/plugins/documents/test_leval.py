"""L-Eval (An et al., 2024): the shipped specs read rows we wrote in the authors' schema (one
document, parallel `instructions` and `outputs`) from their Hub dataset's files (put where
huggingface_hub caches the pinned commit), ask exactly what OpenLMLab/LEval's
Baselines/turbo16k-test.py sends (system prompt, user message), and the judges give the
authors' scores: auto_eval.py's extraction and em.py's match on answers we wrote
(tests/data/leval/metric_cases.json), llm_eval.py's pairwise prompt and win rate."""

from __future__ import annotations

import json

import pytest

from lceval.engine import load_catalog, load_plugins
from lceval.interfaces import JudgeContext, ModelBackend
from lceval.types import CONTEXT_SLOT, Generation, GenerationRequest, JudgeInput
from tests.paths import TEST_DATA

from .conftest import load_shipped, put_in_hub_cache, write_spec
from tests.conftest import spec_notes

PLUGINS = load_plugins()
CATALOG = load_catalog(PLUGINS)
REPO, COMMIT = "L4NLP/LEval", "43b9dbf06c239360b183c76cb5d90ebe4f5e3070"
#: OpenLMLab/LEval (commit cd34b05) Baselines/LEval_config.py `get_sys_prompt`, verbatim
SYS = {
    "gsm": "Given several question answer pairs, you need to follow a similar format to answer the last question. "
           "Make sure the response is end with The answer is _ . ",
    "topic": "Below is a record of our previous conversation on many different topics. You are the ASSISTANT, and I "
             "am the USER. At the beginning of each topic, the USER will say 'I would like to discuss the topic of "
             "<TOPIC>'. Memorize each <TOPIC>. At the end of the record, I will ask you to retrieve the "
             "first/second/third topic names. Now the record start. ",
    "coursera": "Now you are given a very long document. Please follow the instruction based on this document. For "
                "multi-choice questions, there could be a sinlge correct option or multiple correct options. Please "
                "only provide the letter corresponding to the answer (like A or AB) when answering. ",
    "codeU": "Now you are given a code base consisting of a large amount of functions and the corresponding "
             "comments. In the end, I will call some functions defined in the code base. Please carefully read these "
             "codes and comments and answer the question.",
    "sci_fi": "Now you are given a scientific fiction. I will ask you some questions and the answer should be "
              "\"True\" or \"False\". Notice that you should answer the question based on the evidence in the "
              "document instead of your background knowledge.",
    "exam": "Now you are given a very long document. Please follow the instruction based on this document. For "
            "multi-choice questions, there is only a sinlge correct option. Please only provide the letter "
            "corresponding to the answer (like A or B) when answering. For other questions, please directly give the "
            "concise and accurate answer. ",
    "open": "Now you are given a very long document. Please follow the instruction after this document. These "
            "instructions may include summarizing a document, answering questions based on the document, or writing "
            "a required paragraph. ",
}
CLOSED = {"tpo": "exam", "quality": "exam", "coursera": "coursera", "topic_retrieval_longchat": "topic",
          "sci_fi": "sci_fi", "gsm100": "gsm", "codeU": "codeU"}
OPEN_F1 = ["financial_qa", "legal_contract_qa", "multidoc_qa", "narrative_qa", "natural_question", "scientific_qa"]
OPEN_ROUGE = ["gov_report_summ", "meeting_summ", "news_summ", "paper_assistant", "patent_summ", "review_summ",
              "tv_show_summ"]


def authors_user(file_name: str, document: str, inst: str, out: str) -> str:
    """turbo16k-test.py's user message (args.metric exam_eval for the closed-ended files)."""
    if "gsm" in file_name or "codeU" in file_name:
        return document + "\n\n" + inst
    if file_name in CLOSED:
        context = ("Document is as follows. {} Question: {} \nPlease directly give answer without any additional "
                   "output or explanation\n Answer: ")
        return context.format(document, inst)
    context = ("Document is as follows. {} Instruction: {} "
               + f"The suggested output length is around {len(out.split())} words. Output: ")
    return context.format(document, inst)


def rows(task: str) -> list[dict]:
    """Two documents of <task>.jsonl in the authors' schema, the first with three questions."""
    out = []
    for d in range(2):
        if task == "sci_fi":
            insts = [f"{i + 1}.\tthe ship can fly faster than light {d}{i}, True or False? Answer this question based "
                     "on the world described in the document." for i in range(3)]
            outs = ["True [fact: False]", "False [fact: False]", "True [fact: True]"]
        elif task in ("tpo", "quality", "coursera"):
            insts = [f"Why did Frantzen go to the sales barn {d}{i}?\nA. to study\nB. to paint\nC. to sell\nD. to meet"
                     for i in range(3)]
            outs = ["A", "(C) to sell", "AB"]
        elif task == "topic_retrieval_longchat":
            insts = [f"What is the {n} topic we discussed? Only give me the topic name. Do not summarize yourself."
                     for n in ("first", "second", "third")]
            outs = ["The role of art in society", "Climate change", "Space travel"]
        else:
            insts = [f"Question {d}{i}: what does the report say about the {{mill}}?" for i in range(3)]
            outs = [f"It says the mill stands by the bridge, {i} times." for i in range(3)]
        if task == "gsm100":  # one question per row, every row over the same 16-shot context
            insts, outs = insts[:1], ["18"]
        row = {"input": ("Question: 1+1?\nThe answer is 2\n\n" if task == "gsm100" else
                         f"USER: I would like to discuss the topic of art ({d}) {{braces}}.\n ASSISTANT: Sure."),
               "instructions": insts, "outputs": outs, "evaluation": "exam" if task in CLOSED else
               "f1" if task in OPEN_F1 else "rouge"}
        if task != "gsm100":
            row["source"] = f"{task}_src"
        out.append(row)
    if task not in CLOSED:  # a question of the judge's subset, which the n-gram spec leaves out
        out.append({"input": "A judged document.", "instructions": ["Summarize it."], "outputs": ["A short text."],
                    "source": f"{task}_src", "evaluation": "LLM"})
    return out


def file_of(task: str) -> str:
    return f"LEval/{'Exam' if task in CLOSED else 'Generation'}/{task}.jsonl"


@pytest.fixture
def hub(_isolated_hf):
    put_in_hub_cache(_isolated_hf / "hub", REPO, COMMIT, {
        file_of(t): "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows(t)).encode()
        for t in [*CLOSED, *OPEN_F1, *OPEN_ROUGE]})
    return _isolated_hf


def load(name: str, tmp_path):
    return load_shipped(CATALOG, PLUGINS, name, tmp_path)


def test_the_closed_and_open_tasks_with_their_suites_and_family():
    names = sorted(n for n in CATALOG.specs if n.startswith("leval_"))
    assert names == sorted([f"leval_{t.lower()}" for t in [*CLOSED, *OPEN_F1, *OPEN_ROUGE]] + ["leval_llm_judge"])
    assert sorted(CATALOG.suites["leval_closed"]) == sorted(f"leval_{t.lower()}" for t in CLOSED)
    assert sorted(CATALOG.suites["leval_open"]) == sorted(f"leval_{t}" for t in OPEN_F1 + OPEN_ROUGE)
    for name in names:
        spec = CATALOG.spec(name)
        assert spec.data["family"] == "leval" and "OpenLMLab/LEval" in spec_notes(spec)
        assert spec.data["generation"]["max_new_tokens"] == 512
    assert CATALOG.spec("leval_codeu").data["context"]["policy"] == "truncate-left"  # the authors keep its end


@pytest.mark.parametrize("task", [*CLOSED, *OPEN_F1, *OPEN_ROUGE])
def test_each_task_asks_what_the_authors_send(task, hub, tmp_path):
    spec, convs = load(f"leval_{task.lower()}", tmp_path)
    expected = [(r, inst, out) for r in rows(task) if r["evaluation"] != "LLM"
                for inst, out in zip(r["instructions"], r["outputs"])]
    assert len(convs) == len(expected)
    system = SYS[CLOSED.get(task, "open")]
    for conv, (row, inst, out) in zip(convs, expected):
        assert [m.role for m in conv.preamble] == ["system"] and conv.preamble[0].content == system
        turn = conv.turns[0]
        assert turn.user.replace(CONTEXT_SLOT, conv.context) == authors_user(task, row["input"], inst, out)
        assert turn.reference == out and turn.question == inst
    if task == "gsm100":  # the 16-shot context is one document, its questions numbered on
        assert len({c.context_id for c in convs}) == 1
        assert [c.turns[0].metadata["question_id"] for c in convs] == ["0", "1"]
    else:  # three questions over the first document share its context
        assert len({c.context_id for c in convs[:3]}) == 1 and convs[3].context_id != convs[0].context_id
    if task == "sci_fi":  # the real-world question follows the answer, with the authors' replacement
        fact = convs[0].turns[1]
        inst = rows(task)[0]["instructions"][0]
        assert fact.metadata["step"] == "fact" and fact.user == inst.replace(
            "based on the world described in the document.",
            "based on the real-world knowledge and facts up until your last training") + \
            "\nPlease directly give answer without any additional output or explanation \nAnswer:"


CASES = json.loads((TEST_DATA / "leval" / "metric_cases.json").read_text(encoding="utf-8"))["cases"]


def judge_of(task: str):
    if task == "f1":
        spec = CATALOG.spec("leval_financial_qa")
    else:
        spec = CATALOG.spec(f"leval_{task.lower()}")
    return PLUGINS.judges[spec.judge.name](JudgeContext(options=spec.judge.options))


def score(judge, prediction: str, reference: str, **metadata) -> float:
    (j,) = judge.judge([JudgeInput(item_id="q", question="?", response=prediction.strip(), reference=reference,
                                   metadata={"references": [reference], **metadata},
                                   raw_response=prediction if prediction != prediction.strip() else None)])
    return j.score


@pytest.mark.parametrize("case", CASES, ids=[f"{c['task']}-{i}" for i, c in enumerate(CASES)])
def test_the_judges_give_the_authors_scores(case):
    judge = judge_of(case["task"])
    if case["task"] == "sci_fi":  # the two steps of one question: the loyalty answer, then the fact
        got = [score(judge, case["prediction"], case["reference"], step="answer"),
               score(judge, case["fact_prediction"], case["reference"], step="fact")]
        assert got == pytest.approx(case["authors_score"]), case
    else:
        assert score(judge, case["prediction"], case["reference"]) == pytest.approx(case["authors_score"]), case


def test_rouge_one_two_and_l_as_rouge_py_computes_them():
    from rouge_score import rouge_scorer

    spec = CATALOG.spec("leval_gov_report_summ")
    assert [m["label"] for m in spec.data["metrics"]] == ["rouge1", "rouge2", "rougeL"]
    pred, ref = "The report finds the program over budget.\nIt asks for audits.", "The program is over its budget."
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=False)
    expected = scorer.score(ref, pred)
    for metric in spec.data["metrics"]:
        judge = PLUGINS.judges["leval_rouge"](JudgeContext(options=metric["options"]))
        assert score(judge, pred, ref) == pytest.approx(100 * expected[metric["label"]].fmeasure)


class Verdicts(ModelBackend):
    """A judge model that prefers the answer holding "right" and says nothing usable on "???"."""

    def __init__(self) -> None:
        self.calls: list[GenerationRequest] = []

    def identity(self) -> dict:
        return {"scheme": "verdicts"}

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        self.calls.extend(requests)
        out = []
        for r in requests:
            text = r.messages[-1].content
            a = text.split("[The Start of Assistant A's Answer]\n")[1].split("\n[The End")[0]
            b = text.split("[The Start of Assistant B's Answer]\n")[1].split("\n[The End")[0]
            verdict = ("no verdict" if "???" in a + b else "[[A]]" if "right" in a and "right" not in b else
                       "[[B]]" if "right" in b and "right" not in a else "Both fine. [[C]]")
            out.append(Generation(request_id=r.request_id, text=verdict, completion_tokens=3))
        return out


def test_the_pairwise_judge_asks_llm_eval_py_prompt_both_ways(tmp_path):
    baseline = tmp_path / "turbo-16k-0613.pred.jsonl"
    baseline.write_text("".join(json.dumps(r) + "\n" for r in [
        {"query": "Summarize it.", "gt": "A mill.", "turbo-16k-0613_pred": "wrong answer", "evaluation": "LLM"},
        {"query": "Who?", "gt": "Ana.", "turbo-16k-0613_pred": "right answer too", "evaluation": "LLM"},
        {"query": "Where?", "gt": "North.", "turbo-16k-0613_pred": "???", "evaluation": "LLM"}]))
    model = Verdicts()
    judge = PLUGINS.judges["leval_llm"](JudgeContext(options={"baseline": str(baseline)}, model=model, seed=1))
    items = [JudgeInput(item_id="a", question="Summarize it.", response="the right answer", reference="A mill."),
             JudgeInput(item_id="b", question="Who?", response="right", reference="Ana."),
             JudgeInput(item_id="c", question="Where?", response="north", reference="North."),
             JudgeInput(item_id="d", question="Unseen?", response="x", reference="y")]
    a, b, c, d = judge.judge(items)
    assert (a.score, b.score) == (100.0, 50.0)  # won both orders; two ties
    assert c.score is None and c.parse_status == "parse_failure"
    assert d.score is None and d.parse_status == "missing"
    first = model.calls[0].messages
    assert [m.role for m in first] == ["system", "user"] and first[0].content.startswith(
        "Please act as an impartial judge and evaluate the quality of the responses provided by two AI assistants "
        "to the user question about the content of a long document.  You will be given")
    assert first[1].content == ("[User Question]\nSummarize it.\n\n[The Start of Reference Answer]\nA mill.\n[The End "
                                "of Reference Answer]\n\n[The Start of Assistant A's Answer]\nthe right answer\n[The "
                                "End of Assistant A's Answer]\n\n[The Start of Assistant B's Answer]\nwrong answer\n"
                                "[The End of Assistant B's Answer]")
    assert "Assistant A's Answer]\nwrong answer" in model.calls[1].messages[1].content  # swapped


def test_bad_judge_options_exit_2_naming_spec_field_and_value(tmp_path, capsys):
    from lceval.cli import main

    (tmp_path / "rows.jsonl").write_text(json.dumps(rows("tpo")[0]) + "\n")
    spec = write_spec(tmp_path, {"source": {"data_files": "rows.jsonl"},
                                 "fields": {"context": "input", "questions": ["instructions", "outputs"],
                                            "question": "instructions", "answer": "outputs"}},
                      name="leval_typo", judge={"name": "leval_exam", "options": {"task": "toefl"}})
    assert main(["validate", str(spec)]) == 2
    out = capsys.readouterr().out
    assert str(spec) in out and "judge.options.task" in out and "toefl" in out, out
    with pytest.raises(Exception) as err:
        PLUGINS.judges["leval_llm"](JudgeContext(options={}, model=Verdicts()))
    assert "judge.options.baseline" in str(getattr(err.value, "field", "")) + str(err.value)


def test_the_judge_subset_is_the_rows_tagged_llm_of_every_open_task(hub, tmp_path):
    spec, convs = load("leval_llm_judge", tmp_path)
    assert len(convs) == len(OPEN_F1) + len(OPEN_ROUGE)  # one LLM row of each file in the fixture
    assert {c.turns[0].metadata["source"] for c in convs} == {f"{t}_src" for t in OPEN_F1 + OPEN_ROUGE}
    conv = convs[0]
    assert conv.preamble[0].content == SYS["open"]
    assert conv.turns[0].user.replace(CONTEXT_SLOT, conv.context) == authors_user(
        "financial_qa", "A judged document.", "Summarize it.", "A short text.")
    assert spec.judge.name == "leval_llm"
