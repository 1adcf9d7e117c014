"""A finished or partial run, typed: `RunRecord` is its manifest.json and `FinishedRun` its
folder read back (results.json, the samples, the record).

The manifest is written from a `RunRecord` (`to_manifest`) and read back into one
(`from_manifest`) here only, as `RunConfig` and `TaskSpec` write and read their own parts of
it; everything else (`lceval score`, `merge`, `verify`, `report`, `launch`, the bundles) reads
the record's fields, never the manifest's dicts. So a field added to the record is written,
read and reopened by the same code, and the round-trip test
(tests/unit/engine/test_manifest_forms.py) fails for a field that is not carried.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from lceval.engine._run_config import RunConfig
from lceval.engine._runner import RunState, TaskRun
from lceval.engine._spec import TaskSpec
from lceval.errors import UserError
from lceval.io import read_json_object, validate
from lceval.types import LongContextSettings, Sample

#: the parts of manifest.json a later stage would stumble on, checked when it is read (each
#: task's resolved spec is then checked as a spec, by `TaskSpec.from_manifest`)
MANIFEST_SHAPE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "config": {"type": "object", "properties": {
            "tasks": {"type": ["string", "null"]}, "model": {"type": "string"},
            "splits": {"type": ["array", "null"], "items": {"type": "string"}},
            "limit": {"type": ["integer", "null"]}, "limit_per_context": {"type": ["integer", "null"]},
            "seeds": {"type": "array", "items": {"type": "integer"}},
            "context_policy": {"type": ["string", "null"]}, "retriever": {"type": ["string", "null"]},
            "overrides": {"type": ["object", "null"]},
            "disabled_plugins": {"type": ["array", "null"], "items": {"type": "string"}}}},
        "resolved": {"type": "object", "properties": {
            "model_spec": {"type": "string"}, "model_identity": {"type": "object"},
            "tasks": {"type": "object", "additionalProperties": {
                "type": "object", "required": ["spec"],
                "properties": {"spec_path": {"type": "string"}, "spec": {"type": "object"}}}}}},
        "data_files": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}

#: manifest keys that hold no field of their own: `resolved` and `backend_stats` group fields,
#: `seed` is the config's first seed (written for readers of the file)
_GROUPS = ("resolved", "seed", "backend_stats")
#: fields written only when they hold something (a run without them never had the key)
_WHEN_SET = ("partial", "data_sources", "replaced", "metrics_added")


@dataclass
class RunRecord:
    """What a run records of itself in manifest.json, typed: its settings (`config`), the
    model and task specs it resolved, what it used and cost, how it was split or joined, and
    where it came from. A field's manifest key is its name, except the grouped ones
    (`resolved.model_spec`, `resolved.model_identity`, `resolved.tasks`, `backend_stats.model`
    and `.judge`)."""

    run_id: str = ""
    #: the command line that made it
    command: list[str] = field(default_factory=list)
    config: RunConfig = field(default_factory=RunConfig)
    #: the model as resolved when it ran (an alias expanded): what results.json names
    model_spec: str = ""
    model_identity: dict[str, Any] = field(default_factory=dict)
    #: each task's resolved spec, in run order
    tasks: dict[str, TaskSpec] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    judge_usage: dict[str, Any] | None = None
    #: what it cost (`lceval.results.cost_summary`); None from an lceval older than cost accounting
    cost: dict[str, Any] | None = None
    #: which cost limit stopped it, when one did (the run is partial)
    partial: dict[str, Any] | None = None
    model_backend_stats: dict[str, Any] | None = None
    judge_backend_stats: dict[str, Any] | None = None
    #: set by `lceval score`: the run whose answers were judged again
    source_run: dict[str, Any] | None = None
    #: set by `--shard I/N`: this share of the whole run's plan
    shard: dict[str, Any] | None = None
    #: set by `lceval merge`: the shards it was joined from
    merged_from: dict[str, Any] | None = None
    #: lceval, Python, platform, plugins and libraries
    versions: dict[str, Any] = field(default_factory=dict)
    plugin_clashes: list[dict[str, Any]] = field(default_factory=list)
    #: sha256 of every data file read, by path
    data_files: dict[str, str] = field(default_factory=dict)
    #: per task, what its task type recorded per context
    context_facts: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: per task, where its data came from beyond its files
    data_sources: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    git_commit: dict[str, Any] | None = None
    finished_at: str = ""
    #: set when the same run again, every answer from the cache, took this folder's place
    replaced: dict[str, Any] | None = None
    #: each `lceval score --add-metric` that added metrics to the run in place
    metrics_added: list[dict[str, Any]] = field(default_factory=list)
    #: keys a newer lceval wrote, kept as they were
    unknown: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, state: RunState, run_id: str = "", **written: Any) -> "RunRecord":
        """The record of what `state` ran with and produced; `written`: the fields the writer
        adds (what it cost, where and when it was written)."""
        files: dict[str, str] = {}
        for task in state.tasks:
            files.update(task.files_read)
        return cls(
            run_id=run_id, command=state.config.command, config=state.config, model_spec=state.model_spec.canonical,
            model_identity=state.model_identity, tasks={t.spec.name: t.spec for t in state.tasks},
            usage=state.usage, judge_usage=state.judge_usage,
            partial={"reason": "cost_limit", **state.stopped} if state.stopped else None,
            model_backend_stats=state.model_backend_stats, judge_backend_stats=state.judge_backend_stats,
            source_run=state.source_run, shard=state.shard, merged_from=state.merged_from, data_files=files,
            context_facts={t.spec.name: t.context_facts for t in state.tasks if t.context_facts},
            data_sources={t.spec.name: t.sources for t in state.tasks if t.sources}, **written)

    @property
    def long_context(self) -> LongContextSettings | None:
        """How the model was stretched to its window (`ModelBackend.long_context`), recorded in
        `resolved.model_identity.long_context` (where it keys the cache); None: the backend did
        not say, or an lceval older than these settings ran it."""
        found = self.model_identity.get("long_context")
        return LongContextSettings.from_dict(found) if isinstance(found, dict) else None

    @property
    def seeds(self) -> list[int]:
        """The run's seeds: the one rule every stage reads them by (`from_manifest` fills them
        from results.json for a manifest that lacks them, else 0)."""
        return list(self.config.seeds)

    def same_run(self) -> dict[str, Any]:
        """What makes two runs the same run, in the manifest's form: their settings, model and
        resolved tasks, seed and provenance (not when, where or by which command line)."""
        return {
            "config": self.config.to_manifest(),
            "resolved": {"model_spec": self.model_spec, "model_identity": self.model_identity,
                         "tasks": {name: spec.to_manifest() for name, spec in self.tasks.items()}},
            "seed": self.config.seeds[0] if self.config.seeds else None,
            "source_run": self.source_run,
            "shard": self.shard,
            "merged_from": self.merged_from,
        }

    # -- the manifest form: written and read here only -------------------------------------
    def to_manifest(self) -> dict[str, Any]:
        same = self.same_run()
        out: dict[str, Any] = {
            "run_id": self.run_id,
            "command": list(self.command),
            "config": same["config"],
            "resolved": same["resolved"],
            "seed": same["seed"],
            "usage": self.usage,
            "judge_usage": self.judge_usage,
            "cost": self.cost,
            "partial": self.partial,
            "backend_stats": {"model": self.model_backend_stats, "judge": self.judge_backend_stats},
            "source_run": same["source_run"],
            "shard": same["shard"],
            "merged_from": same["merged_from"],
            "versions": self.versions,
            "plugin_clashes": self.plugin_clashes,
            "data_files": self.data_files,
            "context_facts": self.context_facts,
            "data_sources": self.data_sources,
            "git_commit": self.git_commit,
            "finished_at": self.finished_at,
            "replaced": self.replaced,
            "metrics_added": self.metrics_added,
        }
        for name in _WHEN_SET:
            if not out[name]:
                del out[name]
        return {**out, **self.unknown}

    @classmethod
    def from_manifest(cls, data: dict[str, Any], where: Path, *, model: str | None = None,
                      seeds: list[int] | None = None) -> "RunRecord":
        """The record a run wrote as `data` (`to_manifest`'s form); `where` is its folder (the
        errors name its manifest.json). `model` and `seeds` are what its results.json says,
        for a manifest written before the config recorded them. A key this lceval does not
        know (written by a newer one) is kept aside; a key the manifest lacks (an older one)
        keeps its default."""
        validate(data, MANIFEST_SHAPE, where / "manifest.json", {})
        recorded = dict(data.get("config") or {})
        if model is not None:
            recorded.setdefault("model", model)
        recorded.setdefault("seeds", list(seeds or [0]))
        resolved = data.get("resolved") or {}
        stats = data.get("backend_stats") or {}
        values: dict[str, Any] = {
            "config": RunConfig.from_manifest(recorded),
            "model_spec": str(resolved.get("model_spec") or ""),
            "model_identity": dict(resolved.get("model_identity") or {}),
            "tasks": {name: TaskSpec.from_manifest(name, entry if isinstance(entry, dict) else {}, where)
                      for name, entry in (resolved.get("tasks") or {}).items()},
            "model_backend_stats": stats.get("model"),
            "judge_backend_stats": stats.get("judge"),
        }
        own = {f.name for f in fields(cls)} - set(values) - {"unknown"}
        for name in own:
            if name in data:
                values[name] = data[name]
        for name in ("usage", "data_files", "context_facts", "data_sources", "versions"):
            values[name] = dict(values.get(name) or {})
        for name in ("command", "plugin_clashes", "metrics_added"):
            values[name] = list(values.get(name) or [])
        values["run_id"] = str(values.get("run_id") or where.name)
        values["finished_at"] = str(values.get("finished_at") or "")
        values["unknown"] = {k: v for k, v in data.items() if k not in own and k not in _GROUPS and k != "config"}
        return cls(**values)

    @classmethod
    def read(cls, folder: Path) -> "RunRecord":
        """The record in run folder `folder` (its manifest.json alone: results and samples are
        not read), e.g. to find a shard's finished run or the run a rerun repeats."""
        return cls.from_manifest(read_json_object(folder / "manifest.json", what="manifest.json"), folder)


