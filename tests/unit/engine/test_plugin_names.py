"""Names are protected: a plugin cannot silently replace a built-in (the built-in wins, the
clash is printed on every command and recorded), an explicit override is possible and
recorded, a plugin that fails keeps nothing, and a duplicate task name inside one plugin
breaks only that name."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from lceval import hookimpl
from lceval.cli import main
from lceval.errors import UserError
from lceval.interfaces import JudgeContext, TaskType
from lceval.engine import load_plugins
from lceval.engine import load_catalog

from tests.conftest import only_run
from tests.unit.engine.test_plugin_host import fake_distribution, run_cli
from tests.paths import REPO

#: A third party that replaces the `lexical` judge.
JUDGE_SHADOW = """
    from lceval import hookimpl
    from lceval.interfaces import Judge
    from lceval.options import NO_OPTIONS
    from lceval.types import Judgment

    class Fake(Judge):
        name = "lexical"
        def judge(self, items):
            return [Judgment(item_id=i.item_id, judge="fake", score=10.0, raw="fake") for i in items]
        def identity(self):
            return {"judge": "fake-lexical"}

    @hookimpl
    def register_judges(register):
        register("lexical", lambda ctx: Fake(), options_schema=NO_OPTIONS)
"""

#: A third party that takes a name of every kind lceval has built-ins of.
SHADOW = JUDGE_SHADOW + """
    from pathlib import Path
    from lceval.interfaces import Command, Dataset, TaskType

    class Tasks(TaskType):
        def load(self, ctx):
            return []

    class Cmd(Command):
        def add_arguments(self, parser):
            pass
        def run(self, args):
            return "shadow ran"

    @hookimpl
    def register_models(register):
        register("llamacpp", lambda model, options: None)

    @hookimpl
    def register_retrievers(register):
        register("bm25", lambda options: None)

    @hookimpl
    def register_task_types(register):
        register("elitr", Tasks())

    @hookimpl
    def register_datasets(register):
        register(Dataset(name="elitr-bench", description="fake", files=[], install=lambda a, d: None))

    @hookimpl
    def register_commands(register):
        register("summhay", Cmd())
        register("run", Cmd())

    @hookimpl
    def register_spec_dirs(register):
        register(Path(__file__).parent / "shadow_specs")
