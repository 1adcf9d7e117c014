"""What a run may spend and how it is sent: the model options every backend takes for it
(`batch=true`, `batch_max_requests`, `batch_max_wait`, `max_cost` ...), the cost limits
(`--max-cost USD` for the whole command, `max_cost=USD` for one model, e.g. the judge), and
what a request is estimated to cost before it is sent.

A limit is a promise about money, so it is kept against the worst case: before a request is
sent, its estimate (its prompt's tokens, counted by the model's tokenizer when it has one, else
`CHARS_PER_TOKEN` characters a token, a deliberate over-estimate, plus every answer token it
may write, `max_new_tokens` and any thinking budget) is reserved; when the answer comes back
the reservation becomes what the provider charged, and what it did not spend is free again. A
request that would take spent plus reserved past a limit waits for the requests in flight to
come back (their answers are usually cheaper than their bound) and is sent if it fits then;
the first request that would pass the limit even with nothing in flight is refused and so is
every later one (the limit is *hit*): no new request is sent, those in flight finish, and the
run is written as partial.

Where an API provider caches the part a context's requests share (`ModelBackend.prompt_caching`),
the estimate counts the cache the run will get (`estimate`, the dry run's arithmetic too): the
part at the cache-write price until a request about the context has come back, at the
cache-read price after (through a batch, whose requests are processed at once, every request
may write). A provider that misses its own cache bills more than was reserved; the next
reservations see it (what was spent is what the provider billed).
"""

from __future__ import annotations

import math
import threading
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, fields
from typing import Any, Iterator

from lceval.errors import UserError
from lceval.interfaces import ModelBackend, Price
from lceval.options import OptionsSchema, check_options
from lceval.types import Generation, GenerationRequest

#: characters per token when the model lends no tokenizer: English text runs at about four
#: characters a token on the providers' tokenizers, so three over-estimates a prompt (a limit
#: must not be passed because a prompt was under-counted)
CHARS_PER_TOKEN = 3.0
#: tokens a chat message costs beyond its text (role, separators), when estimated
TOKENS_PER_MESSAGE = 4

#: Model options the engine reads itself (`--model SCHEME:MODEL,batch=true,...`, also for the
#: `--judge-model`): the backend never sees them.
SPENDING_OPTIONS: OptionsSchema = {"type": "object", "additionalProperties": False, "properties": {
    "batch": {"type": "boolean",
              "description": "Send this model's requests through its provider's batch API (half the price, answers "
                             "within hours); default: the run's --batch."},
    "batch_max_requests": {"type": "integer", "minimum": 1, "maximum": 50000, "default": 5000,
                           "description": "Most requests in one provider batch."},
    "batch_max_wait": {"type": "number", "exclusiveMinimum": 0, "default": 300.0,
                       "description": "Seconds a batch waits for more requests before it is sent (it goes earlier "
                                      "once full, or after 2 s without a new request)."},
    "batch_poll": {"type": "number", "exclusiveMinimum": 0, "default": 15.0,
                   "description": "Seconds before a sent batch is first asked about; doubled after each ask."},
    "batch_poll_max": {"type": "number", "exclusiveMinimum": 0, "default": 600.0,
                       "description": "Longest wait between two asks about a batch, in seconds."},
    "batch_retries": {"type": "integer", "minimum": 0, "default": 3,
                      "description": "Times a request the provider failed inside a batch is sent again (in a "
                                     "later batch) before it is recorded as failed."},
    "max_cost": {"type": "number", "minimum": 0,
                 "description": "USD this model may cost the command (its own limit, beside --max-cost)."},
}}


@dataclass(frozen=True)
class BatchSettings:
    """How one model's requests are gathered into provider batches and polled."""

    max_requests: int = 5000
    max_wait: float = 300.0
    poll: float = 15.0
    poll_max: float = 600.0
    retries: int = 3
    #: a batch is sent before its input file passes this size (the providers take 200 MB)
    max_bytes: int = 100_000_000
    #: a batch also goes once no request joined it for this long (callers send in bursts)
    quiet: float = 2.0

    @classmethod
    def of(cls, options: dict[str, Any]) -> "BatchSettings":
        wait = float(options["batch_max_wait"])
        return cls(max_requests=int(options["batch_max_requests"]), max_wait=wait, poll=float(options["batch_poll"]),
                   poll_max=max(float(options["batch_poll_max"]), float(options["batch_poll"])),
                   retries=int(options["batch_retries"]), quiet=min(cls.quiet, wait))


def spending_options(options: dict[str, str], field: str) -> dict[str, Any]:
    """The engine's spending options out of a model string's `key=value` options, checked."""
    own = {k: v for k, v in options.items() if k in SPENDING_OPTIONS["properties"]}
    return check_options(SPENDING_OPTIONS, own, what=f"{field} option")


