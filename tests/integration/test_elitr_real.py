"""ELITR-Bench on the real data: the published generations re-scored through the whole
engine reproduce the paper's numbers (paper 000, Table 2 and Table 9)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from tests.cli import run
from lceval.interfaces import TaskContext
from lceval_plugins.elitr.task import ElitrTaskType

from tests.conftest import complete

MODELS_ST = ["GPT-3.5", "GPT-4", "LongAlpaca-7B", "LongAlpaca-13B", "LongChat-7B-v1.5", "Vicuna-7B-v1.5",
             "Vicuna-13B-v1.5", "LongAlign-7B", "LongAlign-13B"]
# paper 000, Table 9: one-tailed Welch p-values, test2 single-turn QA, GPT-4 judge
TABLE9 = {"GPT-3.5": 0.466, "GPT-4": 0.372, "LongAlpaca-7B": 0.713, "LongAlpaca-13B": 0.265,
          "LongChat-7B-v1.5": 0.032, "Vicuna-7B-v1.5": 0.046, "Vicuna-13B-v1.5": 0.469,
          "LongAlign-7B": 0.409, "LongAlign-13B": 0.413}


def recorded_means(path: Path, source: str = "gpt-4-eval") -> dict[str, float]:
    data = json.loads(path.read_text())
    scores: dict[str, list[float]] = defaultdict(list)
    for meeting in data["meetings"]:
        for q in meeting["questions"]:
            for r in q["generated-responses"]:
                scores[r["model"]].append(float(r[f"{source}_score"]))
    return {m: sum(v) / len(v) for m, v in scores.items()}


def test_real_questions_load_with_their_annotations(real_home, tmp_path):
    ctx = TaskContext(spec={"options": complete(ElitrTaskType, {})}, spec_path=tmp_path / "s.yaml", data_home=real_home, splits=None,
                      limit=None, record_file=lambda p: None)
    convs = ElitrTaskType().load(ctx)
    assert len(convs) == 271
    by_split = defaultdict(int)
    for c in convs:
        by_split[c.metadata["split"]] += 1
    assert dict(by_split) == {"dev": 141, "test2": 130}
    positions = {c.turns[0].metadata["answer_position"] for c in convs}
    assert positions == {"B", "M", "E", "S"}
    mt = ElitrTaskType().load(TaskContext(spec={"options": complete(ElitrTaskType, {"mode": "multi-turn", "question_set": "conv"})},
                                          spec_path=tmp_path / "s.yaml", data_home=real_home, splits=None,
                                          limit=None, record_file=lambda p: None))
    assert len(mt) == 18 and sum(len(c.turns) for c in mt) == 271


def test_replay_with_recorded_judge_gives_recorded_means_on_dev(real_home, tmp_path, shared_datasets):
    gen = shared_datasets / "elitr-bench" / "generated-responses" / "elitr-bench-qa_dev_st_gpt-4-eval.json"
    expected = recorded_means(gen)
    models = [f"replay:{gen}#{m}" for m in MODELS_ST]
    reports = run(tasks="elitr_qa", models=models, judge="gpt4-recorded", splits=["dev"], data_home=real_home,
                  output=tmp_path / "runs", progress=False)
    assert len(reports) == len(MODELS_ST)
    for (run_dir, table), name in zip(reports, MODELS_ST):
        results = json.loads((run_dir / "results.json").read_text())
        score = results["tasks"]["elitr_qa"]["metrics"]["score"]
        assert score["value"] == pytest.approx(expected[name], abs=1e-12)
        assert score["groups"]["dev"]["n"] == 141
        assert results["tasks"]["elitr_qa"]["accounting"]["judge_parse_failures"] == 0
    # paper 000 Table 2, single-turn QA dev column (two decimals)
    table2_dev = {"GPT-3.5": 7.04, "GPT-4": 8.21, "LongAlpaca-7B": 5.89, "LongAlpaca-13B": 6.17,
                  "LongChat-7B-v1.5": 6.60, "Vicuna-7B-v1.5": 5.42, "LongAlign-7B": 6.11, "LongAlign-13B": 6.27}
    for name, value in table2_dev.items():
        assert round(expected[name], 2) == value


def test_welch_through_the_engine_reproduces_table9(real_home, tmp_path, shared_datasets):
    pattern = shared_datasets / "elitr-bench" / "generated-responses" / "elitr-bench-qa_{split}_st_gpt-4-eval.json"
    models = [f"replay:{pattern}#{m}" for m in MODELS_ST]
    reports = run(tasks="elitr_qa", models=models, judge="gpt4-recorded", data_home=real_home,
                  output=tmp_path / "runs", progress=False)
    for (run_dir, _), name in zip(reports, MODELS_ST):
        score = json.loads((run_dir / "results.json").read_text())["tasks"]["elitr_qa"]["metrics"]["score"]
        test2 = score["groups"]["test2"]
        assert round(test2["tests"]["lost_in_the_middle"]["p_value"], 3) == TABLE9[name]
        assert test2["n"] == 130 and score["groups"]["dev"]["n"] == 141
        assert score["mean_of_groups"] == pytest.approx((score["groups"]["dev"]["value"] + test2["value"]) / 2)
        assert test2["spread"]["clusters"] == 8  # questions resampled by meeting


def test_replay_refuses_the_wrong_question_set(real_home, tmp_path, shared_datasets):
    from lceval.errors import UserError

    gen = shared_datasets / "elitr-bench" / "generated-responses" / "elitr-bench-conv_dev_mt_gpt-4-eval.json"
    with pytest.raises(UserError):
        run(tasks="elitr_qa_mt", models=[f"replay:{gen}#GPT-4"], judge="gpt4-recorded", splits=["dev"],
            data_home=real_home, output=tmp_path / "runs", progress=False)


# paper 000, Table 2: dev columns (the test columns average three seeded runs; the files hold one)
TABLE2_DEV = {
    "QA single-turn": {"GPT-3.5": 7.04, "GPT-4": 8.21, "LongAlpaca-7B": 5.89, "LongAlpaca-13B": 6.17,
                       "LongChat-7B-v1.5": 6.60, "Vicuna-7B-v1.5": 5.42, "Vicuna-13B-v1.5": 5.92,
                       "LongAlign-7B": 6.11, "LongAlign-13B": 6.27},
    "QA multi-turn": {"GPT-4": 8.53, "LongAlpaca-7B": 4.53, "LongAlpaca-13B": 4.76, "LongChat-7B-v1.5": 5.85,
                      "Vicuna-7B-v1.5": 4.68, "Vicuna-13B-v1.5": 5.52, "LongAlign-7B": 5.43, "LongAlign-13B": 4.65},
    "Conv multi-turn": {"GPT-4": 8.53, "LongAlpaca-7B": 4.70, "LongAlpaca-13B": 4.74, "LongChat-7B-v1.5": 5.21,
                        "Vicuna-7B-v1.5": 4.67, "Vicuna-13B-v1.5": 5.42, "LongAlign-7B": 5.04, "LongAlign-13B": 4.81},
}
# the three cells the published files do not give to the printed digit: their scores sum to
# 1202/141 = 8.5248 (GPT-4, both multi-turn settings) and 834/141 = 5.9149 (Vicuna-13B)
FILES_GIVE = {("QA single-turn", "Vicuna-13B-v1.5"): 5.91, ("QA multi-turn", "GPT-4"): 8.52,
              ("Conv multi-turn", "GPT-4"): 8.52}
RECORDED = ["elitr-bench-qa_{split}_st_gpt-4-eval.json", "elitr-bench-qa_{split}_mt_gpt-4-eval.json",
            "elitr-bench-conv_{split}_mt_gpt-4-eval.json"]


def _csv_tables(text: str) -> dict[str, tuple[list[str], dict[str, list[str]]]]:
    import csv
    import io

    tables: dict[str, tuple[list[str], dict[str, list[str]]]] = {}
    header: list[str] = []
    for row in csv.reader(io.StringIO(text)):
        if row[:2] == ["table", "model"]:
            header = row
            continue
        tables.setdefault(row[0], (header, {}))[1][row[1]] = row
    return tables


def _check_table2_and_table9(tables) -> None:
    header, rows = tables["ELITR-Bench (Thonet et al., 2024a, Table 2)"]
    assert header[2:] == [f"{s}/{g}" for s in ("QA single-turn", "QA multi-turn", "Conv multi-turn")
                          for g in ("dev", "test2", "mean")]
    for setting, cells in TABLE2_DEV.items():
        for model, printed in cells.items():
            value = float(rows[model][header.index(f"{setting}/dev")])
            assert round(value, 2) == FILES_GIVE.get((setting, model), printed), (setting, model)
    assert rows["GPT-3.5"][header.index("QA multi-turn/dev")] == ""  # not run in multi-turn (16K window)
    header9, rows9 = tables["elitr_qa, test2: breakdowns and tests"]
    column = header9.index("tests/lost_in_the_middle p")
    assert {m: round(float(rows9[m][column]), 3) for m in MODELS_ST} == TABLE9


def test_report_of_recorded_files_gives_table2_dev_and_table9(shared_datasets):
    """`lceval report FILE...` over the published generations: paper 000 Table 2's layout
    and dev cells, and Table 9's p-values on test2 (per split, as the paper computed them)."""
    from tests.cli import report

    folder = shared_datasets / "elitr-bench" / "generated-responses"
    files = [folder / name.format(split=split) for name in RECORDED for split in ("dev", "test2")]
    _check_table2_and_table9(_csv_tables(report(files, "csv")))
    pooled = _csv_tables(report(files, "csv", pooled=True))
    header, rows = pooled["elitr_qa, all groups pooled: breakdowns and tests"]
    # dev and test2 together: what the report printed before it followed the paper
    assert round(float(rows["GPT-4"][header.index("tests/lost_in_the_middle p")]), 3) == 0.121


