"""Helpers for the shard tests: run a task whole and in shards, and compare results field by
field (run ids aside), so a difference names the exact field that differs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lceval.interfaces import ModelBackend


def engine_run(model: ModelBackend, tasks: str, home: Path, out: Path, spec: str = "scripted:x",
               **config: Any) -> Path:
    """One run of the engine on a scripted model (no CLI) through the engine's Session, with the
    request cache of $LCEVAL_CACHE (so a later run, a shard of it, reads the same cache); returns
    its run directory."""
    from lceval.engine import RunConfig
    from lceval.results import write_run

    from .conftest import execute_config, plugins_with_model

    plugins = plugins_with_model(model)
    cfg = RunConfig(tasks=tasks, models=[spec], progress=False, **config)
    state = execute_config(cfg, plugins, home)
    run_dir, _ = write_run(state, plugins, out)
    return run_dir


def read(run_dir: Path, name: str) -> Any:
    return json.loads((run_dir / name).read_text(encoding="utf-8"))


def assert_same(a: Any, b: Any, where: str = "results") -> None:
    """Equal JSON values, compared field by field (floats exactly)."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert list(a) == list(b), f"{where}: keys {list(a)} vs {list(b)}"
        for key in a:
            assert_same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), f"{where}: {len(a)} vs {len(b)} entries"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


def assert_same_results(whole: Path, merged: Path) -> None:
    a, b = read(whole, "results.json"), read(merged, "results.json")
    a.pop("run_id"), b.pop("run_id")  # ids are timestamps: equal when both runs end in the same second
    assert_same(a, b)
