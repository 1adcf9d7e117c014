"""The flow of one model's run, once its plan is settled (`lceval.engine._plan`): the
work's conversations -> context policy -> scheduler -> cached model -> judge -> samples.
Knows no benchmark and no backend by name."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from lceval.engine import _context_policy as context_policy
from lceval.engine import _scheduler as scheduler
from lceval.engine._cache import Cache
from lceval.engine._cached_model import CachedModel, messages_payload
from lceval.engine._model_spec import ModelHandle, ModelSpec, open_judge_model
from lceval.engine._plan import RunPlan, load_work, make_judge
from lceval.engine._plugin_host import Plugins
from lceval.engine._run_config import RunConfig
from lceval.engine._scheduler import ConversationState
from lceval.engine._spec import TaskSpec
from lceval.interfaces import Judge
from lceval.io import canonical_hash
from lceval.types import ContextCut, Conversation, GenerationRequest, JudgeInput, Sample


@dataclass
class TaskRun:
    spec: TaskSpec
    samples: list[Sample]
    judge_identity: dict[str, Any]
    files_read: dict[str, str]
    #: what the task type recorded per context (TaskContext.record_facts), for the manifest
    context_facts: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: where the data came from beyond its files (TaskContext.record_source), for the manifest
    sources: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class RunState:
    """Everything a run produced, handed to the writers."""

    config: RunConfig
    model_spec: ModelSpec
    model_identity: dict[str, Any]
    tasks: list[TaskRun]
    usage: dict[str, Any]
    judge_usage: dict[str, Any] | None
    #: set by `lceval score`: the run whose answers were re-judged
    source_run: dict[str, Any] | None = None
    model_backend_stats: dict[str, Any] | None = None
    judge_backend_stats: dict[str, Any] | None = None
    #: set by `--shard`: this run's share of the whole run's plan (selection.shard_record)
    shard: dict[str, Any] | None = None
    #: set by `lceval merge`: the shards this run was joined from
    merged_from: dict[str, Any] | None = None

    @property
    def model_text(self) -> str:
        """The model as the user named it for this run (an alias stays an alias)."""
        return self.config.models[0]


def check_tasks(config: RunConfig, plugins: Plugins, catalog: Catalog) -> None:
    """Everything about the command that can be checked without reading data or opening the
    cache: tasks, specs, overrides, the model string."""
    check_config(config)
    for spec in catalog.resolve_tasks(config.tasks):
        checked_task_type(apply_overrides(spec, config), config, plugins)
    backend_factory(parse_model_spec(config.model, catalog), plugins)
    judge_model_spec(config.judge_model, catalog, plugins)


def generate_task(spec: TaskSpec, conversations: list[Conversation], model: CachedModel,
                  seed: int, progress: bool) -> list[tuple[Conversation, int, Any, ContextCut, str]]:
    """Answer every turn; returns (conversation, turn index, generation|None, cut, prompt hash)."""
    params = spec.generation_params(seed)
    window = model.backend.context_window
    fitted = context_policy.fit_all(conversations, model.backend, spec.context.policy, params.max_new_tokens,
                               spec.context.reserve(params.max_new_tokens), max_tokens=spec.context.max_tokens)
    states = [ConversationState(conv=conv, context=text, cut=cut) for conv, text, cut in fitted]
    total = sum(len(c.turns) for c in conversations)
    bar = tqdm(total=total, desc=spec.name, unit="q", disable=not progress or None, leave=False)

    def build(st: ConversationState) -> GenerationRequest | None:
        """The request of the state's next turn; None leaves the rest of it unasked."""
        if st.context is None:
            return None
        turn = st.conv.turns[st.next_turn]
        messages = context_policy.fill_context(
            context_policy.full_transcript(st.conv, st.history_answers(), upto=st.next_turn), st.context
        )
        if window is not None and st.next_turn > 0 and st.conv.history == "model":
            # the policy sized the first turn exactly; later ones depend on answers
            n = model.backend.count_tokens(messages)
            if n is not None and n + params.max_new_tokens > window:
                return None  # an earlier answer ran past the reserve: stop here, never overflow
        hints = {**st.conv.metadata, **turn.metadata, "item_id": turn.item_id, "question": turn.question}
        return GenerationRequest(request_id=turn.item_id, messages=messages, params=params, hints=hints)

    def answered(st: ConversationState, request: GenerationRequest, gen: Any) -> None:
        st.record(gen, canonical_hash(messages_payload(request.messages)))
        bar.update(1)  # per answer, as it arrives (cached ones too)

    def skipped(st: ConversationState) -> None:
        bar.update(len(st.conv.turns) - st.next_turn)

    out: list[tuple[Conversation, int, Any, ContextCut, str]] = []
    try:
        scheduler.run(states, model, build, answered, skipped)
        for st in states:
            for i in range(len(st.conv.turns)):
                gen = st.generations[i] if i < len(st.generations) else None
                # turns left unasked (context skipped, or no room left mid-conversation) are skipped
                cut = st.cut if gen is not None else replace(st.cut, action="skipped")
                out.append((st.conv, i, gen, cut, st.prompt_hashes[i] if i < len(st.prompt_hashes) else ""))
    finally:
        bar.close()
    return out


