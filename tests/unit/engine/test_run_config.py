"""Each thing said once: `lceval run`'s options declared on RunConfig and read from there by
argparse and --dry-run; a model string resolved (and its options checked) once per run; the
plugins loaded once per command and handed down, nothing passed through os.environ."""

from __future__ import annotations

import os
from dataclasses import fields

import pytest

from lceval import hookimpl
from lceval.cli import main
from lceval.engine import RunConfig
from lceval.errors import UserError
from lceval.options import NO_OPTIONS, flags_of

from tests.conftest import ScriptedModel


def test_every_run_flag_is_parsed_from_its_one_declaration(capsys, monkeypatch):
    # the command line's own parser hands its values to RunConfig.from_flags: the config it
    # builds is caught there, and the command stops before any work
    built: list[RunConfig] = []
    real_from_flags = RunConfig.from_flags.__func__

    def caught(cls, given, **extra):
        built.append(real_from_flags(cls, given, **extra))
        raise UserError("caught")

    monkeypatch.setattr(RunConfig, "from_flags", classmethod(caught))
    assert main(["run", "--tasks", "t", "--model", "a", "--model", "b", "--seed", "1,2", "--limit", "3",
                 "--set", "options.x=[1, 2]", "--context-lengths", "8k,full", "--shard", "1/4",
                 "--no-progress", "--contexts", "dev/*,x", "--context-policy", "truncate-left",
                 "--effective-threshold", "85.6"]) == 2
    assert "caught" in capsys.readouterr().err
    monkeypatch.undo()
    (config,) = built
    assert config.models == ["a", "b"] and config.seeds == [1, 2] and config.limit == 3
    assert config.overrides == {"options.x": [1, 2]} and config.context_lengths == [8192, None]
    assert config.shard == (1, 4) and config.progress is False and config.contexts == ["dev/*", "x"]
    assert config.context_policy == "truncate-left" and config.dry_run is False and config.effective_threshold == 85.6
    # every field a user sets on the command line has a flag the parser knows, and no other
    flagged = {f.name for f in fields(RunConfig) if "flag" in f.metadata}
    assert flagged == {dest for dest, _ in flags_of(RunConfig)}
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    help_text = capsys.readouterr().out
    for _, flag in flags_of(RunConfig):
        assert flag.name in help_text
    assert dict(flags_of(RunConfig))["limit_per_context"].name == "--limit-per-context"


@pytest.mark.parametrize("argv,needle", [
    (["--limit", "abc"], "field '--limit': --limit takes a whole number, got 'abc'"),
    (["--limit", "0"], "field '--limit': --limit must be at least 1, got 0"),
    (["--limit-per-context", "-2"], "--limit-per-context must be at least 1"),
    (["--context-policy", "trim"], "unknown context policy 'trim' (known: error, skip, truncate-middle"),
    (["--shard", "4/4"], "--shard takes I/N"),
    (["--context-lengths", "8q"], "'8q' is not a length"),
    (["--effective-threshold", "high"], "--effective-threshold takes a score (e.g. 85.6), got 'high'"),
])
def test_a_bad_flag_value_is_one_line_naming_the_flag(argv, needle, capsys):
    assert main(["run", "--tasks", "elitr_qa", "--model", "smollm2", *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and "usage:" not in err and len(err.strip().splitlines()) == 1


def test_a_config_built_by_code_is_checked_too():
    with pytest.raises(UserError, match="--limit must be at least 1"):
        RunConfig(tasks="t", models=["m"], limit=0).check()
    with pytest.raises(UserError, match="at least one model"):
        RunConfig(tasks="t").check()


class Counted:
    """A `counted:` scheme whose factory counts its calls, with declared options."""

    SCHEMA = {"type": "object", "additionalProperties": False,
              "properties": {"window": {"type": "integer", "minimum": 1, "default": 4096}}}

    def __init__(self) -> None:
        self.built: list[dict] = []

    @hookimpl
    def register_models(self, register):
        def factory(name, options):
            self.built.append(dict(options))
            return ScriptedModel(window=options["window"])
        register("counted", factory, options_schema=self.SCHEMA)


def test_one_command_loads_the_plugins_once_resolves_the_model_once_and_leaves_the_environment(
        tiny_home, tmp_path, monkeypatch):
    import jsonschema

    import lceval.engine
    from lceval import options as options_module
    from lceval.engine import load_plugins as real_load

    plugin = Counted()
    loads: list[tuple] = []

    def load(disabled=(), extra=(), overrides=()):
        loads.append((tuple(disabled), tuple(overrides)))
        return real_load(disabled, extra=[("counted", plugin)], overrides=overrides)

    monkeypatch.setattr(lceval.engine, "load_plugins", load)  # what `lceval.cli.main` loads them with
    # every check of options against the backend's declared schema: lceval.options validates a
    # mapping of options with a JSON Schema validator of that schema
    checks: list[dict] = []
    real_iter = jsonschema.Draft202012Validator.iter_errors

    def counted_iter(self, instance, *args, **kwargs):
        if self.schema == Counted.SCHEMA:
            checks.append(dict(instance))
        return real_iter(self, instance, *args, **kwargs)

    monkeypatch.setattr(jsonschema.Draft202012Validator, "iter_errors", counted_iter)
    wrapped_calls: list[str] = []  # a registered factory's own options check (judges use it)
    real_call = options_module.CheckedFactory.__call__
    monkeypatch.setattr(options_module.CheckedFactory, "__call__",
                        lambda self, *a: wrapped_calls.append(self.what) or real_call(self, *a))
    before = dict(os.environ)
    assert main(["-p", "override:counted", "run", "--tasks", "elitr_qa", "--model", "counted:x,window=2048",
                 "--limit", "2", "--data-home", str(tiny_home), "--output", str(tmp_path / "runs"),
                 "--no-progress"]) == 0
    assert loads == [((), ("counted",))]  # once, with the -p choice handed to the loader
    assert checks == [{"window": 2048}]  # the backend's options checked once, at resolution ...
    assert "backend 'counted'" not in wrapped_calls  # ... not again at the factory
    assert plugin.built == [{"window": 2048}]  # built once with the options checked at resolution
    assert dict(os.environ) == before  # no -p override, no data home left in the environment


def test_dry_run_reads_the_same_config(tiny_home, monkeypatch, capsys):
    from tests.conftest import serve_scripted

    built = serve_scripted(monkeypatch)
    counts = []
    for limits in ([], ["--limit", "1"], ["--split", "dev", "--limit", "1"]):
        assert main(["run", "--tasks", "elitr_qa", "--model", "scripted:x", *limits, "--data-home", str(tiny_home),
                     "--dry-run"]) == 0
        counts.append(capsys.readouterr().out.count("--- user"))
    assert counts[0] > counts[1] == 2 and counts[2] == 1  # --limit per split, --split: as a run reads them
    assert all(not m.calls for m in built)  # nothing generated


def test_the_data_home_flag_reaches_plugins_without_the_environment(tmp_path):
    from lceval.io import data_home, using_data_home

    os.environ.pop("LCEVAL_DATA_X", None)
    outside = data_home()
    with using_data_home(tmp_path):
        assert data_home() == tmp_path
        assert os.environ.get("LCEVAL_DATA") != str(tmp_path)
    assert data_home() == outside
    assert NO_OPTIONS["properties"] == {}
