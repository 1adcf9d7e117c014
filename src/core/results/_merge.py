"""`lceval merge`: the shards of one run (`lceval run --shard I/N` on N machines) joined into
the run one machine would have written.

Nothing is taken on trust: every shard must come from the same command on the same data
(model and its identity, task specs, options, seeds, judge and its identity, data hashes,
lceval version, N and the plan fingerprint), the N shards must each be there once, each
must hold exactly the contexts the plan assigns it (recomputed here from the plan it
recorded) and a sample for every item of them. The results are then recomputed from the
merged samples by the engine's own scoring, with the samples in the order an unsharded
run writes them (the cluster bootstrap depends on it), so `results.json` equals the
unsharded run's.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any, Callable

from lceval.engine import FinishedRun, RunState, Session, assign, plan_fingerprint
from lceval.errors import UserError
from lceval.types import Sample

HINT = "Shards of one run come from one `lceval run ... --shard I/N` command, run for I = 0..N-1."

#: What must be equal in every shard, in the order it is checked; each a label for the
#: message and a reader of a finished run.
SAME: list[tuple[str, Callable[[FinishedRun], Any]]] = [
    ("lceval version", lambda r: r.results.get("lceval_version")),
    ("model", lambda r: r.results.get("model")),
    ("model identity", lambda r: r.record.model_identity),
    ("tasks", lambda r: list(r.results.get("tasks") or {})),
    ("task specs", lambda r: {t: spec.data for t, spec in r.record.tasks.items()}),
    ("seeds", lambda r: r.results.get("seeds")),
    ("judge (--judge)", lambda r: r.record.config.judge),
    ("judge model (--judge-model)", lambda r: r.record.config.judge_model),
    ("judge identity", lambda r: {t: v.get("judge") for t, v in (r.results.get("tasks") or {}).items()}),
    ("metrics' judges", lambda r: {t: v.get("metric_judges") for t, v in (r.results.get("tasks") or {}).items()}),
    ("options (--split, --limit, --contexts, --context-policy, --retriever, --set)",
     lambda r: {k: getattr(r.record.config, k) for k in ("splits", "limit", "contexts", "context_policy", "retriever",
                                                         "overrides")}),
]
PLAN = "plan (the contexts, items and their weights of the whole run)"


def _shard(run: FinishedRun) -> dict[str, Any]:
    record = run.record.shard
    if not isinstance(record, dict) or not {"index", "count", "fingerprint", "contexts", "plan"} <= set(record):
        raise UserError("not a shard: the run was not made with `lceval run ... --shard I/N`",
                        file=run.path / "manifest.json", field="shard", hint=HINT)
    return record


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def first_difference(a: Any, b: Any, where: str = "") -> str:
    """Where two JSON values first differ, as `at 'key.sub': A vs B`."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            if key not in a or key not in b:
                side = "only in the first" if key in a else "only in this one"
                return f"at '{where}{key}': {side}"
            if a[key] != b[key]:
                return first_difference(a[key], b[key], f"{where}{key}.")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return first_difference(x, y, f"{where}{i}.")
    return (f"at '{where.rstrip('.')}': " if where else "") + f"{_short(a)} vs {_short(b)}"


def _data_difference(first: FinishedRun, run: FinishedRun) -> str | None:
    """Data files are compared by content (their paths differ between machines)."""
    mine, theirs = (dict(r.record.data_files) for r in (first, run))
    if Counter(mine.values()) == Counter(theirs.values()):
        return None
    extra = [f"{p} (sha256 {h[:12]})" for p, h in theirs.items() if h not in set(mine.values())]
    if extra:
        return f"it read {', '.join(extra[:3])}, which the first shard did not"
    lacking = [f"{p} (sha256 {h[:12]})" for p, h in mine.items() if h not in set(theirs.values())]
    if lacking:
        return f"it did not read {', '.join(lacking[:3])}"
    return "the same files were read a different number of times"


def check_together(runs: list[FinishedRun]) -> tuple[list[FinishedRun], list[dict[str, Any]]]:
    """`runs` and their shard records in shard order, once proved to be the N shards of one run."""
    records = [_shard(r) for r in runs]
    first, head = runs[0], records[0]
    for run, rec in zip(runs[1:], records[1:]):
        if rec["count"] != head["count"]:
            raise UserError(f"shard {rec['index']}/{rec['count']} cannot join shard {head['index']}/{head['count']} "
                            f"of {first.path}: the run was split into {rec['count']} shards, not {head['count']}",
                            file=run.path, hint=HINT)
        for label, read in SAME:
            if read(run) != read(first):
                raise UserError(f"not a shard of the same run as {first.path}: {label} differs "
                                f"({first_difference(read(first), read(run))})", file=run.path, hint=HINT)
        data = _data_difference(first, run)
        if data:
            raise UserError(f"not a shard of the same run as {first.path}: the data differ ({data})",
                            file=run.path, hint=HINT)
        if rec["fingerprint"] != head["fingerprint"]:
            raise UserError(f"not a shard of the same run as {first.path}: the {PLAN} differs "
                            f"({first_difference(head['plan'], rec['plan'])})", file=run.path, hint=HINT)
    count = int(head["count"])
    by_index: dict[int, FinishedRun] = {}
    for run, rec in zip(runs, records):
        if rec["index"] in by_index:
            raise UserError(f"shard {rec['index']}/{count} is given twice: {by_index[rec['index']].path} and {run.path}",
                            file=run.path)
        by_index[rec["index"]] = run
    missing = [i for i in range(count) if i not in by_index]
    if missing:
        raise UserError(f"shard(s) {', '.join(f'{i}/{count}' for i in missing)} missing: got "
                        f"{', '.join(f'{i}/{count}' for i in sorted(by_index))} ({', '.join(str(r.path) for r in runs)})",
                        hint="Every shard must be merged: a merge of some shards would not be the run.")
    plan = head["plan"]
    shares = assign(plan["weights"], count)
    for run, rec in zip(runs, records):
        if plan_fingerprint(rec["plan"]) != rec["fingerprint"]:
            raise UserError("the recorded plan does not match its fingerprint (the manifest was edited)",
                            file=run.path / "manifest.json", field="shard.plan")
        if sorted(rec["contexts"]) != sorted(shares[rec["index"]]):
            raise UserError(f"shard {rec['index']}/{count} holds other contexts than the plan assigns it",
                            file=run.path / "manifest.json", field="shard.contexts")
    order = sorted(range(len(runs)), key=lambda k: records[k]["index"])
    return [runs[k] for k in order], [records[k] for k in order]


