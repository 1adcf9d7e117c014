"""Everything about a run that is settled before any model loads, settled once: the
`RunConfig` checked (`plan_run`: specs with the command line's overrides, their task types
and options, the models and the judge resolved), then the work read (`load_work`: each task
variant's conversations, the share `--contexts` and `--shard` keep). A run and
`lceval run --dry-run` both start here."""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from lceval.engine._catalog import Catalog
from lceval.engine._model_handle import ModelHandle
from lceval.engine._model_spec import ModelSpec, resolve_judge_model, resolve_model
from lceval.engine._plugin_host import Plugins, describe_kind
from lceval.engine._run_config import RunConfig, flag_of
from lceval.engine._selection import ContextSelection, select_work
from lceval.engine._spec import (JudgeChoice, TaskSpec, check_options, check_references, nest_dotted,
                                  context_length_variants, with_overrides)
from lceval.errors import DataMissing, PackageMissing, UserError
from lceval.interfaces import Judge, JudgeContext, JudgeModel, TaskContext, TaskType
from lceval.io import DataHomePath, DatasetNeed
from lceval.io import data_home as current_data_home
from lceval.io import fetch, line_of, network_off, offline_recipe, sha256_file
from lceval.needs import Need
from lceval.options import check_options as check_option_values
from lceval.options import parse_judge_flag
from lceval.options import options_schema_of, unwrap
from lceval.tokens import tokens_label
from lceval.types import Conversation, is_scored


@dataclass
class RunPlan:
    """A checked `RunConfig`: its specs (overrides applied, options checked, defaults filled),
    their task types, the models and judge model resolved, `--judge` parsed."""

    config: RunConfig
    specs: list[TaskSpec]
    task_types: dict[str, TaskType]  # spec name -> its task type
    models: list[ModelSpec]
    judge_model: ModelSpec | None
    judge: JudgeChoice | None  # --judge (a preset resolved), None = each spec's own


def plan_run(config: RunConfig, plugins: Plugins, catalog: Catalog) -> RunPlan:
    """Everything about the command that can be checked without reading data or opening the
    cache: tasks, specs, overrides, the model strings, the judge."""
    config.check()
    specs, task_types = [], {}
    for spec in catalog.resolve_tasks(config.tasks):
        spec = apply_overrides(spec, config)
        task_types[spec.name] = checked_task_type(spec, config, plugins)
        specs.append(spec)
    models = [resolve_model(text, catalog, plugins) for text in config.run_models()]
    judge = resolve_judge_flag(config.judge, catalog, plugins) if config.judge else None
    for spec in specs:  # a judge's options are typed: a wrong one fails here, not after the answers
        _check_judge_options(spec, judge, plugins)
    return RunPlan(config=config, specs=specs, task_types=task_types, models=models,
                   judge_model=resolve_judge_model(config.judge_model, catalog, plugins), judge=judge)


class FileRecorder:
    """Collects the sha256 of every data file a task type reads, for the manifest."""

    def __init__(self, files: dict[str, str] | None = None) -> None:
        self.files: dict[str, str] = files if files is not None else {}

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
    for name in ("thinking", "reasoning_budget", "reasoning_effort"):
        if getattr(config, name) is not None and field == f"generation.{name}":
            return UserError(exc.message, field=flag_of(name))
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
    return blamed if blamed is not exc else _at_option(exc, spec)


def checked_task_type(spec: TaskSpec, config: RunConfig, plugins: Plugins) -> Any:
    """The spec's task type, once the spec's options fit its schema and every plugin the spec
    names (type, judge, an option's retriever) exists; errors name the spec line or the flag."""
    try:
        task_type = check_references(spec, plugins, judges=config.judge is None)
        check_options(spec, task_type.options_schema, plugins)
    except UserError as exc:
        raise _blame_overrides(exc, config) from None
    return task_type


def check_spec(spec: TaskSpec, plugins: Plugins, *, data: bool = False) -> TaskType:
    """A spec as `lceval validate` and `lceval tasks show` check it, without a model: every
    plugin it names exists, its options fit its task type's schema (their defaults filled in,
    in place), its judge's options fit the judge's; with `data`, the task type checks it
    against the first rows of its data (`TaskType.check`). Returns the task type; an error
    names the spec file and the option's line."""
    task_type = check_references(spec, plugins)
    check_options(spec, task_type.options_schema, plugins)
    _check_judge_options(spec, None, plugins)
    if data:
        ctx = TaskContext(spec=spec.data, spec_path=spec.path, data_home=current_data_home(), splits=spec.splits, limit=None,
                          record_file=lambda path: None, retrievers=dict(plugins.retrievers))
        try:
            task_type.check(ctx)
        except DataMissing as exc:
            raise completed(exc, spec, plugins, ctx.data_home) from None
        except UserError as exc:
            raise _at_option(exc, spec) from None
    return task_type


