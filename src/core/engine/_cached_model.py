"""A backend seen through the request cache: the cache key of a request (the model's identity
without secrets, the messages, the sampling parameters), what a model cost a run, and
`CachedModel`, which answers from the cache or asks the backend and stores each answer the
moment it exists. The runner and model-calling judges both use it.

With `--batch` (a `Batcher`) the requests the backend would have been asked go through the
provider's batch API instead, and the cache key is the same: an answer is an answer, however
it was paid. A cost limit (`Budget`) is checked before any request is sent (`_spending`)."""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any, Iterable

from lceval.engine._cache import Cache
from lceval.engine._dispatch import Dispatcher
from lceval.engine._spending import Budget, UsageCounters, cost_of, estimate
from lceval.errors import UserError
from lceval.interfaces import ModelBackend, PrefixCache, Price, PromptCaching
from lceval.io import canonical_hash
from lceval.reasoning import EARLY_STOP, ReasoningOptions, split_reasoning
from lceval.types import Generation, GenerationRequest, Message

if TYPE_CHECKING:
    from lceval.engine._batching import Batcher

#: calls in flight at once for a model whose requests go through batches: each call holds
#: up to `batch_max_requests` requests and waits for hours, so few threads carry a whole run
BATCH_CALLS = 64
_UNSET: Any = object()

SECRET_MARKERS = ("key", "token", "secret", "password", "authorization")


def strip_secrets(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: strip_secrets(v)
            for k, v in value.items()
            if not any(m in k.lower() for m in SECRET_MARKERS)
        }
    if isinstance(value, (list, tuple)):
        return [strip_secrets(v) for v in value]
    return value


