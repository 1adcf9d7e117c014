"""The flow of one run: specs -> conversations -> context policy -> scheduler -> cached
model -> judge -> samples. Knows no benchmark and no backend by name."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from lceval.engine import _context_policy as ctxpolicy
from lceval.engine._cache import Cache, CachedModel, canonical_hash, messages_payload
from lceval.io._datahome import sha256_file
from lceval.errors import UserError
from lceval.interfaces import JudgeContext, Judge, TaskContext
from lceval.engine._model_spec import (ModelSpec, backend_factory, judge_model_spec, make_model, open_judge_model,
                                       parse_model_spec)
from lceval.engine._plugin_host import Plugins
from lceval.engine._catalog import Registry
from lceval.engine import _scheduler as scheduler
from lceval.engine._scheduler import ConversationState
from lceval.engine._selection import ContextSelection, select_work
from lceval.engine._spec import TaskSpec, check_options, check_references, with_overrides
from lceval.io._yaml import line_of
from lceval.types import ContextCut, Conversation, GenerationRequest, JudgeInput, Sample


@dataclass
class RunConfig:
    tasks: str
    model: str
    judge: str | None = None
    judge_model: str | None = None
    splits: list[str] | None = None
    limit: int | None = None
    limit_per_context: int | None = None  # --limit-per-context: items per long context (meeting)
    seeds: list[int] = field(default_factory=lambda: [0])
    output: Path = Path("runs")
    context_policy: str | None = None
    context_lengths: list[int | None] | None = None  # --context-lengths: one task variant per budget
    retriever: str | None = None  # --retriever: sets the spec option `retriever`
    overrides: dict[str, Any] = field(default_factory=dict)  # --set path=value on every spec
    cache_path: Path | None = None
    data_home: Path | None = None
    disabled_plugins: list[str] = field(default_factory=list)
    progress: bool = True
    command: list[str] = field(default_factory=list)
    contexts: list[str] | None = None  # --contexts: context-id patterns (see selection.py)
    shard: tuple[int, int] | None = None  # --shard I/N


@dataclass
class TaskRun:
    spec: TaskSpec
    samples: list[Sample]
    judge_identity: dict[str, Any]
    files_read: dict[str, str]
    #: what the task type recorded per context (TaskContext.record_facts), for the manifest
    context_facts: dict[str, dict[str, Any]] = field(default_factory=dict)


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


class FileRecorder:
    """Collects the sha256 of every data file a task type reads, for the manifest."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}

    def __call__(self, path: Path) -> None:
        path = Path(path)
        key = str(path.resolve())
        if key not in self.files:
            if not path.is_file():  # a FIFO would block the hash for ever
                raise UserError("data file not found or not a regular file", file=path)
            self.files[key] = sha256_file(path)


def _blame_overrides(exc: UserError, config: RunConfig) -> UserError:
    """A schema error in a field the user set on the command line names the flag, not the
    spec file it would otherwise seem to come from."""
    field = exc.field or ""
    for key in config.overrides:
        if key == field or key.startswith(field + ".") or field.startswith(key + "."):
            return UserError(exc.message, field=f"--set {key}")
    if config.context_policy and field.startswith("context"):
        return UserError(exc.message, field="--context-policy")
    if config.retriever and field.startswith("options"):
        return UserError(exc.message, field="--retriever",
                         hint="This task type takes no retriever, or not this one.")
    return exc


def _in_spec(exc: UserError, spec: TaskSpec, config: RunConfig) -> UserError:
    """A task type's error about one of the spec's options (`field="options.retriever"`, no
    file) names the flag that set it, else the spec file and the option's line."""
    if exc.file or not (exc.field or "").startswith("options."):
        return exc
    blamed = _blame_overrides(exc, config)
    if blamed is not exc:
        return blamed
    at = tuple(int(p) if p.isdigit() else p for p in exc.field.split("."))
    return UserError(exc.message, file=spec.path, field=exc.field, line=line_of(spec.lines, at), hint=exc.hint)


