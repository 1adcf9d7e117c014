"""Building lceval's wheel is quiet and ships every data file (issue 30): the folders that hold
only data (tasks/<benchmark>/, the RULER word lists, the report's assets) are listed as
packages, so setuptools prints no "Package ... is absent from the `packages` configuration"
wall into a user's install log, and their files are still in the wheel."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.paths import REPO

#: what a clone holds that a build must not see (our venvs, caches, earlier builds)
_NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", ".ci-venv", ".ci-vllm-venv", ".ci-vllm-model", "runs",
                                     "__pycache__", "build", "dist", "*.egg-info", ".pytest_cache", "*.sqlite*")


def test_the_wheel_builds_without_setuptools_warnings_and_ships_every_data_file(tmp_path: Path):
    pytest.importorskip("setuptools", minversion="77")  # what pyproject.toml's build-system asks
    source = tmp_path / "src"
    shutil.copytree(REPO, source, symlinks=True, ignore=_NOT_SOURCE)
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-cache-dir",
                          "-v", ".", "-w", str(tmp_path / "out")], cwd=source, capture_output=True, text=True,
                         timeout=600)
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-4000:]
    assert "is absent from the `packages` configuration" not in log, log[-4000:]
    assert "Package would be ignored" not in log
    (wheel,) = (tmp_path / "out").glob("lceval-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    specs = {f"lceval/tasks/{p.relative_to(REPO / 'tasks').as_posix()}" for p in (REPO / "tasks").rglob("*.yaml")}
    words = {f"lceval_plugins/ruler/words/{p.name}" for p in (REPO / "plugins" / "ruler" / "words").iterdir()}
    assets = {f"lceval/report/assets/{p.name}" for p in (REPO / "src" / "core" / "report" / "assets").iterdir()}
    assert specs and specs <= names, sorted(specs - names)
    assert words <= names and assets <= names, sorted((words | assets) - names)
    assert "lceval/registry.yaml" in names and "lceval/io/schemas/results.schema.json" in names
    assert "lceval_plugins/ruler/essay_sources.tsv" in names  # what `lceval data fetch ruler-essays` downloads
    assert not [n for n in names if "__pycache__" in n]