def merged_samples(runs: list[FinishedRun], plan: dict[str, Any], task: str, seeds: list[int]) -> list[Sample]:
    """Every sample of `task`, once, in the order an unsharded run writes them: seed by seed,
    conversations in plan order, turns in order."""
    found: dict[tuple[int, str], tuple[Sample, FinishedRun]] = {}
    for run in runs:
        for s in run.task_samples(task):
            key = (s.seed, s.item_id)
            if key in found:
                raise UserError(f"task '{task}', seed {s.seed}: item '{s.item_id}' is in two shards "
                                f"({found[key][1].path} and {run.path})", file=run.path / "samples.jsonl")
            found[key] = (s, run)
    out = []
    for seed in seeds:
        for conv in plan["tasks"][task]:
            for item in conv["items"]:
                got = found.pop((seed, item), None)
                if got is None:
                    raise UserError(f"task '{task}', seed {seed}: no shard has a sample for item '{item}' "
                                    f"(context '{conv['context_id']}')", hint="A shard directory is incomplete.")
                out.append(got[0])
    if found:
        (seed, item), (_, run) = next(iter(found.items()))
        raise UserError(f"task '{task}', seed {seed}: item '{item}' is not in the run's plan",
                        file=run.path / "samples.jsonl")
    return out


def add_up(values: list[Any]) -> Any:
    """Shards' counters summed: numbers add; dicts add key by key (a key a shard lacks counts
    for nothing); an explicit None (unknown) in any shard makes the sum unknown; other values
    are kept when every shard has the same, else unknown (each shard's own stays listed)."""
    present = [v for v in values if v is not None]
    if not present or len(present) < len(values):
        return None
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return sum(present)
    if all(isinstance(v, dict) for v in present):
        keys = list(dict.fromkeys(k for v in present for k in v))
        return {k: add_up([v[k] for v in present if k in v]) for k in keys}
    return present[0] if all(v == present[0] for v in present) else None


def merge_runs(runs: list[FinishedRun], session: Session) -> RunState:
    """The merged run, for `write_run`. `session` is the first shard reopened
    (`Session.reopen`): its config and model are the run's, its command this merge's."""
    if not runs:
        raise UserError("merge needs the run directories of the shards", field="RUN_DIR")
    runs, records = check_together(list(runs))
    first, head = runs[0], records[0]
    seeds = [int(s) for s in first.results["seeds"]]
    config = replace(session.config, seeds=seeds, shard=None)
    # the model as results.json names it (canonical), as the user typed it for the labels
    model_spec = replace(session.model_spec(first.model, check=False), text=config.models[0])
    tasks = []
    for name in first.results["tasks"]:
        facts = {cid: f for r in runs for cid, f in (r.record.context_facts.get(name) or {}).items()}
        tasks.append(replace(first.task_run(name), samples=merged_samples(runs, head["plan"], name, seeds),
                             context_facts=facts))
    seconds = [r.record.usage.get("seconds") for r in runs]
    merged_from = {
        "count": head["count"],
        "fingerprint": head["fingerprint"],
        "plan": head["plan"],
        "shards": [{"index": rec["index"], "run_id": r.run_id, "path": str(r.path.resolve()),
                    "contexts": rec["contexts"], "weight": rec.get("weight"),
                    "usage": r.record.usage, "judge_usage": r.record.judge_usage,
                    "finished_at": r.record.finished_at, "platform": r.record.versions.get("platform")}
                   for r, rec in zip(runs, records)],
        "slowest_shard_seconds": max(seconds) if seconds and None not in seconds else None,
        "usage_note": "usage and judge_usage add up the shards' counters; usage.seconds is the sum of the "
                      "shards' seconds (time spent over all machines); with the shards run side by side the "
                      "run took about slowest_shard_seconds. A counter unknown in any shard is unknown (null).",
    }
    return RunState(
        config=config, model_spec=model_spec, model_identity=dict(first.record.model_identity),
        tasks=tasks, usage=add_up([r.record.usage for r in runs]) or {},
        judge_usage=add_up([r.record.judge_usage for r in runs]),
        model_backend_stats=add_up([r.record.model_backend_stats for r in runs]),
        judge_backend_stats=add_up([r.record.judge_backend_stats for r in runs]),
        merged_from=merged_from,
        # a shard a cost limit stopped leaves the whole run partial
        stopped=next((dict(r.record.partial) for r in runs if r.record.partial), None),
        # every shard skipped the same lengths (one model, one sweep): said once
        skipped_lengths=list(runs[0].results.get("skipped_lengths") or []),
    )


__all__ = ["add_up", "check_together", "first_difference", "merge_runs", "merged_samples"]