def parse_usd(text: Any, flag: str = "--max-cost") -> float:
    """`--max-cost 12.5` -> 12.5; a negative, non-numeric or non-finite amount names the flag."""
    try:
        value = float(str(text).strip().lstrip("$"))
    except ValueError:
        raise UserError(f"{flag} takes an amount in USD, got '{text}'", field=flag) from None
    if not math.isfinite(value) or value < 0:
        raise UserError(f"{flag} takes an amount in USD of 0 or more, got '{text}'", field=flag)
    return value


def prompt_estimate(backend: ModelBackend, request: GenerationRequest) -> tuple[int, bool]:
    """The prompt's tokens and whether they were counted: the model's own count when it has a
    tokenizer, else an over-estimate (`CHARS_PER_TOKEN`). The one estimate behind both the dry
    run's "at most" and what a cost limit reserves, so a limit set to the one holds the other."""
    try:
        counted = backend.count_tokens(request.messages)
    except Exception:  # noqa: BLE001 - a tokenizer that cannot be had: estimate instead
        counted = None
    if counted is not None:
        return int(counted), True
    return sum(math.ceil(len(m.content) / CHARS_PER_TOKEN) + TOKENS_PER_MESSAGE for m in request.messages), False


def most_answer_tokens(request: GenerationRequest) -> int:
    """Every token the answer may take: its own and its thinking's (a budget, or room)."""
    return int(request.params.max_new_tokens) + request.params.thinking_allowance


@dataclass(frozen=True)
class Estimate:
    """What one request is estimated to cost before it is sent: its prompt's tokens (counted,
    or over-estimated), those of them the provider's prompt cache will read or write, and every
    answer token it may take, at `price` (the cache's prices where it caches; None: unknown)."""

    prompt: int
    counted: bool
    answer: int
    price: Price | None
    cache_read: int = 0
    cache_write: int = 0

    @property
    def usd(self) -> float | None:
        if self.price is None:
            return None
        return self.price.cost(self.prompt, self.answer, self.cache_read, self.cache_write)


def estimate(backend: ModelBackend, request: GenerationRequest, price: Price | None, batch: bool,
             primed: bool) -> Estimate:
    """The one arithmetic behind the dry run's "at most" and what a cost limit reserves, with
    the cache the run will get: a request whose context the provider caches
    (`backend.prompt_caching`) pays its shared part at the cache-write price until an earlier
    request about the context has come back (`primed`), and at the cache-read price after;
    the rest of its prompt at the input price. `price` is the model's, without a cache."""
    prompt, counted = prompt_estimate(backend, request)
    answer = most_answer_tokens(request)
    caching = backend.prompt_caching(request, batch) if request.shared is not None else None
    if caching is None:
        return Estimate(prompt, counted, answer, price)
    shared_part = request.shared.head(request.messages)  # type: ignore[union-attr]
    head = GenerationRequest(request.request_id, shared_part, request.params)
    shared = min(prompt, prompt_estimate(backend, head)[0])
    return Estimate(prompt, counted, answer, caching.price, cache_read=shared if primed else 0,
                    cache_write=0 if primed else shared)


def cost_of(gen: Generation, price: Price | None) -> float | None:
    """What an answer cost: the backend's own count (`extras["cost_usd"]`), else its tokens at
    `price` (those its provider read from or wrote into its prompt cache at the cache prices);
    None when neither is known."""
    reported = gen.extras.get("cost_usd") if isinstance(gen.extras, dict) else None
    if isinstance(reported, (int, float)) and not isinstance(reported, bool):
        return float(reported)
    if price is None:
        return None
    return price.cost(int(gen.prompt_tokens or 0), int(gen.completion_tokens or 0), int(gen.cache_read_tokens or 0),
                      int(gen.cache_write_tokens or 0))


