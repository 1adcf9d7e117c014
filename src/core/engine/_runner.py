"""The flow of one model's run, once its plan is settled (`lceval.engine._plan`): the
work's conversations -> context policy -> scheduler -> cached model -> judge -> samples.
Knows no benchmark and no backend by name."""

from __future__ import annotations

import contextvars
import logging
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from lceval.engine import _context_policy as context_policy
from lceval.engine import _scheduler as scheduler
from lceval.engine._cache import Cache
from lceval.engine._cached_model import CachedModel, messages_payload
from lceval.engine._judging_pool import JudgingPool
from lceval.engine._model_handle import ModelHandle
from lceval.engine._model_spec import ModelSpec
from lceval.engine._plan import RunPlan, ensure_datasets, load_work, make_judge, make_metric_judges, skipped_lines
from lceval.engine._plugin_host import Plugins
from lceval.engine._progress import RunProgress, TaskProgress
from lceval.engine._run_config import RunConfig
from lceval.engine._scheduler import ConversationState
from lceval.engine._shared_prefix import shared_prefixes
from lceval.engine._spec import TaskSpec
from lceval.engine._spending import usage_scope
from lceval.engine._thinking import controls_of, expects_thinking, thinking_settings
from lceval.errors import UserError
from lceval.interfaces import Judge, ModelBackend
from lceval.io import canonical_hash
from lceval.tokens import loading_bars_off
from lceval.types import (ContextCut, Conversation, Generation, GenerationRequest, JudgeInput, Judgment, Sample,
                          is_scored)


log = logging.getLogger("lceval.run")


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
    #: the identity of each further metric's judge, by label (the spec's `metrics:`)
    metric_identities: dict[str, dict[str, Any]] = field(default_factory=dict)


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
    #: set when a cost limit stopped the run: which, what was spent, what was not sent; the
    #: run is partial (results written as such, never over a complete run)
    stopped: dict[str, Any] | None = None
    #: what the run used for a thinking model where the user set nothing (a budget, room for
    #: the thinking, the provider's own effort), as the console says it
    reasoning_used: list[str] = field(default_factory=list)
    #: the lengths of a `--context-lengths` sweep left out as past the model's window
    #: (`load_work`'s `Work.skipped`; results.json's `skipped_lengths`)
    skipped_lengths: list[dict[str, Any]] = field(default_factory=list)

    @property
    def model_text(self) -> str:
        """The model as the user named it for this run (an alias stays an alias)."""
        return self.config.models[0]


def sample_of(spec: TaskSpec, conv: Conversation, i: int, gen: Generation | None, cut: ContextCut,
              prompt_hash: str, seed: int, continues: bool = True) -> Sample:
    """The sample of turn `i` of `conv` answered with `gen` (None: left unasked), not yet
    judged. A request the backend gave up on (API errors past the retries) is no answer: it
    is counted as a generation failure and never judged."""
    failure = gen.extras if gen is not None and gen.finish_reason == "error" else None
    reasoning = (gen.reasoning, gen.reasoning_tokens) if gen is not None else (None, None)
    unclosed = gen is not None and gen.finish_reason == "unclosed_thinking"
    if failure is not None:
        gen = None
    turn = conv.turns[i]
    extras = dict(gen.extras) if gen else ({"generation_failed": failure} if failure is not None else {})
    metadata = {**conv.metadata, **turn.metadata}
    if turn.assistant_prefix:  # where the answer's start went: as RULER's authors, or in the question
        metadata["answer_prefix_in"] = "assistant" if continues else "user"
    if unclosed:  # a thinking that never closed is no answer: kept, counted, never judged
        extras["unclosed_thinking"] = True
    return Sample(
        task=spec.name, item_id=turn.item_id, conv_id=conv.conv_id, turn_index=i, seed=seed,
        metadata=metadata, prompt_hash=prompt_hash,
        response=gen.text if gen and not unclosed else None, reference=turn.reference, judgments=[],
        context_cut=cut,
        prompt_tokens=gen.prompt_tokens if gen else 0,
        # None: the backend could not tell what it prefilled (never guessed as the prompt)
        prefilled_tokens=gen.prefilled_tokens if gen else 0,
        completion_tokens=gen.completion_tokens if gen else 0,
        seconds=gen.seconds if gen else 0.0, cached=bool(gen and gen.cached),
        generation_extras=extras,
        question=turn.question, reasoning=reasoning[0], reasoning_tokens=reasoning[1],
        raw_response=gen.raw_text if gen and not unclosed else None,
        cache_read_tokens=gen.cache_read_tokens if gen else None,
        cache_write_tokens=gen.cache_write_tokens if gen else None,
    )