def checked_task_type(spec: TaskSpec, config: RunConfig, plugins: Plugins) -> Any:
    """The spec's task type, once the spec's options fit its schema and every plugin the spec
    names (type, judge, an option's retriever) exists; errors name the spec line or the flag."""
    try:
        task_type = check_references(spec, plugins, judges=config.judge is None)
        check_options(spec, task_type.options_schema, plugins)
    except UserError as exc:
        raise _blame_overrides(exc, config) from None
    return task_type


def check_tasks(config: RunConfig, plugins: Plugins, registry: Registry) -> None:
    """Everything about the command that can be checked without reading data or opening the
    cache: tasks, specs, overrides, the model string."""
    check_config(config)
    for spec in registry.resolve_tasks(config.tasks):
        checked_task_type(apply_overrides(spec, config), config, plugins)
    backend_factory(parse_model_spec(config.model, registry), plugins)
    judge_model_spec(config.judge_model, registry, plugins)


def load_task(spec: TaskSpec, config: RunConfig, plugins: Plugins, data_home: Path,
              recorder: FileRecorder, selection: ContextSelection | None = None,
              facts: dict[str, dict[str, Any]] | None = None) -> list[Conversation]:
    """The spec's conversations; what the task type records per context goes into `facts`."""
    task_type = checked_task_type(spec, config, plugins)
    select = selection if selection is not None else ContextSelection(None)
    collected = facts if facts is not None else {}

    def record_facts(context_id: str, values: dict[str, Any]) -> None:
        collected.setdefault(str(context_id), {}).update(values)

    ctx = TaskContext(spec=spec.data, spec_path=spec.path, data_home=data_home,
                      splits=config.splits, limit=config.limit, record_file=recorder,
                      retrievers=dict(plugins.retrievers), seed=config.seeds[0], select_context=select,
                      record_facts=record_facts, limit_per_context=config.limit_per_context)
    try:
        conversations = task_type.load(ctx)
    except UserError as exc:
        raise _in_spec(exc, spec, config) from None
    # a task type that does not ask select_context itself still gets only the chosen contexts
    return cap_per_context([conv for conv in conversations if select(conv.context_id)], config.limit_per_context)


def cap_per_context(conversations: list[Conversation], cap: int | None) -> list[Conversation]:
    """At most `cap` turns per context_id, the first ones (a multi-turn conversation keeps its
    opening turns, which later ones may refer to). A no-op for task types that applied
    `limit_per_context` themselves."""
    if cap is None:
        return conversations
    used: dict[str, int] = {}
    out = []
    for conv in conversations:
        room = cap - used.get(conv.context_id, 0)
        if room <= 0:
            continue
        turns = conv.turns[:room]
        used[conv.context_id] = used.get(conv.context_id, 0) + len(turns)
        out.append(conv if len(turns) == len(conv.turns) else replace(conv, turns=turns))
    return out


def apply_overrides(spec: TaskSpec, config: RunConfig) -> TaskSpec:
    overrides: dict[str, Any] = {}
    for dotted, value in config.overrides.items():
        node = overrides
        keys = dotted.split(".")
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = value
    if config.context_policy:
        overrides.setdefault("context", {})["policy"] = config.context_policy
    if config.retriever:
        overrides.setdefault("options", {})["retriever"] = config.retriever
    try:
        return with_overrides(spec, overrides)
    except UserError as exc:
        raise _blame_overrides(exc, config) from None


