"""One command's hold on a run: the `Session` owns the request cache, the model being
evaluated and the judge model, opens each once, on first use, and closes each once, when the
block ends. Every command that makes or reopens a run goes through it (`lceval run`, `score`,
`merge`, `rank`, `verify`, and `open_model` for a plugin's own command), so nothing else in
lceval opens a cache or a model.

A run is started from a `RunConfig`, or reopened from a finished run, whose manifest gives
the settings (`RunConfig.from_manifest`) and the specs (`TaskSpec.from_manifest`) back. Its
verbs are the steps every caller needs: `plan` (everything checked before any model loads),
`answer` (one model's run, each answer judged as it arrives), `judge` (answers judged again),
`score` and `write` (the numbers and the run folder). Scoring and writing belong to the
results layer above the engine: the caller hands them in as `outputs` (`lceval.results`'s
`RUN_OUTPUTS`), so the engine keeps its place below them.
"""

from __future__ import annotations

from collections import defaultdict
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Protocol

from lceval.engine._batching import Batcher
from lceval.engine._cache import Cache, cache_failures, default_cache_path
from lceval.engine._cached_model import CachedModel, strip_secrets
from lceval.engine._catalog import Catalog, load_catalog
from lceval.engine._data import DataNeeds
from lceval.engine._dry_run import dry_run
from lceval.engine._model_handle import ModelHandle
from lceval.engine._model_spec import ModelSpec, parse_model_spec, resolve_judge_model, resolve_model
from lceval.engine._plan import (FileRecorder, RunPlan, checked_task_type, ensure_datasets, load_task, load_work,
                                 make_judge, plan_run, resolve_judge_flag)
from lceval.engine._plugin_host import Plugins, load_plugins
from lceval.engine._run_config import RunConfig
from lceval.engine._runner import (RunState, TaskRun, censored_judgments, execute, generate_task, is_censored,
                                   judge_input_of, judged, usage_of)
from lceval.engine._selection import build_plan
from lceval.engine._spec import JudgeChoice, TaskSpec
from lceval.engine._spending import BatchSettings, Budget, cost_of, usage_scope
from lceval.errors import UserError
from lceval.interfaces import Judge, ModelBackend
from lceval.io import canonical_hash, data_home, using_data_home
from lceval.options import parse_judge_flag
from lceval.types import Conversation, FinishedRun, Judgment, Sample, is_scored

if TYPE_CHECKING:
    from lceval.engine._progress import RunProgress


class RunOutputs(Protocol):
    """Scoring and writing a run, which the results layer provides (`lceval.results.RUN_OUTPUTS`)."""

    def score(self, state: RunState) -> dict[str, Any]:
        """results.json's content for the run."""

    def write(self, state: RunState, plugins: Plugins, output: Path) -> tuple[Path, dict[str, Any]]:
        """Write the run folder under `output` (whole, or not at all); its path and results."""

    def rewrite(self, state: RunState, plugins: Plugins, run: FinishedRun) -> tuple[Path, dict[str, Any]]:
        """Replace the finished run's folder with `state` (its answers, more judgments)."""


def _metric_flag(text: str, catalog: Catalog) -> tuple[str, str, dict[str, Any]]:
    """`--add-metric NAME[,label=LABEL][,key=value...]` -> (label, judge name, its options)."""
    name, options = parse_judge_flag(text)
    preset = catalog.resolve_judge(name)
    options = {**(preset.get("options") or {}), **options}
    label = str(options.pop("label", preset["name"]))
    return label, preset["name"], options


