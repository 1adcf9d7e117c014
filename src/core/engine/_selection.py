"""Choosing the work of a run before anything is generated: `--contexts` keeps chosen
transcripts (meetings, haystacks), `--shard I/N` keeps a deterministic share of them.

Both work on `Conversation.context_id`, the one id every task type gives the long text a
conversation is about, so the engine needs no knowledge of any benchmark. A context is the
unit of both: every question about a meeting goes to the same shard, so its transcript is
prefilled on one machine only, and `lceval merge` can prove that the shards cover the run
exactly once (see `merge.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from lceval.io import canonical_hash
from lceval.errors import UserError
from lceval.engine._spec import TaskSpec
from lceval.types import Conversation

#: How many known context ids an error message lists before it says "and N more".
LIST_AT_MOST = 40
#: Characters per token in the machine-independent cost estimate of a context (shards are
#: balanced by it, so they must not depend on the tokenizer of the machine that plans them).
CHARS_PER_TOKEN = 4


def context_matches(pattern: str, context_id: str) -> bool:
    """A `--contexts` pattern (a shell glob) selects a context when it matches the whole id,
    its leading '/'-separated segments or its trailing ones: `dev/meeting_en_dev_001`,
    `meeting_en_dev_001`, `dev` and `dev/*` all select that ELITR meeting."""
    return (fnmatchcase(context_id, pattern) or fnmatchcase(context_id, pattern + "/*")
            or fnmatchcase(context_id, "*/" + pattern))


def parse_contexts(values: list[str] | None) -> list[str] | None:
    """`--contexts A,B --contexts C` -> [A, B, C]; None when not given."""
    if not values:
        return None
    out = [p.strip() for v in values for p in v.split(",") if p.strip()]
    if not out:
        raise UserError("--contexts needs at least one context id or pattern", field="--contexts")
    return out


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """`I/N` (0 <= I < N, zero-based like a Slurm array index) -> (I, N)."""
    if text is None:
        return None
    index, sep, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i = n = -1
    if not sep or n < 1 or not 0 <= i < n:
        raise UserError(f"--shard takes I/N with 0 <= I < N (e.g. 0/4), got '{text}'", field="--shard")
    return i, n


@dataclass
class ContextSelection:
    """The predicate task types and the engine ask for each context id (`TaskContext.
    select_context`). It remembers every id it was asked about, so a pattern that selects
    nothing is reported with the ids that exist, not silently ignored."""

    patterns: list[str] | None  # None = every context
    offered: dict[str, None] = field(default_factory=dict)  # an ordered set
    used: set[str] = field(default_factory=set)

    def __call__(self, context_id: str) -> bool:
        self.offered.setdefault(context_id, None)
        if self.patterns is None:
            return True
        hits = [p for p in self.patterns if context_matches(p, context_id)]
        self.used.update(hits)
        return bool(hits)

    def check(self, task_names: list[str], limit: int | None = None, splits: list[str] | None = None) -> None:
        unknown = [p for p in self.patterns or [] if p not in self.used]
        if not unknown:
            return
        known = list(self.offered)
        shown = ", ".join(known[:LIST_AT_MOST]) + (f" and {len(known) - LIST_AT_MOST} more"
                                                   if len(known) > LIST_AT_MOST else "")
        which = "s" if len(unknown) > 1 else ""
        among = f" in split(s) {', '.join(splits)}" if splits else ""
        hint = f"Known context ids of task(s) {', '.join(task_names)}{among}: {shown or 'none'}."
        if limit is not None:
            hint += f" (With --limit {limit} a task type may stop reading at the limit and not list the rest.)"
        raise UserError(f"no context (meeting, haystack) matches the pattern{which} "
                        f"{', '.join(repr(p) for p in unknown)}", field="--contexts", hint=hint)


def _tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def build_plan(loaded: list[tuple[TaskSpec, list[Conversation]]]) -> dict[str, Any]:
    """The whole run's work as plain JSON: per task, its conversations in run order with their
    context and item ids; per context, a cost estimate (tokens: the context once per task -
    backends reuse a shared prefix - plus each question and its answer allowance). The
    fingerprint hashes both, so shards planned from different data or options differ."""
    tasks: dict[str, list[dict[str, Any]]] = {}
    weights: dict[str, int] = {}
    for spec, conversations in loaded:
        allowance = spec.max_new_tokens
        entries = []
        counted: set[str] = set()
        seen: set[str] = set()
        for conv in conversations:
            items = [t.item_id for t in conv.turns]
            repeated = seen.intersection(items)
            if repeated:
                raise spec.error(f"item id '{sorted(repeated)[0]}' occurs twice in the task: a sharded "
                                 "run needs unique item ids to merge")
            seen.update(items)
            entries.append({"conv_id": conv.conv_id, "context_id": conv.context_id, "items": items})
            cost = sum(_tokens(t.user) + allowance for t in conv.turns)
            if conv.context_id not in counted:
                counted.add(conv.context_id)
                cost += _tokens(conv.context)
            weights[conv.context_id] = weights.get(conv.context_id, 0) + cost
        tasks[spec.name] = entries
    plan = {"tasks": tasks, "weights": weights}
    return {"fingerprint": plan_fingerprint(plan), **plan}


def plan_fingerprint(plan: dict[str, Any]) -> str:
    return canonical_hash({"tasks": plan["tasks"], "weights": plan["weights"]})


def assign(weights: dict[str, int], count: int) -> list[list[str]]:
    """Contexts per shard: heaviest first, each to the least loaded shard (lowest index on a
    tie), so the split depends only on the plan and N - every machine computes the same."""
    loads = [0] * count
    shards: list[list[str]] = [[] for _ in range(count)]
    for cid in sorted(weights, key=lambda c: (-weights[c], c)):
        i = min(range(count), key=lambda k: (loads[k], k))
        shards[i].append(cid)
        loads[i] += weights[cid]
    return shards


def shard_record(plan: dict[str, Any], index: int, count: int) -> dict[str, Any]:
    """What a shard's manifest says about it: enough for `merge` to prove completeness."""
    mine = set(assign(plan["weights"], count)[index])
    return {
        "index": index,
        "count": count,
        "fingerprint": plan["fingerprint"],
        "contexts": [c for c in plan["weights"] if c in mine],
        "weight": sum(plan["weights"][c] for c in mine),
        "total_weight": sum(plan["weights"].values()),
        "plan": {"tasks": plan["tasks"], "weights": plan["weights"]},
    }


