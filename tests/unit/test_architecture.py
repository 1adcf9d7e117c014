"""The shape of the code, checked rather than remembered: the layers and doors of `lceval`
(import-linter's contracts in pyproject.toml), no import cycle, a small top level, public
modules that say what they export, and built-in plugins that use only the public API."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from lceval.cli._plugin_check import private_imports
from tests.paths import REPO

grimp = pytest.importorskip("grimp")
pytest.importorskip("importlinter")

CORE = REPO / "src" / "core"
SUBPACKAGES = ("io", "engine", "results", "analysis", "report", "leaderboard", "launch", "cli")


def _graph():
    return grimp.build_graph("lceval", "lceval_plugins", exclude_type_checking_imports=False)


def import_cycles(graph) -> list[list[str]]:
    """The strongly connected groups of modules (Tarjan), counting every import grimp sees:
    module level, inside functions and under TYPE_CHECKING."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(root: str) -> None:
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    cycles.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return cycles


def test_no_import_cycle_and_the_detector_finds_one():
    graph = _graph()
    assert import_cycles(graph) == []
    graph.add_import(importer="lceval.types", imported="lceval.engine._runner", line_number=1, line_contents="x")
    assert any("lceval.types" in group and "lceval.engine._runner" in group for group in import_cycles(graph))


def _contracts():
    from importlinter.configuration import configure
    from importlinter.contracts.forbidden import ForbiddenContract
    from importlinter.contracts.layers import LayersContract
    from importlinter.contracts.private_modules import PrivateModulesContract

    configure()  # import-linter's own settings (its timer), as its CLI sets them
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    kinds = {"layers": LayersContract, "private_modules": PrivateModulesContract, "forbidden": ForbiddenContract}
    session = {"root_packages": config["root_packages"]}
    return {c["type"]: kinds[c["type"]](name=c["name"], session_options=session,
                                         contract_options={k: v for k, v in c.items() if k not in ("name", "type")})
            for c in config["contracts"]}


def test_lint_imports_keeps_every_contract():
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert exe, "import-linter is in the dev extra"
    out = subprocess.run([exe], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "broken" not in out.stdout.lower().replace("0 broken", "")


@pytest.mark.parametrize("kind,importer,imported", [
    ("layers", "lceval.io._readers", "lceval.engine._runner"),  # a lower layer reaching up
    ("layers", "lceval.types", "lceval.results._run_dir"),  # the contract reaching into results
    ("private_modules", "lceval_plugins.elitr.task", "lceval.engine._cache"),  # a plugin past a door
    ("private_modules", "lceval.cli._commands", "lceval.engine._runner"),  # a layer past another's door
    ("forbidden", "lceval.engine._runner", "lceval_plugins.elitr.task"),  # the core naming a plugin
])
def test_each_contract_breaks_on_what_it_forbids(kind, importer, imported):
    contract = _contracts()[kind]
    graph = _graph()
    assert contract.check(graph, verbose=False).kept
    graph.add_import(importer=importer, imported=imported, line_number=1, line_contents="import x")
    assert not contract.check(graph, verbose=False).kept


def test_the_top_level_holds_the_contract_and_the_layers():
    modules = sorted(p.stem for p in CORE.glob("*.py"))
    assert len(modules) <= 15, modules
    packages = sorted(p.name for p in CORE.iterdir() if (p / "__init__.py").is_file())
    assert set(SUBPACKAGES) <= set(packages)


def _public_modules() -> list[str]:
    top = [f"lceval.{p.stem}" for p in CORE.glob("*.py") if not p.stem.startswith("_")]
    return ["lceval", *sorted(top), *(f"lceval.{name}" for name in SUBPACKAGES)]


@pytest.mark.parametrize("name", _public_modules())
def test_every_public_module_says_what_it_exports(name):
    module = importlib.import_module(name)
    assert isinstance(getattr(module, "__all__", None), list), f"{name} has no __all__"
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what it does not define: {missing}"
    assert module.__doc__, f"{name} has no docstring saying what it is for"


def test_builtin_plugins_import_only_the_public_api():
    files = sorted((REPO / "plugins").rglob("*.py"))
    found = [(where, why) for where, why in private_imports(files) if "lceval_plugins" not in why]
    assert found == []


def _family_imports(graph) -> list[str]:
    """Imports from one family's package (a plugin folder named like a tasks/ folder) into
    another's, at module level or inside a function."""
    families = {p.name for p in (REPO / "tasks").iterdir() if (REPO / "plugins" / p.name / "__init__.py").is_file()}
    found = []
    for module in sorted(graph.modules):
        parts = module.split(".")
        if parts[0] != "lceval_plugins" or len(parts) < 2 or parts[1] not in families:
            continue
        for imported in graph.find_modules_directly_imported_by(module):
            other = imported.split(".")
            if other[0] == "lceval_plugins" and len(other) > 1 and other[1] in families and other[1] != parts[1]:
                found.append(f"{module} imports {imported}")
    return found


def test_no_family_imports_another_family():
    """What several families share lives in a shared package (issue 40: the haystack builder,
    transcript noise, the documents bins), so a family can change without breaking another."""
    graph = _graph()
    assert _family_imports(graph) == []
    graph.add_import(importer="lceval_plugins.nolima.task", imported="lceval_plugins.ruler.common", line_number=1,
                     line_contents="import x")
    assert _family_imports(graph) == ["lceval_plugins.nolima.task imports lceval_plugins.ruler.common"]


def test_private_imports_are_found_with_their_line(tmp_path):
    path = tmp_path / "plugin.py"
    path.write_text("import json\nfrom lceval.io import read_json\n\ndef f():\n    from lceval.engine._cache import Cache\n")
    assert private_imports([path]) == [(f"{path}:5", "imports lceval.engine._cache, a private module (a leading "
                                                     "underscore: it changes without notice); import from "
                                                     "lceval.engine instead")]


def _calls(name: str) -> list[str]:
    """Every place in lceval's own code (and its built-in plugins) that calls `name(...)`."""
    import ast

    found = []
    for root in (CORE, REPO / "plugins"):
        for path in root.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call):
                    func = node.func
                    called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                    if called == name:
                        found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def test_only_the_session_opens_a_cache_or_a_model():
    """One door to a run (issue 24): the request cache and every model a command uses are opened
    by `engine.Session` (a model through `ModelHandle`, the one caller of `open_backend`)."""
    session = "src/core/engine/_session.py"
    assert {c.split(":")[0] for c in _calls("Cache")} == {session}
    assert {c.split(":")[0] for c in _calls("ModelHandle")} == {session}
    assert {c.split(":")[0] for c in _calls("open_backend")} == {"src/core/engine/_model_handle.py"}


def test_the_engine_door_is_sized_to_its_readers():
    import lceval.engine

    assert len(lceval.engine.__all__) <= 25, sorted(lceval.engine.__all__)


def test_the_hookspecs_module_reads_as_a_contract():
    """Every hook with a short docstring; the guide to writing plugins is in docs/plugins.md."""
    import inspect

    import lceval.hookspecs as hookspecs

    assert len((hookspecs.__doc__ or "").splitlines()) <= 15
    hooks = [getattr(hookspecs, n) for n in hookspecs.__all__ if n.startswith("register_")]
    assert hooks and all(8 >= len(inspect.getdoc(h).splitlines()) >= 1 for h in hooks)