def messages_payload(messages: Iterable[Message]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


def backend_identity(backend: ModelBackend) -> dict[str, Any]:
    """What keys a backend's answers: its `identity()` and, when it reports them, the
    long-context settings it applied (`ModelBackend.long_context`), so two runs that differ
    only by how the model was stretched to its window never share an answer; no secrets."""
    identity = backend.identity()
    settings = backend.long_context()
    if settings is not None:
        identity = {**identity, "long_context": settings.as_dict()}
    return strip_secrets(identity)


def request_key(identity: dict[str, Any], request: GenerationRequest) -> str:
    params = request.params.as_dict()
    if params["temperature"] == 0:
        # greedy decoding ignores the seed: several --seed values share one answer
        params.pop("seed")
    return canonical_hash(
        {
            "kind": "generate",
            "model": strip_secrets(identity),
            "messages": messages_payload(request.messages),
            "params": params,
        }
    )


class CachedModel:
    """A backend seen through the cache. The runner and model-calling judges both use it,
    so a judge's calls are cached and counted exactly like the system's.

    Thread-safe: the scheduler calls `call` from as many threads as the backend takes
    requests at once; every answer is stored the moment it exists, so an interrupt loses
    only the requests still in flight."""

    def __init__(self, backend: ModelBackend, cache: Cache, spec: str,
                 reasoning: ReasoningOptions | None = None, *, batcher: "Batcher | None" = None,
                 budget: Budget | None = None) -> None:
        self.backend = backend
        self.cache = cache
        self.spec = spec
        #: how the model's thinking is read (split off its answers, at which markers)
        self.reasoning = reasoning or ReasoningOptions()
        #: the provider's batch API, when this model's requests go through it (`--batch`)
        self.batcher = batcher
        #: what the model may spend (its own limit and the command's); None: counted only
        self.budget = budget
        self._price: Any = _UNSET
        self.usage = UsageCounters()
        self._marked = {"with": 0, "without": 0}
        #: the user declared the model thinks (the runner sets it from the backend's controls
        #: and the model's options): answers with no thinking at all are then an error
        self.expects_thinking = False
        self._identity = backend_identity(backend)
        #: contexts (`SharedPrefix.group`) one of whose requests has come back: the provider's
        #: prompt cache holds their shared part, so later requests read it
        self._primed: set[str] = set()
        self._lock = threading.Lock()
        self._busy = 0
        self._busy_since = 0.0

    @property
    def identity(self) -> dict[str, Any]:
        return self._identity

    @property
    def batching(self) -> bool:
        return self.batcher is not None

    @property
    def slots(self) -> int:
        """Calls in flight at once: the backend's declared `max_in_flight`, or `BATCH_CALLS`
        when the requests go through batches."""
        if self.batcher is not None:
            return BATCH_CALLS
        return max(1, int(getattr(self.backend, "max_in_flight", 1) or 1))

    @property
    def call_size(self) -> int:
        """Requests handed over in one call: one per call for a concurrent backend, the
        backend's `batch_size` for a sequential one, a whole batch's worth when batching."""
        if self.batcher is not None:
            return self.batcher.settings.max_requests
        return 1 if self.slots > 1 else max(1, int(self.backend.batch_size))

    @property
    def prefix_cache(self) -> PrefixCache:
        """What the scheduler plans the order of requests by. A batch API keeps no prefix
        between requests the engine could plan for: every request goes out at once."""
        if self.batcher is not None:
            return PrefixCache("none")
        return getattr(self.backend, "prefix_cache", PrefixCache())

    @property
    def per_prefix(self) -> int | None:
        return None if self.batcher is not None else getattr(self.backend, "max_in_flight_per_prefix", None)

    def price(self) -> Price | None:
        """The model's price as it is paid here (its batch price when batching), asked once."""
        if self._price is _UNSET:
            try:
                self._price = self.backend.price(batch=self.batching)
            except UserError:
                raise
            except Exception:  # noqa: BLE001 - a price that cannot be had is unknown
                self._price = None
        return self._price

    def limit_hit(self) -> dict[str, Any] | None:
        """The cost limit that stopped this model's requests, described, or None."""
        stopped = self.budget.stopped_by() if self.budget is not None else None
        return stopped.describe() if stopped is not None else None

    def _count(self, update: Any) -> None:
        """Apply `update` to the totals and to the current task's counters (lock held by caller)."""
        for counters in self.usage.scoped():
            update(counters)

    def key(self, request: GenerationRequest) -> str:
        return request_key(self._identity, request)

    def lookup(self, request: GenerationRequest) -> Generation | None:
        """The cached answer to `request`, or None (counted either way)."""
        if self._budgeted(request):
            return self._think_then_answer(request, ask=False)
        hit = self.cache.get(self.key(request))
        with self._lock:
            self._count(lambda u: setattr(u, "requests", u.requests + 1))
            if hit is not None:
                self._count(lambda u: setattr(u, "cache_hits", u.cache_hits + 1))
        if hit is None:
            return None
        return self._read(request, self._hit(request, hit))

    def _hit(self, request: GenerationRequest, record: dict[str, Any]) -> Generation:
        gen = Generation(**{**record, "request_id": request.request_id, "cached": True})
        paid = cost_of(gen, None)  # what it cost when it was paid, as recorded with it
        if paid is None and gen.finish_reason != "error":  # an answer cached before costs were kept
            paid = cost_of(gen, self.price())

        def update(u: UsageCounters) -> None:
            u.cached_prompt_tokens += int(gen.prompt_tokens or 0)
            u.cached_completion_tokens += int(gen.completion_tokens or 0)
            if paid is not None:
                u.cached_cost_usd += paid

        with self._lock:
            self._count(update)
        return gen

    # -- a reasoning model's thinking --------------------------------------------------------
    def _read(self, request: GenerationRequest, gen: Generation) -> Generation:
        """The generation as a run sees it: a thinking model's reasoning split off its answer
        at its markers (the cache keeps what the backend said, so other markers need no new
        answers), an answer whose thinking never closed marked as such, and counted. With
        `split_reasoning=false` the whole text is the answer, a reasoning the API returned
        apart put back in front of it between the model's markers (as the model wrote it)."""
        if gen.finish_reason != "error":
            gen = self._split(gen) if self.reasoning.split else self._joined(gen)
        if gen.finish_reason != "error" and gen.raw_text is None and gen.text != gen.text.strip():
            # backends return what the model wrote; runs see it stripped, and keep it as written
            gen = replace(gen, text=gen.text.strip(), raw_text=gen.text)
        if gen.finish_reason != "error":
            self._check_marked(request, gen)
        with self._lock:
            self._count(lambda u: u.add_thinking(gen))
        return gen

    def _split(self, gen: Generation) -> Generation:
        """Thinking in the text cut off at the markers, unless the API returned it apart (a
        hidden reasoning, "", does not stop a text that still opens one from being cut)."""
        if gen.reasoning:
            return gen
        text = gen.text
        if gen.extras.get("opened_thinking"):  # the template opened it: the text starts inside
            markers = self.reasoning.markers[0]
            text = text if text.lstrip().startswith(markers.open) else markers.open + text
        part = split_reasoning(text, self.reasoning.markers)
        if part.reasoning is None:
            return gen
        return replace(gen, text=part.answer, reasoning=part.reasoning,
                       reasoning_tokens=self._thought_tokens(gen, part.reasoning, part.closed),
                       finish_reason=gen.finish_reason if part.closed else "unclosed_thinking")

    def _thought_tokens(self, gen: Generation, reasoning: str, closed: bool) -> int | None:
        """Tokens of a thinking cut from the text, counted once: the server's own count where it
        gave one; all of the completion when the thinking never closed (nothing else was
        written); else the model's tokenizer's count of it, never more than the completion."""
        if gen.reasoning_tokens is not None:
            return gen.reasoning_tokens
        if not closed and gen.completion_tokens:
            return gen.completion_tokens
        counted = self._tokens(reasoning)
        return min(counted, gen.completion_tokens) if counted is not None and gen.completion_tokens else counted

    def _joined(self, gen: Generation) -> Generation:
        """`split_reasoning=false`: the whole text, scored as a model that does not think."""
        if gen.reasoning:
            markers = self.reasoning.markers[0]
            gen = replace(gen, text=f"{markers.open}{gen.reasoning}{markers.close}{gen.text}")
        finish = "length" if gen.finish_reason == "unclosed_thinking" else gen.finish_reason
        return replace(gen, reasoning=None, reasoning_tokens=None, finish_reason=finish)

    def _tokens(self, text: str) -> int | None:
        ids = self.backend.tokenize(text)
        return len(ids) if ids is not None else None

    def _check_marked(self, request: GenerationRequest, gen: Generation) -> None:
        """`--thinking on` (or a model declared to think: `reasoning=` on a server, markers of
        its own) promises thinking: three answers in a row with none, and none before them,
        means the markers are not the model's (or it does not think)."""
        declared = self.expects_thinking and request.params.thinking is not False
        if not (request.params.thinking is True or declared) or not self.reasoning.split:
            return
        with self._lock:
            self._marked["with" if gen.reasoning is not None else "without"] += 1
            silent = self._marked["with"] == 0 and self._marked["without"] >= 3
        if silent:
            shown = ", ".join(f"{m.open}...{m.close}" for m in self.reasoning.markers)
            name = self.spec.split(",")[0]  # its options (an api_base) are never echoed
            if request.params.thinking is True:
                raise UserError(f"the run says model '{name}' thinks (--thinking on), but its first answers hold "
                                f"no thinking between the markers looked for ({shown}) and none came apart",
                                field="--thinking",
                                hint="Name the model's own markers with the model option think_markers=OPEN|CLOSE, "
                                     "or drop --thinking on for a model that does not think.")
            raise UserError(f"model '{name}' is declared to think, but its first 3 answers hold no thinking "
                            f"between the markers looked for ({shown}) and none came apart", field="--model",
                            hint="Check think_markers= (or think_open=/think_close=) against what the model writes; "
                                 "a server started without a reasoning parser sends the thinking in the text "
                                 "(reasoning=inline), one with a parser apart (reasoning=separate).")

    def _budgeted(self, request: GenerationRequest) -> bool:
        return request.params.reasoning_budget is not None and not self.backend.handles_reasoning_budget

    def _think_then_answer(self, request: GenerationRequest, ask: bool) -> Generation | None:
        """A thinking budget the backend cannot enforce (`lceval.reasoning`): at most `budget`
        tokens of thinking, stopped at the closing marker; then the thinking closed (with
        EARLY_STOP when the budget ran out) as the start of the assistant's message, and the
        answer asked for with the answer's own `max_new_tokens`. Both requests go through the
        cache; with `ask=False` only the cache is read (None when either is missing)."""
        params = request.params
        markers = self.reasoning.markers[0]
        think = replace(request, params=replace(params, max_new_tokens=int(params.reasoning_budget or 0),
                                                stop=(markers.close,), reasoning_budget=None))
        first = self._one(think, ask)
        if first is None or first.finish_reason == "error":
            return first
        thought = first.text
        reached = first.finish_reason == "length"
        prefill = thought + (EARLY_STOP if reached else "") + markers.close + "\n\n"
        answer_request = replace(request, messages=[*request.messages, Message("assistant", prefill)],
                                 params=replace(params, reasoning_budget=None))
        second = self._one(answer_request, ask)
        if second is None or second.finish_reason == "error":
            return second
        reasoning = thought.lstrip()
        reasoning = reasoning[len(markers.open):] if reasoning.startswith(markers.open) else reasoning
        prefilled = (None if first.prefilled_tokens is None or second.prefilled_tokens is None
                     else first.prefilled_tokens + second.prefilled_tokens)
        answer = second.text.strip()
        gen = Generation(request_id=request.request_id, text=answer, prompt_tokens=first.prompt_tokens,
                         prefilled_tokens=prefilled, completion_tokens=first.completion_tokens + second.completion_tokens,
                         finish_reason=second.finish_reason, seconds=first.seconds + second.seconds,
                         extras={**second.extras, "thinking_budget_reached": reached},
                         cached=first.cached and second.cached, reasoning=reasoning.strip(),
                         reasoning_tokens=first.completion_tokens or self._tokens(reasoning),
                         raw_text=second.text if second.text != answer else None)
        with self._lock:
            self._count(lambda u: u.add_thinking(gen))
        self._check_marked(request, gen)
        return gen

    def _one(self, request: GenerationRequest, ask: bool) -> Generation | None:
        """One request, unsplit: from the cache, else (with `ask`) from the backend."""
        hit = self.cache.get(self.key(request))

        def update(u: UsageCounters) -> None:
            u.requests += not ask  # a lookup counts once, as any request's
            u.cache_hits += hit is not None

        with self._lock:
            self._count(update)
        if hit is not None:
            return self._hit(request, hit)
        return self._call([request])[0] if ask else None

    def call(self, requests: list[GenerationRequest]) -> list[Generation]:
        """Ask the backend (no cache lookup) and store each answer at once. Each request is
        claimed in the cache first: one another process is asking already is not asked
        again, its answer is awaited (and counted as a cache hit). A request the backend gave
        up on (finish_reason "error", an API past its retries) is no answer: never stored, so
        the same command run again asks it again. A thinking model's reasoning is split off
        the answers returned (the cache keeps them whole)."""
        if any(self._budgeted(r) for r in requests):
            return [self._think_then_answer(r, ask=True) if self._budgeted(r) else self.call([r])[0]  # type: ignore[misc]
                    for r in requests]
        return [self._read(r, gen) for r, gen in zip(requests, self._call(requests))]

    def _call(self, requests: list[GenerationRequest]) -> list[Generation]:
        keys = [self.key(r) for r in requests]
        outs: list[Generation | None] = [None] * len(requests)
        mine, theirs = [], []
        for i, key in enumerate(keys):
            claim = self.cache.claim(key)
            if claim == "claimed":
                mine.append(i)
            elif claim == "answered" and (record := self.cache.get(key)) is not None:
                outs[i] = self._served(requests[i], record)
            else:
                theirs.append(i)
        if mine:
            for i, gen in zip(mine, self._ask([requests[i] for i in mine], [keys[i] for i in mine])):
                outs[i] = gen
        for i in theirs:
            while outs[i] is None:
                record = self.cache.wait(keys[i])
                if record is not None:
                    outs[i] = self._served(requests[i], record)
                elif self.cache.claim(keys[i]) == "claimed":  # its claimer gave up or died: ours now
                    outs[i] = self._ask([requests[i]], [keys[i]])[0]
        return [gen for gen in outs if gen is not None]

    def _served(self, request: GenerationRequest, record: dict[str, Any]) -> Generation:
        """An answer another process generated while this one looked: a cache hit."""
        with self._lock:
            self._count(lambda u: setattr(u, "cache_hits", u.cache_hits + 1))
        return self._hit(request, record)

    def _ask(self, requests: list[GenerationRequest], keys: list[str]) -> list[Generation]:
        """Send the claimed `requests` (to the backend, or into batches) and store each answer
        at once. Under a cost limit they go in rounds: those whose estimate fits are reserved
        and sent; one that fits only once the answers in flight are back (they usually cost
        less than their bound) waits for them, and goes in the next round; one that would pass
        the limit even then is not sent (an error answer of kind "cost_limit", asked again by
        the next run)."""
        outs: list[Generation | None] = [None] * len(requests)
        reserved: list[float | None] = [None] * len(requests)
        caching = [self._caching(r) for r in requests]
        expects_read = [c is not None and self._is_primed(r) for r, c in zip(requests, caching)]
        costs: list[float | None] = [None] * len(requests)
        saved: list[float | None] = [0.0] * len(requests)
        pending = list(range(len(requests)))
        while pending:
            send, later = [], []
            for i in pending:
                request, key = requests[i], keys[i]
                if self.budget is None or (self.batcher is not None and self.batcher.adopts(key)):
                    send.append(i)
                    continue
                amount = self._estimate(request)
                # a request waits for the answers in flight only while this call holds no
                # reservation it has not sent yet (those could never come back)
                verdict = self.budget.reserve(amount, wait=not send)
                if verdict:
                    reserved[i] = amount
                    send.append(i)
                elif verdict is None:
                    later.append(i)
                else:
                    outs[i] = Generation(request_id=request.request_id, text="", finish_reason="error",
                                         extras={"error": {"kind": "cost_limit", "message": (
                                             f"not sent: {self.budget.stopped_by().name} reached"  # type: ignore[union-attr]
                                         )}})
                    self.cache.release(key)
            self._send(requests, keys, send, reserved, caching, outs, costs, saved)
            pending = later
        batched = self.batcher is not None
        with self._lock:
            for i, gen in enumerate(outs):
                assert gen is not None
                self._count(lambda u, gen=gen, cost=costs[i]: u.add(gen, cost, batched=batched))
                if gen.finish_reason != "error":  # sent and answered (a refused request is an error)
                    self._count(lambda u, i=i, gen=gen: _cache_use(u, expects_read[i], gen, saved[i]))
        return [gen for gen in outs if gen is not None]

    def _send(self, requests: list[GenerationRequest], keys: list[str], send: list[int],
              reserved: list[float | None], caching: list[PromptCaching | None], outs: list[Generation | None],
              costs: list[float | None], saved: list[float | None]) -> None:
        """One round of `_ask`: the requests `send` (indices) sent, their answers stored, put in
        `outs` with their costs and cache savings, and their reservations settled."""
        with self._lock:
            if self._busy == 0:
                self._busy_since = time.perf_counter()
            self._busy += len(send)
            self.usage.peak_in_flight = max(self.usage.peak_in_flight, self._busy)
        try:
            if self.batcher is not None:
                answers = self.batcher.ask([(keys[i], requests[i]) for i in send]) if send else []
            else:
                answers = self.backend.generate([requests[i] for i in send]) if send else []
        except BaseException:
            for i in send:  # another process may ask them now
                self.cache.release(keys[i])
                if self.budget is not None:
                    self.budget.settle(reserved[i], 0.0)
            raise
        finally:
            with self._lock:
                self._busy -= len(send)
                if self._busy == 0:
                    self.usage.seconds += time.perf_counter() - self._busy_since
        if len(answers) != len(send):
            raise RuntimeError(f"backend returned {len(answers)} answers for {len(send)} requests")
        price = self.price() if send else None
        for i, gen in zip(send, answers):
            outs[i] = gen
            if gen.finish_reason != "error":
                costs[i] = cost_of(gen, price)
                saved[i] = self._saved(gen, caching[i], price)
                shared = requests[i].shared
                if shared is not None:
                    with self._lock:
                        self._primed.add(shared.group)
                if costs[i] and "cost_usd" not in gen.extras:  # what it cost, kept with it (at today's price)
                    gen = outs[i] = replace(gen, extras={**gen.extras, "cost_usd": round(costs[i], 8)})
                if self.batcher is None:  # the batcher stored it the moment its batch ended
                    record = asdict(gen)
                    record.pop("cached", None)
                    self.cache.put(keys[i], "generate", record)
            else:
                self.cache.release(keys[i])
            if self.budget is not None:
                self.budget.settle(reserved[i], costs[i] if gen.finish_reason != "error" else 0.0)

    # -- a provider's prompt cache -------------------------------------------------------------
    def _caching(self, request: GenerationRequest) -> PromptCaching | None:
        if request.shared is None:
            return None
        try:
            return self.backend.prompt_caching(request, self.batching)
        except UserError:
            raise
        except Exception:  # noqa: BLE001 - a backend that cannot tell: nothing counted as cached
            return None

    def _is_primed(self, request: GenerationRequest) -> bool:
        """Whether an earlier request about the request's context came back (the provider's
        cache holds its shared part); never for a batch, whose requests are processed at once."""
        with self._lock:
            return request.shared is not None and request.shared.group in self._primed and not self.batching

    def _saved(self, gen: Generation, caching: PromptCaching | None, price: Price | None) -> float | None:
        """What the provider's prompt cache saved on `gen`, against its prompt at the input price
        (negative: its write cost more than no cache); None: its price is unknown."""
        if not (gen.cache_read_tokens or gen.cache_write_tokens):
            return 0.0
        at = caching.price if caching is not None else price
        if at is None:
            return None
        prompt, completion = int(gen.prompt_tokens or 0), int(gen.completion_tokens or 0)
        return at.cost(prompt, completion) - at.cost(prompt, completion, int(gen.cache_read_tokens or 0),
                                                     int(gen.cache_write_tokens or 0))

    def _estimate(self, request: GenerationRequest) -> float:
        """What the request may cost at most (its prompt counted or over-estimated, every
        answer token it may write) at the model's price, its shared part at the prompt cache's
        price where the provider caches it (`_spending.estimate`, the dry run's arithmetic)."""
        price = self.price()
        if price is None:
            return 0.0  # refused before the run started (`Session`): a limit needs a price
        return estimate(self.backend, request, price, self.batching, self._is_primed(request)).usd or 0.0

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        """Answers in the order asked (a thinking model's reasoning split off each): cached
        ones at once, the rest from the backend with as many in flight as it takes
        (`max_in_flight`), or in chunks of `batch_size`."""
        results: list[Generation | None] = [self.lookup(req) for req in requests]
        misses = [i for i, r in enumerate(results) if r is None]
        if self.batcher is not None and misses:  # one call: the batcher gathers them into batches
            for i, gen in zip(misses, self.call([requests[i] for i in misses])):
                results[i] = gen
            return [r for r in results if r is not None]
        slots = self.slots
        size = self.call_size
        chunks = [misses[start:start + size] for start in range(0, len(misses), size)]
        pool = Dispatcher(self.call, slots)
        for chunk in chunks:
            if pool.free() == 0:
                done, outs = pool.next()
                for i, gen in zip(done, outs):
                    results[i] = gen
            pool.submit(chunk, [requests[i] for i in chunk])
        while pool.in_flight:
            done, outs = pool.next()
            for i, gen in zip(done, outs):
                results[i] = gen
        return [r for r in results if r is not None]


def _cache_use(u: UsageCounters, expected_read: bool, gen: Generation, saved: float | None) -> None:
    """An answer's use of the provider's prompt cache, beside its tokens (`UsageCounters.add`)."""
    u.cache_saved_usd = None if saved is None or u.cache_saved_usd is None else u.cache_saved_usd + saved
    u.cache_writes += bool(gen.cache_write_tokens)
    if expected_read:
        u.cache_reads_expected += 1
        u.cache_reads_missed += not gen.cache_read_tokens
