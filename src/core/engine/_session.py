"""One command's hold on a run: the `Session` owns the request cache, the model being
evaluated and the judge model, opens each once, on first use, and closes each once, when the
block ends (one `ExitStack`: what a call opens for itself is closed on its own stack). Every
command that makes or reopens a run goes through it (`lceval run`, `score`, `merge`, `rank`,
`verify`, `cache`, and `open_model` for a plugin's own command), so nothing else in lceval
opens a cache or a model.

A run is started from a `RunConfig`, or reopened from a finished run, whose record gives the
settings and the specs back (`FinishedRun.record`). A command that is no run holds only what
it names: a cache, a judge model. The verbs are the steps every caller needs: `plan`
(everything checked before any model loads), `answer` (one model's run, each answer judged as
it arrives), `rejudge` and `add_metrics` (a reopened run's answers judged again), each giving
a `RunState`. Scoring and writing it belong to the results layer above (`lceval.results`'s
`write_run`, `rewrite_run`, `run_and_write`), which calls down into the session, never the
other way.
"""

from __future__ import annotations

from collections import defaultdict
from contextlib import ExitStack, closing, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from lceval.engine._batching import Batcher
from lceval.engine._cache import Cache, cache_failures, default_cache_path
from lceval.engine._cached_model import CachedModel, backend_identity
from lceval.engine._catalog import Catalog, load_catalog
from lceval.engine._dry_run import dry_run
from lceval.engine._model_handle import ModelHandle
from lceval.engine._model_spec import ModelSpec, parse_model_spec, resolve_judge_model, resolve_model
from lceval.engine._plan import (FileRecorder, RunPlan, checked_task_type, ensure_datasets, load_task, load_work,
                                 make_judge, plan_run, resolve_judge_flag)
from lceval.engine._plugin_host import Plugins, load_plugins
from lceval.engine._run_config import RunConfig
from lceval.engine._run_record import FinishedRun
from lceval.engine._runner import (RunState, censored_judgments, execute, generate_task, is_censored,
                                   judge_input_of, usage_of)
from lceval.engine._selection import build_plan
from lceval.engine._spec import JudgeChoice, TaskSpec
from lceval.engine._spending import BatchSettings, Budget, cost_of, usage_scope
from lceval.errors import UserError
from lceval.interfaces import Judge, ModelBackend
from lceval.io import canonical_hash, data_home, using_data_home
from lceval.options import parse_judge_flag
from lceval.types import Conversation, Judgment, Sample, is_scored

