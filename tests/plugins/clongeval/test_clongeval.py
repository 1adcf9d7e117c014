"""CLongEval (Qiu et al., 2024): the 21 shipped specs (7 tasks x 3 sizes) read rows we wrote in the
authors' schema from their Hub dataset's files (put where huggingface_hub caches the pinned
commit), ask the authors' prompt byte for byte (zexuanqiu/CLongEval config/dataset2prompt.json,
filled with `str.format` as inference.py fills it), and the `clongeval` judge gives, on answers we
wrote, the scores the authors' metrics.py gave them (tests/data/clongeval/metric_cases.json says
how they were computed)."""

from __future__ import annotations

import json

import pytest

from lceval.engine import load_catalog, load_plugins
from lceval.interfaces import JudgeContext
from lceval.types import CONTEXT_SLOT, JudgeInput
from tests.paths import TEST_DATA
from tests.plugins.documents.conftest import load_shipped, put_in_hub_cache, write_jsonl, write_spec

pytest.importorskip("jieba")

PLUGINS = load_plugins()
CATALOG = load_catalog(PLUGINS)
REPO, COMMIT = "zexuanqiu22/CLongEval", "8a1696670b4a84364bef5f83d97b025f720a7916"
SIZES = ["small", "medium", "large"]
#: each size's upper end, the paper's (about 1K-16K, 16K-50K, 50K-100K tokens): its bin and length
UPPER = {"small": ("16K", 16000), "medium": ("50K", 50000), "large": ("100K", 100000)}
#: config/dataset2prompt.json, dataset2maxlen.json, dataset2path.json and eval.py's dataset2metric (commit 81ba789)
AUTHORS = {
    "long_story_qa": ("下面是一部小说的节选。请阅读该小说节选，并尽可能用简洁的短语（或短句）回答给定的问题，不要提供任何解释。\n小说节选如下：\n\n{}\n\n"
                      "请尽可能简洁地回答下列问题，不要提供任何解释。\n问题：{}\n答案：", 100, "1-1_long_story_qa", "qa_f1_zh_score"),
    "long_conversation_memory": ("你是一个具有聊天陪伴功能的ai伴侣。下面是用户和你的对话记录, 请你阅读对话记录后尽可能简洁地回答问题，不要提供任何解释。对话记录由多天"
                                 "的对话组成：\n\n{}{}\n答案：", 100, "1-2_long_conversation_memory", "qa_f1_zh_score"),
    "long_story_summarization": ("下面是一个小说节选，请你阅读后写出相应的摘要，不要输出其他任何内容。\n小说节选如下：\n\n{}\n\n摘要：", 400,
                                 "2-1_long_story_summarization", "rouge_zh_score"),
    "stacked_news_labeling": ("下面是一个新闻列表。每个新闻属于【体育，娱乐，家居，房产，教育，时政，游戏，科技，财经】这九个类别的某一个类别。请按顺序判断并输出每个"
                              "新闻的所属类别，输出格式为：\n新闻1，类别名1\n新闻2，类别名2\n......\n新闻N，类别名N\n\n新闻如下：\n\n{}\n\n每个新闻的所属"
                              "类别依次为：\n", 800, "3-1_stacked_news_labeling", "news_labeling_zh_score"),
    "stacked_typo_detection": ("下面是一部小说的多个段落，每个段落包含段落ID以及段落内容。有些段落中不存在错别字，有些段落有且仅有一个错别字，该错别字与原来的正确"
                               "汉字同音。请按照段落顺序输出错别字，输出格式为：段落ID，错别字，正确字。不同段落ID用换行符隔开。例如，一个示例输出是\"4，蚔，奇\n"
                               "8，鎌，连\"。该示例输出中的第一行表示在ID为4的段落中，错别字为蚔，正确字应为奇；第二行表示在ID为8的段落中，错别字为鎌，正确字"
                               "应为连。小说的多个段落如下：\n\n{}\n\n所有的错别字为：\n", 800, "3-2_stacked_typo_detection",
                               "typo_detection_zh_score"),
    "key_passage_retrieval": ("请提取下面 JSON 对象中指定键对应的值。只输出对应键的值，不输出任何其他文字。Json数据如下：\n\n{}\n\n键：{}\n值：", 400,
                              "4-1_key_passage_retrieval", "retrieval_zh_edit_score"),
    "table_querying": ("请根据下列多个表格的内容回答给定问题，表格为Markdown格式。请直接返回问题的答案，除此之外不要输出其他内容。表格如下：\n\n{}。\n\n问题：{}"
                       "\n答案：", 50, "4-2_table_querying", "table_querying_match_score"),
}
CASES = json.loads((TEST_DATA / "clongeval" / "metric_cases.json").read_text(encoding="utf-8"))["cases"]