def parse_judge_flag(text: str) -> tuple[str, dict[str, Any]]:
    """`--judge NAME[,key=value...]`: a judge or preset, with options (YAML values) that
    override the preset's."""
    import yaml

    name, *pairs = [p.strip() for p in text.split(",")]
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UserError(f"judge option '{pair}' is not key=value", field="--judge")
        try:
            options[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError:
            raise UserError(f"value of judge option '{key}' is not valid YAML: {value!r}", field="--judge") from None
    if not name:
        raise UserError("--judge needs a judge name", field="--judge")
    return name, options


def make_judge(spec: TaskSpec, config: RunConfig, plugins: Plugins, registry: Registry,
               judge_model: CachedModel | None, seed: int) -> Judge:
    if config.judge:
        name, options = parse_judge_flag(config.judge)
        chosen = registry.resolve_judge(name)
        chosen["options"] = {**(chosen.get("options") or {}), **options}
    else:
        chosen = dict(spec.data["judge"])
    try:
        factory = plugins.get("judge", chosen["name"])
        judge = factory(JudgeContext(options=dict(chosen.get("options") or {}), model=judge_model, seed=seed))
    except UserError as exc:
        blame_flag = not exc.file and (exc.field is None or exc.field.startswith("judge"))
        if config.judge and blame_flag:  # the user's flag, not the spec, chose this judge
            raise UserError(exc.message, field="--judge", hint=exc.hint) from None
        raise
    if judge_model is not None and not judge.uses_model:
        raise UserError(f"judge '{chosen['name']}' does not call a model", field="--judge-model",
                        hint="Drop --judge-model, or pick a judge that uses one.")
    return judge


def generate_task(spec: TaskSpec, conversations: list[Conversation], model: CachedModel,
                  seed: int, progress: bool) -> list[tuple[Conversation, int, Any, ContextCut, str]]:
    """Answer every turn; returns (conversation, turn index, generation|None, cut, prompt hash)."""
    params = spec.generation_params(seed)
    policy = spec.data["context"]["policy"]
    reserve = int(spec.data["context"].get("answer_reserve", params.max_new_tokens))
    window = model.backend.context_window
    max_tokens = spec.data["context"].get("max_tokens")  # one budget of --context-lengths
    tokens: dict[str, list[int] | None] = {}  # a meeting's questions share one tokenization
    fitted = []
    for conv in conversations:
        if (window or max_tokens) and conv.context_id not in tokens:
            tokens[conv.context_id] = model.backend.tokenize(conv.context)
        text, cut = ctxpolicy.fit(conv, model.backend, policy, params.max_new_tokens, reserve,
                                  context_ids=tokens.get(conv.context_id), max_tokens=max_tokens)
        fitted.append((conv, text, cut))
    shared = ctxpolicy.share_cuts(fitted, model.backend, tokens)
    states = [ConversationState(conv=conv, context=text, cut=cut) for (conv, _, _), (text, cut) in zip(fitted, shared)]
    total = sum(len(c.turns) for c in conversations)
    bar = tqdm(total=total, desc=spec.name, unit="q", disable=not progress or None, leave=False)

    def build(st: ConversationState) -> GenerationRequest | None:
        """The request of the state's next turn; None leaves the rest of it unasked."""
        if st.context is None:
            return None
        turn = st.conv.turns[st.next_turn]
        messages = ctxpolicy.fill_context(
            ctxpolicy.full_transcript(st.conv, st.history_answers(), upto=st.next_turn), st.context
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


@dataclass
class Work:
    """What a run (or a dry run) will ask: each task variant with its selected conversations."""

    loaded: list[tuple[TaskSpec, list[Conversation]]]
    shard: dict[str, Any] | None
    facts: dict[str, dict[str, dict[str, Any]]]
    recorder: FileRecorder


def load_work(config: RunConfig, plugins: Plugins, registry: Registry, data_home: Path) -> Work:
    """The specs of `config` (context-length variants included), their conversations, and
    the share --contexts and --shard keep: what `execute` and `lceval run --dry-run` ask."""
    specs = [variant for s in registry.resolve_tasks(config.tasks)
             for variant in ctxpolicy.context_length_variants(apply_overrides(s, config), config.context_lengths)]
    recorder = FileRecorder()
    selection = ContextSelection(config.contexts)
    facts: dict[str, dict[str, dict[str, Any]]] = {spec.name: {} for spec in specs}
    loaded = [(spec, load_task(spec, config, plugins, data_home, recorder, selection, facts[spec.name]))
              for spec in specs]
    loaded, shard = select_work(loaded, selection, config.shard, config.limit, config.splits)
    for spec, conversations in loaded:  # facts only of the contexts this run (or shard) answers
        kept = {conv.context_id for conv in conversations}
        facts[spec.name] = {cid: f for cid, f in facts[spec.name].items() if cid in kept}
    return Work(loaded=loaded, shard=shard, facts=facts, recorder=recorder)


def execute(config: RunConfig, plugins: Plugins, registry: Registry, cache: Cache,
            data_home: Path) -> RunState:
    """Run every task of `config` for one model; the caller writes the outputs."""
    model_spec = parse_model_spec(config.model, registry)
    backend_factory(model_spec, plugins)
    jspec = judge_model_spec(config.judge_model, registry, plugins)
    # data first: a missing dataset or a bad option is reported before any model is loaded
    work = load_work(config, plugins, registry, data_home)
    loaded, shard, facts, recorder = work.loaded, work.shard, work.facts, work.recorder
    judge_model = open_judge_model(jspec, plugins, cache)
    try:
        # a judge that cannot be built (no --judge-model, bad option) fails before the
        # system model is loaded, not after it
        first_judges = {spec.name: make_judge(spec, config, plugins, registry, judge_model, config.seeds[0])
                        for spec, _ in loaded}
        backend = make_model(model_spec, plugins)
    except BaseException:
        if judge_model is not None:
            judge_model.backend.close()
        raise
    model = CachedModel(backend, cache, model_spec.canonical)
    runs: list[TaskRun] = []
    try:
        backend.check_seeds(list(config.seeds))  # e.g. a replay of one run refuses several seeds
        for spec, conversations in loaded:
            samples: list[Sample] = []
            judge_identity: dict[str, Any] = {}
            for seed in config.seeds:
                judge = (first_judges[spec.name] if seed == config.seeds[0]
                         else make_judge(spec, config, plugins, registry, judge_model, seed))
                judge_identity = judge.identity()
                answered = generate_task(spec, conversations, model, seed, config.progress)
                samples.extend(judge_task(spec, answered, judge, seed))
            runs.append(TaskRun(spec=spec, samples=samples, judge_identity=judge_identity,
                                files_read=dict(recorder.files), context_facts=facts[spec.name]))
    finally:
        model_stats = backend.stats()
        judge_stats = judge_model.backend.stats() if judge_model is not None else None
        backend.close()
        if judge_model is not None:
            judge_model.backend.close()
    return RunState(config=config, model_spec=model_spec, model_identity=model.identity, tasks=runs,
                    usage=model.usage.as_dict(),
                    judge_usage=judge_model.usage.as_dict() if judge_model else None,
                    model_backend_stats=model_stats, judge_backend_stats=judge_stats, shard=shard)


def check_config(config: RunConfig) -> None:
    if not config.seeds:
        raise UserError("at least one seed is needed", field="--seed")
    if config.limit is not None and config.limit < 1:
        raise UserError(f"--limit must be at least 1, got {config.limit}", field="--limit")
    if config.shard is not None and not 0 <= config.shard[0] < config.shard[1]:
        raise UserError(f"--shard takes I/N with 0 <= I < N, got {config.shard[0]}/{config.shard[1]}",
                        field="--shard")
    if config.limit_per_context is not None and config.limit_per_context < 1:
        raise UserError(f"--limit-per-context must be at least 1, got {config.limit_per_context}",
                        field="--limit-per-context")
    if config.context_policy and config.context_policy not in ctxpolicy.POLICIES:
        raise UserError(f"unknown context policy '{config.context_policy}'", field="--context-policy")


__all__ = ["RunConfig", "RunState", "TaskRun", "execute", "check_config", "check_tasks"]
