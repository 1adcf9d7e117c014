"""The flow of one model's run, once its plan is settled (`lceval.engine._plan`): the
work's conversations -> context policy -> scheduler -> cached model -> judge -> samples.
Knows no benchmark and no backend by name."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from lceval.engine import _context_policy as context_policy
from lceval.engine import _scheduler as scheduler
from lceval.engine._cache import Cache
from lceval.engine._cached_model import CachedModel, messages_payload
from lceval.engine._judging import JudgingPool
from lceval.engine._model_spec import ModelHandle, ModelSpec, open_judge_model
from lceval.engine._plan import RunPlan, ensure_datasets, load_work, make_judge
from lceval.engine._plugin_host import Plugins
from lceval.engine._progress import RunProgress, TaskProgress
from lceval.engine._run_config import RunConfig
from lceval.engine._scheduler import ConversationState
from lceval.engine._spec import TaskSpec
from lceval.interfaces import Judge
from lceval.io import canonical_hash
from lceval.types import (ContextCut, Conversation, Generation, GenerationRequest, JudgeInput, Judgment, Sample,
                          is_scored)


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


Answered = list[tuple[Conversation, int, Any, ContextCut, str]]


def generate_task(spec: TaskSpec, conversations: list[Conversation], model: CachedModel, seed: int,
                  progress: TaskProgress | bool | None = None,
                  on_answer: Callable[[Conversation, int, Generation], None] | None = None) -> Answered:
    """Answer every turn; returns (conversation, turn index, generation|None, cut, prompt hash).
    `on_answer(conversation, turn index, generation)` hears of each answer as it arrives (the
    run hands it to the judge at once); `progress` shows the work (True: a bar of its own)."""
    params = spec.generation_params(seed)
    window = model.backend.context_window
    fitted = context_policy.fit_all(conversations, model.backend, spec.context.policy, params.max_new_tokens,
                                    spec.context.reserve(params.max_new_tokens), max_tokens=spec.context.max_tokens)
    states = [ConversationState(conv=conv, context=text, cut=cut) for conv, text, cut in fitted]
    if not isinstance(progress, TaskProgress):
        progress = RunProgress(bool(progress)).task(
            spec.name, sum(len(c.turns) for c in conversations),
            {g.key: g.tokens for g in scheduler.make_groups(list(states))}, params.max_new_tokens)

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
        turn = st.next_turn
        st.record(gen, canonical_hash(messages_payload(request.messages)))
        progress.answer(st.conv.context_id, gen)  # per answer, as it arrives (cached ones too)
        if on_answer is not None:
            on_answer(st.conv, turn, gen)

    def skipped(st: ConversationState) -> None:
        progress.skipped(len(st.conv.turns) - st.next_turn)

    out: Answered = []
    try:
        progress.resumed(_cached_answers(states, build, model))
        scheduler.run(states, model, build, answered, skipped,
                      on_start=lambda st, request: progress.request_started(st.conv.context_id))
        for st in states:
            for i in range(len(st.conv.turns)):
                gen = st.generations[i] if i < len(st.generations) else None
                # turns left unasked (context skipped, or no room left mid-conversation) are skipped
                cut = st.cut if gen is not None else replace(st.cut, action="skipped")
                out.append((st.conv, i, gen, cut, st.prompt_hashes[i] if i < len(st.prompt_hashes) else ""))
    finally:
        progress.close()
    return out


def _cached_answers(states: list[ConversationState], build: Callable[[ConversationState], GenerationRequest | None],
                    model: CachedModel) -> int:
    """How many of the turns the cache already answers (a conversation is followed as long as
    its turns are there: a later turn's prompt holds the earlier answers), so a resumed run
    says so before it starts; nothing is counted as a request."""
    found = 0
    for st in states:
        probe = ConversationState(conv=st.conv, context=st.context, cut=st.cut)
        while not probe.done and probe.next_turn < len(probe.conv.turns):
            request = build(probe)
            record = model.cache.get(model.key(request)) if request is not None else None
            if record is None:
                break
            probe.record(Generation(**{**record, "request_id": request.request_id}), "")
            found += 1
    return found


def _scored(conv: Conversation, i: int) -> bool:
    return is_scored(conv.turns[i].metadata)


def judge_inputs(answered: Answered) -> list[JudgeInput]:
    """What the judge is asked about each answer (a failed generation is no answer, an
    unscored turn is not judged)."""
    return [_judge_input(conv, i, gen) for conv, i, gen, _, _ in answered
            if gen is not None and gen.finish_reason != "error" and _scored(conv, i)]


def _judge_input(conv: Conversation, i: int, gen: Generation) -> JudgeInput:
    turn = conv.turns[i]
    return JudgeInput(item_id=turn.item_id, question=turn.question, response=gen.text, reference=turn.reference,
                      metadata={**conv.metadata, **turn.metadata}, generation_extras=dict(gen.extras))


def judge_task(spec: TaskSpec, answered: Answered, judge: Judge, seed: int) -> list[Sample]:
    """Judge every answer at once and write the samples (what a run does while it generates,
    done after the fact)."""
    inputs = judge_inputs(answered)
    verdicts = {j.item_id: j for j in judge.judge(inputs)} if inputs else {}
    return samples_of(spec, answered, verdicts, seed)


def samples_of(spec: TaskSpec, answered: Answered, verdicts: dict[str, Judgment], seed: int) -> list[Sample]:
    """The samples of one task and seed, in the conversations' order."""
    samples = []
    for conv, i, gen, cut, prompt_hash in answered:
        # a request the backend gave up on (API errors past the retries) is no answer: it is
        # counted as a generation failure and never judged
        failure = gen.extras if gen is not None and gen.finish_reason == "error" else None
        if failure is not None:
            gen = None
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


def execute(plan: RunPlan, model_spec: ModelSpec, plugins: Plugins, cache: Cache, data_home: Path,
            progress: RunProgress | None = None) -> RunState:
    """Run every task of the plan for one of its models; the caller writes the outputs. Each
    answer is judged as soon as it exists, beside the generation of the next ones."""
    config = replace(plan.config, models=[model_spec.text])  # this run's model, as the user named it
    progress = progress or RunProgress(config.progress)
    handle = ModelHandle(model_spec)
    judge_model = None
    try:
        # data first: a missing dataset or a bad option is reported before any model is loaded
        # (unless a task type builds its contexts with the model's tokenizer)
        ensure_datasets(plan, plugins, data_home, progress.phase)
        progress.phase(f"reading the data of {len(plan.specs)} task(s)")
        work = load_work(plan, plugins, data_home, handle)
        judge_model = open_judge_model(plan.judge_model, cache)
        # a judge that cannot be built (no --judge-model, bad option) fails before the
        # system model is loaded, not after it
        first_judges = {spec.name: make_judge(spec, plan.judge, plugins, judge_model, config.seeds[0])
                        for spec, _ in work.loaded}
        if not handle.built:
            progress.phase(f"loading model {model_spec.text}")
        backend = handle.backend()
    except BaseException:
        handle.close()
        if judge_model is not None:
            judge_model.backend.close()
        raise
    model = CachedModel(backend, cache, model_spec.canonical)
    judge_slots = judge_model.slots if judge_model is not None else 1
    runs: list[TaskRun] = []
    try:
        backend.check_seeds(list(config.seeds))  # e.g. a replay of one run refuses several seeds
        pool = JudgingPool()
        progress.judging = True
        asked: list[tuple[TaskSpec, int, Judge, Answered, dict[str, Judgment]]] = []
        for spec, conversations in work.loaded:
            for seed in config.seeds:
                judge = (first_judges[spec.name] if seed == config.seeds[0]
                         else make_judge(spec, plan.judge, plugins, judge_model, seed))
                shown = progress.task(f"{spec.name}" + (f" seed {seed}" if len(config.seeds) > 1 else ""),
                                      sum(len(c.turns) for c in conversations),
                                      _contexts(spec, conversations), spec.max_new_tokens)
                verdicts = pool.add_judge(judge, judge_slots, on_judged=shown.judged_some)

                def to_judge(conv: Conversation, i: int, gen: Generation, judge: Judge = judge) -> None:
                    if gen is not None and gen.finish_reason != "error" and _scored(conv, i):
                        pool.submit(judge, _judge_input(conv, i, gen))

                answered = generate_task(spec, conversations, model, seed, shown, on_answer=to_judge)
                asked.append((spec, seed, judge, answered, verdicts))
        if pool.pending and not pool.wait(timeout=0.5):  # say so only when the judge is slow
            progress.phase(f"judging: {pool.pending} answers still with the judge")
        pool.wait()
        for spec, _ in work.loaded:
            mine = [entry for entry in asked if entry[0] is spec]
            samples = [s for _, seed, _, answered, verdicts in mine for s in samples_of(spec, answered, verdicts, seed)]
            runs.append(TaskRun(spec=spec, samples=samples, judge_identity=mine[-1][2].identity(),
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


def _contexts(spec: TaskSpec, conversations: list[Conversation]) -> dict[str, int]:
    """Each context's size, for the progress display: the model's tokens when its tokenizer
    is at hand (the context policy measured them already for a windowed model), else an
    estimate from the characters."""
    sizes: dict[str, int] = {}
    for conv in conversations:
        if conv.context_id not in sizes:
            sizes[conv.context_id] = scheduler.context_tokens(ConversationState(
                conv=conv, context=conv.context, cut=ContextCut(spec.context.policy, None, None)))
    return sizes
