"""Paper 002, Table 1 on the authors' 200 annotated summaries: a replayed run judged by the
offline coverage judge lines up with all 1,419 annotated insights, beside the six recorded
evaluators (GPT-4o: Pearson 0.716 with the annotators, same bullet 88.9%)."""

from __future__ import annotations

import json

import pytest

from tests import cli as commands

FILE = "summhay/eval_benchmark_data.json"
# Table 1 (Pearson with the annotators' coverage, share of insights linked to the same bullet)
TABLE_1 = {"prompted_gpt-4o": (0.716, 0.889)}


def test_offline_judge_beside_the_six_evaluators(shared_datasets, tmp_path):
    path = shared_datasets / FILE
    if not path.is_file():
        pytest.skip(f"{path} not found")
    (run_dir, _), = commands.run(tasks="summhay_annotated", models=["summhay-replay:annotated"],
                                 judge="summhay-coverage-offline", output=tmp_path / "runs",
                                 overrides={"options.annotations": str(path)}, progress=False)
    rep = json.loads(commands.judge_agreement([str(run_dir), str(path)], fmt="json", n_boot=50))
    assert rep["items_in_all_sources"] == 1419
    vs_human = {p["b"] if p["a"] == "human" else p["a"]: p for p in rep["pairs"] if "human" in (p["a"], p["b"])}
    assert set(vs_human) == {"summhay-coverage-offline", "prompted_gpt-4o", "9fs_gpt-4o", "prompted_claude3-haiku",
                             "prompted_claude3-opus", "prompted_gemini-1.5-pro", "prompted_gpt3.5"}
    assert all(p["matched"] == 1419 and p["item"]["n"] == 1419 for p in vs_human.values())
    for name, (r, same) in TABLE_1.items():
        assert round(vs_human[name]["item"]["pearson"]["value"], 3) == r
        assert round(vs_human[name]["label_agreement"]["share"], 3) == same
    mine = vs_human["summhay-coverage-offline"]
    # measured: 0.629 and 84.9% (lexical similarity, thresholds set by hand)
    assert 0.6 < mine["item"]["pearson"]["value"] < 0.66
    assert 0.82 < mine["label_agreement"]["share"] < 0.88


def test_markdown_prints_table_1_digits(shared_datasets):
    path = shared_datasets / FILE
    if not path.is_file():
        pytest.skip(f"{path} not found")
    text = commands.judge_agreement([f"human={path}#human", f"gpt-4o={path}#prompted_gpt-4o"], n_boot=20)
    assert "| human | gpt-4o | 1419 | 0.716 [" in text and "| 88.9% (n=" in text


def test_domains_and_table_6(shared_datasets):
    """The 200 summaries are 114 conversation (doctor-patient, sales calls) and 86 news (Foot
    Locker); Table 6's summarizer bias on them (paper 002, App. A.3)."""
    from lceval_plugins.summhay.annotated import annotated_conversations
    from lceval_plugins.summhay.bias import evaluator_bias

    path = shared_datasets / FILE
    if not path.is_file():
        pytest.skip(f"{path} not found")
    domains = [c.metadata["domain"] for c in annotated_conversations(path)]
    assert (domains.count("conversation"), domains.count("news")) == (114, 86)
    rep = evaluator_bias(path)
    bias = {s: [round(rep["summarizer_bias"][s][e], 3) for e in rep["evaluators"]] for s in rep["summarizer_bias"]}
    # the three rows Table 6 prints to the digit (GPT-4o, Claude 3 Opus, Gemini-1.5-pro columns)
    assert bias["claude3-sonnet"] == [0.027, -0.001, -0.012]
    assert bias["gpt3.5"] == [0.009, 0.050, 0.048]
    assert bias["command-r-plus"] == [0.064, 0.128, 0.071]
    # the other six rows come out 0.01-0.03 lower than printed, for a reason this file does not
    # show (the same computation gives the three rows above exactly): pinned as measured
    assert [round(rep["length_to_score"][e], 3) for e in rep["evaluators"]] == [-0.119, -0.169, -0.175]  # printed -0.122, -0.174, -0.178
    assert [round(rep["length_to_delta"][e], 3) for e in rep["evaluators"]] == [0.023, -0.047, -0.078]  # printed 0.02, -0.051, -0.081