class Budget:
    """A cost limit (None: none, only counted) and what is spent and reserved against it;
    a model's own budget has the command's as its parent, and a request must fit both.
    Thread-safe (one lock for a budget and its parent; waiting callers are woken when a
    reservation is released)."""

    def __init__(self, limit: float | None, name: str, parent: "Budget | None" = None) -> None:
        self.limit = limit
        #: how the limit was set, for messages: "--max-cost" or "--judge-model option max_cost"
        self.name = name
        self.parent = parent
        self._cond: threading.Condition = parent._cond if parent is not None else threading.Condition()
        self.spent = 0.0
        self.reserved = 0.0
        #: requests sent and not yet back (their reservations are `reserved`)
        self.in_flight = 0
        #: requests refused since the limit was hit
        self.refused = 0
        self.hit = False
        #: what was in flight the moment the limit was hit (USD reserved, requests)
        self._at_hit: tuple[float, int] = (0.0, 0)

    def _chain(self) -> list["Budget"]:
        chain, at = [], self
        while at is not None:
            chain.append(at)
            at = at.parent
        return chain

    def reserve(self, amount: float, wait: bool = True) -> bool | None:
        """Reserve `amount` for a request about to be sent. True: reserved. False: even with
        nothing in flight it would take spent past this budget's limit or its parent's, so the
        limit is hit (this and every later request refused). None: it fits once requests in
        flight come back below their reservations; with `wait` (the caller holds no
        reservation of its own not yet sent) the call waits for them and decides then."""
        chain = self._chain()
        with self._cond:
            while True:
                blocked = None
                for b in chain:
                    if b.hit:
                        b.refused += 1
                        return False
                    if b.limit is not None and b.spent + b.reserved + amount > b.limit + 1e-12:
                        blocked = b
                        break
                if blocked is None:
                    for b in chain:
                        b.reserved += amount
                        b.in_flight += 1
                    return True
                if blocked.spent + amount > blocked.limit + 1e-12 or blocked.in_flight == 0:  # type: ignore[operator]
                    blocked.hit = True
                    blocked.refused += 1
                    blocked._at_hit = (blocked.reserved, blocked.in_flight)
                    return False
                if not wait:
                    return None
                self._cond.wait(1.0)

    def settle(self, reserved: float | None, actual: float | None) -> None:
        """A request came back: its reservation leaves (what it did not spend is free again:
        waiting requests are woken), what it cost is spent (an answer that never came costs
        nothing; one of unknown cost counts as reserved). `reserved` None: it had none (a batch
        a crashed run sent, adopted by this one)."""
        with self._cond:
            for b in self._chain():
                if reserved is not None:
                    b.reserved = max(0.0, b.reserved - reserved)
                    b.in_flight = max(0, b.in_flight - 1)
                b.spent += (reserved or 0.0) if actual is None else actual
            self._cond.notify_all()

    def add(self, actual: float) -> None:
        """Spent without a reservation (answers of an adopted batch that nobody asks)."""
        self.settle(None, actual)

    def stopped_by(self) -> "Budget | None":
        """The budget of the chain whose limit was hit, if any."""
        return next((b for b in self._chain() if b.hit), None)

    def describe(self) -> dict[str, Any]:
        """The limit, what was spent in all (the requests in flight when it was hit included,
        once they came back), what was in flight at that moment, and the requests not sent."""
        return {"limit": self.name, "limit_usd": self.limit, "spent_usd": round(self.spent, 6),
                "in_flight_usd": round(self._at_hit[0], 6), "in_flight_requests": self._at_hit[1],
                "requests_not_sent": self.refused}


# -- what a model cost a run ---------------------------------------------------------------

#: the part of a run a request belongs to ("elitr_qa"), so usage is also counted per task;
#: set by the runner around a task's generation and by the judging pool around a judge call,
#: and carried into request threads (`Dispatcher` runs each call in a copy of its context)
USAGE_SCOPE: ContextVar[str | None] = ContextVar("lceval_usage_scope", default=None)


@contextmanager
def usage_scope(name: str | None) -> Iterator[None]:
    """Count the requests made inside the block under `name` too (the task they serve)."""
    token = USAGE_SCOPE.set(name)
    try:
        yield
    finally:
        USAGE_SCOPE.reset(token)


