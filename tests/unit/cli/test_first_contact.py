"""What a new user meets first: a table that says why a cell is empty, a limit that spreads
questions over meetings, the prompts without a model (--dry-run), where data and cache live."""

from __future__ import annotations

import contextlib
import io
import json

from lceval import hookimpl
from lceval.cli import main
from lceval.engine import RunConfig, load_plugins
from lceval.interfaces import TaskContext, TaskType
from lceval.results import format_table
from lceval.types import CONTEXT_SLOT, Conversation, Turn
from lceval_plugins.elitr.task import spread

from tests import cli as commands
from tests import elitr_tiny
from tests.conftest import ScriptedModel, execute_config, run_engine, serve_scripted


def call(*argv) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        rc = main([str(a) for a in argv])
    return rc, out.getvalue()


def test_table_says_why_an_interval_or_test_is_missing(tiny_home, tmp_path):
    _, results, _ = run_engine(ScriptedModel(), "elitr_qa", tiny_home, tmp_path, limit=1)
    table = format_table(results)
    # one question per split, so one meeting each; no middle answer for the test
    assert table.count("n/a: 1 meeting only") == 2, table
    assert "n/a: needs at least 2 scores on each side" in table, table


def test_spread_takes_first_middle_and_last():
    assert spread(17, 3) == [0, 8, 16]
    assert spread(14, 4) == [0, 4, 9, 13]
    assert spread(3, 5) == [0, 1, 2] and spread(9, 1) == [0]


def test_limit_per_context_spreads_over_meetings(tiny_home, tmp_path):
    _, _, state = run_engine(ScriptedModel(), "elitr_qa", tiny_home, tmp_path, limit=4, limit_per_context=2)
    ids = [s.item_id for s in state.tasks[0].samples]
    # dev: 2 meetings x 2 (first and last of 901's three), test2: its one meeting x 2
    assert ids == ["dev/meeting_en_dev_901/1", "dev/meeting_en_dev_901/3", "dev/meeting_en_dev_902/1",
                   "dev/meeting_en_dev_902/2", "test2/meeting_en_test2_901/1", "test2/meeting_en_test2_901/2"]


def test_limit_per_context_keeps_the_opening_turns_of_a_multi_turn_conversation(tiny_home, tmp_path):
    _, _, state = run_engine(ScriptedModel(), "elitr_conv", tiny_home, tmp_path, limit_per_context=2,
                             splits=["dev"])
    assert [s.item_id for s in state.tasks[0].samples] == [
        "dev/meeting_en_dev_901/1", "dev/meeting_en_dev_901/2", "dev/meeting_en_dev_902/1", "dev/meeting_en_dev_902/2"]


class IgnoresTheLimit(TaskType):
    """A task type that never applies `limit_per_context` itself: three one-question
    conversations about meeting m1, then one of three turns about m2."""

    options_schema = {"type": "object", "properties": {}}

    def load(self, ctx: TaskContext) -> list[Conversation]:
        def conv(cid: str, ctx_id: str, n: int) -> Conversation:
            users = [f"{CONTEXT_SLOT}\n\nq0"] + [f"q{i}" for i in range(1, n)]
            return Conversation(conv_id=cid, context="c", context_id=ctx_id,
                                turns=[Turn(item_id=f"{cid}/{i}", user=users[i], reference="r", question=f"q{i}")
                                       for i in range(n)])

        return [conv("a", "m1", 1), conv("b", "m1", 1), conv("c", "m1", 1), conv("d", "m2", 3)]