if TYPE_CHECKING:
    from lceval.engine._progress import RunProgress


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
    with the settings it recorded (e.g. `judge=...` for `lceval score`); a command that is no
    run names what it holds (`Session(cache_path=...)`, `Session(judge_model=...)`). Use it as
    a context manager: what it opened is closed when the block ends, whatever happened."""

    def __init__(self, config: RunConfig | None = None, plugins: Plugins | None = None, *,
                 cache_path: Path | None = None, judge_model: str | None = None,
                 catalog: Catalog | None = None, run: FinishedRun | None = None) -> None:
        if config is not None and (cache_path is not None or judge_model is not None):
            raise TypeError("a run's cache and judge model are its config's (cache_path, judge_model)")
        #: the run's settings; None for a command that is no run
        self.config = config
        self.plugins = plugins if plugins is not None else load_plugins(list(config.disabled_plugins) if config else [])
        self._catalog = catalog
        #: the finished run this session reopened, if any
        self._run = run
        self._cache_path = config.cache_path if config is not None else cache_path
        self._judge_text = config.judge_model if config is not None else judge_model
        self._cache: Cache | None = None
        self._plan: RunPlan | None = None
        self._judge_backend: Any = None
        self._judge_spec: ModelSpec | None = None
        self._judge_resolved = False
        self._models: dict[str, CachedModel] = {}
        #: what the session opened, closed in reverse order when it ends
        self._open = ExitStack()
        #: the command's cost limit (`--max-cost`); each model's own budget has it as parent
        self._budget = Budget(config.max_cost if config is not None else None, "--max-cost")
        #: per backend (by id): its batcher (None: not batching) and its budget (None: no limit)
        self._spending: dict[int, tuple[Batcher | None, Budget | None]] = {}

    @classmethod
    def reopen(cls, run: FinishedRun, plugins: Plugins | None = None, *, catalog: Catalog | None = None,
               **changes: Any) -> "Session":
        """A finished run with the settings it was made with (its record's), with `changes`."""
        return cls(replace(run.record.config, **changes), plugins, catalog=catalog, run=run)

    # -- what the session holds -----------------------------------------------------------
    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close every model the session opened (their batches may still write to the cache),
        then the cache, which is closed even when a model fails to close."""
        with ExitStack() as last:
            last.callback(self._closed_cache)
            self._open.close()

    def _the_config(self) -> RunConfig:
        if self.config is None:
            raise ValueError("this session holds no run (it was opened for a cache or a judge model)")
        return self.config

    def _the_catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = load_catalog(self.plugins)
        return self._catalog

    def _data_home(self) -> Path:
        return Path(self._the_config().data_home or data_home())

    @property
    def cache(self) -> Cache:
        """The request cache (the config's, else $LCEVAL_CACHE or the user cache dir), opened
        on first use: a dry run or a merge never creates one."""
        if self._cache is None:
            self._cache = Cache(Path(self._cache_path or default_cache_path(migrate=True)))
        return self._cache

    def _closed_cache(self) -> None:
        if self._cache is not None:
            self._cache.close()
            self._cache = None

    def model_spec(self, text: str | None = None, *, check: bool = True) -> ModelSpec:
        """A model string (default: the run's model, as resolved when it ran) parsed by the one
        parser; `check=False` does not ask for its backend (a merge needs none installed)."""
        if text is None:
            resolved = self._run.record.model_spec if self._run else None
            text = str(resolved or (self._run.model if self._run else self._the_config().models[0]))
        catalog = self._the_catalog()
        return resolve_model(text, catalog, self.plugins) if check else parse_model_spec(text, catalog)

    def judge_model(self) -> CachedModel | None:
        """The `--judge-model` behind the request cache, opened once for the whole command, or
        None without one. Each call gives fresh usage counters over the same backend, so each
        model's run reports what its own judging cost."""
        if not self._judge_resolved:
            self._judge_spec = resolve_judge_model(self._judge_text, self._the_catalog(), self.plugins)
            self._judge_resolved = True
        if self._judge_spec is None:
            return None
        if self._judge_backend is None:
            self._judge_backend = self._opened(ModelHandle(self._judge_spec)).backend()
        return self._through_cache(self._judge_spec, self._judge_backend)

    def _model(self, text: str) -> CachedModel:
        """A model by spec string, through the request cache (a plugin's own command, e.g.
        synthesizing a haystack): opened once per session, closed with it."""
        spec = resolve_model(text, self._the_catalog(), self.plugins)
        if spec.canonical not in self._models:
            backend = self._opened(ModelHandle(spec)).backend()
            self._models[spec.canonical] = self._through_cache(spec, backend)
        return self._models[spec.canonical]

    def _through_cache(self, spec: ModelSpec, backend: ModelBackend) -> CachedModel:
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
        api = backend.batch_api() if wanted is not False and (wanted or self._batch()) else None
        if wanted and api is None:
            raise UserError(f"{spec.flag} option batch=true: model '{spec.text}' has no batch API",
                            field=f"{spec.flag} option batch",
                            hint=f"Its backend '{spec.scheme}' sends it directly. Batch APIs are OpenAI's and "
                                 "Anthropic's (and servers speaking OpenAI's /v1/batches) through litellm: models; "
                                 "drop batch=true for this one.")
        limit = options.get("max_cost")
        budget = (Budget(limit, f"{spec.flag} option max_cost", parent=self._budget)
                  if limit is not None or self._budget.limit is not None else None)
        price = backend.price(batch=api is not None) if budget is not None else None
        if budget is not None and price is None:
            flag, value = ((f"{spec.flag} option max_cost", limit) if limit is not None
                           else ("--max-cost", self._budget.limit))
            raise UserError(f"{flag} {value:g}: the price of model '{spec.text}' is unknown, so what it spends "
                            "cannot be kept under the limit", field=flag,
                            hint="Give its price with the model options input_cost_per_mtok=USD and "
                                 "output_cost_per_mtok=USD (per million tokens; 0 for a server of your own).")
        batcher = None
        if api is not None:
            identity = canonical_hash(backend_identity(backend))
            batcher = Batcher(api, self.cache, identity, BatchSettings.of(options))
            if budget is not None:  # answers of an adopted batch that nobody asks are paid too
                batcher.on_unasked = lambda gen: budget.add(cost_of(gen, price) or 0.0)
            self._open.callback(batcher.close)
        return batcher, budget

    def _batch(self) -> bool:
        return self.config is not None and self.config.batch

    def _opened(self, handle: ModelHandle) -> ModelHandle:
        self._open.callback(handle.close)
        return handle

    # -- a run ----------------------------------------------------------------------------
    def plan(self) -> RunPlan:
        """Everything the command says, checked once before any data is read or model loaded."""
        if self._plan is None:
            self._plan = plan_run(self._the_config(), self.plugins, self._the_catalog())
        return self._plan

    def dry_run(self) -> str:
        """The prompts each model would be sent (the context policy applied where its
        tokenizer can be had) and what the run would cost at most; nothing generated,
        cached or written."""
        plan = self.plan()
        blocks = []
        judge_spec = resolve_judge_model(self._judge_text, self._the_catalog(), self.plugins)
        with ExitStack() as opened:
            judge = ((judge_spec, opened.enter_context(closing(ModelHandle(judge_spec))).backend())
                     if judge_spec is not None else None)
            opened.enter_context(using_data_home(self._data_home()))
            for model in plan.models:
                with closing(ModelHandle(model)) as handle:
                    blocks.append(f"# model {model.text}\n"
                                  f"{dry_run(plan, handle, self.plugins, self._data_home(), judge)}")
        return "\n".join(blocks)

    def work_plan(self) -> dict[str, Any]:
        """The whole run's work as `--shard I/N` splits it and each shard's manifest records
        it: per task its conversations (context and item ids) in run order, per context its
        weight, and the fingerprint of both. The data are read as a run reads them (a task type
        that asks gets the first model's tokenizer); nothing is generated, cached or written.
        `lceval launch` plans a run's shards with it once, before submitting any."""
        plan = self.plan()
        whole = replace(plan, config=replace(plan.config, shard=None))
        with closing(ModelHandle(plan.models[0])) as handle, using_data_home(self._data_home()):
            ensure_datasets(whole, self.plugins, self._data_home(), lambda _line: None)
            loaded = load_work(whole, self.plugins, self._data_home(), handle).loaded
        return build_plan(loaded)

    def answer(self, model: ModelSpec, progress: "RunProgress | None" = None) -> RunState:
        """One model's run of the plan: every answer generated (or read from the cache) and
        judged as soon as it exists. The model is closed when its run ends (the next model of
        the command needs the memory); the judge model stays open for the next one."""
        plan = self.plan()
        with ExitStack() as opened:
            handle = ModelHandle(model)
            opened.callback(self._release, handle)
            opened.enter_context(using_data_home(self._data_home()))
            opened.enter_context(cache_failures(self.cache.path))
            return execute(plan, model, self.plugins, self.cache, self._data_home(), handle, self.judge_model,
                           progress, through_cache=lambda backend: self._through_cache(model, backend))

    def _release(self, handle: ModelHandle) -> None:
        """A model's run ended: its batches stop being polled with it (a rerun adopts the
        rest), and it is closed."""
        if handle.built:
            batcher, _ = self._spending.pop(id(handle.backend()), (None, None))
            if batcher is not None:
                batcher.close()
        handle.close()

    # -- judging again --------------------------------------------------------------------
    def _judge_choice(self) -> JudgeChoice | None:
        """`--judge` as the session's config gives it (a preset resolved), None: each spec's own."""
        judge = self.config.judge if self.config is not None else None
        return resolve_judge_flag(judge, self._the_catalog(), self.plugins) if judge else None

    def judge_of(self, spec: TaskSpec, seed: int, *, with_model: bool = True) -> Judge:
        """The judge of `spec` for answers generated with `seed`: `--judge` when the session's
        config names one, else the spec's own; without the judge model for `with_model=False`."""
        return make_judge(spec, self._judge_choice(), self.plugins, self.judge_model() if with_model else None, seed)

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
        choice = self._judge_choice()
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
            where = self._run.path / "samples.jsonl" if self._run else None
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
        self._judge_choice()  # an unknown --judge is refused before the judge model opens
        tasks = []
        with cache_failures(self.cache.path):
            judging = self.judge_model()
            if self._batch() and (judging is None or not judging.batching):
                raise UserError("--batch: " + (f"judge model '{judging.spec}' has no batch API" if judging is not None
                                               else "no --judge-model to send through a batch API"), field="--batch")
            for name in names:
                task = run.task_run(name)
                with usage_scope(name):
                    samples, identity = self._judge(task.samples, task.spec, judging)
                tasks.append(replace(task, samples=samples, judge_identity=identity))
        return RunState(
            config=self._the_config(), model_spec=self.model_spec(check=False),
            model_identity=dict(run.record.model_identity), tasks=tasks,
            usage={"requests": 0, "generated": 0, "note": "answers read from the source run"},
            judge_usage=usage_of(judging) if judging is not None else None,
            source_run={"run_id": run.run_id, "path": str(run.path.resolve()),
                        "judge": run.results.get("tasks", {}).get(names[0], {}).get("judge")},
            judge_backend_stats=judging.backend.stats() if judging is not None else None,
            stopped=judging.limit_hit() if judging is not None else None,
            skipped_lengths=list(run.results.get("skipped_lengths") or []),
        )

    def add_metrics(self, flags: list[str]) -> RunState:
        """`lceval score RUN --add-metric NAME[,key=value]`: further metrics of the reopened
        run's answers (each a judge, `label=` naming it), judged now and added to every task
        beside what it has; the answers and the earlier judgments are kept as they are. The
        state is for `rewrite` (the run folder updated in place)."""
        run = self._source()
        chosen = [_metric_flag(flag, self._the_catalog()) for flag in flags]
        tasks = []
        with cache_failures(self.cache.path):
            judging = self.judge_model()
            for name in run.results.get("tasks") or {}:
                task = run.task_run(name)
                spec = task.spec
                have = {m.label for m in spec.metrics} | {spec.headline_label, "score"}
                for label, metric, _ in chosen:
                    if label in have:
                        raise UserError(f"task '{name}' already has a metric '{label}'", field="--add-metric",
                                        hint="Give the new one another name with label=NAME.")
                    have.add(label)
                samples, identities = task.samples, dict(task.metric_identities)
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
                tasks.append(replace(task, spec=spec, samples=samples, metric_identities=identities))
        return RunState(config=self._the_config(), model_spec=self.model_spec(check=False),
                        model_identity=dict(run.record.model_identity), tasks=tasks, usage=dict(run.record.usage),
                        judge_usage=judging.usage.as_dict() if judging is not None else run.record.judge_usage,
                        skipped_lengths=list(run.results.get("skipped_lengths") or []))

    def _source(self) -> FinishedRun:
        if self._run is None:
            raise ValueError("this session was not reopened from a finished run")
        return self._run

    # -- a finished run's tasks again (lceval verify) -------------------------------------
    def load(self, spec: TaskSpec, sources: list[dict[str, Any]] | None = None,
             files: dict[str, str] | None = None) -> list[Conversation]:
        """The conversations of one task, read again from this session's data home; the
        sha256 of every file read is added to `files` (by absolute path), every source beyond
        files to `sources`."""
        config = self._the_config()
        with using_data_home(self._data_home()):
            task_type = checked_task_type(spec, config, self.plugins)
            return load_task(spec, task_type, config, self.plugins, self._data_home(), FileRecorder(files),
                             sources=sources)

    def answer_again(self, spec: TaskSpec, conversations: list[Conversation], seed: int) -> list[Sample]:
        """The reopened run's model asked `conversations` again (not judged)."""
        model = self._model(self.model_spec().text)
        with using_data_home(self._data_home()):
            return generate_task(spec, conversations, model, seed, False)


@contextmanager
def open_model(text: str, *, cache_path: Path | None = None, plugins: Plugins | None = None) -> Iterator[CachedModel]:
    """A model by spec string, through the request cache, for a plugin's own command (e.g.
    synthesizing a haystack): every call cached and resumable like a run's; the model and the
    cache are closed when the block ends. `cache_path` defaults to the run cache."""
    with Session(plugins=plugins, cache_path=cache_path) as session:
        yield session._model(text)
