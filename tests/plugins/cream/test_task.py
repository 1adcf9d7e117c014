"""The `cream` task type on the tiny ELITR fixture: one summary per meeting and prompt, the
human minutes as reference, the transcript shared by both prompts of a meeting; then
`lceval rank` over the run (engine function and CLI)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lceval import hookimpl
from tests import cli as commands
from lceval.errors import UserError
from lceval.interfaces import PairwiseJudge
from lceval.analysis import RankOptions
from lceval.types import PairInput, PairJudgment

from tests.conftest import ScriptedModel, run_engine


def _samples(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]


def test_one_summary_per_meeting_and_prompt(tiny_home, tmp_path):
    model = ScriptedModel()
    run_dir, results, _ = run_engine(model, "cream_elitr", tiny_home, tmp_path)
    samples = _samples(run_dir)
    assert [s["item_id"] for s in samples] == [
        "dev/meeting_en_dev_901/short", "dev/meeting_en_dev_901/long",
        "dev/meeting_en_dev_902/short", "dev/meeting_en_dev_902/long",
        "test2/meeting_en_test2_901/short", "test2/meeting_en_test2_901/long"]
    first = samples[0]
    assert first["metadata"] == {"split": "dev", "meeting_id": "meeting_en_dev_901",
                                 "unit": "dev/meeting_en_dev_901", "prompt": "short"}
    # both annotators' minutes, in file-name order, joined by a --- line
    assert first["reference"].startswith("Demo planning") and "\n\n---\n\n- Orange dashboard" in first["reference"]
    assert "[transcript]" in first["question"] and "short summary" in first["question"]
    # the two prompts of a meeting share the transcript as their prefix and run back to back
    texts = [r.messages[-1].content for r in model.calls]
    assert "orange dashboard" in texts[0] and texts[0].split("\n\n")[1] == texts[1].split("\n\n")[1]
    assert "bulleted list" in texts[1]
    task = results["tasks"]["cream_elitr"]
    assert task["accounting"]["answered"] == 6
    assert set(task["metrics"]) >= {"score", "completeness", "conciseness"}
    assert set(task["metrics"]["score"]["breakdowns"]["prompt"]) == {"short", "long"}


def test_limit_counts_meetings_and_every_prompt_runs_on_them(tiny_home, tmp_path):
    run_dir, _, _ = run_engine(ScriptedModel(), "cream_elitr", tiny_home, tmp_path, limit=1)
    ids = [s["item_id"] for s in _samples(run_dir)]
    assert ids == ["dev/meeting_en_dev_901/short", "dev/meeting_en_dev_901/long",
                   "test2/meeting_en_test2_901/short", "test2/meeting_en_test2_901/long"]


def test_prompts_and_meetings_are_options(tiny_home, tmp_path):
    overrides = {"options.prompts": {"bullets": "{transcript}\n\nList the decisions."},
                 "options.meetings": ["meeting_en_dev_902"]}
    run_dir, _, _ = run_engine(ScriptedModel(), "cream_elitr", tiny_home, tmp_path, overrides=overrides)
    assert [s["item_id"] for s in _samples(run_dir)] == ["dev/meeting_en_dev_902/bullets"]


@pytest.mark.parametrize("overrides, message", [
    ({"options.use_prompts": ["medium"]}, "unknown prompt"),
    ({"options.meetings": ["meeting_en_dev_999"]}, "not found"),
    ({"options.prompts": {"p": "no slot here"}}, "does not match"),
])
def test_bad_options_name_the_field(tiny_home, tmp_path, overrides, message):
    with pytest.raises(UserError, match=message) as err:
        run_engine(ScriptedModel(), "cream_elitr", tiny_home, tmp_path, overrides=overrides)
    assert "options" in (err.value.field or "")


def test_missing_minutes_is_a_clear_error(tiny_home, tmp_path):
    for f in (tiny_home / "elitr-bench" / "minutes" / "meeting_en_dev_902").iterdir():
        f.unlink()
    with pytest.raises(UserError, match="no human minutes for meeting_en_dev_902"):
        run_engine(ScriptedModel(), "cream_elitr", tiny_home, tmp_path)


class LengthJudge(PairwiseJudge):
    """Longer text: more complete, less concise."""

    name = "length"
    criteria = ("completeness", "conciseness")

    def compare(self, pairs: list[PairInput]) -> list[PairJudgment]:
        return [PairJudgment(unit_id=p.unit_id, judge=self.name,
                             scores_a={"completeness": len(p.text_a) / 1000, "conciseness": 1 / len(p.text_a)},
                             scores_b={"completeness": len(p.text_b) / 1000, "conciseness": 1 / len(p.text_b)})
                for p in pairs]


class LengthPlugin:
    @hookimpl
    def register_pairwise_judges(self, register):
        register("length", lambda ctx: LengthJudge())


def test_rank_over_a_real_run_directory(tiny_home, tmp_path, monkeypatch):
    class Verbose(ScriptedModel):
        def generate(self, requests):
            out = super().generate(requests)
            for r, g in zip(requests, out):  # the long prompt gets the longer summary
                g.text = ("word " * (30 if "bulleted" in r.messages[-1].content else 8)).strip()
            return out

    run_dir, _, _ = run_engine(Verbose(), "cream_elitr", tiny_home, tmp_path)
    import lceval.engine

    plugins = lceval.engine.load_plugins(extra=[("length", LengthPlugin())])
    # what `lceval.cli.main` loads the plugins with
    monkeypatch.setattr(lceval.engine, "load_plugins", lambda disabled=(), **kw: plugins)
    path, text = commands.rank([run_dir], judge="length", options=RankOptions(n_orders=20, n_boot=50),
                               output=tmp_path / "rankings")
    report = json.loads((path / "rankings.json").read_text())
    assert report["schema"] == "lceval-rankings-1" and report["unit_field"] == "unit"
    assert report["rankings"]["completeness"]["order"] == ["x/long", "x/short"]
    assert report["rankings"]["conciseness"]["order"] == ["x/short", "x/long"]
    assert report["accounting"]["units"] == 3 and report["accounting"]["ordered_judgments"] == 6
    # the run's own judge (keyfacts-lexical against the minutes) is the reference ranking
    assert report["rankings"]["completeness"]["reference"]["judge"] == ["keyfacts-lexical"]
    assert "x/long" in text and "Pairwise scores" in text
    # the spec's default judge (cream) needs a model: a clear error, not a traceback
    with pytest.raises(UserError, match="model"):
        commands.rank([run_dir], options=RankOptions(n_orders=2, n_boot=2), output=tmp_path / "r2")
