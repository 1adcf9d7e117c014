"""LV-Eval (Yuan et al., 2024): the 55 shipped specs (11 datasets x 5 length levels) read rows we
wrote in the authors' schema from the archives of their Hub dataset (put where huggingface_hub
caches the pinned commit), ask with the authors' prompt byte for byte (infinigence/LVEval
config.py DATASET_PROMPT, filled with `prompt_format.format(**json_obj)` as prediction.py
fills it), and the `lveval` judge gives, on answers we wrote, the scores the authors' own
metrics.py gave them (tests/data/lveval/metric_cases.json says how they were computed)."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from lceval.engine import load_catalog, load_plugins
from lceval.interfaces import JudgeContext
from lceval.types import CONTEXT_SLOT, JudgeInput
from tests.paths import TEST_DATA

from .conftest import load_shipped, put_in_hub_cache, write_jsonl, write_spec
from tests.conftest import spec_notes

PLUGINS = load_plugins()
CATALOG = load_catalog(PLUGINS)
REPO, COMMIT = "Infinigence/LVEval", "86a3b0e6f2266281d481bcb46a0bda5b511cffb0"
LENGTHS = ["16k", "32k", "64k", "128k", "256k"]
#: infinigence/LVEval config.py (commit 63e7ae9): DATASET_PROMPT, DATASET_MAXGEN and DATASET_METRIC
AUTHORS = {
    "hotpotwikiqa_mixup": ("Answer the question based on the given passages. Questions and answers are only relevant "
                           "to some passages. Only give me the answer and do not output any other explanation and "
                           "evidence.\n\nArticle: {context}\n\nPlease answer the following question based on the "
                           "above passages. Questions and answers are only relevant to some passages. Only give me "
                           "the answer and do not output any other explanation and evidence.\n\nQuestion: {input}\n"
                           "Answer:", 64, "qa_f1_score_with_gold_ans"),
    "factrecall_en": ("Please answer the following questions based on the given article.\n\nArticle: {context}\n\n"
                      "Please answer the following questions based on the above article.\n\nQuestion: {input}\n"
                      "Answer:", 16, "qa_f1_score"),
    "factrecall_zh": ("请基于给定的文章回答下述问题。\n\n文章：{context}\n\n现在请基于上述文章回答下面的问题。\n\n问题：{input}\n回答：",
                      16, "qa_f1_zh_score"),
    "cmrc_mixup": ("请根据下面给定的文章回答问题，问题和答案只与其中一篇文章有关。\n\n文章：{context}\n\n现在请基于上述文章回答下面的问题，问题和答案"
                   "只与其中一篇文章有关。\n\n问题：{input}\n回答：", 64, "qa_f1_zh_score_with_gold_ans"),
    "lic_mixup": ("请根据下面给定的文章回答问题，问题和答案只与其中一篇文章有关。\n\n文章：{context}\n\n请现在基于上述文章回答下面的问题，问题和答案"
                  "只与其中一篇文章有关。\n\n问题：{input}\n回答：", 64, "qa_f1_zh_score_with_gold_ans"),
    "dureader_mixup": ("请根据下面给定的文章回答问题，问题和答案只与其中一篇文章有关。\n\n文章：{context}\n\n现在请基于上述文章回答下面的问题，问题和"
                       "答案只与其中一篇文章有关。\n\n问题：{input}\n回答：", 64, "rouge_zh_score_blacklist"),
    "multifieldqa_zh_mixup": ("请阅读以下文章并用中文回答问题，问题和答案只与其中一篇文章有关。只需要直接给出问题的答案，不要输出其他任何解释和证据。\n\n文章："
                              "{context}\n\n请基于上面的文章回答下面的问题，问题和答案只与其中一篇文章有关。只需要直接给出问题的答案，不要输出其他任何解释"
                              "和证据。\n\n问题：{input}\n回答：", 64, "qa_f1_zh_score_with_gold_ans"),
}
_ONE_PASSAGE = ("Please answer the following question based on the given passages. Questions and answers are only "
                "relevant to one passage. Only give me the answer and do not output any other explanation and "
                "evidence.\n\nArticle: {context}\n\nPlease answer the following question based on the above passages. "
                "Questions and answers are only relevant to one passage. Only give me the answer and do not output "
                "any other explanation and evidence.\n\nQuestion: {input}\nAnswer:")
for _name in ("loogle_SD_mixup", "loogle_CR_mixup", "loogle_MIR_mixup", "multifieldqa_en_mixup"):
    AUTHORS[_name] = (_ONE_PASSAGE, 64, "qa_f1_score_with_gold_ans")
#: README: the datasets that carry answer keywords (AK); cmrc and dureader have none
WITH_KEYWORDS = {"hotpotwikiqa_mixup", "loogle_SD_mixup", "loogle_CR_mixup", "loogle_MIR_mixup",
                 "multifieldqa_en_mixup", "multifieldqa_zh_mixup", "lic_mixup", "factrecall_en", "factrecall_zh"}


def row(dataset: str, length: str, i: int) -> dict:
    """A row of <dataset>/<dataset>_<length>.jsonl in the authors' schema (README, "Data Format")."""
    zh = dataset in ("cmrc_mixup", "lic_mixup", "dureader_mixup", "multifieldqa_zh_mixup", "factrecall_zh")
    context = ("### Passage 1\n河流向北流。\n\n### Passage 2\n磨坊在桥边。{大括号}" if zh else
               "### Passage 1\nThe river runs north.\n\n### Passage 2\nThe mill stands by the bridge {braces}.")
    out = {"input": ("磨坊在哪里？" if zh else "Where is the mill?") + f" ({i})",
           "context": f"{context} ({length} {i})", "answers": ["桥边" if zh else "by the bridge"],
           "length": 12, "dataset": f"{dataset}_{length}", "language": "zh" if zh else "en",
           "confusing_facts": ["The mill stands by the river."]}
    if dataset in WITH_KEYWORDS:
        out["answer_keywords"] = "桥边" if zh else "bridge"
    return out


