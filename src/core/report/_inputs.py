"""What `lceval report` tabulates: finished run directories and recorded score files.

A recorded file (e.g. the generations ELITR-Bench published with their GPT-4 judge's scores)
is read by whichever installed score-source reader recognises it (`register_score_sources`,
the same readers `judge-agreement` uses). When the reader says which task the items answer
and gives each item the metadata a run's sample would carry, its scores become samples and
are scored with that task's spec exactly as a run's are (`scoring.score_task`), so recorded
results and runs sit side by side in the papers' tables with the same groups, breakdowns,
intervals and tests. Nothing here knows a benchmark.

`--where FIELD=VALUE` (a subset, e.g. Thonet et al., 2024a, App. C.3's QA/Conv differing questions) and
`--by FIELD` (a further breakdown) re-score each run from its samples.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from lceval.errors import UserError
from lceval.engine import Plugins, TaskSpec, model_label
from lceval.results import FinishedRun, load_run
from lceval.results import score_task
from lceval.types import ContextCut, Judgment, Sample, ScoreSource


@dataclass
class ReportRun:
    """One model's results as a table sees them: from a run directory, or scored from a
    recorded file."""

    run_id: str
    model: str  # the model spec string (a recorded file: the system it names)
    results: dict[str, Any]
    specs: dict[str, TaskSpec]  # task -> the resolved spec it was scored with (absent: none recorded)
    samples: list[Sample] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The model's name, as a paper's table calls it: the row label."""
        return model_label(self.model)

    @property
    def reasoning(self) -> str:
        """The run's reasoning settings (its specs' thinking switch, budget, effort and room), to
        tell two runs of one model apart: `budget 2048` beside `budget 8192`."""
        parts: list[str] = []
        for spec in self.specs.values():
            g = spec.data.get("generation") or {}
            if g.get("thinking") is not None:
                parts.append(f"thinking {'on' if g['thinking'] else 'off'}")
            for key, label in (("reasoning_budget", "budget"), ("reasoning_effort", "effort"),
                               ("reasoning_room", "room")):
                if g.get(key) is not None:
                    parts.append(f"{label} {g[key]}")
        return ", ".join(dict.fromkeys(parts)) or "the model's own reasoning"

    @property
    def judge(self) -> str:
        """The judges of its tasks, e.g. `recorded:gpt-4-eval` (to tell two rows apart)."""
        labels = []
        for task in (self.results.get("tasks") or {}).values():
            ident = task.get("judge") or {}
            label = str(ident.get("judge", "?")) + (f":{ident['source']}" if ident.get("source") else "")
            if label not in labels:
                labels.append(label)
        return "+".join(labels)


def from_run_dir(run: FinishedRun) -> ReportRun:
    specs = {task: run.record.tasks[task] for task in run.results.get("tasks") or {} if task in run.record.tasks}
    # the model as the user named it (`smollm2`, not the file its alias resolves to)
    typed = run.record.config.models[0] if run.record.config.models else ""
    return ReportRun(run_id=run.run_id, model=typed or run.model, results=run.results, specs=specs,
                     samples=run.samples)


def samples_of(source: ScoreSource, task: str, items: list[Any]) -> list[Sample]:
    """A recorded scorer's items as the samples a run of `task` judged by it would hold."""
    judge = f"recorded:{source.name}"
    out = []
    for item in items:
        ok = item.score is not None
        out.append(Sample(
            task=task, item_id=item.item_id, conv_id=item.cluster or item.item_id, turn_index=0, seed=0,
            metadata=dict(item.metadata), prompt_hash="", response=item.response or "", reference="",
            judgments=[Judgment(item_id=item.item_id, judge=judge, score=item.score,
                                parse_status="ok" if ok else "missing",
                                raw="" if ok else f"no recorded '{source.name}' score")],
            context_cut=ContextCut(policy="recorded", original_tokens=None, kept_tokens=None)))
    return out


