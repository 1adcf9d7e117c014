"""`lceval validate FOLDER` checks the folder's own code (even beside an installed copy) and
refuses what would make the plugin silently do nothing; `lceval plugins NAME` documents a
plugin's options."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest

from tests.cli import list_plugins, validate
from lceval.errors import UserError

PYPROJECT = """
[project]
name = "lceval-folder-plugin"
version = "0.2.0"
[project.entry-points.lceval]
folderplugin = "folder_plugin"
"""

GOOD = """
from lceval import hookimpl
from lceval.interfaces import Judge

class Nothing(Judge):
    name = "{name}"
    def judge(self, items):
        return []

@hookimpl
def register_judges(register):
    register("{name}", lambda ctx: Nothing())
"""


def plugin_folder(root: Path, code: str, specs: dict[str, str] | None = None) -> Path:
    folder = root / "pkg"
    (folder / "src" / "folder_plugin").mkdir(parents=True)
    (folder / "pyproject.toml").write_text(PYPROJECT)
    (folder / "src" / "folder_plugin" / "__init__.py").write_text(textwrap.dedent(code))
    for name, text in (specs or {}).items():
        (folder / "src" / "folder_plugin" / "specs").mkdir(exist_ok=True)
        (folder / "src" / "folder_plugin" / "specs" / name).write_text(text)
    return folder


def test_the_folders_code_is_checked_not_an_installed_copy(tmp_path, monkeypatch):
    installed = tmp_path / "site" / "folder_plugin"
    installed.mkdir(parents=True)
    (installed / "__init__.py").write_text(textwrap.dedent(GOOD.format(name="installed-judge")))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    import folder_plugin  # the installed copy, imported first, as a plugin loader would

    assert "site" in folder_plugin.__file__
    folder = plugin_folder(tmp_path, GOOD.format(name="folder-judge"))
    text, ok = validate([folder])
    assert ok and any("plugin 'folderplugin'" in line and "judge: folder-judge" in line
                      for line in text.splitlines()), text
    assert sys.modules["folder_plugin"] is folder_plugin  # the process is left as it was


def test_an_import_that_resolves_outside_the_folder_is_refused(tmp_path):
    folder = plugin_folder(tmp_path, GOOD.format(name="x"))
    (folder / "pyproject.toml").write_text(PYPROJECT.replace('"folder_plugin"', '"json"'))
    text, ok = validate([folder])
    assert not ok and re.search("imports .*json.* which is not in", text), text


@pytest.mark.parametrize("code, words", [
    ("""
     from lceval import hookimpl
     @hookimpl
     def register_model(register):
         register("m", lambda model, options: None)
     """, ["'register_model', which is not an lceval hook", "did you mean 'register_models'"]),
    ("""
     def register_judges(register):
         register("j", lambda ctx: None)
     """, ["register_judges is not decorated with @lceval.hookimpl"]),
    ("""
     from lceval import hookimpl
     @hookimpl
     def register_judges(register):
         register("j", lambda ctx: None, options_schema={"type": "object", "properties": {"n": {"type": "integer", "default": "x"}}})
     """, ["failed", "does not fit its own schema"]),
])
def test_a_plugin_that_would_silently_do_nothing_is_refused(tmp_path, code, words):
    text, ok = validate([str(plugin_folder(tmp_path, code))], [])
    assert not ok
    for word in words:
        assert word in text


SPEC = "name: {name}\ndescription: d\ntype: elitr\n"
SPECS_CODE = """
from pathlib import Path
from lceval import hookimpl

@hookimpl
def register_spec_dirs(register):
    register(Path(__file__).parent / "specs")
"""


def test_duplicate_task_names_are_refused_and_builtin_clashes_warned(tmp_path):
    folder = plugin_folder(tmp_path, SPECS_CODE, {"a.yaml": SPEC.format(name="dup"), "b.yaml": SPEC.format(name="dup")})
    text, ok = validate([str(folder)], [])
    assert not ok and "task 'dup' is given twice by plugin 'folderplugin'" in text
    folder = plugin_folder(tmp_path / "2", SPECS_CODE, {"a.yaml": SPEC.format(name="elitr_qa")})
    text, ok = validate([str(folder)], [])
    assert ok, text
    assert "warning task 'elitr_qa': plugin 'folderplugin' (in-process) also provides it and is ignored" in text


def test_importing_the_builtin_plugins_package_is_flagged(tmp_path):
    code = GOOD.format(name="x") + "\nfrom lceval_plugins.judges.lexical import content_words\n"
    text, ok = validate([str(plugin_folder(tmp_path, code))], [])
    assert ok and "imports lceval_plugins.judges.lexical, lceval's built-in plugins, which are not an API" in text


@pytest.mark.parametrize("line,module,door", [
    ("from lceval.engine._cache import Cache", "lceval.engine._cache", "lceval.engine"),
    ("import lceval.io._readers as s", "lceval.io._readers", "lceval.io"),
    ("    from lceval.report import _svgplot", "lceval.report._svgplot", "lceval.report"),
])
def test_importing_a_private_module_is_warned_with_its_public_door(tmp_path, line, module, door):
    body = line if not line.startswith(" ") else "def later():\n" + line + "\n    return _svgplot"
    code = GOOD.format(name="x") + "\n" + body + "\n"
    folder = plugin_folder(tmp_path, code)
    text, ok = validate([str(folder)], [])
    assert ok, text  # a warning: the plugin still works today
    (warning,) = [w for w in text.splitlines() if w.startswith("warning") and "private module" in w]
    assert f"imports {module}, a private module" in warning and f"import from {door} instead" in warning
    assert ".py:" in warning  # the file and the line of the import


def test_public_imports_are_not_warned(tmp_path):
    code = GOOD.format(name="x") + "\nfrom lceval.io import read_json\nfrom lceval import __version__\n" \
        "import lceval.results\n"
    text, ok = validate([str(plugin_folder(tmp_path, code))], [])
    assert ok and "warning" not in text, text


def test_plugins_name_lists_options_for_every_kind():
    text = list_plugins([], "llamacpp")
    assert "backend 'llamacpp' from plugin 'llamacpp'" in text
    assert "n_batch            integer (>= 1)" in text and "512" in text
    judge = list_plugins([], "rubric")
    assert "top_p           number (> 0, <= 1)  0.9" in judge and "--judge rubric,key=value" in judge
    task = list_plugins([], "summhay")
    assert "task-type 'summhay'" in task and "budget_tokens      integer (>= 1)" in task and "15000" in task
    assert "dataset 'summhay'" in task and "command 'summhay'" in task
    assert "retriever_options" in list_plugins([], "bm25")
    plugin = list_plugins([], "retrievers_lexical")  # a plugin name: everything it provides
    assert all(f"retriever '{n}'" in plugin for n in ("random", "keywords", "bm25", "oracle"))
    with pytest.raises(UserError, match="Did you mean: lexical"):
        list_plugins([], "lexcal")
