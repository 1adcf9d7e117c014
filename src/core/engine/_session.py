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

from lceval.engine._cache import Cache, cache_failures, default_cache_path
from lceval.engine._cached_model import CachedModel
from lceval.engine._catalog import Catalog, load_catalog
from lceval.engine._dry_run import dry_run
from lceval.engine._model_handle import ModelHandle
from lceval.engine._model_spec import ModelSpec, parse_model_spec, resolve_judge_model, resolve_model
from lceval.engine._plan import (FileRecorder, RunPlan, checked_task_type, ensure_datasets, load_task, load_work,
                                 make_judge, plan_run, resolve_judge_flag)
from lceval.engine._plugin_host import Plugins, load_plugins
from lceval.engine._run_config import RunConfig
from lceval.engine._runner import RunState, TaskRun, execute, generate_task, judge_input_of, judged
from lceval.engine._selection import build_plan
from lceval.engine._spec import JudgeChoice, TaskSpec
from lceval.errors import UserError
from lceval.interfaces import Judge
from lceval.io import data_home, using_data_home
from lceval.types import Conversation, FinishedRun, Sample

if TYPE_CHECKING:
    from lceval.engine._progress import RunProgress


class RunOutputs(Protocol):
    """Scoring and writing a run, which the results layer provides (`lceval.results.RUN_OUTPUTS`)."""

    def score(self, state: RunState) -> dict[str, Any]:
        """results.json's content for the run."""

    def write(self, state: RunState, plugins: Plugins, output: Path) -> tuple[Path, dict[str, Any]]:
        """Write the run folder under `output` (whole, or not at all); its path and results."""


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
        return CachedModel(self._judge_backend, self.cache, self._judge_spec.canonical, self._judge_spec.reasoning)

    def model(self, text: str) -> CachedModel:
        """A model by spec string, through the request cache (a plugin's own command, e.g.
        synthesizing a haystack): opened once per session, closed with it."""
        spec = resolve_model(text, self.catalog, self.plugins)
        if spec.canonical not in self._models:
            backend = self._opened(ModelHandle(spec)).backend()
            self._models[spec.canonical] = CachedModel(backend, self.cache, spec.canonical, spec.reasoning)
        return self._models[spec.canonical]

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
        tokenizer can be had); nothing generated, cached or written."""
        plan = self.plan()
        blocks = []
        with using_data_home(self.data_home):
            for model in plan.models:
                handle = ModelHandle(model)
                try:
                    blocks.append(f"# model {model.text}\n{dry_run(plan, handle, self.plugins, self.data_home)}")
                finally:
                    handle.close()
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
                               progress)
        finally:
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
        out = [judged([s], {s.item_id: verdicts[(s.seed, s.item_id)]})[0] if (s.seed, s.item_id) in verdicts
               else replace(s, judgments=[]) for s in samples]
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
            for name in names:
                spec = TaskSpec.of_run(run, name)
                samples, identity = self._judge(run.task_samples(name), spec, judging)
                tasks.append(TaskRun(spec=spec, samples=samples, judge_identity=identity,
                                     files_read=dict(run.manifest.get("data_files") or {}),
                                     context_facts=dict((run.manifest.get("context_facts") or {}).get(name) or {}),
                                     sources=list((run.manifest.get("data_sources") or {}).get(name) or [])))
        return RunState(
            config=self.config, model_spec=self.model_spec(check=False),
            model_identity=dict((run.manifest.get("resolved") or {}).get("model_identity") or {}), tasks=tasks,
            usage={"requests": 0, "generated": 0, "note": "answers read from the source run"},
            judge_usage=judging.usage.as_dict() if judging is not None else None,
            source_run={"run_id": run.run_id, "path": str(run.path.resolve()),
                        "judge": run.results.get("tasks", {}).get(names[0], {}).get("judge")},
            judge_backend_stats=judging.backend.stats() if judging is not None else None,
        )

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