def judge_input_of(sample: Sample) -> JudgeInput | None:
    """What the judge is asked about a sample, whether it was just generated or read back
    from a finished run; None when there is nothing to judge (no answer, an unscored turn)."""
    if sample.response is None or not is_scored(sample.metadata):
        return None
    return JudgeInput(item_id=sample.item_id, question=sample.question, response=sample.response,
                      reference=sample.reference, metadata=dict(sample.metadata),
                      generation_extras=dict(sample.generation_extras), reasoning=sample.reasoning,
                      raw_response=sample.raw_response)


def generate_task(spec: TaskSpec, conversations: list[Conversation], model: CachedModel, seed: int,
                  progress: TaskProgress | bool | None = None,
                  on_sample: Callable[[Sample], None] | None = None) -> list[Sample]:
    """Answer every turn; returns the samples (not yet judged) in the conversations' order, a
    turn left unasked (its context skipped, or no room left mid-conversation) as a skipped
    sample without an answer. `on_sample` hears of each answered sample as it arrives (the
    run hands it to the judge at once); `progress` shows the work (True: a bar of its own)."""
    params = spec.generation_params(seed)
    window = model.backend.context_window
    continues = model.backend.continues_assistant
    # the window holds the context, the thinking and the answer
    thinking = params.thinking_allowance
    fitted = context_policy.fit_all(conversations, model.backend, spec.context.policy, params.max_new_tokens + thinking,
                                    spec.context.reserve(params.max_new_tokens) + thinking,
                                    max_tokens=spec.context.max_tokens, style=spec.context.style,
                                    count=spec.report.length_bins is not None and spec.report.length_bins.counted)
    states = [ConversationState(conv=conv, context=text, cut=cut) for conv, text, cut in fitted]
    # each context's tokens as the model gets it (after the cut) and its questions: what the
    # progress line shows and its ETA counts
    groups = scheduler.make_groups(list(states))
    sizes = {g.key: g.tokens for g in groups}
    turns = {g.key: sum(len(st.conv.turns) for st in g.states) for g in groups}
    # what a context's requests share, for a provider's prompt cache (`_shared_prefix`)
    shared = shared_prefixes(fitted, params, model.batching, sizes)
    own_progress = None
    if not isinstance(progress, TaskProgress):
        own_progress = RunProgress(bool(progress))
        progress = own_progress.task(spec.name, sum(len(c.turns) for c in conversations), sizes,
                                     params.max_new_tokens)
    progress.plan(sizes, turns)

    def build(st: ConversationState) -> GenerationRequest | None:
        """The request of the state's next turn; None leaves the rest of it unasked."""
        if st.context is None:
            return None
        turn = st.conv.turns[st.next_turn]
        unfilled = context_policy.full_transcript(st.conv, st.history_answers(), upto=st.next_turn)
        messages = context_policy.fill_context(unfilled, st.context)
        end = context_policy.context_end(unfilled, st.context)
        if turn.assistant_prefix and not model.backend.continues_assistant:
            messages = context_policy.prefix_in_user(messages)
        if window is not None and st.next_turn > 0 and st.conv.history == "model":
            # the policy sized the first turn exactly; later ones depend on answers
            n = model.backend.count_tokens(messages)
            if n is not None and n + params.max_new_tokens + thinking > window:
                return None  # an earlier answer ran past the reserve: stop here, never overflow
        hints = {**st.conv.metadata, **turn.metadata, "item_id": turn.item_id, "question": turn.question,
                 **({"context_end": end} if end is not None else {})}
        return GenerationRequest(request_id=turn.item_id, messages=messages, params=params, hints=hints,
                                 shared=shared.get(st.conv.context_id))

    samples: dict[tuple[int, int], Sample] = {}

    def answered(st: ConversationState, request: GenerationRequest, gen: Any) -> None:
        turn = st.next_turn
        prompt_hash = canonical_hash(messages_payload(request.messages))
        st.record(gen, prompt_hash)
        sample = samples[(id(st), turn)] = sample_of(spec, st.conv, turn, gen, st.cut, prompt_hash, seed, continues)
        progress.answer(st.conv.context_id, gen)  # per answer, as it arrives (cached ones too)
        if on_sample is not None:
            on_sample(sample)

    def skipped(st: ConversationState) -> None:
        progress.skipped(len(st.conv.turns) - st.next_turn, st.conv.context_id)

    try:
        progress.resumed(_cached_answers(states, build, model))
        scheduler.run(states, model, build, answered, skipped,
                      on_start=lambda st, request: progress.request_started(st.conv.context_id))
    finally:
        progress.close()
        if own_progress is not None:
            own_progress.close()
    return [samples.get((id(st), i)) or sample_of(spec, st.conv, i, None, replace(st.cut, action="skipped"), "", seed, continues)
            for st in states for i in range(len(st.conv.turns))]


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