def _at_option(exc: UserError, spec: TaskSpec) -> UserError:
    """A task type's error about one of the spec's options (`field="options.x"`, no file),
    placed at that option's line of the spec file."""
    if exc.file or not (exc.field or "").startswith("options."):
        return exc
    at = tuple(int(p) if p.isdigit() else p for p in exc.field.split("."))
    return spec.blame(exc.but(file=str(spec.path), line=line_of(spec.lines, at)))


def _judge_needs(spec: TaskSpec, plugins: Plugins) -> list[Need]:
    """What the spec's judge and metrics load (an NLI model): a judge factory may declare
    `needs(options) -> list[Need]`, given its checked options with their defaults."""
    out: list[Need] = []
    for name, options in [(spec.judge.name, spec.judge.options), *((m.name, m.options) for m in spec.metrics)]:
        factory = plugins.judges.get(name)
        declare = getattr(unwrap(factory), "needs", None)
        if factory is None or not callable(declare):
            continue
        schema = options_schema_of(factory)
        checked = check_option_values(schema, dict(options), what=f"judge '{name}'") if schema is not None else dict(options)
        out += list(declare(checked))
    return out


def needs_of(spec: TaskSpec, plugins: Plugins, data_home: Path) -> list[Need]:
    """The spec's needs (checked first: an invalid spec raises), one per key: its dataset, what
    its task type declares, what its judges load."""
    task_type = check_spec(spec, plugins)
    found: list[Need] = []
    name = spec.dataset or task_type.dataset
    if name and name in plugins.datasets:
        found.append(DatasetNeed(plugins.datasets[name], data_home))
    ctx = TaskContext(spec=spec.data, spec_path=spec.path, data_home=data_home, splits=spec.splits, limit=None,
                      record_file=lambda path: None, retrievers=dict(plugins.retrievers))
    try:
        declared = task_type.needs(ctx)
    except UserError as exc:
        raise _at_option(exc, spec) from None
    for need in [*declared, *_judge_needs(spec, plugins)]:
        if isinstance(need, DataHomePath) and need.first in plugins.datasets:
            need = DatasetNeed(plugins.datasets[need.first], data_home)
        found.append(need)
    return list({need.key: need for need in found}.values())


def fetch_target(spec: TaskSpec, plugins: Plugins) -> str:
    """What `lceval data fetch` is given to get everything the task needs: its family, unless
    that is also a dataset's name (then `data fetch` takes the dataset alone): the task; a spec
    file of no catalog folder: its path."""
    from importlib import resources

    folders = {Path(str(resources.files("lceval").joinpath("tasks"))).resolve() / spec.path.parent.name}
    folders |= {Path(d).resolve() for d in plugins.spec_dirs}
    if spec.path.parent.resolve() not in folders:
        return str(spec.path)
    return spec.family if spec.family not in plugins.datasets else spec.name


def install_command(spec: TaskSpec, missing: list[Need], plugins: Plugins) -> str:
    """The one command that installs `missing`: the need's own, or the task's family fetch."""
    own = {need.command for need in missing}
    if len(own) == 1 and None not in own:
        return str(own.pop())
    folder = " --from FOLDER" if any(need.from_folder for need in missing) else ""
    return f"lceval data fetch {fetch_target(spec, plugins)}{folder}"


def completed(exc: DataMissing, spec: TaskSpec, plugins: Plugins, data_home: Path) -> DataMissing:
    """A task type's DataMissing placed at its spec line, named by its task, with the command
    that installs what it lacks: the type's own, else the one for the task's missing needs."""
    placed = _at_option(exc, spec)
    message = placed.message if placed.message.startswith("task '") else f"task '{spec.name}': {placed.message}"
    command = getattr(placed, "command", None)
    if not command:
        try:
            missing = [need for need in needs_of(spec, plugins, data_home) if _lacking(need)]
        except UserError:
            missing = []
        command = install_command(spec, missing, plugins)
    out = placed.but(message=message, command=command)
    assert isinstance(out, DataMissing)
    out.offline_hint = pack_hint(spec.name)
    out.args = (out.render(),)
    return out


def _lacking(need: Need) -> bool:
    """Missing, or unknown because the library that reads it is not installed."""
    try:
        return need.missing() is not None
    except PackageMissing:
        return True


