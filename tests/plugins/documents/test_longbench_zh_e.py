"""LongBench's five Chinese tasks and LongBench-E (Bai et al., 2024): the shipped specs read rows
we wrote in the authors' schema from data.zip of their Hub dataset (put where huggingface_hub
caches the pinned commit), ask the authors' prompt byte for byte (THUDM/LongBench
LongBench/config/dataset2prompt.json, filled with `prompt_format.format(**json_obj)` as pred.py
fills it), and score our answers as the authors' metrics.py and eval.py scored them
(tests/data/longbench/metric_cases.json says how those numbers were computed). LongBench-E's
rows get eval.py `scorer_e`'s length bins, and a run's breakdown by them is scorer_e's."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from lceval.engine import load_catalog, load_plugins
from lceval.interfaces import JudgeContext
from lceval.types import CONTEXT_SLOT, JudgeInput
from tests.conftest import run_engine
from tests.paths import TEST_DATA
from tests.plugins.graphwalks.test_graphwalks import Answering

from .conftest import load_shipped, put_in_hub_cache, write_jsonl, write_spec

pytest.importorskip("jieba")

PLUGINS = load_plugins()
CATALOG = load_catalog(PLUGINS)
REPO, COMMIT = "THUDM/LongBench", "5e628be450b7e67fb7ae6e201bd6d8f7056f7672"
#: THUDM/LongBench LongBench/config/dataset2prompt.json and dataset2maxlen.json (commit 2e00731)
ZH = {
    "multifieldqa_zh": ("阅读以下文字并用中文简短回答：\n\n{context}\n\n现在请基于上面的文章回答下面的问题，只告诉我答案，不要输出任何其他字词。\n\n问题：{input}\n回答：",
                        64, "f1"),
    "dureader": ("请基于给定的文章回答下述问题。\n\n文章：{context}\n\n请基于上述文章回答下面的问题。\n\n问题：{input}\n回答：", 128, "rouge_l"),
    "vcsum": ("下面有一段会议记录，请你阅读后，写一段总结，总结会议的内容。\n会议记录：\n{context}\n\n会议总结：", 512, "rouge_l"),
    "lsht": ("请判断给定新闻的类别，下面是一些例子。\n\n{context}\n{input}", 64, "classification"),
    "passage_retrieval_zh": ("以下是若干段落文字，以及其中一个段落的摘要。请确定给定的摘要出自哪一段。\n\n{context}\n\n下面是一个摘要\n\n{input}\n\n"
                             "请输入摘要所属段落的编号。答案格式必须是\"段落1\"，\"段落2\"等格式\n\n答案是：", 32, "numeric"),
}
#: pred.py's LongBench-E datasets (`datasets = [...]` under `if args.e`)
E = ["qasper", "multifieldqa_en", "hotpotqa", "2wikimqa", "gov_report", "multi_news", "trec", "triviaqa", "samsum",
     "passage_count", "passage_retrieval_en", "lcc", "repobench-p"]
CLASSES = ["体育", "娱乐", "体育彩票", "财经", "科技"]
CASES = json.loads((TEST_DATA / "longbench" / "metric_cases.json").read_text(encoding="utf-8"))


def row(dataset: str, i: int, length: int = 20) -> dict:
    """A row of data/<dataset>.jsonl in LongBench's schema (README, "Data Format")."""
    zh = dataset in ZH
    answers = {"lsht": ["体育"], "passage_retrieval_zh": ["段落2"], "trec": ["Location"],
               "passage_retrieval_en": ["Paragraph 2"], "passage_count": ["2"]}.get(
        dataset.removesuffix("_e"), ["磨坊在桥边" if zh else f"answer {i}"])
    context = ("段落1：河流向北流。\n\n段落2：磨坊在桥边。{大括号}\n" if zh else
               "Paragraph 1: The river runs north.\n\nParagraph 2: The mill stands by the bridge {braces}.\n")
    return {"input": "" if dataset == "vcsum" else ("磨坊在哪里？" if zh else "Where is the mill?") + f" ({i})",
            "context": context + f"({dataset} {i})", "answers": answers, "length": length, "dataset": dataset,
            "language": "zh" if zh else "en",
            "all_classes": CLASSES if dataset == "lsht" else ["Location", "Person"] if dataset == "trec_e" else None,
            "_id": f"{dataset}-{i}"}