CENSORED = ("censored: the model's thinking was cut (by its budget or the window) before any answer; counted at "
            "the bottom of the judge's scale in the score over all items, left out of the uncensored one")


def censored_judgments(sample: Sample, judges: list[Judge]) -> list[Judgment]:
    """A censored sample's judgment by each judge (the headline's, then the further metrics'),
    never asked of the judge: the bottom of its scale, marked "censored"."""
    return [Judgment(sample.item_id, getattr(j, "name", ""), float(j.scale[0]), "censored", raw=CENSORED)
            for j in judges]


def is_censored(sample: Sample) -> bool:
    """The model thought until its budget or the window ran out and never answered."""
    return sample.response is None and bool(sample.generation_extras.get("unclosed_thinking"))


def judged(samples: list[Sample], verdicts: dict[str, Judgment],
           further: list[tuple[str, dict[str, Judgment]]] = (),  # type: ignore[assignment]
           judges: list[Judge] | None = None) -> list[Sample]:
    """The samples with their verdicts (by item id): the headline metric's first, then each
    further metric's (`further`: label, verdicts), in the spec's order; an unanswered sample
    keeps none, a censored one (`judges` given) the bottom of each judge's scale. A further
    metric without a verdict for an item is recorded as missing, so each metric keeps its place."""
    out = []
    for s in samples:
        if judges and is_censored(s) and is_scored(s.metadata):
            out.append(replace(s, judgments=censored_judgments(s, judges)))
            continue
        if s.response is None or (s.item_id not in verdicts and not further):
            out.append(s)
            continue
        head = verdicts.get(s.item_id) or Judgment(s.item_id, "", None, "missing", raw="no verdict")
        rest = [found.get(s.item_id) or Judgment(s.item_id, label, None, "missing", raw="no verdict")
                for label, found in further]
        out.append(replace(s, judgments=[head, *rest]))
    return out


