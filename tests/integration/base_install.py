"""Run `lceval` as it runs after `pip install lceval` with no extra: every installed
distribution that lceval's base requirements (and theirs, markers evaluated) do not pull in is
hidden, so importing it fails as it would there. Used by test_base_install.py as

    python tests/integration/base_install.py ARGV_JSON_LINES [EXTRA,EXTRA...]

which runs each command line (a JSON list per line of the file) through `lceval.cli.main`
in this one process (with those of lceval's extras installed, if given) and prints one JSON line per command: its argv, exit code, stdout and
stderr. The test's own dependencies (pytest) are not imported here."""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.metadata as md
import io
import json
import re
import sys
from pathlib import Path

from packaging.requirements import Requirement

#: never hidden: lceval itself, and what a virtual environment always has
KEPT = {"lceval", "lceval_plugins", "_distutils_hack", "pip", "setuptools", "pkg_resources"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def base_distributions(extras: tuple[str, ...] = ()) -> set[str]:
    """lceval and everything its requirements without extras (but `extras` of lceval's own)
    pull in, on this platform."""
    todo, seen = ["lceval"], set()
    while todo:
        name = _norm(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            requirements = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        for text in requirements:
            req = Requirement(text)
            wanted = [""] + list(extras if name == "lceval" else ())
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in wanted):
                todo.append(req.name)
    return seen


class HideExtras(importlib.abc.MetaPathFinder):
    """Refuses every top-level module whose distributions are all outside the base install."""

    def __init__(self, extras: tuple[str, ...] = ()) -> None:
        self.allowed = base_distributions(extras)
        self.owners = md.packages_distributions()

    def find_spec(self, name: str, path=None, target=None):
        top = name.partition(".")[0]
        dists = self.owners.get(top)
        if not dists or top in KEPT or any(_norm(d) in self.allowed for d in dists):
            return None  # the standard library, lceval, or a base requirement
        raise ModuleNotFoundError(f"No module named '{name}'", name=name)


def main(commands_file: str, extras: str = "") -> None:
    sys.meta_path.insert(0, HideExtras(tuple(e for e in extras.split(",") if e)))
    from lceval.cli import main as lceval

    for line in Path(commands_file).read_text(encoding="utf-8").splitlines():
        argv = json.loads(line)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = lceval(argv)
            except SystemExit as exc:  # argparse
                code = exc.code if isinstance(exc.code, int) else 2
        print(json.dumps({"argv": argv, "code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}),
              flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:3])
