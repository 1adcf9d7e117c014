"""The contracts plugins implement. Base classes rather than bare protocols so that a plugin
gets sensible defaults and the engine can rely on every attribute being there."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Protocol, runtime_checkable

from lceval.needs import Need
from lceval.types import (Conversation, Generation, GenerationRequest, JudgeInput, Judgment, LongContextSettings,
                          Message, PairInput, PairJudgment, RunView)

__all__ = ["BatchAPI", "BatchStatus", "Command", "Dataset", "DatasetFile", "Judge", "JudgeContext", "JudgeFactory",
           "JudgeModel", "ModelBackend", "ModelFactory", "PairwiseJudge", "PairwiseJudgeFactory", "PrefixCache", "Price",
           "PromptCaching", "ReasoningControls", "ReportContext", "ReportFigure", "ReportPanel", "Retriever",
           "RetrieverFactory", "TaskContext", "TaskType", "is_recomputable", "missing_requirements", "recomputable",
           "requires"]


@dataclass(frozen=True)
class PrefixCache:
    """What a backend's KV (or prompt) cache keeps between requests; the scheduler plans the
    order and the number of transcripts in flight by it, so a long context is prefilled once.

    - ``"none"``: nothing is kept; every request is prefilled whole, order does not matter.
    - ``"last-prompt"``: the previous request's tokens only (llama.cpp, the hf decode loop):
      requests sharing a transcript run back to back, one transcript at a time.
    - ``"shared"``: many prefixes at once, up to ``capacity_tokens`` tokens (vLLM's automatic
      prefix caching, SGLang's radix cache, their OpenAI-compatible servers): as many
      transcripts are kept in flight as fit, each primed by one request before its other
      requests fan out, so no two concurrent requests prefill the same transcript.

    Whatever the kind, a multi-turn conversation is asked turn by turn, and an answer reaches
    the request cache as soon as it exists. ``capacity_tokens`` counts what the cache holds at
    once: the transcripts in flight (each once) plus each request's own part and answer. No
    transcript starts that would push out one whose questions are pending; with ``None`` a new
    one starts only when those in flight have nothing left to send.
    """

    kind: Literal["none", "last-prompt", "shared"] = "last-prompt"
    #: For "shared": tokens the cache can hold (None = unknown).
    capacity_tokens: int | None = None
    #: For "shared": the cache serves a prefix to requests that arrive while it is still being
    #: prefilled (vLLM V1 enters a block into its cache when it allocates it), so concurrent
    #: requests on one transcript prefill it once anyway and the engine sends them together
    #: without priming. False (an API provider caches a prompt once its request is done) keeps
    #: the primer.
    shares_in_flight: bool = False


@dataclass(frozen=True)
class Price:
    """What a model's tokens cost, in USD per million tokens (a provider's list price, or the
    user's `input_cost_per_mtok` / `output_cost_per_mtok`). A local model costs nothing."""

    input_per_mtok: float
    output_per_mtok: float
    cache_read_per_mtok: float | None = None
    cache_write_per_mtok: float | None = None

    def cost(self, prompt_tokens: int, completion_tokens: int, cache_read: int = 0, cache_write: int = 0) -> float:
        """`cache_read`/`cache_write` of the prompt at the prompt cache's prices (None: input), the rest at input."""
        read, write = (self.input_per_mtok if v is None else v for v in (self.cache_read_per_mtok,
                                                                          self.cache_write_per_mtok))
        plain = max(0, prompt_tokens - cache_read - cache_write) * self.input_per_mtok
        return (plain + cache_read * read + cache_write * write + completion_tokens * self.output_per_mtok) / 1e6


@dataclass(frozen=True)
class PromptCaching:
    """A request's shared part in a provider's prompt cache: the first request about a context writes
    it, later ones read it (at `price`'s cache prices); `lifetime` asked ("5m", "1h"; None: the
    provider's); `marked`: the request marks it (Anthropic), else the provider finds it itself."""

    price: Price
    lifetime: str | None = None
    marked: bool = False


@dataclass(frozen=True)
class ReasoningControls:
    """What a backend can do with a run's reasoning settings (`--thinking`,
    `--reasoning-budget`, `--reasoning-effort`), so the engine checks them against the model
    before any request, fills defaults that run, and says what was used. Every field may be
    None: not known, and then nothing is refused on its account.

    - `thinks`: the model thinks when the run says nothing (True: Qwen3, OpenAI's reasoning
      models), only when switched on (False with `switch=True`: Claude's extended thinking), or
      not at all (False).
    - `switch`: `--thinking on|off` reaches the model (a chat template's switch, an API's).
    - `budget`: how a thinking budget is applied: "api" (sent to the API, which caps the
      thinking: Anthropic's `budget_tokens`, Gemini's `thinkingBudget`), "engine" (the engine
      stops the thinking itself: the backend continues an assistant message), or None (it
      cannot be: an API that takes an effort, a server).
    - `efforts`: the reasoning efforts the API takes (empty: none).
    - `room`: where the API counts the thinking in the request's token limit, the tokens to
      leave for it beside the answer's when the run gives no budget (`GenerationParams.
      reasoning_room`), and `room_source`: whose guidance that is, for the console.
    - `declared`: the user said the model thinks (a server's model option), so thinking that
      never appears in its first answers is an error, not a model that does not think.
    - `api`: the API in words, for messages ("OpenAI's reasoning models")."""

    thinks: bool | None = None
    switch: bool | None = None
    budget: Literal["api", "engine"] | None = None
    efforts: tuple[str, ...] | None = None
    room: int | None = None
    room_source: str = ""
    declared: bool = False
    api: str = ""


@dataclass
class BatchStatus:
    """What a provider says of a submitted batch when it is polled.

    `ended` is False while the provider still works on it. Once it is True, `results` holds an
    answer per request the batch finished (by the id it was submitted under): a `Generation`,
    with `finish_reason="error"` and `extras["error"]` for a request the provider failed (the
    engine asks it again in a later batch); the requests of the batch missing from `results`
    were not finished (the batch expired or was cancelled) and are submitted again."""

    ended: bool
    #: the provider's own word for the batch's state ("in_progress", "completed", "expired", "ended" ...)
    state: str
    results: dict[str, Generation] = field(default_factory=dict)
    #: the batch failed as a whole (the provider refused its input): why; each of its requests
    #: missing from `results` then counts as a failed request, not an unfinished one
    error: str | None = None


class BatchAPI(ABC):
    """A provider's batch API for one model (OpenAI's `/v1/batches`, Anthropic's Message
    Batches): requests sent in bulk, answered within hours, at the provider's batch price.

    A backend that has one returns it from `ModelBackend.batch_api()`; the engine does the rest
    (`--batch`): it gathers requests into chunks, records each chunk in the request cache
    *before* `submit` (so a rerun after a crash adopts the batch instead of paying again),
    polls with backoff, stores each answer in the cache the moment the batch ends, retries
    failed requests in a later batch and resubmits what an expired batch did not finish. The
    methods are called from one engine thread; they raise `UserError` for what stops the run
    (no credentials) and any other exception for a failure worth trying again later."""

    #: the protocol's name, recorded with each batch ("openai", "anthropic")
    name: str = "batch"

    @abstractmethod
    def submit(self, local_id: str, items: list[tuple[str, GenerationRequest]]) -> dict[str, Any]:
        """Send one batch: `items` are (id, request), each id unique in the batch and at most
        64 characters of `[A-Za-z0-9_-]`. `local_id` is the engine's own name for the batch
        (tag the provider's batch with it where the API allows, for `find`). Returns the
        provider's handle (JSON: its batch id, file ids), which `poll` and `cancel` receive."""

    @abstractmethod
    def poll(self, handle: dict[str, Any]) -> BatchStatus:
        """The batch's state now; once ended, its results."""

    def cancel(self, handle: dict[str, Any]) -> None:
        """Ask the provider to stop the batch (what it finished is still returned by `poll`)."""

    def find(self, local_id: str, items: int, since: float) -> dict[str, Any] | None:
        """The handle of a batch sent as `local_id` (with `items` requests, at or after the
        Unix time `since`) whose handle was never recorded (the process died while `submit`
        waited for the provider's answer); None when the provider has no such batch."""
        return None

    def find_batch(self, local_id: str, ids: list[str], since: float) -> dict[str, Any] | None:
        """As `find`, given the ids the batch's requests were submitted under: a batch is ours
        only when the provider shows it holds exactly those requests (the tag `submit` wrote,
        its requests' ids), never by size and time alone (a stranger's batch would be adopted
        and paid twice). The engine calls this; the default asks `find`."""
        return self.find(local_id, len(ids), since)


class ModelBackend(ABC):
    """A model behind a scheme (`llamacpp:`, `replay:` ...). `identity()` describes everything that
    changes its outputs (path or name, quantization, context size) and nothing secret: it keys the cache."""

    #: Largest prompt + answer the backend accepts, in its own tokens; None = unknown/unbounded,
    #: in which case the context policy cannot cut and only `error`/`skip` on known overflow apply.
    context_window: int | None = None
    #: How many requests the engine hands over at once. Sequential backends keep 1 so every
    #: finished answer reaches the cache before the next starts (nothing lost on interrupt).
    batch_size: int = 1
    #: What the backend's cache keeps between requests (see `PrefixCache`).
    prefix_cache: PrefixCache = PrefixCache("last-prompt")
    #: How many requests may be in flight at once. Above 1 the engine calls `generate` from up
    #: to this many threads at once, one request per call, so it must be thread-safe; each
    #: finished request frees its slot at once (no waiting for the slowest of a batch). At 1
    #: the engine calls `generate` from its own thread with up to `batch_size` requests.
    max_in_flight: int = 1
    #: How many requests sharing one prefix (a transcript) are worth running at once; None =
    #: `max_in_flight`. A fleet of servers that routes each transcript to one server sets the
    #: concurrency of one server here, so the engine fills the other servers' slots with other
    #: transcripts instead of queueing a transcript's questions behind each other.
    max_in_flight_per_prefix: int | None = None
    #: A request whose last message is the assistant's is continued from that text, the
    #: assistant's turn already begun (the chat template's generation prompt, then the text):
    #: RULER's answer prefix, or a thinking the engine ended when its budget ran out. A backend
    #: that cannot leaves it False; the engine then says so instead of sending such a request.
    continues_assistant: bool = False
    #: The backend passes `params.reasoning_budget` to the model itself (an API's thinking
    #: budget, e.g. Anthropic's `budget_tokens`). Otherwise the engine enforces the budget: at
    #: most that many tokens of thinking, then the thinking closed and the answer asked for
    #: (`lceval.reasoning`), which needs `continues_assistant`.
    handles_reasoning_budget: bool = False

    @abstractmethod
    def identity(self) -> dict[str, Any]: ...

    def thinks(self) -> bool | None:
        """Whether the model thinks before it answers (its chat template writes thinking
        markers or has a thinking switch; an API says the model reasons); None: cannot tell.
        The engine refuses a thinking budget or `--thinking on` for a model that does not."""
        return None

    def reasoning_controls(self) -> ReasoningControls:
        """What the backend can do with the run's reasoning settings (`ReasoningControls`).
        The default reads `thinks()`, `handles_reasoning_budget` and `continues_assistant`;
        an API backend says more (the efforts it takes, the room its token limit needs)."""
        budget = "api" if self.handles_reasoning_budget else "engine" if self.continues_assistant else None
        return ReasoningControls(thinks=self.thinks(), budget=budget)

    @abstractmethod
    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        """Answer each request; results in the same order. The engine sends requests that
        share a long prefix back to back, so a backend with a KV cache should reuse it."""

    # -- the tokenizer, for the context policy (which cuts the context's ids and sizes the prompt
    # with count_tokens): tokenize adds no special tokens, detokenize(tokenize(x)) == x, and
    # count_tokens grows by len(tokenize(x)) when x enters a message (lceval.tokens.
    # tokenizer_problems checks it). Without one, leave them and context_window None. A prompt
    # over the window is never cut silently: raise UserError naming the option, or fail it.
    def count_tokens(self, messages: list[Message]) -> int | None:
        """Tokens of the prompt after the chat template, exactly as `generate` sends it."""
        return None

    def tokenize(self, text: str) -> list[int] | None:
        """The text's token ids, without special tokens (no BOS); None = no tokenizer."""
        return None

    def detokenize(self, tokens: list[int]) -> str:
        raise NotImplementedError(f"{type(self).__name__} has no tokenizer")

    def check_seeds(self, seeds: list[int]) -> None:
        """Raise UserError for `--seed` values the backend cannot honour, before any request
        (a replay of one recorded run gives the same answers to every seed: refused, rather
        than reported as a spread of zero). The default accepts any."""

    def long_context(self) -> LongContextSettings | None:
        """How the model was stretched to its window, as applied: part of every cache key and the run's record."""
        return None

    def stats(self) -> dict[str, Any] | None:
        """Backend-side accounting for the manifest (retries, failures by kind, cost), or
        None. The engine's own counters (requests, cache hits, tokens) are kept anyway."""
        return None

    def price(self, batch: bool = False) -> Price | None:
        """What the model's tokens cost, directly or (`batch=True`) through its batch API. The default
        is free (a local model); an API backend returns its price, or None when it does not know it: the
        engine then refuses `--max-cost` rather than guess. A response's cost is its `extras["cost_usd"]`
        when the backend reports one, else this price times the response's tokens."""
        return Price(0.0, 0.0)

    def prompt_caching(self, request: GenerationRequest, batch: bool = False) -> PromptCaching | None:
        """How the provider's prompt cache serves `request.shared`; None (a local model): nothing apart."""
        return None

    def batch_api(self) -> BatchAPI | None:
        """The provider's batch API for this model (`--batch`), or None when it has none (the
        default): the engine then refuses `--batch` and `batch=true` for it. Must not reach
        the network: it is asked before anything is sent."""
        return None

    def close(self) -> None:
        """Free the model (weights, servers). Called once at the end of a run."""


ModelFactory = Callable[[str, dict[str, Any]], ModelBackend]
"""(model part of the spec string, key=value options: text, or typed and defaulted when the
backend was registered with an options_schema) -> backend."""


def recomputable(factory: ModelFactory) -> ModelFactory:
    """Mark a model factory whose answers are a deterministic function of the request and of
    local files the data home verifies (recorded generations: no model runs, no network).
    `lceval verify` asks such a backend again for a seeded sample of a bundle's items and
    compares the answers; other backends' answers are never re-generated at verify time."""
    factory.recomputable = True  # type: ignore[attr-defined]
    return factory


def is_recomputable(factory: Any) -> bool:
    """Whether a registered model factory was marked `recomputable`, itself or the factory an
    options check wraps (registered with an options schema)."""
    while factory is not None:
        if getattr(factory, "recomputable", False):
            return True
        factory = getattr(factory, "factory", None)
    return False


@runtime_checkable
class JudgeModel(Protocol):
    """What a judge is handed as its model (`JudgeContext.model`): the `--judge-model`
    backend seen through the run's request cache, so a judge's calls are cached, resumed and
    counted exactly like the system's. A judge only asks and names it."""

    #: what determines the model's answers (put it in the judge's own `identity()`)
    identity: dict[str, Any]

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        """Answers in the order asked (cached ones at once, the rest from the backend)."""
        ...


def requires(*modules: str, install: str) -> Callable[[Any], Any]:
    """Mark a factory (a backend's, a judge's ...) whose plugin needs optional packages:
    `lceval plugins` shows "not installed: <install>" while one of `modules` is not found
    (looked up, never imported); called without them, the factory raises a `UserError` with it.

        @requires("vllm", install="pip install 'lceval[vllm]'")
        def make_vllm(model, options): ...
    """
    def mark(factory: Any) -> Any:
        factory.requirements = (tuple(modules), install)
        return factory
    return mark


def missing_requirements(factory: Any) -> str | None:
    """The install hint of a factory marked with `requires` whose packages are not all
    installed, else None (also through an options check's wrapper)."""
    import importlib.util

    while factory is not None:
        marked = getattr(factory, "requirements", None)
        if marked:
            modules, install = marked
            for name in modules:
                try:
                    found = importlib.util.find_spec(name) is not None
                except (ImportError, ValueError):
                    found = False
                if not found:
                    return install
            return None
        factory = getattr(factory, "factory", None)
    return None


class Judge(ABC):
    """Turns (question, response, reference) into a score on the task's scale.

    Judges that need a model receive a `JudgeModel` (so their calls are cached and counted
    like the system's); those that need none ignore it.
    """

    name: str = "judge"
    #: Score range the judge reports on; the ELITR scale is 1-10.
    scale: tuple[float, float] = (1.0, 10.0)
    #: True for judges that call the `--judge-model`; giving one to a judge that ignores it
    #: is an error rather than a silently unused flag.
    uses_model: bool = False

    @abstractmethod
    def judge(self, items: list[JudgeInput]) -> list[Judgment]: ...

    def identity(self) -> dict[str, Any]:
        """What, besides the text judged, determines the verdict (prompt hash, judge model)."""
        return {"judge": self.name}


@dataclass
class JudgeContext:
    """What the engine hands a judge factory."""

    options: dict[str, Any] = field(default_factory=dict)
    model: JudgeModel | None = None  # set when --judge-model is given
    seed: int = 0


JudgeFactory = Callable[[JudgeContext], Judge]


class PairwiseJudge(ABC):
    """Compares two responses to the same unit and scores both sides on each criterion
    (CREAM: completeness and conciseness of two summaries of one meeting).

    The engine (`lceval rank`) shows every pair in both orders, so a judge never needs to
    randomise positions itself; it turns the scores into matches for Elo and Bradley-Terry.
    A judge that cannot parse its model's output returns ``parse_status="parse_failure"``
    with ``scores_a = scores_b = None``: never a made-up score.
    """

    name: str = "pairwise"
    #: The criteria every successful judgment scores, higher is better (e.g. completeness).
    criteria: tuple[str, ...] = ("preference",)
    uses_model: bool = False

    @abstractmethod
    def compare(self, pairs: list[PairInput]) -> list[PairJudgment]:
        """One judgment per pair, in the same order."""

    def identity(self) -> dict[str, Any]:
        """What, besides the texts compared, determines the verdict (prompt hash, model)."""
        return {"judge": self.name}


PairwiseJudgeFactory = Callable[[JudgeContext], PairwiseJudge]


class Retriever(ABC):
    """Ranks documents for a query (used by retrieval-augmented task types).

    The factory receives ``{"seed": run seed, **the spec's retriever_options}``. An oracle
    that ranks by gold relevance sets ``wants_relevance = True`` and is then called as
    ``rank(query, documents, relevance=[gold relevance of each document])`` (higher = more
    relevant); task types that know no gold relevance refuse such a retriever. A retriever
    ranks every document and never sees a budget: the task type keeps the top ones up to its
    token budget (lceval.tokens.fill_budget).
    """

    name: str = "retriever"
    wants_relevance: bool = False

    @abstractmethod
    def rank(self, query: str, documents: list[str]) -> list[int]:
        """Indices of `documents`, most relevant first."""


RetrieverFactory = Callable[[dict[str, Any]], Retriever]


@dataclass
class TaskContext:
    """What the engine hands a task type when it loads a spec."""

    #: the resolved spec (the mapping `lceval tasks show` prints): its defaults filled, and
    #: `spec["options"]` checked against the type's `options_schema` with that schema's
    #: defaults filled in, by the engine, once; read the options through `options`
    spec: dict[str, Any]
    spec_path: Path
    data_home: Path
    splits: list[str] | None  # --split, else the spec's `splits`; None = all the type's splits
    #: --limit: at most this many scored items per split (first ones, stable order); the task
    #: type applies it (and `splits`): the engine does not cut what `load` returns
    limit: int | None
    #: Every data file the task type reads must be passed through here: its sha256 goes into
    #: the manifest.
    record_file: Callable[[Path], None]
    #: Retrievers the installed plugins provide, by name (for task types that retrieve): a
    #: task type looks its spec's retriever up here, so third-party retrievers plug in.
    retrievers: dict[str, "RetrieverFactory"] = field(default_factory=dict)
    seed: int = 0  # the run's first seed, for task types that shuffle (document order ...)
    #: Whether the user chose this context id (`--contexts`; always True without it). Ask it
    #: for every context before applying `limit`, so the limit counts within the chosen
    #: contexts and an id that exists is never reported unknown; the engine drops the
    #: conversations of unchosen contexts anyway.
    select_context: Callable[[str], bool] = field(default=lambda context_id: True)
    #: Facts about one context the manifest should keep (the noise applied to a transcript):
    #: ``record_facts(context_id, {"noise": {...}})``, kept under ``context_facts[task][context_id]``
    #: (merged per context) and summarised under the console table; never interpreted.
    record_facts: Callable[[str, dict[str, Any]], None] = field(default=lambda context_id, facts: None)
    #: `--limit-per-context K`: at most K scored items about one long context (a meeting, a
    #: haystack), chosen to spread over it (ELITR: evenly over the meeting's questions); with
    #: `limit`, the contexts are taken in order until the split has `limit` items. A task type
    #: that ignores it is trimmed by the engine (the first K items of each context_id).
    limit_per_context: int | None = None
    #: The evaluated model's tokenizer, for task types that build contexts to a length in its
    #: tokens: the backend (use only `context_window`, `tokenize`, `detokenize`, `count_tokens`),
    #: or None when it lends none (an API model without `tokenizer=...`). Loaded on the first
    #: call, once per run: a task type that never calls it costs nothing.
    model_tokenizer: Callable[[], "ModelBackend | None"] = field(default=lambda: None)
    #: The prompt length to build to, in the model's tokens: this variant's budget of
    #: `--context-lengths` (the spec's `context.max_tokens`); None = no target.
    context_length: int | None = None
    #: Where the data came from beyond its files (a Hugging Face dataset's id, config, split
    #: and resolved revision): ``record_source({"dataset": ..., "revision": ...})``; kept in
    #: manifest.json under ``data_sources[task]`` beside the sha256 of every recorded file.
    record_source: Callable[[dict[str, Any]], None] = field(default=lambda source: None)

    @property
    def options(self) -> dict[str, Any]:
        """The spec's `options`, checked and complete (no default to merge again)."""
        return self.spec.get("options") or {}

    def dataset_dir(self, default: str | None) -> Path:
        """The data home's folder of the spec's `dataset` (else `default`, the type's own)."""
        name = self.spec.get("dataset") or default
        if not name:
            raise ValueError("the spec names no dataset and the task type has none")
        return self.data_home / name


class TaskType(ABC):
    """Turns a spec and a dataset into conversations. Knows its benchmark's format and
    prompts; knows nothing of models, caching or statistics."""

    #: JSON Schema of the spec's `options` mapping, checked before `load` (file, field, line
    #: are reported by the engine on failure).
    options_schema: dict[str, Any] = {"type": "object"}
    #: Dataset name (as registered with register_datasets) this type reads by default.
    dataset: str | None = None

    @abstractmethod
    def load(self, ctx: TaskContext) -> list[Conversation]: ...

    def check(self, ctx: TaskContext) -> None:
        """Check a spec against its data before any model loads: `lceval validate SPEC` calls
        it after the options schema passed. Read only what is needed (a dataset's first rows)
        and raise `UserError` for what would fail the run (a column the spec names that the
        data lacks, a template using an undefined field). `ctx.limit` is None and nothing read
        here is recorded. The default checks nothing more."""

    def needs(self, ctx: TaskContext) -> list[Need]:
        """What the spec needs on disk besides itself (its Hub files at their revision, files
        in the data home, an encoding, a judge's model), read from the spec without reading
        the data: `lceval data status / fetch / pack` check, get and carry these, and
        `validate` tells "data not installed" from an invalid spec by them. A dataset named by
        the spec's `dataset` (or the type's) is added by the engine. The default: nothing."""
        return []


@dataclass
class DatasetFile:
    """One archive of a dataset, as published."""

    name: str  # file name in --from folders, e.g. "data.zip"
    url: str  # official public location
    sha256: str
    password: str | None = None  # zip password as published


@dataclass
class Dataset:
    """A dataset `lceval data fetch NAME` installs: `install(archives, dest)` gets the verified
    archives by DatasetFile.name and writes the final layout under `dest` (a fresh temporary
    folder, swapped in atomically only when install returns)."""

    name: str
    description: str
    files: list[DatasetFile]
    install: Callable[[dict[str, Path], Path], None]
    license: str = ""
    #: Data without checksums we could pin (SummHay's haystack files): `collect(folder)` checks a
    #: `--from` folder's files by content and returns them by name; `files` stays empty and each
    #: file's sha256 is recorded like an archive's. `download(folder, base, say)` (optional, with
    #: `collect`) gets them from their sources instead (`base`: a `--from` URL prefix, else None).
    collect: Callable[[Path], dict[str, Path]] | None = None
    download: Callable[[Path, str | None, Callable[[str], None]], dict[str, Path]] | None = None


class Command(ABC):
    """A benchmark-specific sub-command a plugin adds to ``lceval`` (``lceval NAME ...``).

    The engine builds its parser and calls ``run``; a command never prints by itself, so tests
    call ``run`` with a parsed namespace and check the text."""

    help: str = ""

    @abstractmethod
    def add_arguments(self, parser: Any) -> None:
        """Declare flags on an ``argparse.ArgumentParser``."""

    @abstractmethod
    def run(self, args: Any) -> str: ...


@dataclass
class ReportFigure:
    """One figure of the HTML report: a Vega-Lite chart spec (altair's `Chart.to_dict()`; build it
    with `lceval.report.charts` or altair, wrap it with `lceval.report.figure`), its title and
    caption. `section` is the heading it goes under (a task name); `points` is how many data
    values it plots: a figure with none is said to have no value instead of drawn."""

    title: str
    spec: dict[str, Any]
    caption: str = ""
    section: str = ""
    points: int = 0


@dataclass
class ReportContext:
    """What a report panel (``register_report_panels``) is given: the finished runs of the
    report (``labels[i]`` names ``runs[i]`` as its rows and legends do) and the rankings
    (``rankings.json`` of each ``lceval rank`` directory given)."""

    runs: list[RunView]
    labels: list[str]
    rankings: list[dict[str, Any]] = field(default_factory=list)


ReportPanel = Callable[[ReportContext], "list[ReportFigure]"]
"""(report context) -> figures; an empty list when none of the runs is of its kind."""