#: LongBench-E rows at lengths on both sides of scorer_e's edges
E_LENGTHS = [120, 3999, 4000, 7999, 8000, 15000]


@pytest.fixture
def hub(_isolated_hf):
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as zf:
        for ds in ZH:
            zf.writestr(f"data/{ds}.jsonl", "".join(json.dumps(row(ds, i), ensure_ascii=False) + "\n" for i in range(2)))
        for ds in E:
            zf.writestr(f"data/{ds}_e.jsonl", "".join(json.dumps(row(f"{ds}_e", i, n)) + "\n"
                                                      for i, n in enumerate(E_LENGTHS)))
    put_in_hub_cache(_isolated_hf / "hub", REPO, COMMIT, {"data.zip": data.getvalue()})
    return _isolated_hf


def load(name: str, tmp_path):
    sources: list = []
    return (*load_shipped(CATALOG, PLUGINS, name, tmp_path, sources), sources)


def judge_of(spec):
    return PLUGINS.judges[spec.judge.name](JudgeContext(options=spec.judge.options))


def ask(judge, answer: str, references: list[str], metadata: dict | None = None) -> float:
    (j,) = judge.judge([JudgeInput(item_id="q", question="?", response=answer.strip(), reference=references[0],
                                   metadata={**(metadata or {}), "references": references},
                                   raw_response=answer if answer != answer.strip() else None)])
    assert j.parse_status == "ok", j
    return j.score


def test_the_chinese_tasks_and_longbench_e_are_suites_and_families():
    assert CATALOG.suites["longbench_zh"] == [f"longbench_{d}" for d in ZH]
    assert CATALOG.suites["longbench"] == ["longbench_en", "longbench_zh"]
    assert CATALOG.suites["longbench_e"] == [f"longbench_{d.replace('-', '_')}_e" for d in E]
    assert sorted(n for n in CATALOG.specs if n.startswith("longbench_") and n.endswith("_e")) == \
        sorted(CATALOG.suites["longbench_e"])
    assert CATALOG.family("longbench_e").name == "LongBench-E"
    for name in CATALOG.suites["longbench_zh"]:
        spec = CATALOG.spec(name)
        assert spec.family == "longbench" and spec.languages == ["zh"]


@pytest.mark.parametrize("dataset", sorted(ZH))
def test_each_chinese_task_asks_the_authors_prompt_and_scores_with_their_metric(dataset, hub, tmp_path):
    template, max_len, judge = ZH[dataset]
    spec, convs, sources = load(f"longbench_{dataset}", tmp_path)
    assert sources[0]["revision"] == COMMIT and len(convs) == 2
    assert (spec.data["generation"]["max_new_tokens"], spec.data["generation"]["temperature"]) == (max_len, 0.0)
    assert spec.data["context"]["policy"] == "truncate-middle" and spec.judge.name == judge
    for i, conv in enumerate(convs):
        assert conv.turns[0].user.replace(CONTEXT_SLOT, conv.context) == template.format(**row(dataset, i))
    turn = convs[0].turns[0]
    metadata = {**convs[0].metadata, **turn.metadata}
    assert ("all_classes" in metadata) == (dataset == "lsht")
    assert ask(judge_of(spec), turn.reference, [turn.reference], metadata) == pytest.approx(100.0, abs=1e-5)


@pytest.mark.parametrize("case", CASES["cases"], ids=[f"{c['dataset']}-{i}" for i, c in enumerate(CASES["cases"])])
def test_the_specs_judges_give_the_authors_scores(case):
    spec = CATALOG.spec(f"longbench_{case['dataset']}")
    metadata = {"all_classes": case["all_classes"]} if case["all_classes"] else {}
    assert ask(judge_of(spec), case["prediction"], case["answers"], metadata) == \
        pytest.approx(case["authors_score"], abs=1e-9)


def test_rouge_over_jieba_words_stops_where_the_authors_recursion_does():
    """The rouge package's LCS recurses once per word; `python eval.py` meets Python's limit one
    frame deeper for rouge_zh_score than for rouge_score (it calls rouge_score), and so here."""
    judge = judge_of(CATALOG.spec("longbench_vcsum"))
    n = CASES["rouge_zh_recursion_zero_at"]
    assert ask(judge, " ".join(["会议"] * (n - 1)), [" ".join(["会议"] * (n - 1))]) == pytest.approx(100, abs=1e-5)
    assert ask(judge, " ".join(["会议"] * n), [" ".join(["会议"] * n)]) == 0.0