def spec_name(dataset: str, length: str) -> str:
    return f"lveval_{dataset.lower()}_{length}"


@pytest.fixture
def hub(_isolated_hf):
    files = {}
    for dataset in AUTHORS:
        data = io.BytesIO()
        with zipfile.ZipFile(data, "w") as zf:
            for length in LENGTHS:
                rows = [row(dataset, length, i) for i in range(2)]
                zf.writestr(f"{dataset}/{dataset}_{length}.jsonl",
                            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        files[f"{dataset}.zip"] = data.getvalue()
    put_in_hub_cache(_isolated_hf / "hub", REPO, COMMIT, files)
    return _isolated_hf


def load(name: str, tmp_path):
    sources: list = []
    return (*load_shipped(CATALOG, PLUGINS, name, tmp_path, sources), sources)


def test_eleven_datasets_at_five_lengths_with_suites_and_a_family():
    names = sorted(n for n in CATALOG.specs if n.startswith("lveval_"))
    assert names == sorted(spec_name(d, length) for d in AUTHORS for length in LENGTHS)
    for length in LENGTHS:
        assert sorted(CATALOG.suites[f"lveval_{length}"]) == sorted(spec_name(d, length) for d in AUTHORS)
    assert CATALOG.suites["lveval"] == [f"lveval_{length}" for length in LENGTHS]
    for name in names:
        spec = CATALOG.spec(name)
        assert spec.data["family"] == "lveval" and "infinigence/LVEval" in spec_notes(spec)
        assert spec.data["context"] == {"policy": "truncate-middle", "cut": "prompt", "marker": ""}


@pytest.mark.parametrize("dataset", sorted(AUTHORS))
def test_each_dataset_asks_the_authors_prompt_and_scores_with_their_metric(dataset, hub, tmp_path):
    template, max_gen, metric = AUTHORS[dataset]
    for length in LENGTHS:  # the five levels differ only in their file and their table
        spec = CATALOG.spec(spec_name(dataset, length))
        assert spec.data["options"]["source"]["data_files"] == f"zip://{dataset}/{dataset}_{length}.jsonl::{dataset}.zip"
        assert spec.data["generation"]["max_new_tokens"] == max_gen
        assert spec.judge.name == "lveval" and spec.judge.options["metric"] == metric
    spec, convs, sources = load(spec_name(dataset, "64k"), tmp_path)
    assert sources[0]["revision"] == COMMIT and len(convs) == 2
    for i, conv in enumerate(convs):
        r = row(dataset, "64k", i)
        assert conv.turns[0].user.replace(CONTEXT_SLOT, conv.context) == template.format(**r)
        assert conv.turns[0].reference == r["answers"][0]
    judge = PLUGINS.judges["lveval"](JudgeContext(options=spec.judge.options))
    turn = convs[0].turns[0]
    metadata = {**convs[0].metadata, **turn.metadata}
    assert ("answer_keywords" in metadata) == (metric.endswith("gold_ans") and dataset in WITH_KEYWORDS)
    (j,) = judge.judge([JudgeInput(item_id=turn.item_id, question=turn.question, response=turn.reference,
                                   reference=turn.reference, metadata=metadata)])
    assert j.score == pytest.approx(100.0, abs=1e-5), j  # the rouge package's F adds 1e-8 to its terms


CASES = json.loads((TEST_DATA / "lveval" / "metric_cases.json").read_text(encoding="utf-8"))["cases"]


@pytest.mark.parametrize("case", CASES, ids=[f"{c['metric']}-{i}" for i, c in enumerate(CASES)])
def test_the_judge_gives_the_authors_scores(case):
    judge = PLUGINS.judges["lveval"](JudgeContext(options={"metric": case["metric"]}))
    metadata = {"references": [case["answer"], "a second answer the authors' scorer never reads"]}
    if case["keywords"] is not None:
        metadata["answer_keywords"] = case["keywords"]
    raw = case["prediction"]
    (j,) = judge.judge([JudgeInput(item_id="q", question="?", response=raw.strip(), reference=case["answer"],
                                   metadata=metadata, raw_response=raw if raw != raw.strip() else None)])
    assert j.score == pytest.approx(100 * case["authors_score"], abs=1e-9), (case, j.details)


def test_a_bad_metric_name_exits_2_naming_spec_field_and_value(tmp_path, capsys):
    from lceval.cli import main

    write_jsonl(tmp_path / "rows.jsonl", [row("hotpotwikiqa_mixup", "16k", 0)])
    spec = write_spec(tmp_path, {"source": {"data_files": "rows.jsonl"},
                                 "fields": {"question": "input", "answer": "answers"},
                                 "prompt": {"user": "{{ context }} {{ input }}"}},
                      name="lveval_typo", judge={"name": "lveval", "options": {"metric": "qa_f1_score_with_gold"}})
    assert main(["validate", str(spec)]) == 2
    out = capsys.readouterr().out
    assert str(spec) in out and "judge.options.metric" in out and "qa_f1_score_with_gold" in out, out
