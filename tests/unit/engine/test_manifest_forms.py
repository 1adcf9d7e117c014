"""Run settings, task specs and the run's record read and write their manifest form themselves
(`RunConfig`, `TaskSpec` and `RunRecord`'s `to_manifest` / `from_manifest`): every field goes
round, including fields added later, so `lceval score`, `merge`, `verify`, `report` and
`launch` reopen a run with exactly what it was made with."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from lceval.engine import ReportSettings, RunConfig, RunRecord, TaskSpec, load_catalog, load_plugins
from lceval.results import load_run
from lceval.types import LongContextSettings, RopeScaling
from tests.cli import lceval
from tests.conftest import serve_scripted

#: a value unlike the default for every RunConfig field the manifest records. A field added
#: to RunConfig without a value here fails `test_every_recorded_field_has_a_sample`: add one,
#: and the round trip below then proves the manifest carries it.
SAMPLES: dict[str, Any] = {
    "tasks": "elitr_qa,ruler",
    "models": ["hf:org/Model,batch_size=4"],
    "judge": "rubric,temperature=0.6",
    "judge_model": "litellm:openai/gpt-4o",
    "splits": ["dev", "test2"],
    "limit": 9,
    "limit_per_context": 3,
    "seeds": [2023, 2024, 2025],
    "context_policy": "truncate-middle",
    "context_lengths": [8192, 16384, None],
    "effective_threshold": 85.6,
    "thinking": True,
    "reasoning_budget": 4096,
    "reasoning_effort": "high",
    "batch": True,
    "max_cost": 12.5,
    "press_sweep": "snapkv:0,0.25,0.5",
    "retriever": "bm25",
    "overrides": {"options.history": "gold", "generation.max_new_tokens": 32},
    "contexts": ["dev/*", "test2/meeting_en_test2_004"],
    "shard": (1, 4),
    "disabled_plugins": ["noise"],
}


def _recorded() -> list[str]:
    return [f.name for f in fields(RunConfig) if not f.metadata.get("local")]


def test_every_recorded_field_has_a_sample() -> None:
    missing = [name for name in _recorded() if name not in SAMPLES]
    assert not missing, f"RunConfig fields without a round-trip sample in this test: {missing}"
    for name in _recorded():
        default = getattr(RunConfig(tasks="", models=[]), name)
        assert SAMPLES[name] != default, f"the sample of {name} is its default: it would prove nothing"


def test_run_config_goes_round_through_json_field_by_field() -> None:
    config = RunConfig(**SAMPLES, output=Path("elsewhere"), cache_path=Path("c.sqlite"), command=["lceval", "run"])
    back = RunConfig.from_manifest(json.loads(json.dumps(config.to_manifest())))
    for name in _recorded():
        assert getattr(back, name) == getattr(config, name), name
    # where this machine keeps things is not a setting of the run: not recorded, defaults back
    assert back.output == Path("runs") and back.cache_path is None and back.command == []


def test_changes_apply_over_the_recorded_settings() -> None:
    recorded = RunConfig(**SAMPLES).to_manifest()
    back = RunConfig.from_manifest(recorded, judge="lexical", cache_path=Path("x.sqlite"))
    assert (back.judge, back.cache_path, back.limit) == ("lexical", Path("x.sqlite"), 9)


def test_a_manifest_of_an_older_or_newer_lceval_still_reads() -> None:
    # an older lceval recorded fewer settings; a newer one may record settings unknown here
    back = RunConfig.from_manifest({"tasks": "elitr_qa", "model": "smollm2", "seeds": [1], "from_the_future": 1})
    assert (back.tasks, back.models, back.seeds, back.context_lengths) == ("elitr_qa", ["smollm2"], [1], None)


def test_task_spec_goes_round_with_its_typed_report() -> None:
    plugins = load_plugins()
    spec = load_catalog(plugins).spec("elitr_qa")
    entry = json.loads(json.dumps(spec.to_manifest()))
    back = TaskSpec.from_manifest(spec.name, entry, Path("run"))
    assert (back.name, back.path, back.data) == (spec.name, spec.path, spec.data)
    assert back.report == spec.report and isinstance(back.report, ReportSettings)
    assert back.report.group_by == "split" and back.report.cluster_by == "meeting_id"
    assert [t.name for t in back.report.tests] == ["lost_in_the_middle"]


def test_a_finished_run_reopens_with_its_own_settings(tiny_home: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A real run folder: what `lceval score` and `merge` reopen equals what ran."""
    serve_scripted(monkeypatch)
    out = tmp_path / "runs"
    lceval("run", "--tasks", "elitr_qa", "--model", "scripted:x", "--judge", "lexical", "--limit", "4",
           "--limit-per-context", "2", "--seed", "3", "--data-home", tiny_home, "--output", out, "--no-progress")
    (run_dir,) = list(out.iterdir())
    run = load_run(run_dir)
    config = run.record.config
    assert (config.tasks, config.models, config.limit, config.limit_per_context, config.seeds, config.judge) == \
        ("elitr_qa", ["scripted:x"], 4, 2, [3], "lexical")
    spec = run.spec("elitr_qa")
    recorded = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))["resolved"]["tasks"]["elitr_qa"]
    assert spec.data == recorded["spec"] and spec.report.cluster_by == "meeting_id"


