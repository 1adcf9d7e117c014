"""Every shipped LongBench, LongBench v2 and InfiniteBench spec loads rows in its dataset's
real schema from the authors' files (put where huggingface_hub caches the pinned commit),
renders the authors' prompt, and its judge scores an answer. Expected prompts are the
authors' templates (LongBench config/dataset2prompt.json, InfiniteBench src/prompt.py)
filled as their scripts fill them (`str.format` of the row; InfiniteBench's create_prompt)."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from lceval.engine import check_spec, load_catalog, load_plugins
from lceval.interfaces import JudgeContext, TaskContext
from lceval.types import CONTEXT_SLOT, JudgeInput

from .conftest import put_in_hub_cache
from tests.conftest import spec_notes

PLUGINS = load_plugins()
CATALOG = load_catalog(PLUGINS)
LONGBENCH = sorted(CATALOG.suites["longbench_en"])  # the Chinese tasks and LongBench-E: test_longbench_zh_e.py
INFINITEBENCH = sorted(n for n in CATALOG.specs if n.startswith("infinitebench_") and not n.endswith("_open"))
INFINITEBENCH_OPEN = sorted(n for n in CATALOG.specs if n.startswith("infinitebench_") and n.endswith("_open"))
LB_REPO, LB_COMMIT = "THUDM/LongBench", "5e628be450b7e67fb7ae6e201bd6d8f7056f7672"
IB_REPO, IB_COMMIT = "xinrongzhang2022/InfiniteBench", "90f0394333616266d9fe85824ceaf505093cbaa5"
CONTEXT = "Paragraph 1: The river runs north.\n\nParagraph 2: The mill stands by the bridge.\n"


def lb_row(dataset: str, i: int) -> dict:
    """A row of THUDM/LongBench data/<dataset>.jsonl."""
    answers = {"trec": ["Location"], "passage_retrieval_en": ["Paragraph 2"], "passage_count": ["2"],
               "lcc": ["    return x"], "repobench-p": ["    return y"]}.get(dataset, [f"answer {i}"])
    return {"input": "" if dataset in ("gov_report", "multi_news", "lcc") else f"Where is the mill {i}?",
            "context": CONTEXT + f"({dataset} {i})", "answers": answers, "length": 20, "dataset": dataset,
            "language": "en", "all_classes": ["Location", "Person"] if dataset == "trec" else None,
            "_id": f"{dataset}-{i}"}


def ib_row(task: str, i: int) -> dict:
    """A row of xinrongzhang2022/InfiniteBench <task>.jsonl."""
    row = {"id": i, "context": CONTEXT + f"({task} {i})", "input": "What is the pass key?", "answer": ["71432"],
           "options": []}
    if task in ("longbook_choice_eng", "code_debug"):
        row.update(options=["alpha", "beta", "gamma", "delta"], answer=["beta"], input="Which one?")
    if task == "code_run":
        row.update(input="Compute func_12(-3).", answer=[42])
    if task == "math_find":
        row.update(input="The largest number of the list is: ", answer=[98])
    if task == "math_calc":
        row.update(answer=[[1, 4, 8]])
    return row


@pytest.fixture
def hub(_isolated_hf):
    data = io.BytesIO()
    datasets = [CATALOG.spec(n).data["options"]["source"]["data_files"].split("::")[0].removeprefix("zip://data/")
                .removesuffix(".jsonl") for n in LONGBENCH]
    with zipfile.ZipFile(data, "w") as zf:
        for ds in datasets:
            zf.writestr(f"data/{ds}.jsonl", "".join(json.dumps(lb_row(ds, i)) + "\n" for i in range(2)))
    put_in_hub_cache(_isolated_hf / "hub", LB_REPO, LB_COMMIT, {"data.zip": data.getvalue()})
    tasks = [n.removeprefix("infinitebench_") for n in INFINITEBENCH]
    put_in_hub_cache(_isolated_hf / "hub", IB_REPO, IB_COMMIT,
                     {f"{t}.jsonl": "".join(json.dumps(ib_row(t, i)) + "\n" for i in range(2)).encode() for t in tasks})
    return _isolated_hf


def load(name: str, tmp_path):
    spec = CATALOG.spec(name)
    task_type = PLUGINS.task_types[spec.type]
    check_spec(spec, PLUGINS)  # the type's option defaults filled, as a run fills them
    files, sources = [], []
    ctx = TaskContext(spec=spec.data, spec_path=spec.path, data_home=tmp_path, splits=spec.splits, limit=None,
                      record_file=files.append, record_source=sources.append)
    return spec, task_type.load(ctx), files, sources


def first_prompt(conv) -> str:
    return conv.turns[0].user.replace(CONTEXT_SLOT, conv.context)


def test_every_benchmark_is_listed_with_the_code_it_follows():
    assert len(LONGBENCH) == 16 and len(INFINITEBENCH) == 11
    assert INFINITEBENCH_OPEN == sorted(f"{n}_open" for n in INFINITEBENCH)  # the open-model route of each
    assert {"longbench_v2", "longbench_v2_cot"} <= set(CATALOG.specs)
    for name in LONGBENCH + INFINITEBENCH + INFINITEBENCH_OPEN + ["longbench_v2", "longbench_v2_cot"]:
        spec = CATALOG.spec(name)
        text = spec_notes(spec)
        assert spec.data["citation"] and ("THUDM/LongBench" in text or "OpenBMB/InfiniteBench" in text)
        assert spec.data["context"]["policy"] == "truncate-middle"
    assert CATALOG.suites["longbench_en"] == LONGBENCH or set(CATALOG.suites["longbench_en"]) == set(LONGBENCH)
    assert set(CATALOG.suites["infinitebench_en"]) == set(INFINITEBENCH)
    assert set(CATALOG.suites["infinitebench_en_open"]) == set(INFINITEBENCH_OPEN)


@pytest.mark.parametrize("name", LONGBENCH + INFINITEBENCH + INFINITEBENCH_OPEN)
def test_each_spec_loads_its_authors_files_and_its_judge_scores(name, hub, tmp_path):
    spec, convs, files, sources = load(name, tmp_path)
    assert len(convs) == 2 and all(c.context.startswith("Paragraph 1") for c in convs)
    assert all(first_prompt(c).count(c.context) == 1 for c in convs)
    (source,) = sources
    assert source["revision"] in (LB_COMMIT, IB_COMMIT) and len(files) == 1
    judge = PLUGINS.judges[spec.judge.name](JudgeContext(options=spec.judge.options))
    turn = convs[0].turns[0]
    # the reference itself scores (code_debug's scorer wants the letter: "B." is right, the bare name is not)
    right = "B." if name.startswith("infinitebench_code_debug") else turn.reference
    if spec.judge.options.get("drop_first_number"):  # GPT-4's math_calc answer echoes the first operand
        right = f"0, {right}"
    (j,) = judge.judge([JudgeInput(item_id=turn.item_id, question=turn.question, response=right,
                                   reference=turn.reference, metadata={**convs[0].metadata, **turn.metadata})])
    assert j.parse_status == "ok" and j.score is not None and j.score > 0, (name, j)


LB_PROMPTS = {  # THUDM/LongBench LongBench/config/dataset2prompt.json
    "narrativeqa": "You are given a story, which can be either a novel or a movie script, and a question. Answer the "
                   "question asconcisely as you can, using a single phrase if possible. Do not provide any explanation."
                   "\n\nStory: {context}\n\nNow, answer the question based on the story asconcisely as you can, using "
                   "a single phrase if possible. Do not provide any explanation.\n\nQuestion: {input}\n\nAnswer:",
    "trec": "Please determine the type of the question below. Here are some examples of questions.\n\n{context}\n{input}",
    "lcc": "Please complete the code given below. \n{context}Next line of code:\n",
    "passage_retrieval_en": "Here are 30 paragraphs from Wikipedia, along with an abstract. Please determine which "
                            "paragraph the abstract is from.\n\n{context}\n\nThe following is an abstract.\n\n{input}\n\n"
                            "Please enter the number of the paragraph that the abstract is from. The answer format must "
                            "be like \"Paragraph 1\", \"Paragraph 2\", etc.\n\nThe answer is: ",
}


@pytest.mark.parametrize("dataset", sorted(LB_PROMPTS))
def test_longbench_prompts_are_the_authors(dataset, hub, tmp_path):
    _, convs, _, _ = load(f"longbench_{dataset}", tmp_path)
    assert first_prompt(convs[0]) == LB_PROMPTS[dataset].format(**lb_row(dataset, 0))


IB_PROMPTS = {  # OpenBMB/InfiniteBench src/prompt.py gpt4_templates, filled as eval_utils.py create_prompt fills them
    "code_run": "Following is a set of Python functions. There is a function called named func_12.\n\n{context}\n\n"
                "Please give me the exact number of the return value of func_12(-3). Be concise. Your response must end "
                "with the final returned value.",
    "math_find": "What is the largest number in the following list?\n\n{context}\n\n{input}",
    "longbook_choice_eng": "Read the book and answer the question.\n\n{context}\n\nQuestion: Which one?\n\nOnly one of "
                           "the following options is correct, tell me the answer using one single letter (A, B, C, or "
                           "D). Don't say anything else.\nA. alpha\nB. beta\nC. gamma\nD. delta",
    "kv_retrieval": "Extract the value corresponding to the specified key in the JSON object below.\n\n{context}\n\n{input}",
}


@pytest.mark.parametrize("task", sorted(IB_PROMPTS))
def test_infinitebench_prompts_are_the_authors(task, hub, tmp_path):
    _, convs, _, _ = load(f"infinitebench_{task}", tmp_path)
    row = ib_row(task, 0)
    assert first_prompt(convs[0]) == IB_PROMPTS[task].format(context=row["context"], input=row["input"])
    assert convs[0].preamble[0].content == "You are a helpful assistant"


def test_longbench_v2_chain_of_thought_asks_reasoning_then_answer(_isolated_hf, tmp_path):
    from tests.paths import TEST_DATA

    put_in_hub_cache(_isolated_hf / "hub", "zai-org/LongBench-v2", "2b48e494f2c7a2f0af81aae178e05c7e1dde0fe9",
                     {"data.json": TEST_DATA / "documents" / "longbench_v2_sample.json"})
    spec, convs, _, _ = load("longbench_v2_cot", tmp_path)
    conv = convs[0]
    assert [t.metadata["step"] for t in conv.turns] == ["reasoning", "answer"]
    assert conv.turns[0].user.endswith("(D) 0.96 euros per cubic metre\n\nLet’s think step by step:")
    assert conv.turns[1].user == ("Based on the above, what is the single, most likely answer choice? Format your "
                                  "response as follows: \"The correct answer is (insert answer here)\".")
    # the reasoning is asked and kept, never scored: the task's score is the answer step's accuracy
    assert conv.turns[0].metadata["scored"] is False and "scored" not in conv.turns[1].metadata
    assert spec.report.group_by is None