def row(task: str, size: str, i: int) -> dict:
    """A row of <dir>/<size>.jsonl (the fields inference.py reads); query-less tasks have ''."""
    has_query = AUTHORS[task][0].count("{}") == 2
    return {"id": f"{task}-{size}-{i}", "context": f"第一段。{{花括号}}\n第二段。({task} {size} {i})",
            "query": f"第{i}个问题是什么？" if has_query else "", "answer": "新闻 1：体育" if task == "stacked_news_labeling"
            else "0，的，淂" if task == "stacked_typo_detection" else "桥边"}


@pytest.fixture
def hub(_isolated_hf):
    files = {f"{folder}/{size}.jsonl": "".join(json.dumps(row(task, size, i), ensure_ascii=False) + "\n"
                                               for i in range(2)).encode()
             for task, (_, _, folder, _) in AUTHORS.items() for size in SIZES}
    put_in_hub_cache(_isolated_hf / "hub", REPO, COMMIT, files)
    return _isolated_hf


def load(name: str, tmp_path):
    return load_shipped(CATALOG, PLUGINS, name, tmp_path)


def test_seven_tasks_at_three_sizes_with_suites_and_a_family():
    names = sorted(n for n in CATALOG.specs if n.startswith("clongeval_"))
    assert names == sorted(f"clongeval_{t}_{s}" for t in AUTHORS for s in SIZES)
    for size in SIZES:
        assert CATALOG.suites[f"clongeval_{size}"] == [f"clongeval_{t}_{size}" for t in AUTHORS]
    assert CATALOG.suites["clongeval"] == [f"clongeval_{s}" for s in SIZES]
    assert CATALOG.family("clongeval").citation == "Qiu et al., 2024"


@pytest.mark.parametrize("task", sorted(AUTHORS))
def test_each_task_asks_the_authors_prompt_with_their_cap_and_metric(task, hub, tmp_path):
    template, max_new, folder, metric = AUTHORS[task]
    for size in SIZES:
        spec, convs = load(f"clongeval_{task}_{size}", tmp_path)
        assert spec.data["options"]["source"]["data_files"] == f"{folder}/{size}.jsonl"
        assert spec.data["generation"]["max_new_tokens"] == max_new and spec.data["generation"]["temperature"] == 0.0
        assert spec.judge.name == "clongeval" and spec.judge.options["metric"] == metric
        assert spec.languages == ["zh"] and len(convs) == 2
        bins = spec.report.length_bins  # the sizes are a task's length curve: each set at its upper end, K = 1,000
        assert (bins.place({}, None), bins.curve) == (UPPER[size], f"clongeval_{task}")
        for i, conv in enumerate(convs):
            r = row(task, size, i)
            expected = template.format(r["context"]) if not r["query"] else template.format(r["context"], r["query"])
            assert conv.preamble == [] and conv.turns[0].user.replace(CONTEXT_SLOT, conv.context) == expected
            assert conv.turns[0].item_id == f"test/{r['id']}" and conv.turns[0].reference == r["answer"]