@dataclass
class UsageCounters:
    """What one model cost a run. Updated from several threads when the backend takes
    requests concurrently (`CachedModel` holds the lock); each update also goes to the
    counters of the task it served (`by_task`)."""

    requests: int = 0
    cache_hits: int = 0
    generated: int = 0
    prompt_tokens: int = 0
    #: tokens the backend really prefilled; None as soon as one generated request's prefill is
    #: unknown (a server that reports no cached tokens): the sum of a subset is not the total
    prefilled_tokens: int | None = 0
    #: generated requests whose prefill the backend could not tell
    prefill_unknown: int = 0
    completion_tokens: int = 0
    #: wall-clock seconds with at least one request at the backend (concurrent requests
    #: counted once): what the generation took
    seconds: float = 0.0
    #: the sum of every request's own latency (exceeds `seconds` when requests overlap)
    request_seconds: float = 0.0
    #: the most requests the backend had at once
    peak_in_flight: int = 0
    #: requests the backend gave up on (finish_reason "error"): not cached, asked again next run
    failed: int = 0
    #: the prompt and answer tokens of the answers served from the cache: the work this run did
    #: not redo (a rerun's prompt_tokens is 0 because nothing was sent, not because nothing was asked)
    cached_prompt_tokens: int = 0
    cached_completion_tokens: int = 0
    #: tokens a reasoning model thought in the answers it generated (part of completion_tokens,
    #: as providers bill them); None as soon as one thinking answer's count is unknown (an API
    #: that reports none): the sum over the others would pass for a total it is not
    reasoning_tokens: int | None = 0
    #: the same for the answers served from the cache (part of cached_completion_tokens)
    cached_reasoning_tokens: int | None = 0
    #: thinking answers whose reasoning tokens are unknown (generated or from the cache)
    reasoning_unknown: int = 0
    #: answers whose thinking never closed (no answer at all)
    unclosed_thinking: int = 0
    #: USD this command paid for the answers it generated (those of known cost; a local model's
    #: cost 0), the provider's own count where it gives one, else the tokens at the model's price
    cost_usd: float = 0.0
    #: generated answers whose cost is unknown (not in cost_usd: the total is then a lower bound)
    cost_unknown: int = 0
    #: answers generated through the provider's batch API, and what they cost (part of cost_usd)
    batched: int = 0
    batch_cost_usd: float = 0.0
    #: what the answers served from the cache cost when they were paid (the run's full cost is
    #: cost_usd + cached_cost_usd)
    cached_cost_usd: float = 0.0
    #: requests not sent because a cost limit was reached (`--max-cost`, `max_cost=`)
    cost_limited: int = 0
    #: of the generated answers' prompt tokens: those the provider read from its prompt cache,
    #: those it wrote into it, and the rest (billed at the input price)
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    uncached_prompt_tokens: int = 0
    #: generated answers whose provider said nothing about its prompt cache
    cache_unreported: int = 0
    #: answers sent after their context's cache was primed (expected to read it), and those of
    #: them the provider reported no cache read for (a cache that did not serve: said on the console)
    cache_reads_expected: int = 0
    cache_reads_missed: int = 0
    #: USD the prompt cache saved: the same answers at the input price less what they cost
    #: (negative where writes at their premium cost more than the reads saved: a batch's lines
    #: each write their context); None as soon as one cached answer's price is unknown
    cache_saved_usd: float | None = 0.0
    #: generated answers the provider reported a cache write for
    cache_writes: int = 0
    by_task: dict[str, "UsageCounters"] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "by_task"}
        for name in ("cost_usd", "batch_cost_usd", "cached_cost_usd", "cache_saved_usd"):
            out[name] = round(out[name], 8) if out[name] is not None else None
        if self.by_task:
            out["by_task"] = {name: child.as_dict() for name, child in self.by_task.items()}
        return out

    def scoped(self) -> list["UsageCounters"]:
        """These counters and the current task's (`usage_scope`), to update together."""
        name = USAGE_SCOPE.get()
        if name is None:
            return [self]
        child = self.by_task.get(name)
        if child is None:
            child = self.by_task[name] = UsageCounters()
        return [self, child]

    def add_thinking(self, gen: Generation) -> None:
        """A thinking answer's reasoning tokens, each counted once: in `reasoning_tokens` when it
        was generated now, in `cached_reasoning_tokens` when it came from the cache."""
        if gen.finish_reason == "error" or gen.reasoning is None:
            return
        self.unclosed_thinking += gen.finish_reason == "unclosed_thinking"
        name = "cached_reasoning_tokens" if gen.cached else "reasoning_tokens"
        if gen.reasoning_tokens is None:
            self.reasoning_unknown += 1
            setattr(self, name, None)
        elif getattr(self, name) is not None:
            setattr(self, name, getattr(self, name) + int(gen.reasoning_tokens))

    def add(self, gen: Generation, cost: float | None = None, batched: bool = False) -> None:
        self.request_seconds += gen.seconds
        if gen.finish_reason == "error":
            error = gen.extras.get("error")
            if isinstance(error, dict) and error.get("kind") == "cost_limit":
                self.cost_limited += 1
            else:
                self.failed += 1
            return
        self.generated += 1
        self.prompt_tokens += gen.prompt_tokens
        self.completion_tokens += gen.completion_tokens
        read, written = int(gen.cache_read_tokens or 0), int(gen.cache_write_tokens or 0)
        self.cache_read_tokens += read
        self.cache_write_tokens += written
        self.uncached_prompt_tokens += max(0, gen.prompt_tokens - read - written)
        self.cache_unreported += gen.cache_read_tokens is None and gen.cache_write_tokens is None
        if gen.prefilled_tokens is None:
            self.prefill_unknown += 1
            self.prefilled_tokens = None
        elif self.prefilled_tokens is not None:
            self.prefilled_tokens += gen.prefilled_tokens
        if cost is None:
            self.cost_unknown += 1
        else:
            self.cost_usd += cost
        if batched:
            self.batched += 1
            self.batch_cost_usd += cost or 0.0