def judge_task(spec: TaskSpec, answered: list[tuple[Conversation, int, Any, ContextCut, str]],
               judge: Judge, seed: int) -> list[Sample]:
    # a request the backend gave up on (API errors past the retries) is no answer: it is
    # counted as a generation failure and never judged
    answered = [(conv, i, None if gen is not None and gen.finish_reason == "error" else gen, cut, h,
                 gen.extras if gen is not None and gen.finish_reason == "error" else None)
                for conv, i, gen, cut, h in answered]
    inputs: list[JudgeInput] = []
    for conv, i, gen, _, _, _ in answered:
        if gen is not None:
            turn = conv.turns[i]
            inputs.append(JudgeInput(item_id=turn.item_id, question=turn.question, response=gen.text,
                                     reference=turn.reference, metadata={**conv.metadata, **turn.metadata},
                                     generation_extras=dict(gen.extras)))
    verdicts = {j.item_id: j for j in judge.judge(inputs)} if inputs else {}
    samples = []
    for conv, i, gen, cut, prompt_hash, failure in answered:
        turn = conv.turns[i]
        samples.append(Sample(
            task=spec.name, item_id=turn.item_id, conv_id=conv.conv_id, turn_index=i, seed=seed,
            metadata={**conv.metadata, **turn.metadata}, prompt_hash=prompt_hash,
            response=gen.text if gen else None, reference=turn.reference,
            judgments=[verdicts[turn.item_id]] if gen is not None and turn.item_id in verdicts else [],
            context_cut=cut,
            prompt_tokens=gen.prompt_tokens if gen else 0,
            # None: the backend could not tell what it prefilled (never guessed as the prompt)
            prefilled_tokens=gen.prefilled_tokens if gen else 0,
            completion_tokens=gen.completion_tokens if gen else 0,
            seconds=gen.seconds if gen else 0.0, cached=bool(gen and gen.cached),
            generation_extras=dict(gen.extras) if gen else ({"generation_failed": failure} if failure is not None else {}),
            question=turn.question,
        ))
    return samples


def execute(plan: RunPlan, model_spec: ModelSpec, plugins: Plugins, cache: Cache, data_home: Path) -> RunState:
    """Run every task of the plan for one of its models; the caller writes the outputs."""
    config = replace(plan.config, models=[model_spec.text])  # this run's model, as the user named it
    handle = ModelHandle(model_spec)
    judge_model = None
    try:
        # data first: a missing dataset or a bad option is reported before any model is loaded
        # (unless a task type builds its contexts with the model's tokenizer)
        work = load_work(plan, plugins, data_home, handle)
        judge_model = open_judge_model(plan.judge_model, cache)
        # a judge that cannot be built (no --judge-model, bad option) fails before the
        # system model is loaded, not after it
        first_judges = {spec.name: make_judge(spec, plan.judge, plugins, judge_model, config.seeds[0])
                        for spec, _ in work.loaded}
        backend = handle.backend()
    except BaseException:
        handle.close()
        if judge_model is not None:
            judge_model.backend.close()
        raise
    model = CachedModel(backend, cache, model_spec.canonical)
    runs: list[TaskRun] = []
    try:
        backend.check_seeds(list(config.seeds))  # e.g. a replay of one run refuses several seeds
        for spec, conversations in work.loaded:
            samples: list[Sample] = []
            judge_identity: dict[str, Any] = {}
            for seed in config.seeds:
                judge = (first_judges[spec.name] if seed == config.seeds[0]
                         else make_judge(spec, plan.judge, plugins, judge_model, seed))
                judge_identity = judge.identity()
                answered = generate_task(spec, conversations, model, seed, config.progress)
                samples.extend(judge_task(spec, answered, judge, seed))
            runs.append(TaskRun(spec=spec, samples=samples, judge_identity=judge_identity,
                                files_read=dict(work.recorder.files), context_facts=work.facts[spec.name],
                                sources=work.sources.get(spec.name, [])))
    finally:
        model_stats = backend.stats()
        judge_stats = judge_model.backend.stats() if judge_model is not None else None
        handle.close()
        if judge_model is not None:
            judge_model.backend.close()
    return RunState(config=config, model_spec=model_spec, model_identity=model.identity, tasks=runs,
                    usage=model.usage.as_dict(),
                    judge_usage=judge_model.usage.as_dict() if judge_model else None,
                    model_backend_stats=model_stats, judge_backend_stats=judge_stats, shard=work.shard)
