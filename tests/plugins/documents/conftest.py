"""Fixtures of the documents task type's tests: an isolated `datasets` cache, an offline and
isolated Hugging Face Hub cache, and helpers that write specs and data in the real schemas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml


@pytest.fixture(autouse=True)
def _isolated_hf(tmp_path_factory, monkeypatch):
    """Nothing downloads and nothing lands in the user's caches: `datasets` writes its Arrow
    files under a scratch folder, the Hub cache is a scratch folder too, and the Hub is
    offline (a test that needs a Hub file puts it in that cache first: `hub_cache`) as on a
    node whose environment sets HF_HUB_OFFLINE before Python starts: huggingface_hub and
    `datasets` read it once, at import, so their flags are set too (the reader of a file in a
    cached Hub archive failed only then)."""
    import datasets
    from huggingface_hub import constants

    base = tmp_path_factory.mktemp("hf")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(base / "datasets"))
    monkeypatch.setenv("HF_HUB_CACHE", str(base / "hub"))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", base / "datasets")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(base / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    return base


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def write_spec(folder: Path, options: dict[str, Any], name: str = "docs_task", **top: Any) -> Path:
    """A spec file of the documents type in `folder` (the YAML a user writes)."""
    spec = {"name": name, "description": "a documents task of a test", "type": "documents", "options": options,
            **top}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def put_in_hub_cache(hub: Path, repo: str, revision: str, files: dict[str, bytes | Path]) -> Path:
    """Lay files out as huggingface_hub's cache holds a dataset repository at a commit
    (`datasets--OWNER--NAME/snapshots/<commit>/<file>`), so `hf_hub_download` finds them
    offline exactly as after a real download."""
    snapshot = hub / f"datasets--{repo.replace('/', '--')}" / "snapshots" / revision
    for name, content in files.items():
        target = snapshot / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.read_bytes() if isinstance(content, Path) else content)
    return snapshot


def load_shipped(catalog: Any, plugins: Any, name: str, data_home: Path, sources: list | None = None):
    """(spec, conversations) of a shipped spec as a run loads it: the type's option defaults
    filled (`check_spec`), every split, no limit; `sources` collects what it records reading."""
    from lceval.engine import check_spec
    from lceval.interfaces import TaskContext

    spec = catalog.spec(name)
    check_spec(spec, plugins)
    ctx = TaskContext(spec=spec.data, spec_path=spec.path, data_home=data_home, splits=spec.splits, limit=None,
                      record_file=lambda p: None,
                      record_source=sources.append if sources is not None else (lambda r: None))
    return spec, plugins.task_types[spec.type].load(ctx)
