"""`lceval data fetch summhay --from FOLDER`: haystack files checked against the official
schema (no checksums to pin), installed atomically, then read by the task type. Runs once
the engine's Dataset has `collect` (see plugins/summhay/dataset.py)."""

from __future__ import annotations

import json

import pytest

from lceval.errors import UserError
from lceval_plugins.summhay.dataset import collect, summhay_dataset
from lceval_plugins.summhay.template import write_template

from tests.conftest import ScriptedModel, run_engine


def test_collect_checks_every_file_against_the_schema(tmp_path):
    write_template(tmp_path / "a.json")
    write_template(tmp_path / "b.json", seed=4)
    assert sorted(collect(tmp_path)) == ["a.json", "b.json"]
    write_template(tmp_path / "c.json", seed=4)  # the same topic twice
    with pytest.raises(UserError, match="topic_id"):
        collect(tmp_path)
    (tmp_path / "c.json").write_text(json.dumps({"topic": "t", "subtopics": []}))
    with pytest.raises(UserError, match="c.json"):
        collect(tmp_path)


def test_fetch_from_folder_then_run(tmp_path):
    dataset = summhay_dataset()
    if dataset is None:
        pytest.skip("the engine's Dataset has no `collect` yet: no unpinned installs")
    from lceval.io import fetch

    src = tmp_path / "src"
    write_template(src / "topic_a.json")
    home = tmp_path / "home"
    assert fetch(dataset, str(src), home).status == "installed"
    assert fetch(dataset, str(src), home).status == "already-present"
    with pytest.raises(UserError, match="--from"):
        fetch(dataset, None, home)
    model = ScriptedModel(window=8192)
    _, _, state = run_engine(model, "summhay_full", home, tmp_path)
    assert len(state.tasks[0].samples) == 3
    assert any(p.endswith("topic_a.json") for p in state.tasks[0].files_read)