def select_work(loaded: list[tuple[TaskSpec, list[Conversation]]], selection: ContextSelection,
                shard: tuple[int, int] | None, limit: int | None = None, splits: list[str] | None = None,
                ) -> tuple[list[tuple[TaskSpec, list[Conversation]]], dict[str, Any] | None]:
    """Apply `--contexts` (already asked during loading) and `--shard`; returns the work of
    this run and, when sharded, the manifest's shard record."""
    selection.check([spec.name for spec, _ in loaded], limit, splits)
    for spec, conversations in loaded:
        if not conversations:
            raise spec.error("the task selected no questions (check --split, --limit and --contexts)")
    if shard is None:
        return loaded, None
    plan = build_plan(loaded)
    record = shard_record(plan, *shard)
    mine = set(record["contexts"])
    if not mine:
        raise UserError(f"shard {shard[0]}/{shard[1]} gets no work: the run has only {len(plan['weights'])} "
                        "context(s) (meetings, haystacks) and a context is never split", field="--shard",
                        hint=f"Use at most {len(plan['weights'])} shards.")
    return [(spec, [c for c in convs if c.context_id in mine]) for spec, convs in loaded], record


__all__ = ["ContextSelection", "assign", "build_plan", "context_matches", "parse_contexts", "parse_shard",
           "plan_fingerprint", "select_work", "shard_record"]
