"""CONTRIBUTING.md stays a page a contributor reads first (issue 40): at most 300 lines, its
source tree names exactly the folders and modules there are, and no page sends a reader to a
module that has no API page (an old name kept only so that older plugins import)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.paths import REPO

CONTRIBUTING = REPO / "CONTRIBUTING.md"
#: the folders whose entries the tree names one by one
ROOTS = ("src/core/", "plugins/", "tasks/")
#: a name in the tree's name column: a folder, a module or a YAML file
NAME = re.compile(r"[A-Za-z0-9_.-]+(/|\.py|\.yaml)")


def source_tree(text: str) -> dict[str, set[str]]:
    """Root folder -> the names the tree lists under it. The tree is the first ```text block
    after "## The source tree"; a line at column 0 opens a root, an indented line lists names
    (its leading words that end in `/`, `.py` or `.yaml`) before its description."""
    section = re.split(r"^## The source tree$", text, maxsplit=1, flags=re.M)[1]
    block = section.split("```text\n", 1)[1].split("\n```", 1)[0]
    tree: dict[str, set[str]] = {}
    root = None
    for line in block.splitlines():
        if not line.startswith(" "):
            first = line.split()[0]
            root = first if first in ROOTS else None
            tree.setdefault(first, set())
            continue
        if root is None:
            continue
        for word in line.split():
            if not NAME.fullmatch(word):
                break
            tree[root].add(word.rstrip("/"))
    return tree


def on_disk(root: Path) -> set[str]:
    """The folders, modules and YAML files directly under `root`, but caches and dunder modules."""
    return {p.name for p in root.iterdir()
            if p.name != "__pycache__" and not p.name.startswith("__")
            and (p.is_dir() or p.suffix in (".py", ".yaml"))}


def tree_problems(tree: dict[str, set[str]], repo: Path) -> list[str]:
    problems = []
    for root in ROOTS:
        named, there = tree.get(root, set()), on_disk(repo / root)
        problems += [f"{root}{n} is not in the tree" for n in sorted(there - named)]
        problems += [f"the tree names {root}{n}, which does not exist" for n in sorted(named - there)]
    problems += [f"the tree names {top}, which does not exist" for top in tree if not (repo / top).exists()]
    return problems


def test_the_source_tree_names_every_folder_and_module():
    tree = source_tree(CONTRIBUTING.read_text(encoding="utf-8"))
    assert set(ROOTS) <= set(tree), sorted(tree)
    problems = tree_problems(tree, REPO)
    assert not problems, "CONTRIBUTING.md's source tree is out of date:\n" + "\n".join(problems)


def test_the_tree_check_sees_a_folder_added_and_one_gone(tmp_path):
    for root in ROOTS:
        (tmp_path / root / "kept").mkdir(parents=True)
    (tmp_path / "plugins" / "newfamily").mkdir()
    (tmp_path / "src" / "core" / "__init__.py").write_text("")
    text = ("## The source tree\n\n```text\nsrc/core/   the core\n  kept/ gone.py   what they are\n"
            "plugins/    built-ins\n  kept/\ntasks/      specs\n  kept/  the description/ ends the names\n```\n")
    assert tree_problems(source_tree(text), tmp_path) == ["the tree names src/core/gone.py, which does not exist",
                                                          "plugins/newfamily is not in the tree"]


def test_contributing_is_short():
    lines = CONTRIBUTING.read_text(encoding="utf-8").count("\n")
    assert lines <= 300, f"CONTRIBUTING.md has {lines} lines; move what plugin authors need into docs/plugins.md"


def test_no_page_names_a_module_without_an_api_page():
    """`lceval.safeio` re-exports `lceval.io`'s readers for plugins written against lceval 0.1;
    the pages name `lceval.io`, whose API page a reader can open."""
    nav = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    with_a_page = set(re.findall(r"api/(lceval(?:\.[a-z_]+)?)\.md", nav))
    top_level = {p.stem for p in (REPO / "src" / "core").glob("*.py") if not p.stem.startswith("_")}
    pages = [REPO / "README.md", CONTRIBUTING, REPO / "mkdocs.yml",
             *(p for p in (REPO / "docs").rglob("*.md"))]
    found = [f"{page.relative_to(REPO)}: lceval.{name}" for page in pages
             for name in re.findall(r"\blceval\.([a-z_]+)\b", page.read_text(encoding="utf-8"))
             if name in top_level and f"lceval.{name}" not in with_a_page]
    assert not found, "pages naming a module that has no API page:\n" + "\n".join(sorted(set(found)))