def from_sources(sources: list[ScoreSource], specs: dict[str, TaskSpec]) -> list[ReportRun]:
    """One run per (system, scorer): the items of every file of one scorer about one system
    are joined (e.g. the dev and test2 files of one setting, and the three settings), each
    task scored with its registered spec."""
    by_run: dict[tuple[str, str], dict[str, list[Sample]]] = defaultdict(lambda: defaultdict(list))
    origins: dict[tuple[str, str], list[str]] = defaultdict(list)
    for source in sources:
        if source.task is None:
            continue
        per_system: dict[str, list[Any]] = defaultdict(list)
        for item in source.items:
            per_system[item.system].append(item)
        for system, items in per_system.items():
            by_run[(system, source.name)][source.task].extend(samples_of(source, source.task, items))
            origins[(system, source.name)].append(Path(source.origin).name)
    runs = []
    for (system, scorer), tasks in by_run.items():
        results: dict[str, Any] = {"schema_version": 1, "run_id": f"recorded:{scorer}", "model": system,
                                   "seeds": [0], "tasks": {}}
        for task, samples in tasks.items():
            results["tasks"][task] = score_task(samples, specs[task], {"judge": "recorded", "source": scorer})
        runs.append(ReportRun(run_id=f"{'+'.join(dict.fromkeys(origins[(system, scorer)]))}#{scorer}",
                              model=system, results=results, specs={t: specs[t] for t in tasks},
                              samples=[s for v in tasks.values() for s in v]))
    return runs


def load_inputs(paths: list[str], plugins: Plugins, spec_of: Any) -> list[ReportRun]:
    """Run directories and recorded files (`FILE` or `FILE#SCORER`), in the order given.
    `spec_of(task)` gives a registered task's resolved `TaskSpec` (recorded files name tasks)."""
    from lceval.analysis import read_sources

    runs: list[ReportRun] = []
    sources: list[ScoreSource] = []
    for arg in paths:
        if Path(arg).is_dir():
            runs.append(from_run_dir(load_run(Path(arg))))
            continue
        found = read_sources(arg, plugins, None)
        if not any(s.task for s in found):
            raise UserError("these recorded scores do not say which task they answer, so they cannot "
                            "be laid out as a task's results", file=arg.partition("#")[0], field="run_dirs",
                            hint="Give run directories, or files named as their reader expects "
                            "(e.g. ELITR-Bench's elitr-bench-qa_dev_st_gpt-4-eval.json).")
        sources += found
    specs = {t: spec_of(t) for t in dict.fromkeys(s.task for s in sources if s.task)}
    return runs + from_sources(sources, specs)


def parse_where(items: list[str]) -> list[tuple[str, str]]:
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UserError(f"--where takes FIELD=VALUE, got '{item}'", field="--where")
        out.append((key.strip(), value.strip()))
    return out


def _matches(value: Any, wanted: str) -> bool:
    if isinstance(value, bool):  # --where flag=true as well as flag=True
        return str(value).lower() == wanted.lower()
    return value is not None and str(value) == wanted


def rescored(run: ReportRun, where: list[tuple[str, str]], by: list[str]) -> ReportRun:
    """The run scored again from its samples: only those matching every `where`, with the
    further breakdowns `by`; tasks left without samples are dropped."""
    if not where and not by:
        return run
    tasks: dict[str, Any] = {}
    seed = int((run.results.get("seeds") or [0])[0])
    for task, entry in (run.results.get("tasks") or {}).items():
        spec = run.specs.get(task)
        if spec is None:
            raise UserError(f"task '{task}' has no resolved spec to score it again with",
                            file=run.run_id, field="--where/--by")
        samples = [s for s in run.samples if s.task == task
                   and all(_matches(s.metadata.get(k), v) for k, v in where)]
        if not samples:
            continue
        tasks[task] = score_task(samples, spec.with_breakdowns(by), entry.get("judge") or {}, seed=seed,
                                 metric_identities=entry.get("metric_judges"))
    if not tasks:
        raise UserError(f"no sample of run '{run.run_id}' has {', '.join(f'{k}={v}' for k, v in where)}",
                        field="--where")
    return replace(run, results={**run.results, "tasks": tasks})