def test_engine_caps_contexts_of_a_task_type_that_ignores_the_limit(tmp_path):
    class Plugin:
        @hookimpl
        def register_models(self, register):
            register("scripted", lambda name, options: ScriptedModel())

        @hookimpl
        def register_task_types(self, register):
            register("ignores-the-limit", IgnoresTheLimit())

    spec = tmp_path / "capped.yaml"
    spec.write_text("name: capped\ndescription: ignores limit_per_context\ntype: ignores-the-limit\n")
    plugins = load_plugins(extra=[("capped", Plugin())])

    def answered(**config) -> list[tuple[str, str]]:
        cfg = RunConfig(tasks=str(spec), models=["scripted:x"], progress=False, **config)
        return [(s.conv_id, s.item_id) for s in execute_config(cfg, plugins, tmp_path / "data").tasks[0].samples]

    # at most 2 turns per context, the first ones: m1's first two conversations, m2's opening two turns
    assert answered(limit_per_context=2) == [("a", "a/0"), ("b", "b/0"), ("d", "d/0"), ("d", "d/1")]
    assert answered() == [("a", "a/0"), ("b", "b/0"), ("c", "c/0"), ("d", "d/0"), ("d", "d/1"), ("d", "d/2")]  # no cap


def test_limit_per_context_must_be_positive(tiny_home, tmp_path, monkeypatch):
    serve_scripted(monkeypatch)
    rc, text = call("run", "--tasks", "elitr_qa", "--model", "scripted:x", "--limit-per-context", "0",
                    "--data-home", tiny_home, "--output", tmp_path)
    assert rc == 2 and "--limit-per-context must be at least 1" in text


def test_dry_run_prints_the_cut_prompts_and_writes_nothing(tiny_home, tmp_path, monkeypatch):
    models = serve_scripted(monkeypatch, lambda: ScriptedModel(window=105))
    cache = tmp_path / "cache.sqlite"
    rc, text = call("--tasks", "elitr_qa", "--model", "scripted:x", "--split", "dev", "--data-home", tiny_home,
                    "--context-policy", "truncate-middle", "--set", "generation.max_new_tokens=8", "--dry-run", "--output", tmp_path / "runs",
                    "--cache", cache)
    assert rc == 0, text
    assert "# elitr_qa: 5 prompt(s) in 5 conversation(s); context policy truncate-middle, window 105" in text
    assert "context cut (truncate-middle) from 30 to" in text and "[...]" in text, text
    assert "Which tool did they choose for the demo?" in text and "--- user" in text
    assert not models[0].calls  # tokenized, never asked to generate
    assert not (tmp_path / "runs").exists() and not cache.exists()


def test_dry_run_without_a_tokenizer_says_it_could_not_cut(tiny_home, tmp_path, monkeypatch):
    serve_scripted(monkeypatch, lambda: ScriptedModel(window=None))
    rc, text = call("run", "--tasks", "elitr_conv", "--model", "scripted:x", "--split", "dev", "--limit", "2",
                    "--data-home", tiny_home, "--dry-run")
    assert rc == 0, text
    assert "could NOT cut" in text and "contexts shown uncut" in text
    assert "[the model's answer to question 1: not generated in a dry run]" in text
    assert elitr_tiny.TRANSCRIPTS["meeting_en_dev_901"].strip() in text


def test_data_paths_says_where_and_why(tmp_path, monkeypatch):
    monkeypatch.setenv("LCEVAL_DATA", str(tmp_path / "home"))
    monkeypatch.delenv("LCEVAL_CACHE")
    text = commands.paths()
    assert f"data home: {tmp_path / 'home'}  [$LCEVAL_DATA]" in text
    # the cache follows the data home when only $LCEVAL_DATA is set (issue 46)
    assert f"{tmp_path / 'home' / 'cache.sqlite'}  [beside the data home, $LCEVAL_DATA" in text
    rc, out = call("data", "paths", "--cache", tmp_path / "c.sqlite")
    assert rc == 0 and f"{tmp_path / 'c.sqlite'}  [--cache]" in out


def test_manifest_records_the_per_context_limit(tiny_home, tmp_path):
    run_dir, _, _ = run_engine(ScriptedModel(), "elitr_qa", tiny_home, tmp_path, limit_per_context=1)
    assert json.loads((run_dir / "manifest.json").read_text())["config"]["limit_per_context"] == 1