def pack_hint(task: str) -> str:
    """The way in for a machine without network, said with every "data not here" of a task."""
    if network_off():
        return (f"No network here: on a connected machine run `lceval data pack {task} -o FILE`, copy FILE here "
                "and run `lceval data unpack FILE`.")
    return (f"For a machine without network: run `lceval data pack {task} -o FILE` here, copy FILE there and run "
            "`lceval data unpack FILE`.")


def load_task(spec: TaskSpec, task_type: TaskType, config: RunConfig, plugins: Plugins, data_home: Path,
              recorder: FileRecorder, selection: ContextSelection | None = None,
              facts: dict[str, dict[str, Any]] | None = None, model: ModelHandle | None = None,
              sources: list[dict[str, Any]] | None = None) -> list[Conversation]:
    """The spec's conversations; what the task type records per context goes into `facts`,
    where its data came from into `sources`; `model` lends its tokenizer when asked."""
    select = selection if selection is not None else ContextSelection(None)
    collected = facts if facts is not None else {}
    read_from = sources if sources is not None else []

    def record_facts(context_id: str, values: dict[str, Any]) -> None:
        collected.setdefault(str(context_id), {}).update(values)

    ctx = TaskContext(spec=spec.data, spec_path=spec.path, data_home=data_home,
                      splits=config.splits or spec.splits, limit=config.limit, record_file=recorder,
                      retrievers=dict(plugins.retrievers), seed=config.seeds[0], select_context=select,
                      record_facts=record_facts, limit_per_context=config.limit_per_context,
                      model_tokenizer=model.tokenizer if model is not None else (lambda: None),
                      context_length=spec.context.max_tokens,
                      record_source=lambda source: read_from.append(dict(source)))
    try:
        conversations = task_type.load(ctx)
    except DataMissing as exc:
        raise completed(exc, spec, plugins, data_home) from None
    except UserError as exc:
        raise _in_spec(exc, spec, config) from None
    bins = spec.report.length_bins
    if bins is not None:  # a length field the data lacks stops the run before anything is asked
        try:
            bins.check([{**conv.metadata, **turn.metadata} for conv in conversations for turn in conv.turns
                        if is_scored(turn.metadata)])
        except UserError as exc:
            raise spec.placed(exc) from None
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
    overrides = nest_dotted(config.overrides)
    if config.context_policy:
        overrides.setdefault("context", {})["policy"] = config.context_policy
    for name in ("thinking", "reasoning_budget", "reasoning_effort"):  # the run's reasoning settings
        if getattr(config, name) is not None:
            overrides.setdefault("generation", {})[name] = getattr(config, name)
    if config.retriever:
        overrides.setdefault("options", {})["retriever"] = config.retriever
    try:
        return with_overrides(spec, overrides)
    except UserError as exc:
        raise _blame_overrides(exc, config) from None


def resolve_judge_flag(text: str, catalog: Catalog, plugins: Plugins) -> JudgeChoice:
    """`--judge NAME[,key=value...]` with a preset's options under the flag's; an unknown
    name is refused at once, with the judges and presets there are and the closest one."""
    name, options = parse_judge_flag(text)
    preset = catalog.resolve_judge(name)
    if preset["name"] not in plugins.judges:
        judges, presets = sorted(plugins.judges), sorted(catalog.judges)
        close = difflib.get_close_matches(name, judges + presets, n=1)
        raise UserError(f"unknown judge '{name}'" + (f"; did you mean '{close[0]}'?" if close else ""),
                        field="--judge", hint=f"Judges: {', '.join(judges) or 'none'}; presets (a judge with "
                        f"options): {', '.join(presets) or 'none'}. `lceval plugins NAME` shows a judge's options.")
    return JudgeChoice(name=preset["name"], options={**(preset.get("options") or {}), **options})


def _blame_judge(exc: UserError, spec: TaskSpec, choice: JudgeChoice | None) -> UserError:
    """A judge's error about its options names where they were written: the `--judge` flag,
    or the spec file and the option's line."""
    if exc.file or not (exc.field is None or exc.field.startswith("judge")):
        return exc
    if choice is not None:  # the user's flag, not the spec, chose this judge
        return UserError(exc.message, field="--judge", hint=exc.hint)
    field = exc.field or "judge"
    at = tuple(int(p) if p.isdigit() else p for p in field.split("."))
    return UserError(exc.message, file=spec.path, field=field, line=line_of(spec.lines, at), hint=exc.hint)