"""


@pytest.fixture
def shadow_site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    fake_distribution(site, "lceval-shadow", {"shadow_plugin": SHADOW}, {"shadow": "shadow_plugin"})
    specs = site / "shadow_specs"
    specs.mkdir()
    builtin = REPO / "tasks" / "elitr" / "elitr_qa.yaml"
    text = re.sub(r"(?m)^description:.*$", "description: SHADOW copy", builtin.read_text())
    (specs / "elitr_qa.yaml").write_text(text)
    # the spec's family defaults come with it (a plugin's spec folder has them as tasks/<family>/ has)
    (specs / "_family.yaml").write_text((builtin.parent / "_family.yaml").read_text())
    return site


def warnings_of(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("lceval: warning: ")]


def test_builtins_win_and_every_clash_is_printed_on_every_command(shadow_site):
    expected = ["judge 'lexical'", "backend 'llamacpp'", "retriever 'bm25'",
                "task-type 'elitr'", "dataset 'elitr-bench'", "command 'summhay'", "command 'run'", "task 'elitr_qa'"]
    for args in (["plugins"], ["tasks"], ["data", "list"], ["report", "/nonexistent"]):
        proc = run_cli(shadow_site, *args)
        lines = warnings_of(proc.stderr)
        for what in expected:
            assert sum(what in line for line in lines) == 1, (args, what, proc.stderr)
        assert "Traceback" not in proc.stderr
    listing = run_cli(shadow_site, "plugins").stdout
    assert "clash: judge 'lexical': plugin 'shadow' (lceval-shadow 1.2.3) also provides it" in listing.replace("\n  ", " ")
    clash = next(line for line in warnings_of(run_cli(shadow_site, "tasks").stderr) if "judge 'lexical'" in line)
    assert "plugin 'shadow' (lceval-shadow 1.2.3) also provides it and is ignored" in clash
    assert "using plugin 'lexical' (built-in)" in clash and "-p override:shadow" in clash
    tasks = run_cli(shadow_site, "tasks")
    assert "SHADOW" not in tasks.stdout and "elitr_qa" in tasks.stdout
    # the built-in command is lceval's own, even with the override
    assert "built-in commands cannot be overridden" in run_cli(shadow_site, "-p", "override:shadow", "plugins").stderr


def test_override_is_explicit_and_said(shadow_site):
    proc = run_cli(shadow_site, "-p", "override:shadow", "tasks")
    assert proc.returncode == 0, proc.stderr
    lines = warnings_of(proc.stderr)
    assert any("judge 'lexical': using plugin 'shadow' (lceval-shadow 1.2.3) instead of plugin 'lexical' "
               "(built-in), as -p override:shadow asks" in line for line in lines)
    assert "SHADOW" in proc.stdout  # the plugin's elitr_qa spec is now the one listed
    env = run_cli(shadow_site, "plugins", env_extra={"LCEVAL_OVERRIDE_PLUGINS": "shadow"})
    assert "ok (overriding built-ins)" in env.stdout
    bad = run_cli(shadow_site, "-p", "override:shadw", "tasks")
    assert bad.returncode == 2 and "no loaded plugin named 'shadw'" in bad.stderr and "shadow" in bad.stderr
    assert run_cli(shadow_site, "-p", "yes:shadow", "tasks").returncode == 2




class Echo:
    """An in-process backend, so that a run needs no model file."""

    @hookimpl
    def register_models(self, register):
        from tests.conftest import ScriptedModel

        register("echo", lambda model, options: ScriptedModel())


def test_a_run_records_clashes_and_overrides_in_its_manifest(tmp_path, monkeypatch, tiny_home):
    site = tmp_path / "site"
    site.mkdir()
    fake_distribution(site, "lceval-judge-shadow", {"judge_shadow": JUDGE_SHADOW}, {"judgeshadow": "judge_shadow"})
    monkeypatch.syspath_prepend(str(site))  # found through its entry point, like an installed plugin
    real_load = load_plugins
    monkeypatch.setattr("lceval.engine.load_plugins",  # what `lceval.cli.main` loads the plugins with
                        lambda disabled=(), **kw: real_load(disabled, extra=[("echo", Echo())], **kw))
    common = ["--tasks", "elitr_qa", "--model", "echo:x", "--limit", "1", "--data-home", str(tiny_home), "--no-progress"]

    assert main(["run", *common, "--output", str(tmp_path / "plain")]) == 0
    run_dir = only_run(tmp_path / "plain")
    (clash,) = json.loads((run_dir / "manifest.json").read_text())["plugin_clashes"]
    assert (clash["kind"], clash["name"], clash["why"], clash["kept_plugin"], clash["ignored_plugin"]) == \
        ("judge", "lexical", "built-in", "lexical", "judgeshadow")
    assert json.loads((run_dir / "results.json").read_text())["tasks"]["elitr_qa"]["judge"]["judge"] == "lexical"

    assert main(["-p", "override:judgeshadow", "run", *common, "--output", str(tmp_path / "over")]) == 0
    run_dir = only_run(tmp_path / "over")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["versions"]["plugins"]["judgeshadow"]["overriding"] is True
    (clash,) = manifest["plugin_clashes"]
    assert (clash["why"], clash["kept_plugin"]) == ("override", "judgeshadow")
    assert json.loads((run_dir / "results.json").read_text())["tasks"]["elitr_qa"]["judge"] == {"judge": "fake-lexical"}
    assert "LCEVAL_OVERRIDE_PLUGINS" not in os.environ  # the CLI's choice ends with the command


class Partial:
    """Registers a backend, then fails in a later hook: nothing of it may stay."""

    @hookimpl
    def register_models(self, register):
        register("partial-model", lambda model, options: None)

    @hookimpl
    def register_judges(self, register):
        register("partial-judge", lambda ctx: None)
        raise RuntimeError("the judge's tables are missing")


def test_a_plugin_failing_in_a_hook_keeps_nothing():
    plugins = load_plugins(extra=[("partial", Partial())])
    info = plugins.info("partial")
    assert info.error == "register_judges failed: RuntimeError: the judge's tables are missing"
    assert "partial-model" not in plugins.models and "partial-judge" not in plugins.judges
    assert not [r for r in plugins.registrations if r.plugin == "partial"]
    assert "lexical" in plugins.judges  # the others keep working


def _factory(*args):
    return None


@pytest.mark.parametrize("hook, body, error", [
    ("register_judges", lambda register: (register("a", _factory), register("a", _factory)), "registers judge 'a' twice"),
    ("register_judges", lambda register: register("a", "not callable"), "must be a callable factory"),
    ("register_task_types", lambda register: register("t", object()), "must be a lceval.interfaces.TaskType"),
    ("register_task_types", lambda register: register("t", TaskType), "must be a lceval.interfaces.TaskType"),
    ("register_retrievers", lambda register: register("", _factory), "needs a non-empty name"),
    ("register_spec_dirs", lambda register: register("/no/such/folder"), "does not exist"),
    ("register_judges", lambda register: register("a", _factory, options_schema={"type": "array"}),
     "must describe an object"),
])
def test_unusable_registrations_fail_the_plugin_at_load(hook, body, error):
    def models(self, register):
        register("bad-model", _factory)

    def bad(self, register):
        body(register)

    plugin = type("Bad", (), {"register_models": hookimpl(models), hook: hookimpl(bad)})()
    plugins = load_plugins(extra=[("bad", plugin)])
    assert error in (plugins.info("bad").error or "")
    assert "bad-model" not in plugins.models  # registered by a hook that did not fail: dropped too


def test_a_hook_name_lceval_does_not_know_is_said():
    class Typo:
        @hookimpl
        def register_model(self, register):  # sic
            register("typo", lambda model, options: None)

    plugins = load_plugins(extra=[("typo", Typo())])
    (warning,) = plugins.info("typo").warnings
    assert "'register_model', which is not an lceval hook (did you mean 'register_models'?)" in warning


def test_third_parties_clash_in_a_fixed_order_and_builtins_never_lose():
    def judge_plugin(tag):
        class P:
            @hookimpl
            def register_judges(self, register):
                register("shared", lambda ctx, tag=tag: tag)
                register("rubric", lambda ctx: tag)
        return P()

    for order in (["zeta", "alpha"], ["alpha", "zeta"]):
        plugins = load_plugins(extra=[(name, judge_plugin(name)) for name in order])
        assert plugins.judges["shared"](JudgeContext()) == "alpha"  # by name, whatever the order given
        assert plugins.owner[("judge", "rubric")] == "llm_judges"
        assert {c.why for c in plugins.clashes} == {"first", "built-in"}


SPEC = """
name: {name}
description: {description}
type: elitr
"""


def test_a_duplicate_task_name_in_one_plugin_breaks_only_that_name(tmp_path):
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "a.yaml").write_text(SPEC.format(name="twice", description="first"))
    (folder / "b.yaml").write_text(SPEC.format(name="twice", description="second"))
    (folder / "c.yaml").write_text(SPEC.format(name="once", description="fine"))
    (folder / "d.yaml").write_text(SPEC.format(name="elitr_conv", description="shadow"))

    class Specs:
        @hookimpl
        def register_spec_dirs(self, register):
            register(folder)

    plugins = load_plugins(extra=[("specs", Specs())])
    catalog = load_catalog(plugins)
    assert catalog.spec("once").description == "fine"
    assert catalog.resolve_tasks("elitr_qa")[0].name == "elitr_qa"
    assert catalog.spec("elitr_conv").description != "shadow"
    with pytest.raises(UserError, match=r"task 'twice' is defined twice by plugin 'specs'.*a.yaml.*b.yaml"):
        catalog.resolve_tasks("twice")
    messages = [c.message for c in plugins.clashes]
    assert any("task 'twice' is given twice by plugin 'specs'" in m for m in messages)
    assert any("task 'elitr_conv': plugin 'specs' (in-process) also provides it and is ignored; using the built-in "
               "catalog" in m for m in messages)


def test_a_plugin_named_like_a_builtin_cannot_push_it_out(tmp_path):
    fake_distribution(tmp_path, "aaa-first", {"aaa_lexical": JUDGE_SHADOW}, {"lexical": "aaa_lexical"})
    proc = run_cli(tmp_path, "plugins")
    rows = [line for line in proc.stdout.splitlines() if line.startswith("lexical ")]
    assert len(rows) == 2, proc.stdout
    builtin, other = sorted(rows, key=lambda r: "aaa-first" in r)
    assert builtin.endswith("ok") and "FAILED" in other
    below = proc.stdout.replace("\n  ", " ")
    assert "lexical: FAILED: its plugin name 'lexical' is taken by plugin 'lexical' (built-in)" in below
    assert any("plugin 'lexical': plugin 'lexical' (aaa-first 1.2.3) also provides it and is ignored" in line
               for line in warnings_of(proc.stderr))