@pytest.mark.parametrize("broken", [{}, {"spec": "not a mapping"}])
def test_a_manifest_without_the_spec_is_named(broken: dict[str, Any]) -> None:
    from lceval.errors import UserError

    with pytest.raises(UserError) as err:
        TaskSpec.from_manifest("elitr_qa", broken, Path("run"))
    assert err.value.field == "resolved.tasks.elitr_qa.spec"


#: how the sample run's model was stretched to its window (recorded in its model identity)
STRETCHED = LongContextSettings(window=131072, position_embeddings=131072, rope=RopeScaling("yarn", 4.0, 32768),
                                chunked_prefill=True, prefill_chunk=8192, prefix_caching=False)


def _record_samples() -> dict[str, Any]:
    """A value unlike the default for every RunRecord field. A field added to RunRecord
    without one fails `test_every_record_field_has_a_sample`: add one, and the round trip
    then proves the manifest carries it."""
    spec = load_catalog(load_plugins()).spec("elitr_qa")
    return {
        "run_id": "20250101-000000_Model_elitr_qa", "command": ["lceval", "run", "--tasks", "elitr_qa"],
        "config": RunConfig(**SAMPLES), "model_spec": "hf:org/Model,batch_size=4",
        "model_identity": {"scheme": "hf", "model": "org/Model", "long_context": STRETCHED.as_dict()},
        "tasks": {spec.name: spec},
        "usage": {"requests": 7, "seconds": 1.5}, "judge_usage": {"requests": 3}, "cost": {"total_usd": 0.5},
        "partial": {"reason": "cost_limit", "limit": "--max-cost"},
        "model_backend_stats": {"forward_passes": 4}, "judge_backend_stats": {"attempts": 3},
        "source_run": {"run_id": "a", "path": "/runs/a"}, "shard": {"index": 1, "count": 4, "fingerprint": "f"},
        "merged_from": {"count": 4}, "versions": {"lceval": "0.1.0"},
        "plugin_clashes": [{"kind": "judge", "name": "x"}], "data_files": {"/data/a.json": "ab" * 32},
        "context_facts": {"elitr_qa": {"dev/m1": {"noise": 0.4}}}, "data_sources": {"elitr_qa": [{"dataset": "x"}]},
        "git_commit": {"commit": "abc", "dirty": False}, "finished_at": "2025-01-01T00:00:00+0000",
        "replaced": {"run_id": "old"}, "metrics_added": [{"task": "elitr_qa"}], "unknown": {"from_the_future": 1},
    }


def _comparable(name: str, value: Any) -> Any:
    if name == "config":
        return value.to_manifest()
    if name == "tasks":
        return {k: (v.name, v.path, v.data) for k, v in value.items()}
    return value


def test_every_record_field_has_a_sample() -> None:
    samples = _record_samples()
    missing = [f.name for f in fields(RunRecord) if f.name not in samples]
    assert not missing, f"RunRecord fields without a round-trip sample in this test: {missing}"
    for name, value in samples.items():
        default = getattr(RunRecord(), name)
        assert _comparable(name, value) != _comparable(name, default), f"the sample of {name} is its default"


def test_run_record_goes_round_through_json_field_by_field() -> None:
    record = RunRecord(**_record_samples())
    back = RunRecord.from_manifest(json.loads(json.dumps(record.to_manifest())), Path("run"))
    for f in fields(RunRecord):
        assert _comparable(f.name, getattr(back, f.name)) == _comparable(f.name, getattr(record, f.name)), f.name
    assert back.seeds == [2023, 2024, 2025]
    assert back.long_context == STRETCHED  # typed again, as the report's run table reads it


def test_a_manifest_lacking_the_config_takes_the_results_model_and_seeds() -> None:
    """One seed rule: the manifest's config, else results.json's seeds (an older lceval), else 0."""
    back = RunRecord.from_manifest({"run_id": "r"}, Path("run"), model="replay:f#GPT-4", seeds=[5, 6])
    assert (back.config.models, back.seeds) == (["replay:f#GPT-4"], [5, 6])
    assert RunRecord.from_manifest({}, Path("run")).seeds == [0]


def test_a_run_folder_manifest_goes_round_byte_for_byte(tiny_home: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    serve_scripted(monkeypatch)
    out = tmp_path / "runs"
    lceval("run", "--tasks", "elitr_qa", "--model", "scripted:x", "--judge", "lexical", "--limit", "2",
           "--data-home", tiny_home, "--output", out, "--no-progress")
    (run_dir,) = list(out.iterdir())
    written = (run_dir / "manifest.json").read_text(encoding="utf-8")
    assert json.dumps(RunRecord.read(run_dir).to_manifest(), indent=2, ensure_ascii=False) + "\n" == written