def execute(plan: RunPlan, model_spec: ModelSpec, plugins: Plugins, cache: Cache, data_home: Path,
            handle: ModelHandle, judge_model: Callable[[], CachedModel | None],
            progress: RunProgress | None = None,
            through_cache: Callable[[ModelBackend], CachedModel] | None = None) -> RunState:
    """Run every task of the plan for one of its models (`handle`, built on first use) and
    judge each answer as soon as it exists, beside the generation of the next ones. The
    caller (the Session) owns the model and the judge model and closes them; it writes the
    outputs. `through_cache` puts the backend behind the cache (with its batches and cost
    limit, as the Session decides); a model whose requests go through batches answers every
    task and seed at once, so their batches go out together."""
    config = replace(plan.config, models=[model_spec.text])  # this run's model, as the user named it
    own_progress = progress is None
    progress = progress or RunProgress(config.progress)
    try:
        with loading_bars_off(not config.progress):  # --no-progress: the libraries' loading bars too
            return _execute(plan, config, model_spec, plugins, cache, data_home, handle, judge_model, progress,
                            through_cache)
    finally:
        if own_progress:
            progress.close()


def _execute(plan: RunPlan, config: RunConfig, model_spec: ModelSpec, plugins: Plugins, cache: Cache, data_home: Path,
             handle: ModelHandle, judge_model: Callable[[], CachedModel | None], progress: RunProgress,
             through_cache: Callable[[ModelBackend], CachedModel] | None) -> RunState:
    # data first: a missing dataset or a bad option is reported before any model is loaded
    # (unless a task type builds its contexts with the model's tokenizer)
    ensure_datasets(plan, plugins, data_home, progress.phase)
    progress.phase(f"reading the data of {len(plan.specs)} task(s)")
    work = load_work(plan, plugins, data_home, handle)
    for line in skipped_lines(work.skipped):  # said whether or not a progress line is drawn
        log.warning(line)
    judging = judge_model()
    # a judge that cannot be built (no --judge-model, bad option) fails before the
    # system model is loaded, not after it
    first_judges = {spec.name: make_judge(spec, plan.judge, plugins, judging, config.seeds[0])
                    for spec, _ in work.loaded}
    if not handle.built:
        progress.phase(f"loading model {model_spec.text}")
    backend = handle.backend()
    controls = controls_of(backend)
    used: list[str] = []

    def say(line: str) -> None:
        used.append(line)
        progress.phase(line)

    work.loaded = [(thinking_settings(spec, controls, backend.context_window, model_spec, say),
                    conversations) for spec, conversations in work.loaded]
    model = (through_cache(backend) if through_cache is not None
             else CachedModel(backend, cache, model_spec.canonical, model_spec.reasoning))
    model.expects_thinking = expects_thinking(controls, model_spec)
    if config.batch and not model.batching and not (judging is not None and judging.batching):
        raise UserError(f"--batch: neither model '{model_spec.text}' nor "
                        + (f"judge model '{judging.spec}'" if judging is not None else "a judge model")
                        + " has a batch API", field="--batch",
                        hint="Batch APIs are OpenAI's and Anthropic's (and servers speaking OpenAI's /v1/batches) "
                             "through litellm: models; drop --batch for the others.")
    judge_slots = judging.slots if judging is not None else 1
    judge_batch = dict(batch=judging.call_size, linger=judging.batcher.settings.max_wait) \
        if judging is not None and judging.batcher is not None else {}
    judge_stats_before = judging.backend.stats() if judging is not None else None
    runs: list[TaskRun] = []
    try:
        backend.check_seeds(list(config.seeds))  # e.g. a replay of one run refuses several seeds
        pool = JudgingPool()
        progress.judging = True
        asked: list[list[Any]] = []  # [spec, judge, samples (once generated), verdicts, further metrics]
        jobs: list[Callable[[], None]] = []
        for spec, conversations in work.loaded:
            for seed in config.seeds:
                judge = (first_judges[spec.name] if seed == config.seeds[0]
                         else make_judge(spec, plan.judge, plugins, judging, seed))
                shown = progress.task(f"{spec.name}" + (f" seed {seed}" if len(config.seeds) > 1 else ""),
                                      sum(len(c.turns) for c in conversations),
                                      _contexts(spec, conversations), spec.max_new_tokens)
                verdicts = pool.add_judge(judge, judge_slots, on_judged=shown.judged_some, label=spec.name,
                                          **judge_batch)
                # a spec's further metrics: each a judge of the same answers, beside the headline
                further = [(label, extra, pool.add_judge(extra, judge_slots, label=spec.name, **judge_batch))
                           for label, extra in make_metric_judges(spec, plugins, judging, seed)]
                entry: list[Any] = [spec, judge, [], verdicts, further]
                asked.append(entry)

                def to_judge(sample: Sample, judges: list[Judge] = [judge, *(j for _, j, _ in further)]) -> None:
                    asked_of = judge_input_of(sample)
                    if asked_of is not None:
                        for each in judges:
                            pool.submit(each, asked_of)

                def job(spec: TaskSpec = spec, conversations: list[Conversation] = conversations, seed: int = seed,
                        shown: TaskProgress = shown, to_judge: Callable[[Sample], None] = to_judge,
                        entry: list[Any] = entry) -> None:
                    with usage_scope(spec.name):
                        entry[2] = generate_task(spec, conversations, model, seed, shown, on_sample=to_judge)
                jobs.append(job)
        _run_jobs(jobs, together=model.batching)
        if pool.pending and not pool.wait(timeout=0.5):  # say so only when the judge is slow
            progress.phase(f"judging: {pool.pending} answers still with the judge")
        pool.wait()
        for spec, _ in work.loaded:
            mine = [entry for entry in asked if entry[0] is spec]
            runs.append(TaskRun(spec=spec, samples=[s for _, judge, samples, verdicts, further in mine
                                                    for s in judged(samples, verdicts,
                                                                    [(lab, v) for lab, _, v in further],
                                                                    [judge, *(j for _, j, _ in further)])],
                                judge_identity=mine[-1][1].identity(),
                                files_read=dict(work.recorder.files), context_facts=work.facts[spec.name],
                                sources=work.sources.get(spec.name, []),
                                metric_identities={lab: j.identity() for lab, j, _ in mine[-1][4]}))
    finally:
        model_stats = backend.stats()
    return RunState(config=config, model_spec=model_spec, model_identity=model.identity, tasks=runs,
                    usage=usage_of(model),
                    judge_usage=usage_of(judging) if judging else None,
                    model_backend_stats=model_stats,
                    judge_backend_stats=stats_since(judge_stats_before, judging.backend.stats()) if judging else None,
                    shard=work.shard,
                    stopped=model.limit_hit() or (judging.limit_hit() if judging is not None else None),
                    reasoning_used=used, skipped_lengths=work.skipped)


