"""`lceval report`: the papers' layout (one row per model across settings, paper 000 Table 2),
breakdowns and tests per split or pooled, subsets and extra breakdowns from samples, recorded
score files read like runs, and context-length breakdowns and curves."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest

from lceval.cli import main
from lceval.errors import UserError
from lceval.report import from_run_dir, row_labels
from lceval.results import load_run

from tests import cli as commands
from tests.conftest import ScriptedModel, run_engine
from tests.paths import TEST_DATA

FIXTURE = TEST_DATA / "replay_small.json"


def _csv(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def _table(rows: list[list[str]], title: str) -> tuple[list[str], dict[str, list[str]]]:
    """(header, model -> row) of one table of a CSV report."""
    start = next(i for i, r in enumerate(rows) if len(r) > 1 and i + 1 < len(rows) and rows[i + 1][0] == title)
    body = {r[1]: r for r in rows[start + 1:] if r[0] == title}
    return rows[start], body


def test_one_row_per_model_across_the_three_settings(tiny_home, tmp_path):
    dirs = [run_engine(ScriptedModel(), task, tiny_home, tmp_path / task)[0]
            for task in ("elitr_qa", "elitr_qa_mt", "elitr_conv")]
    rows = _csv(commands.report(dirs, "csv"))
    header, body = _table(rows, "ELITR-Bench (Thonet et al., 2024a, Table 2)")
    assert header[2:] == [f"{s}/{g}" for s in ("QA single-turn", "QA multi-turn", "Conv multi-turn")
                          for g in ("dev", "test2", "mean")]
    assert list(body) == ["x"]  # `scripted:x` is named x, and its three runs are one row
    results = [json.loads((d / "results.json").read_text()) for d in dirs]
    for i, task in enumerate(("elitr_qa", "elitr_qa_mt", "elitr_conv")):
        metric = results[i]["tasks"][task]["metrics"]["score"]
        assert float(body["x"][2 + 3 * i]) == pytest.approx(metric["groups"]["dev"]["value"], rel=1e-5)
        assert float(body["x"][4 + 3 * i]) == pytest.approx(metric["mean_of_groups"], rel=1e-5)


def test_two_judges_of_one_model_are_two_rows(tiny_home, tmp_path, capsys):
    run_dir, _, _ = run_engine(ScriptedModel(), "elitr_qa", tiny_home, tmp_path)
    assert main(["score", str(run_dir), "--judge", "gpt4-recorded", "--output", str(tmp_path / "s")]) == 0
    capsys.readouterr()
    rescored = next((tmp_path / "s").iterdir())
    runs = [from_run_dir(load_run(d)) for d in (run_dir, rescored, run_dir)]
    assert row_labels(runs) == ["x (lexical)", "x (recorded:gpt-4-eval)", "x (lexical) #2"]
    assert row_labels(runs[:1] + [from_run_dir(load_run(run_dir))]) == ["x", "x #2"]


def test_breakdowns_and_tests_per_split_unless_pooled(tiny_home, tmp_path):
    run_dir, results, _ = run_engine(ScriptedModel(), "elitr_qa", tiny_home, tmp_path)
    metric = results["tasks"]["elitr_qa"]["metrics"]["score"]
    text = commands.report([run_dir], "markdown")
    assert "### elitr_qa, dev: breakdowns and tests" in text and "### elitr_qa, test2:" in text
    header, body = _table(_csv(commands.report([run_dir], "csv")), "elitr_qa, dev: breakdowns and tests")
    # the paper's column order (spec's report.breakdown_order): who, what, when, howmany; B, M, E, S
    assert header[2:6] == [f"question_type/{t}" for t in ("who", "what", "when", "howmany")]
    assert header[6:9] == ["answer_position/B", "answer_position/M", "answer_position/E"]
    dev = metric["groups"]["dev"]
    assert float(body["x"][header.index("answer_position/M")]) == pytest.approx(
        dev["breakdowns"]["answer_position"]["M"]["value"], rel=1e-5)
    pooled = commands.report([run_dir], "markdown", pooled=True)
    assert "### elitr_qa, all groups pooled: breakdowns and tests" in pooled and ", dev:" not in pooled


def test_where_keeps_a_subset_and_by_adds_a_breakdown(tiny_home, tmp_path):
    run_dir, _, _ = run_engine(ScriptedModel(), "elitr_qa", tiny_home, tmp_path)
    out = json.loads(commands.report([run_dir], "json", where=["qa_conv_differs=true"]))
    score = out["tasks"]["elitr_qa"]["metrics"]["score"]
    assert score["n"] == 1 and list(score["groups"]) == ["dev"]  # only dev/meeting_en_dev_901/3 differs
    by = json.loads(commands.report([run_dir], "json", by=["qa_conv_differs"]))
    split = by["tasks"]["elitr_qa"]["metrics"]["score"]["groups"]["dev"]["breakdowns"]["qa_conv_differs"]
    assert {k: v["n"] for k, v in split.items()} == {"False": 4, "True": 1}
    text = commands.report([run_dir], "markdown", where=["qa_conv_differs=true"])
    assert "### ELITR-Bench (Thonet et al., 2024a, Table 2) (only samples with qa_conv_differs=true)" in text
    with pytest.raises(UserError, match="no sample"):
        commands.report([run_dir], "json", where=["question_type=nonesuch"])
    assert main(["report", str(run_dir), "--where", "novalue"]) == 2


def _published(tmp_path: Path, name: str = "elitr-bench-qa_dev_st_gpt-4-eval.json") -> Path:
    folder = tmp_path / "generated"
    folder.mkdir(exist_ok=True)
    shutil.copy(FIXTURE, folder / name)
    return folder / name


def test_recorded_files_are_tabulated_like_runs(tmp_path):
    path = _published(tmp_path)
    _, body = _table(_csv(commands.report([f"{path}#gpt-4-eval"], "csv")), "ELITR-Bench (Thonet et al., 2024a, Table 2)")
    recorded = json.loads(FIXTURE.read_text())
    scores: dict[str, list[float]] = {}
    for m in recorded["meetings"]:
        for q in m["questions"]:
            for r in q["generated-responses"]:
                scores.setdefault(r["model"], []).append(float(r["gpt-4-eval_score"]))
    assert list(body) == ["ModelA", "ModelB"]
    for model, values in scores.items():
        assert float(body[model][2]) == pytest.approx(sum(values) / len(values), rel=1e-5)
    # every scorer of the file is a run: the same model's rows are told apart by scorer
    _, all_scorers = _table(_csv(commands.report([path], "csv")), "ELITR-Bench (Thonet et al., 2024a, Table 2)")
    assert "ModelA (recorded:gpt-4-eval)" in all_scorers and "ModelA (recorded:prometheus-eval)" in all_scorers
    per_run = json.loads(commands.report([f"{path}#gpt-4-eval"], "json").split("\n\n")[0])
    types = [q["question-type"] for m in recorded["meetings"] for q in m["questions"]]
    by_type = per_run["tasks"]["elitr_qa"]["metrics"]["score"]["breakdowns"]["question_type"]
    assert {t: v["n"] for t, v in by_type.items()} == {t: types.count(t) for t in set(types)}


def test_recorded_file_that_names_no_task_is_refused(tmp_path, capsys):
    plain = tmp_path / "answers.json"
    shutil.copy(FIXTURE, plain)
    with pytest.raises(UserError, match="do not say which task"):
        commands.report([plain], "markdown")
    assert main(["report", str(plain), "--format", "markdown"]) == 2
    assert "answers.json" in capsys.readouterr().err


def test_recorded_items_know_the_qa_conv_differing_questions(tmp_path):
    from lceval_plugins.elitr.replay import read_recorded_scores

    qa = _published(tmp_path, "elitr-bench-qa_dev_mt_gpt-4-eval.json")
    conv = json.loads(FIXTURE.read_text())
    conv["meetings"][0]["questions"][1]["question"] = "And how many rooms?"
    (qa.parent / "elitr-bench-conv_dev_mt_gpt-4-eval.json").write_text(json.dumps(conv))
    (source, *_) = read_recorded_scores(qa)
    assert source.task == "elitr_qa_mt"
    flagged = {i.item_id for i in source.items if i.metadata["qa_conv_differs"]}
    assert flagged == {"dev/meeting_fixture_001/2"}


# -- seeds ------------------------------------------------------------------------------

class OneRunModel(ScriptedModel):
    def check_seeds(self, seeds):
        if len(seeds) > 1:
            raise UserError("one recorded run only", field="--seed")


def test_a_backend_refuses_seeds_before_any_request(tiny_home, tmp_path):
    model = OneRunModel()
    with pytest.raises(UserError, match="one recorded run"):
        run_engine(model, "elitr_qa", tiny_home, tmp_path, seeds=[1, 2])
    assert model.calls == []
    run_engine(OneRunModel(), "elitr_qa", tiny_home, tmp_path, seeds=[1])


def test_replay_takes_a_seed_placeholder_and_refuses_seeds_without_one(tmp_path, monkeypatch):
    from lceval.types import GenerationParams, GenerationRequest, Message
    from lceval_plugins.elitr.replay import make_replay

    for seed, answer in ((1, "first run"), (2, "second run")):
        data = json.loads(FIXTURE.read_text())
        data["meetings"][0]["questions"][0]["generated-responses"][0]["generated-response"] = answer
        (tmp_path / f"run_seed{seed}.json").write_text(json.dumps(data))
    monkeypatch.chdir(tmp_path)
    backend = make_replay("run_seed{seed}.json#ModelA", {})
    backend.check_seeds([1, 2])  # one file per seed: accepted
    hints = {"meeting_id": "meeting_fixture_001", "question_id": "1", "split": "dev"}
    texts = [backend.generate([GenerationRequest("r", [Message("user", "q")], GenerationParams(seed=s), hints)])[0].text
             for s in (1, 2)]
    assert texts == ["first run", "second run"]
    single = make_replay(f"{FIXTURE}#ModelA", {})
    single.check_seeds([7])
    with pytest.raises(UserError, match=r"2 seeds.*same answers") as err:
        single.check_seeds([1, 2])
    assert "{seed}" in err.value.render()


# -- context length ---------------------------------------------------------------------

def test_context_length_breakdowns_have_the_breakdown_structure(tiny_home, tmp_path):
    _, results, _ = run_engine(ScriptedModel(window=4096), "elitr_qa", tiny_home, tmp_path)
    score = results["tasks"]["elitr_qa"]["metrics"]["score"]
    for block in (score, score["groups"]["dev"]):
        tokens = block["breakdowns"]["context_tokens"]
        assert list(tokens) == ["0-4k"]  # tiny transcripts
        assert set(tokens["0-4k"]) == {"value", "n", "spread"} and tokens["0-4k"]["spread"]["method"] == "cluster_bootstrap"
        assert list(block["breakdowns"]["context_kept_share"]) == ["100%"]
    # a backend without a tokenizer measures nothing: no context breakdown rather than a guess
    _, plain, _ = run_engine(ScriptedModel(), "elitr_qa", tiny_home, tmp_path / "plain")
    assert "context_tokens" not in plain["tasks"]["elitr_qa"]["metrics"]["score"]["breakdowns"]


def test_context_lengths_run_each_budget_and_report_a_curve(tiny_home, tmp_path):
    model = ScriptedModel(window=4096)
    run_dir, results, state = run_engine(model, "elitr_qa", tiny_home, tmp_path, context_lengths=[10, 20, None])
    assert list(results["tasks"]) == ["elitr_qa@10", "elitr_qa@20", "elitr_qa"]
    at10 = results["tasks"]["elitr_qa@10"]
    assert at10["context_max_tokens"] == 10 and at10["spec_name"] == "elitr_qa"
    assert at10["accounting"]["window_capped"] == 0
    samples = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines()]
    cut10 = [s["context_cut"] for s in samples if s["task"] == "elitr_qa@10"]
    assert all(c["kept_tokens"] <= 10 for c in cut10) and all(c["action"] == "truncated" for c in cut10)
    assert {c["policy"] for c in cut10} == {"truncate-middle"}  # asked for: made though the policy is error
    # a prompt a budget leaves uncut is the full task's prompt: asked once, then from the cache
    uncut20 = sum(1 for s in samples if s["task"] == "elitr_qa@20" and s["context_cut"]["action"] == "none")
    assert uncut20 > 0 and state.usage["requests"] == 21
    assert state.usage["cache_hits"] == uncut20 and len(model.calls) == 21 - uncut20
    text = commands.report([run_dir], "csv")
    header, body = _table(_csv(text), "elitr_qa: score by context length (tokens kept of each context, at most)")
    assert header[2:] == ["context length/10", "context length/20", "context length/full"]
    assert float(body["x"][2]) == pytest.approx(at10["metrics"]["score"]["mean_of_groups"], rel=1e-5)
    assert "elitr_qa@10" not in text.split("score by context length")[0]  # budgets stay out of Table 2


class NoTokenizer(ScriptedModel):
    def tokenize(self, text):
        return None


def test_context_budget_needs_a_tokenizer(tiny_home, tmp_path):
    with pytest.raises(UserError, match="needs the model's tokenizer"):
        run_engine(NoTokenizer(), "elitr_qa", tiny_home, tmp_path, context_lengths=[8])


def test_context_lengths_flag_parses_budgets(capsys):
    from lceval.engine import RunConfig

    def parse_context_lengths(text: str) -> list[int | None] | None:  # `--context-lengths TEXT`, as `run` reads it
        return RunConfig.from_flags({"context_lengths": text}, tasks="elitr_qa", models=["smollm2"]).context_lengths

    assert parse_context_lengths("16k, 4k,full,12000") == [4096, 12000, 16384, None]
    for bad in ("8q", "0", "4k,4096", ""):
        with pytest.raises(UserError):
            parse_context_lengths(bad)
    assert main(["run", "--tasks", "elitr_qa", "--model", "smollm2", "--context-lengths", "8x"]) == 2
    assert "--context-lengths" in capsys.readouterr().err


def test_the_prefilled_footnote_is_printed_only_under_a_table_with_such_a_cell(tiny_home, tmp_path):
    """Issue 19: the markdown report explained "-" prefilled cells under a table that had none."""
    run_dir, _, _ = run_engine(ScriptedModel(), "elitr_qa", tiny_home, tmp_path)
    note = "prefilled: - where the backend did not report what it prefilled"
    text = commands.report([run_dir], "markdown")
    tokens = json.loads((run_dir / "results.json").read_text())["tasks"]["elitr_qa"]["accounting"]["tokens"]
    assert tokens["prefilled"] is not None  # the scripted backend says what it prefilled
    assert "### Tokens per model and task" in text and note not in text
    results = json.loads((run_dir / "results.json").read_text())
    results["tasks"]["elitr_qa"]["accounting"]["tokens"].update(prefilled=None, prefill_unknown=3)
    (run_dir / "results.json").write_text(json.dumps(results))
    text = commands.report([run_dir], "markdown")
    tokens_table = text[text.index("### Tokens per model and task"):]
    row = next(line for line in tokens_table.splitlines() if line.startswith("| x |"))
    assert row.split("|")[3].strip() == "-" and note in tokens_table
