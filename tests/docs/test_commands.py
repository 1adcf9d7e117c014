"""Every shell command of README.md, CONTRIBUTING.md and docs/**/*.md runs as written.

Each page's ```bash blocks run in order, in a scratch folder of the page's own, offline, with
`LCEVAL_DATA` a copy of a data home holding `elitr-bench` (fetched from the published
archives in the shared datasets folder) and SummHay's annotated summaries, and a fresh
`LCEVAL_CACHE`. The scratch folder is what a reader has who followed the pages: the clone's
folders the pages name (`tests/`, `examples/`, `benchmarks/`, `tasks/`), ELITR-Bench's
archives downloaded into `elitr-bench-archives/` and SummHay's annotated summaries
(`eval_benchmark_data.json`). No variable a reader does not have is set: a page that uses
`$LCEVAL_REPO` or `$LCEVAL_SHARED_DATASETS` fails. A command that does not end as its page
says fails the test with the page, the line, the command and its output. Pages whose commands run the real SmolLM2 model are marked slow (each such
command is kept to a few questions and a small window). Without the shared datasets the
command tests are skipped; the marking checks always run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO, SHARED

from .shell_blocks import RUN, block_script, commands, failure, marking_problems, page_blocks

PAGES = sorted([REPO / "README.md", REPO / "CONTRIBUTING.md"]
               + [p for p in (REPO / "docs").rglob("*.md") if "_hooks" not in p.parts])
#: a command that runs a model for real (not with --dry-run, not refused with exit 2): its page is a slow test
REAL_MODEL = re.compile(r"--model[= ]['\"]?(smollm2|llamacpp:|hf:)|--judge(-model)?[= ]['\"]?(semantic|smollm2)"
                        r"|noise corpus")
#: seconds one block may take before it counts as failed
BLOCK_TIMEOUT = 600


def _rel(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


def _runs_a_model(page: Path) -> bool:
    for block in page_blocks(REPO, page):
        if block.lang == RUN:
            if any(REAL_MODEL.search(c.run) and "--dry-run" not in c.run and c.expect == 0 for c in commands(block)):
                return True
    return False


def _params() -> list:
    return [pytest.param(p, id=_rel(p), marks=[pytest.mark.slow] if _runs_a_model(p) else [])
            for p in PAGES if any(b.lang == RUN for b in page_blocks(REPO, p))]


def test_every_block_is_marked():
    """Every fenced block says what it is: run (bash), shown with the reason it is not run
    (sh), output (text) or a file's language; no other name for a shell."""
    problems = [p for page in PAGES for block in page_blocks(REPO, page) for p in marking_problems(block)]
    assert not problems, "\n".join(problems)


def test_docs_cite_papers_instead_of_numbering_them():
    """The papers are cited ("[Thonet et al., 2024a](references.md#thonet-2024a)"), never
    "paper 000": a reader of the docs has no numbered list of papers."""
    found = [f"{_rel(page)}:{n}: {line.strip()}" for page in PAGES if page.name != "CONTRIBUTING.md"
             for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"\b[Pp]apers? 00[0-9]\b", line)]
    assert not found, "cite the paper (see docs/references.md) instead of:\n" + "\n".join(found)


def test_no_paper_is_numbered_anywhere_a_user_reads():
    """`lceval tasks`, the report's task descriptions, messages and the docstrings the API
    reference renders cite the papers by authors and year too (issue 30): `grep -rn "paper 00"
    src plugins tasks docs` finds nothing."""
    found = [f"{path.relative_to(REPO)}:{n}: {line.strip()}"
             for folder in ("src", "plugins", "tasks", "docs") for path in sorted((REPO / folder).rglob("*"))
             if path.is_file() and not path.is_symlink() and "__pycache__" not in path.parts
             and path.suffix in (".py", ".yaml", ".yml", ".md", ".json", ".js", ".css", ".txt")
             for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
             if re.search(r"\b[Pp]apers? 00[0-9]", line)]
    assert not found, "cite the paper by authors and year (docs/references.md) instead of:\n" + "\n".join(found)