@pytest.mark.parametrize("case", CASES, ids=[f"{c['metric']}-{i}" for i, c in enumerate(CASES)])
def test_the_judge_gives_the_authors_scores(case):
    options = {"metric": case["metric"]}
    if case["metric"] == "typo_detection_zh_score":
        options["typo_reference"] = "eval_py" if case["eval_py_rewrite"] else "as_is"
    judge = PLUGINS.judges["clongeval"](JudgeContext(options=options))
    raw = case["prediction"]
    (j,) = judge.judge([JudgeInput(item_id="q", question="?", response=raw.strip(), reference=case["answer"],
                                   metadata={"references": [case["answer"]]},
                                   raw_response=raw if raw != raw.strip() else None)])
    assert j.score == pytest.approx(100 * case["authors_score"], abs=1e-9), j.details


def test_its_recursion_limit_is_its_own_not_the_processes():
    """eval.py raises Python's recursion limit for its ROUGE; lceval raises it for CLongEval's
    call only, so LongBench's ROUGE scored later in the same process still stops where its
    authors' script (Python's default limit) stops."""
    import sys

    before = sys.getrecursionlimit()
    judge = PLUGINS.judges["clongeval"](JudgeContext(options={"metric": "rouge_zh_score"}))
    text = "今天天气很好，我们去公园散步。" * 40
    (j,) = judge.judge([JudgeInput(item_id="q", question="?", response=text, reference=text,
                                   metadata={"references": [text]})])
    assert j.score == pytest.approx(100.0)
    assert sys.getrecursionlimit() == before


def test_typo_references_every_line_scores_each_typo():
    judge = PLUGINS.judges["clongeval"](JudgeContext(options={"metric": "typo_detection_zh_score",
                                                             "typo_reference": "every_line"}))
    gold = "0，阶，介\n1，他，澾\n4，还，亥"  # the Hub order: id，correct，typo
    (j,) = judge.judge([JudgeInput(item_id="q", question="", response="0，介，阶\n1，澾，他", reference=gold,
                                   metadata={"references": [gold]})])
    assert j.score == pytest.approx(100 * 2 / 3)


def test_a_bad_typo_reference_option_exits_2(tmp_path, capsys):
    from lceval.cli import main

    write_jsonl(tmp_path / "rows.jsonl", [row("stacked_typo_detection", "small", 0)])
    spec = write_spec(tmp_path, {"source": {"data_files": "rows.jsonl"},
                                 "fields": {"id": "id", "question": None, "answer": "answer"}},
                      name="clongeval_typo", judge={"name": "clongeval",
                                                    "options": {"metric": "typo_detection_zh_score",
                                                                "typo_reference": "fixed"}})
    assert main(["validate", str(spec)]) == 2
    out = capsys.readouterr().out
    assert str(spec) in out and "judge.options.typo_reference" in out and "fixed" in out, out


def test_questions_over_one_excerpt_share_its_prefix(_isolated_hf, tmp_path):
    """Rows that repeat a context (several questions about one excerpt) are one document: one
    context id, the questions after it, so the engine prefills the excerpt once for all of them."""
    rows = [{**row("long_story_qa", "small", i), "context": "同一段小说节选。" * 20} for i in range(3)]
    rows.append(row("long_story_qa", "small", 3))
    put_in_hub_cache(_isolated_hf / "hub", REPO, COMMIT, {"1-1_long_story_qa/small.jsonl": "".join(
        json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()})
    _, convs = load("clongeval_long_story_qa_small", tmp_path)
    assert len(convs) == 4 and len({c.context_id for c in convs[:3]}) == 1 and convs[3].context_id != convs[0].context_id
    assert [c.turns[0].user.split(CONTEXT_SLOT)[0] for c in convs[:3]] == [convs[0].turns[0].user.split(CONTEXT_SLOT)[0]] * 3