@pytest.mark.parametrize("dataset", E)
def test_each_longbench_e_task_is_its_base_task_on_the_e_rows_with_length_bins(dataset, hub, tmp_path):
    base = CATALOG.spec(f"longbench_{dataset.replace('-', '_')}")
    spec, convs, _ = load(f"longbench_{dataset.replace('-', '_')}_e", tmp_path)
    assert spec.data["options"]["source"]["data_files"] == f"zip://data/{dataset}_e.jsonl::data.zip"
    for key in ("generation", "context", "judge"):
        assert spec.data[key] == base.data[key], key
    for key in ("fields", "prompt"):
        assert spec.data["options"][key] == base.data["options"][key], key
    assert spec.data["report"]["breakdowns"] == ["length_bin"]
    bins = [c.turns[0].metadata["length_bin"] for c in convs]
    assert bins == ["0-4k", "0-4k", "4-8k", "4-8k", "8k+", "8k+"]  # scorer_e: < 4000, < 8000, else


def test_a_run_reports_scorer_e_by_length_bin(hub, tmp_path):
    case = CASES["scorer_e"]
    answers = {f"(passage_count_e {i})": pred for i, pred in enumerate(case["predictions"])}
    data = io.BytesIO()
    rows = [{**row("passage_count_e", i, n), "answers": a} for i, (n, a) in enumerate(zip(case["lengths"],
                                                                                         case["answers"]))]
    with zipfile.ZipFile(data, "w") as zf:
        zf.writestr("data/passage_count_e.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    put_in_hub_cache(hub / "hub", REPO, COMMIT, {"data.zip": data.getvalue()})
    _, results, _ = run_engine(Answering(answers, window=4096), "longbench_passage_count_e", tmp_path / "home",
                               tmp_path)
    by_bin = results["tasks"]["longbench_passage_count_e"]["metrics"]["score"]["breakdowns"]["length_bin"]
    assert list(by_bin) == ["0-4k", "4-8k", "8k+"]
    assert {k: v["value"] for k, v in by_bin.items()} == pytest.approx(case["authors_scores"])


@pytest.mark.parametrize("bins, field, words", [
    ({"edges": [4000, 8000], "labels": ["short", "long"]}, "options.length_bins.labels", "2 edges make 3 bins"),
    ({"edges": [8000, 4000]}, "options.length_bins.edges", "[8000, 4000]"),
    ({"field": "language"}, "options.length_bins.field", "'language' must be a number"),
    ({"field": "words"}, "options.length_bins.field", "'words' must be one of options.fields.metadata"),
])
def test_bad_bins_exit_2_naming_spec_field_and_value(bins, field, words, tmp_path, capsys):
    from lceval.cli import main

    write_jsonl(tmp_path / "rows.jsonl", [row("qasper_e", 0, 5000)])
    spec = write_spec(tmp_path, {"source": {"data_files": "rows.jsonl"},
                                 "fields": {"id": "_id", "question": "input", "answer": "answers",
                                            "metadata": ["length", "language"]},
                                 "prompt": {"user": "{{ context }} {{ input }}"}, "length_bins": bins},
                      name="lb_e_typo", type="longbench_e", judge={"name": "f1"})
    assert main(["validate", str(spec)]) == 2
    out = capsys.readouterr().out
    assert str(spec) in out and field in out and words in out, out


def test_jieba_words_are_an_option_of_the_rouge_package_route_only(tmp_path, monkeypatch, capsys):
    from lceval.cli import main
    from tests.conftest import serve_scripted

    serve_scripted(monkeypatch)
    write_jsonl(tmp_path / "rows.jsonl", [row("dureader", 0)])
    spec = write_spec(tmp_path, {"source": {"data_files": "rows.jsonl"},
                                 "fields": {"id": "_id", "question": "input", "answer": "answers"},
                                 "prompt": {"user": "{{ context }} {{ input }}"}},
                      name="lb_zh_typo", judge={"name": "rouge_l", "options": {"tokenize": "jieba"}})
    assert main(["run", "--tasks", str(spec), "--model", "scripted:x", "--output", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert str(spec) in err and "judge.options.tokenize" in err and "tokenize: jieba" in err, err