def test_readme_is_a_front_door():
    """README.md stays short (the manual is the docs site): at most 250 lines."""
    lines = (REPO / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 250, f"README.md has {lines} lines; move sections into docs/"


@pytest.fixture(scope="session")
def docs_data_home(tmp_path_factory) -> Path:
    """A data home as a user builds it: ELITR-Bench fetched from the published archives,
    SummHay's annotated summaries where the summhay tasks look for them."""
    archives = SHARED / "elitr-bench" / "archives"
    annotated = SHARED / "summhay" / "eval_benchmark_data.json"
    if not archives.is_dir() or not annotated.is_file():
        pytest.skip(f"shared datasets not found at {SHARED} (set LCEVAL_SHARED_DATASETS)")
    home = tmp_path_factory.mktemp("docs-data") / "data"
    res = subprocess.run([sys.executable, "-m", "lceval", "data", "fetch", "elitr-bench", "--from", str(archives),
                          "--data-home", str(home)], capture_output=True, text=True,
                         env={**os.environ, "LCEVAL_CACHE": str(home.parent / "fetch.sqlite")})
    assert res.returncode == 0, res.stdout + res.stderr
    (home / "summhay").mkdir()
    shutil.copyfile(annotated, home / "summhay" / annotated.name)
    return home


#: the clone's folders the pages name by relative path (commands run from the clone's root)
CLONE_FOLDERS = ("tests", "examples", "benchmarks", "tasks")
#: variables only this test had once; the pages must not use them (a reader has neither)
NOT_THE_READERS = ("LCEVAL_REPO", "LCEVAL_SHARED_DATASETS")


def _reader_folder(scratch: Path) -> None:
    """What a reader of the pages has in the folder they work in: the clone's folders, the
    archives the offline instructions download, SummHay's annotated summaries."""
    for name in CLONE_FOLDERS:
        (scratch / name).symlink_to(REPO / name, target_is_directory=True)
    (scratch / "elitr-bench-archives").symlink_to(SHARED / "elitr-bench" / "archives", target_is_directory=True)
    (scratch / "eval_benchmark_data.json").symlink_to(SHARED / "summhay" / "eval_benchmark_data.json")


def _env(scratch: Path, data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LCEVAL_")}
    env.update(LCEVAL_DATA=str(data), LCEVAL_CACHE=str(scratch.parent / "cache.sqlite"),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
               NO_COLOR="1", LCEVAL_AUTO_FETCH="0")  # offline: a dataset missing is an error, never a download
    return env


def test_no_page_uses_a_variable_the_reader_does_not_have():
    """A command is pasted as written: `$LCEVAL_REPO` and `$LCEVAL_SHARED_DATASETS` were this
    test's, not a reader's (pasted, they give "path does not exist"); pages name the clone's
    files by relative path and say which files to download where (issue 30)."""
    found = [f"{block.where}: {line.strip()}" for page in PAGES if page.name != "CONTRIBUTING.md"
             for block in page_blocks(REPO, page) if block.lang in (RUN, "sh")
             for line in block.lines if any(f"${name}" in line or f"${{{name}}}" in line for name in NOT_THE_READERS)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("page", _params())
def test_page_commands_run_as_written(page: Path, docs_data_home: Path, tmp_path: Path):
    scratch, data = tmp_path / "work", tmp_path / "data"
    scratch.mkdir()
    _reader_folder(scratch)
    shutil.copytree(docs_data_home, data, symlinks=True)
    env = _env(scratch, data)
    for block in page_blocks(REPO, page):
        if block.lang != RUN:
            continue
        cmds = commands(block)
        try:
            res = subprocess.run(["bash"], input=block_script(cmds), cwd=scratch, env=env, capture_output=True,
                                 text=True, timeout=BLOCK_TIMEOUT)
            output, status = res.stdout, res.returncode
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            output, status = out + f"\n(the block ran past {BLOCK_TIMEOUT} s)", 124
        problem = failure(cmds, output, status)
        assert problem is None, problem
