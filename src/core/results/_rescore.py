"""Judging as a stage of its own: re-judge a finished run without generating again.

Generation is the expensive part of long-context evaluation; judges change more often
(a new judge model, a fixed rubric). `lceval score RUN_DIR --judge NAME` reads the answers a
run wrote, judges them through the same cache as a normal run, and writes a *new* run
directory whose manifest points to its source; the source is never modified.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

from lceval.engine import (Cache, CachedModel, JudgeChoice, Plugins, Catalog, RunConfig, RunState, TaskRun, TaskSpec,
                           make_judge, open_judge_model, parse_model_spec, resolve_judge_flag, resolve_judge_model)
from lceval.errors import UserError
from lceval.types import FinishedRun, JudgeInput, Sample


def _judge_inputs(samples: list[Sample], run: FinishedRun) -> list[JudgeInput]:
    inputs = []
    for s in samples:
        if s.response is None:
            continue
        if not s.question:
            raise UserError(f"sample '{s.item_id}' has no stored question (written by an older lceval)",
                            file=run.path / "samples.jsonl", field="question",
                            hint="Re-run the task (answers come from the cache) to re-judge it.")
        inputs.append(JudgeInput(item_id=s.item_id, question=s.question, response=s.response,
                                 reference=s.reference, metadata=dict(s.metadata),
                                 generation_extras=dict(s.generation_extras)))
    return inputs


def rejudge_samples(samples: list[Sample], spec: TaskSpec, choice: JudgeChoice | None, plugins: Plugins,
                    judge_model: CachedModel | None, run: FinishedRun) -> tuple[list[Sample], dict[str, Any]]:
    """New samples with one fresh judgment each (seed by seed: a sampling judge uses the
    seed the answer was generated with, as in a normal run)."""
    by_seed: dict[int, list[Sample]] = defaultdict(list)
    for s in samples:
        by_seed[s.seed].append(s)
    verdicts: dict[tuple[int, str], Any] = {}
    identity: dict[str, Any] = {}
    for seed, group in sorted(by_seed.items()):
        judge = make_judge(spec, choice, plugins, judge_model, seed)
        identity = judge.identity()
        inputs = _judge_inputs(group, run)
        for verdict in judge.judge(inputs) if inputs else []:
            verdicts[(seed, verdict.item_id)] = verdict
    out = []
    for s in samples:
        v = verdicts.get((s.seed, s.item_id))
        out.append(replace(s, judgments=[v] if v is not None and s.response is not None else []))
    return out, identity


def config_of(run: FinishedRun, **changes: Any) -> RunConfig:
    """The configuration a finished run was made with (its manifest's), with `changes`."""
    cfg = dict(run.manifest.get("config") or {})
    config = RunConfig(
        tasks=str(cfg.get("tasks", "")), models=[str(cfg.get("model", run.model))], judge=cfg.get("judge"),
        judge_model=cfg.get("judge_model"), splits=cfg.get("splits"), limit=cfg.get("limit"),
        limit_per_context=cfg.get("limit_per_context"),
        seeds=list(cfg.get("seeds") or run.results.get("seeds") or [0]),
        context_policy=cfg.get("context_policy"), retriever=cfg.get("retriever"), overrides=dict(cfg.get("overrides") or {}),
        disabled_plugins=list(cfg.get("disabled_plugins") or []), progress=False,
    )
    return replace(config, **changes)


def spec_of(run: FinishedRun, name: str) -> TaskSpec:
    """The resolved spec task `name` ran with, as a TaskSpec (no line numbers: it is JSON)."""
    resolved = run.manifest.get("resolved") or {}
    spec_path = Path((resolved.get("tasks") or {}).get(name, {}).get("spec_path", run.path))
    return TaskSpec(name=name, path=spec_path, data=run.task_spec(name), lines={})


def rescore_run(run: FinishedRun, judge: str, judge_model: str | None, plugins: Plugins,
                catalog: Catalog, cache: Cache, command: list[str]) -> RunState:
    resolved = run.manifest.get("resolved") or {}
    config = config_of(run, judge=judge, judge_model=judge_model, cache_path=cache.path, command=command)
    model_spec = parse_model_spec(str(resolved.get("model_spec") or run.model), catalog)
    jspec = resolve_judge_model(judge_model, catalog, plugins)
    choice = resolve_judge_flag(judge, catalog, plugins)
    task_names = list(run.results.get("tasks") or {})
    if not task_names:
        raise UserError("the run has no tasks to re-judge", file=run.path / "results.json", field="tasks")
    cached_judge = None
    tasks: list[TaskRun] = []
    try:
        cached_judge = open_judge_model(jspec, cache)
        for name in task_names:
            spec = spec_of(run, name)
            samples, identity = rejudge_samples(run.task_samples(name), spec, choice, plugins, cached_judge, run)
            tasks.append(TaskRun(spec=spec, samples=samples, judge_identity=identity,
                                 files_read=dict(run.manifest.get("data_files") or {}),
                                 context_facts=dict((run.manifest.get("context_facts") or {}).get(name) or {}),
                                 sources=list((run.manifest.get("data_sources") or {}).get(name) or [])))
    finally:
        if cached_judge is not None:
            cached_judge.backend.close()
    return RunState(
        config=config, model_spec=model_spec,
        model_identity=dict(resolved.get("model_identity") or {}), tasks=tasks,
        usage={"requests": 0, "generated": 0, "note": "answers read from the source run"},
        judge_usage=cached_judge.usage.as_dict() if cached_judge else None,
        source_run={"run_id": run.run_id, "path": str(run.path.resolve()),
                    "judge": run.results.get("tasks", {}).get(task_names[0], {}).get("judge")},
        judge_backend_stats=_stats(cached_judge),
    )


def _stats(model: CachedModel | None) -> dict[str, Any] | None:
    return model.backend.stats() if model is not None else None
