"""`options.noise` in the task types, the cached noisy transcripts, the manifest's per-context
facts, the `lceval noise` commands (through the entry point) and the robustness report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lceval.errors import UserError
from lceval.interfaces import TaskContext
from lceval_plugins.transcript_noise import transcripts
from lceval_plugins.transcript_noise.corpus import read_corpus
from lceval_plugins.noise.report import format_report, noise_report
from lceval_plugins.transcript_noise.rules import build_rules, write_rules
from lceval_plugins.cream.task import CreamTaskType
from lceval_plugins.elitr.task import ElitrTaskType

from tests.conftest import ScriptedModel, complete, run_engine
from tests.paths import TEST_DATA

pytest.importorskip("jiwer")
CORPUS = TEST_DATA / "noise" / "espeak_pocketsphinx.jsonl"


@pytest.fixture
def noise_home(tiny_home) -> Path:
    write_rules(build_rules(read_corpus(str(CORPUS))), tiny_home / "noise" / "rules.json")
    return tiny_home


def spec(tmp_path: Path, name: str, wer: float | None) -> Path:
    noise = "" if wer is None else f"\n  noise: {{rules: rules.json, wer: {wer}, seed: 1}}"
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\ndescription: tiny\ntype: elitr\ndataset: elitr-bench\n"
                    f"options:\n  mode: single-turn{noise}\n"
                    "report:\n  group_by: split\n  cluster_by: meeting_id\n")
    return path


def context(home: Path, tmp_path: Path, options: dict, facts: dict, files: list, task_type=ElitrTaskType) -> TaskContext:
    return TaskContext(spec={"options": complete(task_type, options)}, spec_path=tmp_path / "s.yaml", data_home=home, splits=None,
                       limit=None, record_file=files.append,
                       record_facts=lambda cid, f: facts.setdefault(cid, {}).update(f))


def test_elitr_noise_option_builds_and_caches_noisy_transcripts(noise_home, tmp_path, monkeypatch):
    facts, files = {}, []
    options = {"noise": {"rules": "rules.json", "wer": 0.8, "seed": 1}}
    convs = ElitrTaskType().load(context(noise_home, tmp_path, options, facts, files))
    clean = (noise_home / "elitr-bench" / "transcripts" / "meeting_en_dev_901.txt").read_text()
    first = convs[0]
    assert first.context != clean and first.context.count("(PERSON") == clean.count("(PERSON")
    assert first.metadata["noise_target_wer"] == 0.8 and 0 < first.metadata["noise_wer"] <= 1.5
    assert first.turns[0].metadata["question_id"] == "1"  # questions untouched
    noise = facts["dev/meeting_en_dev_901"]["noise"]
    assert noise["effective_wer"] == first.metadata["noise_wer"] and noise["seed"] == 1
    assert {p.name for p in files} >= {"rules.json", f"{transcripts.cache_key(noise['transcript_sha256'], noise['rules_sha256'], 0.8, 1, True)}.txt"}
    # a second load reads the cache: the injection never runs again
    monkeypatch.setattr("lceval_plugins.transcript_noise.inject.inject", lambda *a, **k: pytest.fail("rebuilt"))
    again = ElitrTaskType().load(context(noise_home, tmp_path, options, {}, []))
    assert [c.context for c in again] == [c.context for c in convs]


def test_damaged_cache_is_rebuilt(noise_home):
    clean = "(PERSON1) the earlier meeting was on friday and we talked about the demo\n" * 5
    path, facts = transcripts.noisy_transcript(clean, noise_home / "noise" / "rules.json", 0.6, 0, True, noise_home)
    good = path.read_bytes()
    path.write_text("truncated")
    path2, _ = transcripts.noisy_transcript(clean, noise_home / "noise" / "rules.json", 0.6, 0, True, noise_home)
    assert path2 == path and path.read_bytes() == good


def test_missing_rules_and_bad_level_are_user_errors(noise_home, tmp_path):
    with pytest.raises(UserError) as err:
        ElitrTaskType().load(context(noise_home, tmp_path, {"noise": {"rules": "nope.json", "wer": 0.2}}, {}, []))
    assert err.value.field == "options.noise.rules" and "lceval noise rules" in err.value.hint
    out = subprocess.run([sys.executable, "-m", "lceval", "run", "--tasks", str(spec(tmp_path, "bad", 0.2)),
                          "--model", "replay:x.json#M", "--set", "options.noise.wer=1.5",
                          "--data-home", str(noise_home)], capture_output=True, text=True)
    assert out.returncode == 2 and "options.noise.wer" in out.stderr, out.stderr


def test_cream_takes_the_same_noise_option(noise_home, tmp_path):
    facts = {}
    options = {"noise": {"rules": "rules.json", "wer": 0.6}}
    convs = CreamTaskType().load(context(noise_home, tmp_path, options, facts, [], task_type=CreamTaskType))
    assert all(c.metadata["noise_target_wer"] == 0.6 for c in convs)
    assert set(facts) == {c.context_id for c in convs}
    assert "orange dashboard" in convs[0].turns[0].reference  # the minutes stay clean


def test_run_records_context_facts_and_the_report_pairs_levels(noise_home, tmp_path):
    tasks = ",".join(str(spec(tmp_path, n, w)) for n, w in [("t_clean", None), ("t_n40", 0.4), ("t_n100", 1.0)])
    run_dir, results, state = run_engine(ScriptedModel(), tasks, noise_home, tmp_path)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert set(manifest["context_facts"]) == {"t_n40", "t_n100"}
    assert manifest["context_facts"]["t_n40"]["dev/meeting_en_dev_902"]["noise"]["target_wer"] == 0.4
    from lceval.results import console_text

    assert "t_n100 (mean over 3 contexts): noise.target_wer=1" in console_text(state, results)
    report = noise_report([run_dir], n_boot=200)
    rows = {r.task: r for r in report.rows}
    assert [r.target_wer for r in report.rows] == [0.0, 0.4, 1.0]
    assert rows["t_clean"].drop is None and rows["t_clean"].effective_wer == 0.0
    # the scripted model answers from the question alone: the same scores at every level
    assert rows["t_n100"].pairs == rows["t_n100"].n == 7 and rows["t_n100"].drop == 0.0
    assert rows["t_n100"].meetings == 3 and len(rows["t_n100"].points) == 3
    assert [t.target_wer for t in report.table5] == [0.4, 1.0] and report.table5[0].meetings == 3
    text = format_report(report)
    assert "Table 5" in text and "t_n40" in text
    assert json.loads(format_report(report, "json"))["rows"][2]["task"] == "t_n100"


def test_report_without_noise_is_a_user_error(noise_home, tmp_path):
    run_dir, _, _ = run_engine(ScriptedModel(), str(spec(tmp_path, "t_clean", None)), noise_home, tmp_path)
    with pytest.raises(UserError, match="no task with options.noise"):
        noise_report([run_dir])


def test_noise_commands_through_the_entry_point(tmp_path, noise_home):
    from lceval.engine import load_plugins

    assert "noise" in load_plugins().commands

    def lceval(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "lceval", "noise", *args], capture_output=True, text=True)

    rules = tmp_path / "r.json"
    out = lceval("rules", str(CORPUS), "-o", str(rules))
    assert out.returncode == 0 and "rules from 60 pairs" in out.stdout, out.stderr
    text = noise_home / "elitr-bench" / "transcripts" / "meeting_en_dev_901.txt"
    out = lceval("apply", str(rules), str(text), "--wer", "0.5", "-o", str(tmp_path / "noisy.txt"))
    assert out.returncode == 0 and json.loads(out.stdout)["target_wer"] == 0.5, out.stderr
    out = lceval("wer", str(rules), "--levels", "0.2,0.6", "--data-home", str(noise_home), "--format", "json")
    rows = json.loads(out.stdout)
    assert [r["target_wer"] for r in rows] == [0.2, 0.6] and rows[0]["meetings"] == 3
    bad = lceval("rules", str(tmp_path / "missing.jsonl"), "-o", str(rules))
    assert bad.returncode == 2 and "corpus file not found" in bad.stderr


def test_shards_keep_the_facts_of_their_meetings_and_merge_joins_them(noise_home, tmp_path):
    from tests.cli import merge

    from tests.shards import engine_run

    task = str(spec(tmp_path, "t_n60", 0.6))
    shards = [engine_run(ScriptedModel(window=8192), task, noise_home, tmp_path / "shards", shard=(i, 2))
              for i in range(2)]
    held = [set(json.loads((s / "manifest.json").read_text())["context_facts"]["t_n60"]) for s in shards]
    assert held[0] and held[1] and not held[0] & held[1]
    merged, _ = merge(shards, output=tmp_path / "merged")
    facts = json.loads((merged / "manifest.json").read_text())["context_facts"]["t_n60"]
    assert set(facts) == held[0] | held[1] and len(facts) == 3
    assert all(f["noise"]["target_wer"] == 0.6 for f in facts.values())


def test_html_report_draws_the_noise_curve_through_the_panel_hook(noise_home, tmp_path):
    from lceval.interfaces import ReportContext
    from lceval.engine import load_plugins
    from lceval.report import run_labels
    from lceval.results import load_run

    tasks = ",".join(str(spec(tmp_path, n, w)) for n, w in [("t_clean", None), ("t_n40", 0.4), ("t_n100", 1.0)])
    run_dir, _, _ = run_engine(ScriptedModel(), tasks, noise_home, tmp_path)
    other, _, _ = run_engine(ScriptedModel(), str(spec(tmp_path, "t_clean", None)), noise_home, tmp_path / "b")
    runs = [load_run(run_dir)]  # what the HTML report hands its panels
    panel = load_plugins().report_panels["noise"]
    figs = panel(ReportContext(runs, run_labels(runs)))
    assert [f.title for f in figs] == ["Score by target word error rate", "Drop from the clean score",
                                       "Each meeting's score against its effective WER",
                                       "Target vs effective word error rate (Table 5)"]
    score, drop, meetings, table5 = figs
    assert score.points == 3 and '"0%"' in json.dumps(score.spec) and '"100%"' in json.dumps(score.spec)
    assert drop.points == 2  # the noisy levels, each against the clean run
    assert meetings.points == 9  # 3 meetings x 3 levels
    assert table5.points == 2 and "Effective WER measured with jiwer" in table5.caption
    # runs without noise draw nothing
    clean = [load_run(other)]
    assert panel(ReportContext(clean, run_labels(clean))) == []