def _check_judge_options(spec: TaskSpec, choice: JudgeChoice | None, plugins: Plugins) -> None:
    chosen = choice or spec.judge
    schema = options_schema_of(plugins.judges.get(chosen.name))
    if schema is not None:
        try:
            check_option_values(schema, chosen.options, what=describe_kind("judge", chosen.name),
                                field_prefix="judge.options.")
        except UserError as exc:
            raise _blame_judge(exc, spec, choice) from None
    for i, m in enumerate(spec.data.get("metrics") or []):
        if m.get("headline"):
            continue
        schema = options_schema_of(plugins.judges.get(m["name"]))
        if schema is None:
            continue
        try:
            check_option_values(schema, dict(m.get("options") or {}), what=describe_kind("judge", m["name"]),
                                field_prefix=f"metrics.{i}.options.")
        except UserError as exc:
            at = tuple(int(p) if p.isdigit() else p for p in (exc.field or f"metrics.{i}").split("."))
            raise UserError(exc.message, file=spec.path, field=exc.field, line=line_of(spec.lines, at),
                            hint=exc.hint) from None


def make_metric_judges(spec: TaskSpec, plugins: Plugins, judge_model: JudgeModel | None,
                       seed: int) -> list[tuple[str, Judge]]:
    """The judges of the spec's further metrics (`metrics:` after the headline), by label."""
    out = []
    for m in spec.metrics:
        factory = plugins.get("judge", m.name)
        judge = factory(JudgeContext(options=dict(m.options), model=judge_model, seed=seed))
        out.append((m.label, judge))
    return out


def make_judge(spec: TaskSpec, choice: JudgeChoice | None, plugins: Plugins, judge_model: JudgeModel | None,
               seed: int) -> Judge:
    """The judge of one task and seed: `choice` (from `--judge`), else the spec's own."""
    chosen = choice or spec.judge
    try:
        factory = plugins.get("judge", chosen.name)
        judge = factory(JudgeContext(options=dict(chosen.options), model=judge_model, seed=seed))
    except UserError as exc:
        raise _blame_judge(exc, spec, choice) from None
    if judge_model is not None and not judge.uses_model:
        raise UserError(f"judge '{chosen.name}' does not call a model", field="--judge-model",
                        hint="Drop --judge-model, or pick a judge that uses one.")
    return judge


@dataclass
class Work:
    """What a run (or a dry run) will ask: each task variant with its selected conversations."""

    loaded: list[tuple[TaskSpec, list[Conversation]]]
    shard: dict[str, Any] | None
    facts: dict[str, dict[str, dict[str, Any]]]
    recorder: FileRecorder
    #: per task, where its data came from beyond its files (TaskContext.record_source)
    sources: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: the lengths of a `--context-lengths` sweep left out as past the model's window, one
    #: entry per task and length (results.json's `skipped_lengths`)
    skipped: list[dict[str, Any]] = field(default_factory=list)


#: set to 0 to never download a missing dataset on first use (`lceval data fetch` still does)
AUTO_FETCH_ENV = "LCEVAL_AUTO_FETCH"


def ensure_datasets(plan: RunPlan, plugins: Plugins, data_home: Path, say: Callable[[str], None]) -> None:
    """A dataset the plan's tasks read that is not in the data home at all is fetched from its
    official source on first use and verified against its pinned checksums, as `datasets`
    and lm-evaluation-harness do; a folder already there (fetched, or laid out by hand) is
    left alone. Without network the error says how to fetch from a folder instead."""
    auto = os.environ.get(AUTO_FETCH_ENV, "1").strip().lower() not in ("0", "false", "no", "off")
    for name in dict.fromkeys(spec.dataset or plan.task_types[spec.name].dataset for spec in plan.specs):
        dataset = plugins.datasets.get(name) if name else None
        if dataset is None or not dataset.files or dataset.collect is not None or (data_home / name).exists():
            continue
        tasks = ",".join(spec.name for spec in plan.specs if (spec.dataset or plan.task_types[spec.name].dataset) == name)
        if not auto or network_off():  # told, not fetched for: the commands that fetch it, online or not
            if network_off():  # its way in: the archives from elsewhere (--from), or a pack
                raise _not_fetched(dataset, data_home, tasks, "the network is off here (HF_HUB_OFFLINE / "
                                   "HF_DATASETS_OFFLINE), so it is not fetched", offline_recipe(dataset))
            raise _not_fetched(dataset, data_home, tasks, f"{AUTO_FETCH_ENV}=0 turns fetching it on first use off",
                               f"Run: `lceval data fetch {name}`. {offline_recipe(dataset)}")
        say(f"fetching dataset {name} from its official source (first use; verified against its checksums)")
        try:
            fetch(dataset, None, data_home)
        except UserError as exc:  # no field: the data home is where it is whether a flag chose it or not
            raise _not_fetched(dataset, data_home, tasks, f"could not be fetched: {exc.message}",
                               f"{offline_recipe(dataset)} ({AUTO_FETCH_ENV}=0 turns fetching on first use off.)"
                               ) from None