class Session:
    """The cache, the model and the judge model of one command, and its verbs.

    `Session(config)` starts a run; `Session.reopen(run, **changes)` reopens a finished one
    with the settings its manifest recorded (e.g. `judge=...` for `lceval score`). Use it as a
    context manager: what it opened is closed when the block ends, whatever happened."""

    def __init__(self, config: RunConfig, plugins: Plugins | None = None, *, catalog: Catalog | None = None,
                 outputs: RunOutputs | None = None, source: FinishedRun | None = None) -> None:
        self.config = config
        self.plugins = plugins if plugins is not None else load_plugins(list(config.disabled_plugins))
        self._catalog = catalog
        self.outputs = outputs
        #: the finished run this session reopened, if any
        self.source = source
        self._cache: Cache | None = None
        self._plan: RunPlan | None = None
        self._judge_backend: Any = None
        self._judge_spec: ModelSpec | None = None
        self._judge_resolved = False
        self._models: dict[str, CachedModel] = {}
        self._recorder = FileRecorder()
        self._open = ExitStack()
        #: the command's cost limit (`--max-cost`); each model's own budget has it as parent
        self.budget = Budget(config.max_cost, "--max-cost")
        #: per backend (by id): its batcher (None: not batching) and its budget (None: no limit)
        self._spending: dict[int, tuple[Batcher | None, Budget | None]] = {}

    @classmethod
    def judging(cls, judge_model: str | None, plugins: Plugins | None = None, *,
                cache_path: Path | None = None) -> "Session":
        """A session that only judges, with `judge_model` (`lceval rank`'s pairwise judge)."""
        return cls(RunConfig(tasks="", models=[], judge_model=judge_model, cache_path=cache_path), plugins)

    @classmethod
    def for_cache(cls, cache_path: Path | None = None, plugins: Plugins | None = None) -> "Session":
        """A session that only holds a request cache (`lceval cache export/import`): the one
        at `cache_path`, else $LCEVAL_CACHE or the user cache dir."""
        return cls(RunConfig(tasks="", models=[], cache_path=cache_path), plugins)

    @staticmethod
    def data(plugins: Plugins, home: Path | None = None, catalog: Catalog | None = None) -> DataNeeds:
        """What tasks need on disk in the data home `home` (default: the command's) and the
        caches, whether it is here, and getting it: `lceval data status / fetch / pack / unpack`
        and `validate`'s "data not installed" (a `DataNeeds`; no run is opened)."""
        return DataNeeds(plugins, home if home is not None else data_home(), catalog)

    @classmethod
    def reopen(cls, run: FinishedRun, plugins: Plugins | None = None, *, catalog: Catalog | None = None,
               outputs: RunOutputs | None = None, **changes: Any) -> "Session":
        """A finished run with the settings it was made with (its manifest's), with `changes`."""
        recorded = dict(run.manifest.get("config") or {})
        recorded.setdefault("model", run.model)
        recorded.setdefault("seeds", list(run.results.get("seeds") or [0]))
        return cls(RunConfig.from_manifest(recorded, **changes), plugins, catalog=catalog, outputs=outputs, source=run)

    # -- what the session holds -----------------------------------------------------------
    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close every model the session opened, then the cache."""
        try:
            self._open.close()
        finally:
            if self._cache is not None:
                self._cache.close()
                self._cache = None

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = load_catalog(self.plugins)
        return self._catalog

    @property
    def data_home(self) -> Path:
        return Path(self.config.data_home or data_home())

    @property
    def cache(self) -> Cache:
        """The request cache (the config's, else $LCEVAL_CACHE or the user cache dir), opened
        on first use: a dry run or a merge never creates one."""
        if self._cache is None:
            self._cache = Cache(Path(self.config.cache_path or default_cache_path()))
        return self._cache

    def model_spec(self, text: str | None = None, *, check: bool = True) -> ModelSpec:
        """A model string (default: the run's model, as resolved when it ran) parsed by the one
        parser; `check=False` does not ask for its backend (a merge needs none installed)."""
        if text is None:
            resolved = (self.source.manifest.get("resolved") or {}).get("model_spec") if self.source else None
            text = str(resolved or (self.source.model if self.source else self.config.models[0]))
        return resolve_model(text, self.catalog, self.plugins) if check else parse_model_spec(text, self.catalog)

    def judge_model(self) -> CachedModel | None:
        """The `--judge-model` behind the request cache, opened once for the whole command, or
        None without one. Each call gives fresh usage counters over the same backend, so each
        model's run reports what its own judging cost."""
        if not self._judge_resolved:
            self._judge_spec = resolve_judge_model(self.config.judge_model, self.catalog, self.plugins)
            self._judge_resolved = True
        if self._judge_spec is None:
            return None
        if self._judge_backend is None:
            self._judge_backend = self._opened(ModelHandle(self._judge_spec)).backend()
        return self.through_cache(self._judge_spec, self._judge_backend)

    def model(self, text: str) -> CachedModel:
        """A model by spec string, through the request cache (a plugin's own command, e.g.
        synthesizing a haystack): opened once per session, closed with it."""
        spec = resolve_model(text, self.catalog, self.plugins)
        if spec.canonical not in self._models:
            backend = self._opened(ModelHandle(spec)).backend()
            self._models[spec.canonical] = self.through_cache(spec, backend)
        return self._models[spec.canonical]

    def through_cache(self, spec: ModelSpec, backend: ModelBackend) -> CachedModel:
        """`backend` behind the request cache, with fresh usage counters, its batches (when
        `--batch` or its `batch=` option asks and it has a batch API) and its cost limit
        (its `max_cost=` within the command's `--max-cost`); the batcher and the budget are
        made once per backend, so every judge of a command shares them."""
        key = id(backend)
        if key not in self._spending:
            self._spending[key] = self._spending_of(spec, backend)
        batcher, budget = self._spending[key]
        return CachedModel(backend, self.cache, spec.canonical, spec.reasoning, batcher=batcher, budget=budget)

    def _spending_of(self, spec: ModelSpec, backend: ModelBackend) -> tuple[Batcher | None, Budget | None]:
        options = spec.spending or {}
        wanted = options.get("batch")
        api = backend.batch_api() if wanted is not False and (wanted or self.config.batch) else None
        if wanted and api is None:
            raise UserError(f"{spec.flag} option batch=true: model '{spec.text}' has no batch API",
                            field=f"{spec.flag} option batch",
                            hint=f"Its backend '{spec.scheme}' sends it directly. Batch APIs are OpenAI's and "
                                 "Anthropic's (and servers speaking OpenAI's /v1/batches) through litellm: models; "
                                 "drop batch=true for this one.")
        limit = options.get("max_cost")
        budget = (Budget(limit, f"{spec.flag} option max_cost", parent=self.budget)
                  if limit is not None or self.budget.limit is not None else None)
        price = backend.price(batch=api is not None) if budget is not None else None
        if budget is not None and price is None:
            flag, value = ((f"{spec.flag} option max_cost", limit) if limit is not None
                           else ("--max-cost", self.budget.limit))
            raise UserError(f"{flag} {value:g}: the price of model '{spec.text}' is unknown, so what it spends "
                            "cannot be kept under the limit", field=flag,
                            hint="Give its price with the model options input_cost_per_mtok=USD and "
                                 "output_cost_per_mtok=USD (per million tokens; 0 for a server of your own).")
        batcher = None
        if api is not None:
            identity = canonical_hash(strip_secrets(backend.identity()))
            batcher = Batcher(api, self.cache, identity, BatchSettings.of(options))
            if budget is not None:  # answers of an adopted batch that nobody asks are paid too
                batcher.on_unasked = lambda gen: budget.add(cost_of(gen, price) or 0.0)
            self._open.callback(batcher.close)
        return batcher, budget

    def _opened(self, handle: ModelHandle) -> ModelHandle:
        self._open.callback(handle.close)
        return handle

    # -- a run ----------------------------------------------------------------------------
    def plan(self) -> RunPlan:
        """Everything the command says, checked once before any data is read or model loaded."""
        if self._plan is None:
            self._plan = plan_run(self.config, self.plugins, self.catalog)
        return self._plan

    def dry_run(self) -> str:
        """The prompts each model would be sent (the context policy applied where its
        tokenizer can be had) and what the run would cost at most; nothing generated,
        cached or written."""
        plan = self.plan()
        blocks = []
        judge_spec = resolve_judge_model(self.config.judge_model, self.catalog, self.plugins)
        judge_handle = ModelHandle(judge_spec) if judge_spec is not None else None
        judge = (judge_spec, judge_handle.backend()) if judge_spec is not None and judge_handle is not None else None
        try:
            with using_data_home(self.data_home):
                for model in plan.models:
                    handle = ModelHandle(model)
                    try:
                        blocks.append(f"# model {model.text}\n"
                                      f"{dry_run(plan, handle, self.plugins, self.data_home, judge)}")
                    finally:
                        handle.close()
        finally:
            if judge_handle is not None:
                judge_handle.close()
        return "\n".join(blocks)

    def work_plan(self) -> dict[str, Any]:
        """The whole run's work as `--shard I/N` splits it and each shard's manifest records
        it: per task its conversations (context and item ids) in run order, per context its
        weight, and the fingerprint of both. The data are read as a run reads them (a task type
        that asks gets the first model's tokenizer); nothing is generated, cached or written.
        `lceval launch` plans a run's shards with it once, before submitting any."""
        plan = self.plan()
        whole = replace(plan, config=replace(plan.config, shard=None))
        handle = ModelHandle(plan.models[0])
        try:
            with using_data_home(self.data_home):
                ensure_datasets(whole, self.plugins, self.data_home, lambda _line: None)
                loaded = load_work(whole, self.plugins, self.data_home, handle).loaded
        finally:
            handle.close()
        return build_plan(loaded)

    def answer(self, model: ModelSpec, progress: "RunProgress | None" = None) -> RunState:
        """One model's run of the plan: every answer generated (or read from the cache) and
        judged as soon as it exists. The model is closed when its run ends (the next model of
        the command needs the memory); the judge model stays open for the next one."""
        plan = self.plan()
        handle = ModelHandle(model)
        try:
            with using_data_home(self.data_home), cache_failures(self.cache.path):
                return execute(plan, model, self.plugins, self.cache, self.data_home, handle, self.judge_model,
                               progress, through_cache=lambda backend: self.through_cache(model, backend))
        finally:
            if handle.built:  # the model's batches stop being polled with it (a rerun adopts the rest)
                batcher, _ = self._spending.pop(id(handle.backend()), (None, None))
                if batcher is not None:
                    batcher.close()
            handle.close()

    def run(self, output: Path | None = None) -> list[tuple[Path, dict[str, Any], RunState]]:
        """`lceval run`: each model of the plan answered, scored and written; per model its run
        folder, results and state. Everything is checked before anything is opened or written."""
        from lceval.io import check_writable

        plan = self.plan()
        target = Path(output or self.config.output)
        # hours of generation must not end in "cannot write": the folder is probed before any model loads
        check_writable(target)
        done = []
        for model in plan.models:
            state = self.answer(model)
            run_dir, results = self.write(state, target)
            done.append((run_dir, results, state))
            if state.stopped:  # a cost limit: the next models are not started
                break
        return done

    # -- judging again --------------------------------------------------------------------
    def judge_choice(self) -> JudgeChoice | None:
        """`--judge` as the session's config gives it (a preset resolved), None: each spec's own."""
        return resolve_judge_flag(self.config.judge, self.catalog, self.plugins) if self.config.judge else None

    def judge_of(self, spec: TaskSpec, seed: int, *, with_model: bool = True) -> Judge:
        """The judge of `spec` for answers generated with `seed`: `--judge` when the session's
        config names one, else the spec's own; without the judge model for `with_model=False`."""
        return make_judge(spec, self.judge_choice(), self.plugins, self.judge_model() if with_model else None, seed)

    def judge(self, samples: list[Sample], spec: TaskSpec, *,
              with_model: bool = True) -> tuple[list[Sample], dict[str, Any]]:
        """`samples` judged again (seed by seed: a sampling judge uses the seed the answer was
        generated with, as in a run), each with one fresh judgment, and the judge's identity.
        `with_model=False` builds the judge without the judge model (a verifier re-judges only
        judges that call none)."""
        return self._judge(samples, spec, self.judge_model() if with_model else None)

    def _judge(self, samples: list[Sample], spec: TaskSpec,
               judging: CachedModel | None) -> tuple[list[Sample], dict[str, Any]]:
        by_seed: dict[int, list[Sample]] = defaultdict(list)
        for s in samples:
            by_seed[s.seed].append(s)
        choice = self.judge_choice()
        verdicts: dict[tuple[int, str], Any] = {}
        identity: dict[str, Any] = {}
        for seed, group in sorted(by_seed.items()):
            judge = make_judge(spec, choice, self.plugins, judging, seed)
            identity = judge.identity()
            inputs = [asked for s in group if (asked := self._judge_input(s)) is not None]
            for verdict in judge.judge(inputs) if inputs else []:
                verdicts[(seed, verdict.item_id)] = verdict
            for s in group:  # a censored answer: the bottom of this judge's scale, never asked
                if is_censored(s) and is_scored(s.metadata):
                    verdicts[(seed, s.item_id)] = censored_judgments(s, [judge])[0]
        # the headline judged again; the spec's further metrics keep their judgments
        out = [replace(s, judgments=[verdicts[(s.seed, s.item_id)], *s.judgments[1:]])
               if (s.seed, s.item_id) in verdicts and (s.response is not None or is_censored(s))
               else replace(s, judgments=s.judgments[1:] and [Judgment(s.item_id, "", None, "missing"),
                                                              *s.judgments[1:]]) for s in samples]
        return out, identity

    def _judge_input(self, sample: Sample) -> Any:
        if sample.response is not None and not sample.question:
            where = self.source.path / "samples.jsonl" if self.source else None
            raise UserError(f"sample '{sample.item_id}' has no stored question (written by an older lceval)",
                            file=where, field="question",
                            hint="Re-run the task (answers come from the cache) to re-judge it.")
        return judge_input_of(sample)

    def rejudge(self) -> RunState:
        """`lceval score`: the reopened run's answers judged again with this session's judge;
        a new run whose manifest points to its source (the source is never modified)."""
        run = self._source()
        names = list(run.results.get("tasks") or {})
        if not names:
            raise UserError("the run has no tasks to re-judge", file=run.path / "results.json", field="tasks")
        self.judge_choice()  # an unknown --judge is refused before the judge model opens
        tasks = []
        with cache_failures(self.cache.path):
            judging = self.judge_model()
            if self.config.batch and (judging is None or not judging.batching):
                raise UserError("--batch: " + (f"judge model '{judging.spec}' has no batch API" if judging is not None
                                               else "no --judge-model to send through a batch API"), field="--batch")
            for name in names:
                spec = TaskSpec.of_run(run, name)
                with usage_scope(name):
                    samples, identity = self._judge(run.task_samples(name), spec, judging)
                tasks.append(TaskRun(spec=spec, samples=samples, judge_identity=identity,
                                     files_read=dict(run.manifest.get("data_files") or {}),
                                     context_facts=dict((run.manifest.get("context_facts") or {}).get(name) or {}),
                                     sources=list((run.manifest.get("data_sources") or {}).get(name) or []),
                                     metric_identities=dict(run.results["tasks"][name].get("metric_judges") or {})))
        return RunState(
            config=self.config, model_spec=self.model_spec(check=False),
            model_identity=dict((run.manifest.get("resolved") or {}).get("model_identity") or {}), tasks=tasks,
            usage={"requests": 0, "generated": 0, "note": "answers read from the source run"},
            judge_usage=usage_of(judging) if judging is not None else None,
            source_run={"run_id": run.run_id, "path": str(run.path.resolve()),
                        "judge": run.results.get("tasks", {}).get(names[0], {}).get("judge")},
            judge_backend_stats=judging.backend.stats() if judging is not None else None,
            stopped=judging.limit_hit() if judging is not None else None,
        )

    def add_metrics(self, flags: list[str]) -> RunState:
        """`lceval score RUN --add-metric NAME[,key=value]`: further metrics of the reopened
        run's answers (each a judge, `label=` naming it), judged now and added to every task
        beside what it has; the answers and the earlier judgments are kept as they are. The
        state is for `rewrite` (the run folder updated in place)."""
        run = self._source()
        chosen = [_metric_flag(flag, self.catalog) for flag in flags]
        tasks = []
        with cache_failures(self.cache.path):
            judging = self.judge_model()
            for name in run.results.get("tasks") or {}:
                spec = TaskSpec.of_run(run, name)
                have = {m.label for m in spec.metrics} | {spec.headline_label, "score"}
                for label, metric, _ in chosen:
                    if label in have:
                        raise UserError(f"task '{name}' already has a metric '{label}'", field="--add-metric",
                                        hint="Give the new one another name with label=NAME.")
                    have.add(label)
                samples = run.task_samples(name)
                identities = dict((run.results["tasks"][name].get("metric_judges") or {}))
                for label, metric, options in chosen:
                    verdicts: dict[tuple[int, str], Judgment] = {}
                    for seed in sorted({s.seed for s in samples}):  # as in a run: the answer's seed
                        try:
                            judge = make_judge(spec, JudgeChoice(metric, options), self.plugins, judging, seed)
                        except UserError as exc:
                            raise UserError(exc.message, field="--add-metric", hint=exc.hint) from None
                        asked = [i for s in samples if s.seed == seed and (i := self._judge_input(s)) is not None]
                        verdicts.update({(seed, v.item_id): v for v in judge.judge(asked)} if asked else {})
                        identities[label] = judge.identity()
                    samples = [replace(s, judgments=[*(s.judgments or [Judgment(s.item_id, "", None, "missing")]),
                                                     verdicts.get((s.seed, s.item_id))
                                                     or Judgment(s.item_id, label, None, "missing", raw="no verdict")])
                               if s.response is not None else s for s in samples]
                    spec = spec.with_metric(label, metric, options)
                tasks.append(TaskRun(spec=spec, samples=samples, judge_identity=run.results["tasks"][name]["judge"],
                                     files_read=dict(run.manifest.get("data_files") or {}),
                                     context_facts=dict((run.manifest.get("context_facts") or {}).get(name) or {}),
                                     sources=list((run.manifest.get("data_sources") or {}).get(name) or []),
                                     metric_identities=identities))
        return RunState(config=self.config, model_spec=self.model_spec(check=False),
                        model_identity=dict((run.manifest.get("resolved") or {}).get("model_identity") or {}),
                        tasks=tasks, usage=dict(run.manifest.get("usage") or {}),
                        judge_usage=judging.usage.as_dict() if judging is not None else run.manifest.get("judge_usage"))

    def rewrite(self, state: RunState) -> tuple[Path, dict[str, Any]]:
        """The reopened run's folder rewritten in place with `state` (its answers, more
        judgments): written aside, then swapped in whole."""
        return self._outputs().rewrite(state, self.plugins, self._source())

    def _source(self) -> FinishedRun:
        if self.source is None:
            raise ValueError("this session was not reopened from a finished run")
        return self.source

    # -- a finished run's tasks again (lceval verify) -------------------------------------
    def load(self, spec: TaskSpec, sources: list[dict[str, Any]] | None = None) -> list[Conversation]:
        """The conversations of one task, read again from this session's data home; every
        file read is added to `files_read`, every source beyond files to `sources`."""
        with using_data_home(self.data_home):
            task_type = checked_task_type(spec, self.config, self.plugins)
            return load_task(spec, task_type, self.config, self.plugins, self.data_home, self._recorder,
                             sources=sources)

    @property
    def files_read(self) -> dict[str, str]:
        """sha256 of every data file `load` read, by absolute path."""
        return dict(self._recorder.files)

    def answer_again(self, spec: TaskSpec, conversations: list[Conversation], seed: int) -> list[Sample]:
        """The reopened run's model asked `conversations` again (not judged)."""
        model = self.model(self.model_spec().text)
        with using_data_home(self.data_home):
            return generate_task(spec, conversations, model, seed, False)

    # -- the outputs ----------------------------------------------------------------------
    def score(self, state: RunState) -> dict[str, Any]:
        """results.json's content for `state`."""
        return self._outputs().score(state)

    def write(self, state: RunState, output: Path | None = None) -> tuple[Path, dict[str, Any]]:
        """The run folder of `state`, written whole under `output` (default: the config's)."""
        return self._outputs().write(state, self.plugins, Path(output or self.config.output))

    def _outputs(self) -> RunOutputs:
        if self.outputs is None:
            raise ValueError("this session was opened without outputs (pass outputs=lceval.results.RUN_OUTPUTS)")
        return self.outputs


@contextmanager
def open_model(text: str, *, cache_path: Path | None = None, plugins: Plugins | None = None) -> Iterator[CachedModel]:
    """A model by spec string, through the request cache, for a plugin's own command (e.g.
    synthesizing a haystack): every call cached and resumable like a run's; the model and the
    cache are closed when the block ends. `cache_path` defaults to the run cache."""
    with Session(RunConfig(tasks="", models=[text], cache_path=cache_path), plugins) as session:
        yield session.model(text)