@dataclass
class FinishedRun:
    """A run folder read back (`lceval.results.load_run`): what every later stage (score,
    compare, report, rank, merge, verify, a report panel) starts from, never a run's memory."""

    path: Path
    #: results.json: the numbers, as scoring wrote them
    results: dict[str, Any]
    #: manifest.json, typed
    record: RunRecord
    samples: list[Sample]

    @property
    def run_id(self) -> str:
        return str(self.results.get("run_id", self.path.name))

    @property
    def model(self) -> str:
        """The model as results.json names it (resolved: `smollm2`'s GGUF file)."""
        return str(self.results.get("model", "?"))

    def task_samples(self, task: str) -> list[Sample]:
        return [s for s in self.samples if s.task == task]

    def spec(self, task: str) -> TaskSpec:
        """The spec the task ran with, as the run recorded it."""
        found = self.record.tasks.get(task)
        if found is None:
            raise UserError(f"the manifest has no resolved spec for task '{task}'",
                            file=self.path / "manifest.json", field=f"resolved.tasks.{task}.spec")
        return found

    def task_spec(self, task: str) -> dict[str, Any]:
        """The resolved spec the task ran with, as a mapping (what `lceval tasks show` prints)."""
        return self.spec(task).data

    def task_run(self, task: str) -> TaskRun:
        """The task as the run holds it (its spec, samples, judges' identities, data files,
        facts and sources): what `lceval score` judges again and `merge` joins."""
        block = (self.results.get("tasks") or {}).get(task) or {}
        return TaskRun(spec=self.spec(task), samples=self.task_samples(task), judge_identity=block.get("judge") or {},
                       files_read=dict(self.record.data_files),
                       context_facts=dict(self.record.context_facts.get(task) or {}),
                       sources=list(self.record.data_sources.get(task) or []),
                       metric_identities=dict(block.get("metric_judges") or {}))
