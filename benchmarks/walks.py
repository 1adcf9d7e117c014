"""How far a value travels through lceval's modules: the shape of the code, measured.

Two walks through one real `lceval run` (a replay of ELITR-Bench's recorded GPT-4 answers, two
questions, no model to load), traced in this process with `sys.setprofile`:

- **model**: the `--model` string from the command line to the call of its backend's factory.
- **spec**: a task spec from the catalog to the write of results.json.

A call *carries* the value when one of its arguments is it or holds it (the string itself, a
list or dict holding it, an object whose attributes hold it, two levels deep: a `RunConfig`, a
`ModelSpec`, a `TaskSpec`, a plan ...). For each walk the script prints the lceval modules whose
functions carried the value (`modules`), how many carrying calls there were, and `climbs`: how
many times a carrying call returned into a module of a *higher* layer than its own (`cli` >
`leaderboard` > `report` > `analysis` > `results` > `engine` > the rest), i.e. the value went
down and came back up; `to cli` counts the climbs that land in the CLI. A value's own methods
(a `TaskSpec`'s properties) are no hop and are not counted. Counts, not seconds: the
same code gives the same numbers on any machine.

    python benchmarks/walks.py [--data-home DIR]   # needs the elitr-bench dataset (lceval data fetch elitr-bench)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

LAYERS = ("cli", "leaderboard", "report", "analysis", "results", "engine")
MODEL = "replay:generated-responses/elitr-bench-qa_{split}_st_gpt-4-eval.json#GPT-4"


def _module(frame: Any) -> str | None:
    name = frame.f_globals.get("__name__", "")
    return name if name.startswith(("lceval.", "lceval_plugins.")) else None


def _rank(module: str) -> int:
    """Higher number = higher layer."""
    parts = module.split(".")
    if parts[0] == "lceval" and len(parts) > 1 and parts[1] in LAYERS:
        return len(LAYERS) - LAYERS.index(parts[1])
    return 0


def _holds(value: Any, match: Any, depth: int = 2) -> bool:
    if match(value):
        return True
    if depth == 0:
        return False
    if isinstance(value, (list, tuple, set)):
        return any(_holds(v, match, depth - 1) for v in list(value)[:50])
    if isinstance(value, dict):
        return any(_holds(v, match, depth - 1) for v in list(value.values())[:50])
    attrs = getattr(value, "__dict__", None)
    if isinstance(attrs, dict) and type(value).__module__.startswith("lceval"):
        return any(_holds(v, match, depth - 1) for v in attrs.values())
    return False


class Walk:
    def __init__(self, name: str, match: Any) -> None:
        self.name, self.match = name, match
        self.modules: list[str] = []
        self.calls = 0
        self.climbs = 0
        self.to_cli = 0
        self.climbed: list[str] = []
        self.carrying: set[int] = set()
        self.done = False

    def on_call(self, frame: Any) -> None:
        module = _module(frame)
        if module is None or self.done:
            return
        code = frame.f_code
        n = code.co_argcount + code.co_kwonlyargcount
        args = [frame.f_locals.get(v) for v in code.co_varnames[:n]]
        if args and self.match(args[0]) and type(args[0]).__module__ == module:
            return  # the value's own method (a property of a TaskSpec): no hop between modules
        if any(_holds(a, self.match) for a in args):
            self.carrying.add(id(frame))
            self.calls += 1
            if module not in self.modules:
                self.modules.append(module)

    def on_return(self, frame: Any) -> None:
        if id(frame) not in self.carrying:
            return
        self.carrying.discard(id(frame))
        caller = frame.f_back
        mine, theirs = _module(frame), _module(caller) if caller is not None else None
        if mine and theirs and _rank(theirs) > _rank(mine):
            self.climbs += 1
            self.climbed.append(f"{mine}.{frame.f_code.co_name} -> {theirs}")
            if theirs.startswith("lceval.cli"):
                self.to_cli += 1

    def as_dict(self) -> dict[str, Any]:
        return {"walk": self.name, "modules": len(self.modules), "carrying calls": self.calls,
                "climbs": self.climbs, "to cli": self.to_cli, "module list": self.modules,
                "climbs made": self.climbed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-home", default=os.environ.get("LCEVAL_DATA"))
    args = parser.parse_args()
    from lceval.cli import main as lceval

    spec_types = {"TaskSpec"}

    def is_model(v: Any) -> bool:
        return (isinstance(v, str) and v == MODEL) or getattr(v, "text", None) == MODEL

    def is_spec(v: Any) -> bool:
        return type(v).__name__ in spec_types

    model = Walk("model string -> backend factory", is_model)
    spec = Walk("task spec -> results.json", is_spec)

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            if frame.f_code.co_name == "make_replay" and not model.done:
                model.on_call(frame)
                model.done = True
            model.on_call(frame)
            spec.on_call(frame)
            if frame.f_code.co_name == "write_text" and str(frame.f_locals.get("self", "")).endswith("results.json"):
                spec.done = True
        elif event == "return":
            model.on_return(frame)
            spec.on_return(frame)

    with tempfile.TemporaryDirectory() as tmp:
        argv = ["run", "--tasks", "elitr_qa", "--model", MODEL, "--judge", "gpt4-recorded", "--limit", "2",
                "--output", str(Path(tmp) / "runs"), "--cache", str(Path(tmp) / "cache.sqlite"), "--no-progress"]
        if args.data_home:
            argv += ["--data-home", args.data_home]
        sys.setprofile(profile)
        try:
            code = lceval(argv)
        finally:
            sys.setprofile(None)
    if code != 0:
        raise SystemExit(f"the run failed (exit {code})")
    for walk in (model, spec):
        print(json.dumps(walk.as_dict(), indent=1))


if __name__ == "__main__":
    main()
