"""Plugins are found through entry points, fail alone, and can be disabled by name."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.cli import list_plugins
from lceval.engine import load_plugins


def fake_distribution(site: Path, dist: str, modules: dict[str, str], entry_points: dict[str, str]) -> None:
    """Install a minimal distribution by hand: a module plus a dist-info with entry points."""
    for name, code in modules.items():
        (site / f"{name}.py").write_text(textwrap.dedent(code))
    info = site / f"{dist.replace('-', '_')}-1.2.3.dist-info"  # normalized, as pip writes it
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.2.3\n")
    eps = "[lceval]\n" + "".join(f"{k} = {v}\n" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(eps)


def run_cli(site: Path, *args: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
           **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "lceval", *args], capture_output=True, text=True, env=env)


def test_builtin_plugins_load_through_entry_points():
    plugins = load_plugins()
    by_name = {i.name: i for i in plugins.infos}
    assert by_name["elitr"].distribution == "lceval"
    assert "task-type" in by_name["elitr"].kinds and "dataset" in by_name["elitr"].kinds
    assert by_name["lexical"].kinds == ["judge"]
    assert {"llamacpp", "replay"} <= set(plugins.models)
    assert {"lexical", "recorded"} <= set(plugins.judges)


def test_broken_plugin_is_reported_and_others_work(tmp_path):
    fake_distribution(tmp_path, "lceval-broken", {
        "broken_plugin": "raise ImportError('needs the frobnicator library')\n",
        "good_plugin": """
            from lceval import hookimpl
            from lceval.interfaces import Judge
            class Half(Judge):
                name = "half"
                def judge(self, items):
                    return []
            @hookimpl
            def register_judges(register):
                register("half", lambda ctx: Half())
        """,
    }, {"broken": "broken_plugin", "goodone": "good_plugin"})
    proc = run_cli(tmp_path, "plugins")
    assert proc.returncode == 0, proc.stderr
    lines = {line.split()[0]: line for line in proc.stdout.splitlines() if line.strip()}
    assert "FAILED" in lines["broken"]  # the error itself below the table, whole
    assert "needs the frobnicator library" in lines["broken:"] and lines["broken:"].startswith("broken: FAILED:")
    assert max(len(line) for line in proc.stdout.splitlines()) <= 100
    assert "lceval-broken" in lines["goodone"] and "1.2.3" in lines["goodone"] and lines["goodone"].endswith("ok")
    assert lines["lexical"].endswith("ok")
    tasks = run_cli(tmp_path, "tasks")
    assert tasks.returncode == 0 and "elitr_qa" in tasks.stdout


def test_plugin_can_be_disabled_by_name(tmp_path):
    proc = run_cli(tmp_path, "-p", "no:lexical", "plugins")
    line = next(l for l in proc.stdout.splitlines() if l.startswith("lexical"))
    assert line.endswith("disabled")
    env = run_cli(tmp_path, "plugins", env_extra={"LCEVAL_DISABLE_PLUGINS": "recorded"})
    assert next(l for l in env.stdout.splitlines() if l.startswith("recorded")).endswith("disabled")
    assert "lexical" not in load_plugins(disabled=["lexical"]).judges


def test_name_conflicts_keep_the_first_and_say_so(tmp_path):
    from lceval import hookimpl

    class Impostor:
        @hookimpl
        def register_judges(self, register):
            register("lexical", lambda ctx: None)

    plugins = load_plugins(extra=[("impostor", Impostor())])
    assert plugins.owner[("judge", "lexical")] == "lexical"
    (clash,) = plugins.clashes
    assert (clash.kind, clash.name, clash.why, clash.kept_plugin, clash.ignored_plugin) == \
        ("judge", "lexical", "built-in", "lexical", "impostor")


def test_listing_fits_100_columns_and_the_details_say_kinds_and_versions():
    text = list_plugins([])
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "rubric, prometheus" in text  # what each plugin provides, by name
    detail = list_plugins([], "llamacpp")
    assert "backend 'llamacpp'" in detail and "from lceval 0.1.0 (built-in)" in detail