def test_report_of_replayed_runs_matches_the_recorded_files(real_home, tmp_path, shared_datasets):
    """The README's flow: replay each setting, then `lceval report` the run directories."""
    from tests.cli import report

    models = ["GPT-4", "LongChat-7B-v1.5"]
    dirs = []
    for task, name in zip(("elitr_qa", "elitr_qa_mt", "elitr_conv"), RECORDED):
        reports = run(tasks=task, models=[f"replay:generated-responses/{name}#{m}" for m in models],
                      judge="gpt4-recorded", data_home=real_home, output=tmp_path / "runs", progress=False)
        dirs += [d for d, _ in reports]
    tables = _csv_tables(report(dirs, "csv"))
    header, rows = tables["ELITR-Bench (Thonet et al., 2024a, Table 2)"]
    assert list(rows) == models  # three runs per model, one row each
    for setting, cells in TABLE2_DEV.items():
        for model in models:
            value = float(rows[model][header.index(f"{setting}/dev")])
            assert round(value, 2) == FILES_GIVE.get((setting, model), cells[model])
    header9, rows9 = tables["elitr_qa, test2: breakdowns and tests"]
    column = header9.index("tests/lost_in_the_middle p")
    assert {m: round(float(rows9[m][column]), 3) for m in models} == {m: TABLE9[m] for m in models}


def test_qa_conv_differing_subset_in_one_command(shared_datasets):
    """Paper 000 App. C.3 (paper 001 Fig. 3): 16 dev and 17 test2 questions differ."""
    from tests.cli import report

    folder = shared_datasets / "elitr-bench" / "generated-responses"
    files = [folder / f"elitr-bench-qa_{split}_mt_gpt-4-eval.json#gpt-4-eval" for split in ("dev", "test2")]
    out = [json.loads(block) for block in report(files, "json", where=["qa_conv_differs=true"]).split("\n\n")]
    gpt4 = next(r for r in out if r["model"] == "GPT-4")["tasks"]["elitr_qa_mt"]["metrics"]["score"]
    assert {g: v["n"] for g, v in gpt4["groups"].items()} == {"dev": 16, "test2": 17}