def usage_of(model: CachedModel) -> dict[str, Any]:
    """The model's usage for the manifest, with what its batches did when it sent any."""
    usage = model.usage.as_dict()
    if model.batcher is not None:
        usage["batch_api"] = {"protocol": model.batcher.api.name, **model.batcher.counters.as_dict()}
    return usage


def _run_jobs(jobs: list[Callable[[], None]], together: bool) -> None:
    """Each task and seed's generation: one after the other, or (`together`: a model whose
    requests wait hours in batches) all at once, so their batches go out together."""
    if not together or len(jobs) < 2:
        for job in jobs:
            job()
        return
    errors: list[BaseException] = []

    def run(job: Callable[[], None]) -> None:
        try:
            job()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the run's thread
            errors.append(exc)

    threads = [threading.Thread(target=contextvars.copy_context().run, args=(run, job), daemon=True,
                                name="lceval-task") for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(0.2)
    if errors:
        raise errors[0]


def stats_since(before: Any, after: Any) -> Any:
    """A backend's counters since `before` (a judge model serves every model of a command):
    numbers subtracted key by key, anything else as it is now."""
    if isinstance(before, dict) and isinstance(after, dict):
        return {k: stats_since(before.get(k), v) for k, v in after.items()}
    numbers = (int, float)
    if isinstance(before, numbers) and isinstance(after, numbers) and not isinstance(after, bool):
        return after - before
    return after


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