def _not_fetched(dataset: Any, data_home: Path, tasks: str, why: str, hint: str) -> DataMissing:
    """A dataset the run needs and did not fetch: `hint` (the fetch, the archives' recipe with
    its `--from` fetch), and the pack/unpack way in for a machine without network."""
    out = DataMissing(f"dataset '{dataset.name}' is not in the data home ({data_home}) and {why}", hint=hint)
    out.offline_hint = pack_hint(tasks)
    out.args = (out.render(),)
    return out


def load_work(plan: RunPlan, plugins: Plugins, data_home: Path, model: ModelHandle | None = None) -> Work:
    """The plan's specs (context-length variants included), their conversations, and the
    share --contexts and --shard keep: what `execute` and `lceval run --dry-run` ask. `model`
    (the run's model, built on first use) lends its tokenizer to task types that ask."""
    config = plan.config
    budgets, skipped = sweep_within_window(plan, model)
    variants = [(variant, plan.task_types[s.name]) for s in plan.specs
                for variant in context_length_variants(s, budgets)]
    specs = [spec for spec, _ in variants]
    recorder = FileRecorder()
    selection = ContextSelection(config.contexts)
    facts: dict[str, dict[str, dict[str, Any]]] = {spec.name: {} for spec in specs}
    sources: dict[str, list[dict[str, Any]]] = {spec.name: [] for spec in specs}
    loaded = [(spec, load_task(spec, task_type, config, plugins, data_home, recorder, selection, facts[spec.name],
                               model, sources[spec.name]))
              for spec, task_type in variants]
    loaded, shard = select_work(loaded, selection, config.shard, config.limit, config.splits)
    for spec, conversations in loaded:  # facts only of the contexts this run (or shard) answers
        kept = {conv.context_id for conv in conversations}
        facts[spec.name] = {cid: f for cid, f in facts[spec.name].items() if cid in kept}
    return Work(loaded=loaded, shard=shard, facts=facts, recorder=recorder,
                sources={name: found for name, found in sources.items() if found}, skipped=skipped)


def sweep_within_window(plan: RunPlan, model: ModelHandle | None) -> tuple[list[int | None] | None,
                                                                           list[dict[str, Any]]]:
    """The lengths of `--context-lengths` the model's window holds, and one record per task
    and length left out: a 2m point of a sweep run on a 1m model is skipped, not an error
    for the rest of the sweep. The window is asked of the model only for a sweep with a
    length (so the model opens before the data is read); a model that names no window skips
    nothing. Every length past the window is an error (nothing would be left to run)."""
    budgets = plan.config.context_lengths
    if not budgets or model is None or all(b is None for b in budgets):
        return budgets, []
    try:
        window = model.backend().context_window
    except UserError:  # a backend that cannot tell before it serves (e.g. an API that is down)
        window = None
    if not window:
        return budgets, []
    past = [b for b in budgets if b is not None and b > window]
    kept = [b for b in budgets if b not in past]
    if not kept:
        raise UserError(f"every length ({', '.join(tokens_label(b) for b in past)}) is past the model's window "
                        f"of {window:,} tokens ({tokens_label(window)})", field="--context-lengths",
                        hint=f"Give lengths up to {tokens_label(window)}, or a model (or n_ctx) with a larger window.")
    skipped = [{"task": f"{spec.name}@{tokens_label(b)}", "spec_name": spec.name, "length": b,
                "label": tokens_label(b), "window": window} for b in past for spec in plan.specs]
    return kept, skipped


def skipped_lines(skipped: list[dict[str, Any]]) -> list[str]:
    """One line per length left out of a sweep (its tasks named together), as the console
    says it."""
    by_length: dict[int, list[str]] = {}
    for entry in skipped:
        by_length.setdefault(entry["length"], []).append(entry["spec_name"])
    window = {entry["length"]: entry["window"] for entry in skipped}
    return [f"skipped --context-lengths {tokens_label(length)} ({length:,} tokens): past the model's window of "
            f"{window[length]:,} tokens ({', '.join(names)})" for length, names in by_length.items()]


