"""LIBRA (Churin et al., 2024): the 21 shipped specs read rows we wrote in the authors' schema (the
Hub dataset's Parquet files, put where huggingface_hub caches the pinned commit), ask the authors'
instruction byte for byte (ai-forever/LIBRA configs/datasets_config.json, filled by
answer_generator.py's `str.replace`) after their instruct models' system message, and the `libra`
judge gives, on answers we wrote, the scores the authors' eval.py gave them on both branches of
their metrics (tests/data/libra/metric_cases.json says how they were computed)."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lceval.engine import load_catalog, load_plugins
from lceval.interfaces import JudgeContext
from lceval.types import CONTEXT_SLOT, JudgeInput
from tests.conftest import run_engine
from tests.paths import TEST_DATA
from tests.plugins.documents.conftest import load_shipped, put_in_hub_cache, write_jsonl, write_spec
from tests.plugins.graphwalks.test_graphwalks import Answering

PLUGINS = load_plugins()
CATALOG = load_catalog(PLUGINS)
REPO, COMMIT = "ai-forever/LIBRA", "c7a66710b8ab3e3a12b576bda29eddf394ada2fe"
ALL = ["4k", "8k", "16k", "32k", "64k", "128k"]
#: configs/datasets_config.json (commit 94dcac0): max_new_tokens, metric, lengths
CONFIG = {
    "passkey": (16, "em", ALL), "passkey_with_librusec": (16, "em", ALL), "matreshka_yes_no": (4, "em", ALL),
    "matreshka_names": (16, "em", ALL), "librusec_history": (32, "em", ["8k", "16k", "32k", "64k"]),
    "ru_gsm100": (32, "em", ["16k"]), "ru_sci_passage_count": (8, "count_score", ALL),
    "ru_2wikimultihopqa": (32, "em", ["8k", "16k", "32k"]), "long_context_multiq": (32, "em", ALL),
    "ru_sci_abstract_retrieval": (32, "em", ALL), "ru_trec": (32, "em", ["4k", "8k", "16k", "32k"]),
    "ru_sci_fi": (32, "em", ["32k", "64k"]), "librusec_mhqa": (32, "em", ["8k"]),
    **{f"ru_babilong_qa{i}": (16, "em", ALL) for i in range(1, 6)},
    "ru_quality": (128, "em", ["8k", "16k"]), "ru_tpo": (8, "em", ["8k"]), "ru_qasper": (256, "f1", ["8k", "16k", "32k"]),
}
#: four of the instructions, verbatim (the babilong ones say "Вопрос: {input}", the rest "Вопрос:{input}")
INSTRUCTIONS = {
    "passkey": "Тебе предоставляется длинный текст, в котором содержится ключ доступа. Запомни только ключ доступа.\n"
               "{context}\nВ ответе нужно указать только ключ доступа.\nВопрос:{input}\nОтвет:",
    "ru_babilong_qa3": "Я даю тебе контекст с фактами о местоположении и действиях разных людей. Тебе нужно ответить на "
                       "вопрос, основываясь только на фактической информации. Если человек взял предмет в одном месте и "
                       "отправился в другое место, этот предмет также находится во втором месте. Если человек оставил "
                       "предмет в первом метсе и перешел во второе место, предмет остается в первом месте.\n{context}\n"
                       "Ответь на вопрос как можно более кратко.\nВопрос: {input}\nОтвет:",
    "ru_sci_fi": "Тебе предоставляется длинный текст, в котором нужно найти ответ на вопрос.\n{context}\nТебе нужно "
                 "ответить на следующий вопрос одним из вариантов: 'Ложь [в реальном мире: Ложь]', 'Правда [в реальном "
                 "мире: Ложь]', 'Правда [в реальном мире: Правда]' или 'Ложь [в реальном мире: Правда]'.\nВопрос:{input}"
                 "\nОтвет:",
    "ru_gsm100": "Ниже приведены примеры математических задач. Размышляй шаг за шагом и дай ответ на вопрос.\n{context}\n"
                 "Размышляй шаг за шагом и дай ответ вопрос.\nВопрос:{input}\nОтвет:",
}
GROUPS = {"libra_i": 2, "libra_ii": 8, "libra_iii": 8, "libra_iv": 3}
CASES = json.loads((TEST_DATA / "libra" / "metric_cases.json").read_text(encoding="utf-8"))


def row(task: str, length: str, i: int) -> dict:
    """A row of the task's Parquet file in the dataset card's schema."""
    return {"length": length, "context": f"Длинный текст {{с фигурными скобками}} ({task} {length} {i}).",
            "input": f"Какой ключ доступа? ({i})", "positive_outputs": ["71432"],
            "negative_outputs": ["Нет"] if task == "matreshka_yes_no" else [],
            "metadata": {"id": i, "source_path": None}}


def rows(task: str) -> list[dict]:
    return [row(task, length, i) for i, length in enumerate(CONFIG[task][2])]


@pytest.fixture
def hub(_isolated_hf):
    files = {}
    for task in CONFIG:
        data = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(rows(task)), data)
        files[f"{task}/test-00000-of-00001.parquet"] = data.getvalue()
    put_in_hub_cache(_isolated_hf / "hub", REPO, COMMIT, files)
    return _isolated_hf


def load(name: str, tmp_path):
    return load_shipped(CATALOG, PLUGINS, name, tmp_path)


def test_twenty_one_tasks_in_four_groups_and_a_family():
    names = sorted(n for n in CATALOG.specs if n.startswith("libra_"))
    assert names == sorted(f"libra_{t}" for t in CONFIG)
    assert {g: len(CATALOG.suites[g]) for g in GROUPS} == GROUPS and CATALOG.suites["libra"] == list(GROUPS)
    assert CATALOG.family("libra").citation == "Churin et al., 2024"


@pytest.mark.parametrize("task", sorted(CONFIG))
def test_each_task_asks_the_authors_instruction_with_their_cap_and_metric(task, hub, tmp_path):
    max_new, metric, lengths = CONFIG[task]
    spec, convs = load(f"libra_{task}", tmp_path)
    assert spec.data["generation"]["max_new_tokens"] == max_new and spec.data["generation"]["temperature"] == 0.0
    assert spec.judge.name == "libra" and spec.judge.options["metric"] == metric
    assert spec.data["report"]["breakdown_order"]["length"] == lengths and spec.languages == ["ru"]
    assert len(convs) == len(lengths)
    for conv, r in zip(convs, rows(task)):
        assert [m.content for m in conv.preamble] == ["You are a helpful assistant."] and conv.preamble[0].role == "system"
        prompt = conv.turns[0].user.replace(CONTEXT_SLOT, conv.context)
        if task in INSTRUCTIONS:
            assert prompt == INSTRUCTIONS[task].replace("{context}", r["context"]).replace("{input}", r["input"])
        space = " " if task.startswith("ru_babilong") else ""
        assert prompt.startswith(("Тебе", "Ниже", "Я даю", "Ответь", "Определи")) and \
            prompt.endswith(f"\nВопрос:{space}{r['input']}\nОтвет:") and f"\n{r['context']}\n" in prompt
        assert conv.turns[0].metadata["length"] == r["length"]
        assert conv.turns[0].metadata["negative_outputs"] == r["negative_outputs"]


@pytest.mark.parametrize("branch", ["main", "lemma"])
@pytest.mark.parametrize("case", CASES["items"], ids=[f"{c['dataset']}-{c['length']}-{i}" for i, c in
                                                       enumerate(CASES["items"])])
def test_the_judge_gives_the_authors_scores(case, branch):
    if branch == "lemma":
        pytest.importorskip("pymorphy3")
    options = {"metric": CONFIG[case["dataset"]][1], "normalize": "none" if branch == "main" else "lemmas"}
    judge = PLUGINS.judges["libra"](JudgeContext(options=options))
    raw = case["model_answer"]
    (j,) = judge.judge([JudgeInput(item_id="q", question="?", response=raw.strip(), reference=case["positive_outputs"][0],
                                   metadata={"references": case["positive_outputs"],
                                             "negative_outputs": case["negative_outputs"]},
                                   raw_response=raw if raw != raw.strip() else None)])
    assert j.score == pytest.approx(100 * case["authors_score"][branch], abs=1e-9), j.details


def test_a_run_reports_each_length_and_their_mean_as_eval_py(hub, tmp_path):
    """ru_sci_fi, both of its lengths: the mean of the lengths' means is eval.py's dataset_total_score."""
    cases = [c for c in CASES["items"] if c["dataset"] == "ru_sci_fi"]
    data = io.BytesIO()
    table = [{**row("ru_sci_fi", c["length"], i), "positive_outputs": c["positive_outputs"],
              "negative_outputs": c["negative_outputs"]} for i, c in enumerate(cases)]
    pq.write_table(pa.Table.from_pylist(table), data)
    put_in_hub_cache(hub / "hub", REPO, COMMIT, {"ru_sci_fi/test-00000-of-00001.parquet": data.getvalue()})
    answers = {f"(ru_sci_fi {c['length']} {i})": c["model_answer"] for i, c in enumerate(cases)}
    _, results, _ = run_engine(Answering(answers, window=4096), "libra_ru_sci_fi", tmp_path / "home", tmp_path)
    score = results["tasks"]["libra_ru_sci_fi"]["metrics"]["score"]
    totals = CASES["totals"]["main"]["ru_sci_fi"]
    assert {k: g["value"] for k, g in score["groups"].items()} == pytest.approx({k: 100 * totals[k] for k in ("32k", "64k")})
    assert score["mean_of_groups"] == pytest.approx(100 * totals["dataset_total_score"])
    assert list(score["breakdowns"]["length"]) == ["32k", "64k"]


def test_lemmas_need_pymorphy3_and_a_bad_metric_exits_2(tmp_path, capsys):
    from lceval.cli import main

    write_jsonl(tmp_path / "rows.jsonl", [row("passkey", "4k", 0)])
    spec = write_spec(tmp_path, {"source": {"data_files": "rows.jsonl"},
                                 "fields": {"question": "input", "answer": "positive_outputs",
                                            "metadata": ["length", "negative_outputs"]},
                                 "prompt": {"user": "{{ context }} {{ input }}"}},
                      name="libra_typo", judge={"name": "libra", "options": {"metric": "exact"}})
    assert main(["validate", str(spec)]) == 2
    out = capsys.readouterr().out
    assert str(spec) in out and "judge.options.metric" in out and "exact" in out, out
