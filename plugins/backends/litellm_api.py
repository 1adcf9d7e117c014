"""`litellm:` backend: hosted and self-hosted chat APIs (OpenAI, Anthropic, any
OpenAI-compatible server such as `python -m llama_cpp.server` or vLLM) through litellm.

An API is slow, rate-limited and unreliable where a local model is not, so this backend
owns three things the others do not need:

- a persistent pool: it declares `max_in_flight = concurrency`, and the engine keeps that many
  requests in flight, refilling a slot the moment a request finishes and storing each answer
  at once (an interrupt loses only the requests in flight). The engine sends a transcript's
  requests adjacently, one first (the primer), so a provider's prompt cache holds the
  transcript when the others arrive; `prefix_cache` and `cache_tokens` tell the engine what
  the server keeps (`shared` by default: OpenAI, Anthropic, vLLM and SGLang keep many
  prefixes; `last-prompt` for llama.cpp's server);
- retries: a failure's kind comes from its HTTP status and the provider's error type
  (`api_calls.classify`); 429, 5xx, timeouts, connection errors and malformed bodies are
  retried with exponential backoff and full jitter (AWS "Exponential Backoff and Jitter"),
  honouring `Retry-After`; 400, a content filter's refusal and a context past the window are not
  retried (recorded as failed, with a hint where one is known), 401/403/404 stop the run with a
  UserError (every other request would fail the same way);
- honest accounting: `stats()` counts attempts, retries, errors by kind, failures, and the
  tokens and cost of successful responses only. A request that fails past its retry budget
  becomes a Generation with `finish_reason="error"`, which the cache does not store, so a
  rerun asks it again. Tokens prefilled are the prompt minus the cached prompt tokens the
  provider reports (`usage.prompt_tokens_details.cached_tokens`, which litellm also fills
  from Anthropic's cache reads); a server that reports none (llama.cpp's) leaves them unknown
  (None), never the whole prompt. Sampling parameters left at a neutral value (top_p and
  repeat_penalty 1.0) are not sent unless `explicit_sampling=true`: `stats()["sampling"]`
  says which values were sent and which were left to the server's own default.

Prompt caches (`api_caching`, model options `prompt_cache`, `cache_ttl`): every request about a
context carries the part the context's requests share (`request.shared`); the backend marks it
for Anthropic (a `cache_control` breakpoint), keys it for OpenAI (`prompt_cache_key`), and counts
what each provider reports it read from and wrote into its cache (`Generation.cache_read_tokens`,
`cache_write_tokens`), priced at the provider's cache prices (`price()`, `prompt_caching()`).

Batches (`--batch`, or the model option `batch=true`; the engine gathers, records, polls and
resumes them, docs/judging-at-scale.md): OpenAI's Batch API for `openai/` models (and any
OpenAI-compatible server at `api_base` that speaks `/v1/batches`, as vLLM's does), Anthropic's
Message Batches for `anthropic/` models (`batch_apis`, our own small HTTP client). `price()`
gives the model's price from the user's `input/output_cost_per_mtok` or litellm's bundled
map, and the batch price as the providers charge it (the map's `*_batches` prices, else
`batch_price_factor` times the direct ones: half).

Secrets: the API key comes only from the environment (the provider's usual variable, or the
one named by `api_key_env`); a key on the command line is refused. `identity()` (in every
cache key and in manifests) holds the model name and the api_base without credentials.

litellm is imported only inside functions, with its remote cost map and telemetry off.
"""

from __future__ import annotations

import logging
import math
import os
import random
import threading
import time
from typing import Any, Callable

from lceval import hookimpl
from lceval.errors import UserError
from lceval.interfaces import BatchAPI, ModelBackend, PrefixCache, Price, PromptCaching, ReasoningControls, requires
from lceval.types import Generation, GenerationRequest, Message

from .api_caching import CHARS_PER_TOKEN, ProviderCache, cache_price, caching_of, shared_tokens
from .api_calls import (FATAL_KINDS, FINAL_KINDS, RETRY_AFTER_CAP_S, ApiStats, SamplingRecord, classify,
                        environment_secrets, hint_of, map_price, read_reply, reasoning_tokens_of, reported_cache_writes,
                        reported_cached_tokens, retry_after_seconds, scrub)
from .api_shapes import Anthropic, Shape, shape_of
from .api_token_counts import COUNTERS

from .litellm_options import OPTIONS, SCHEME, _api_base, check_model_name, import_litellm, parse_options

__all__ = ["OPTIONS", "SCHEME", "LiteLLMBackend", "_api_base", "check_model_name", "import_litellm", "make_litellm",
           "parse_options", "register_models"]


_UNASKED = object()
log = logging.getLogger("lceval.litellm")


class LiteLLMBackend(ModelBackend):
    """One API model; the engine calls `generate` from up to `concurrency` threads at once."""

    batch_size = 1

    def __init__(self, model: str, options: dict[str, str]) -> None:
        self._setup(check_model_name(model), parse_options(options, model))

    def _setup(self, model: str, options: dict[str, Any]) -> None:
        """Shared with the fleet, whose options arrive checked against its schema."""
        self.model = model
        self.options = options
        self.concurrency: int = self.options["concurrency"]
        self.max_in_flight = self.concurrency
        capacity = self.options.get("cache_tokens")
        self.prefix_cache = PrefixCache(self.options["prefix_cache"],
                                        capacity if self.options["prefix_cache"] == "shared" else None)
        self.context_window = self.options.get("context_window")
        self.api_base: str | None = self.options.get("api_base")
        #: a server of the user's own (needs no key); the fleet's servers are
        self.self_hosted = self.api_base is not None
        self._stats = ApiStats()
        self._sampling = SamplingRecord()
        self._stop = threading.Event()
        self._rng = random.Random()
        self._litellm: Any = None
        self._shape: Shape | None = None
        self._controls: ReasoningControls | None = None
        self._cache: ProviderCache | None = None
        self._info: Any = _UNASKED
        self._tokenizer_backend: ModelBackend | None = None
        #: the shared part's tokens per context (`_shared_size`), and how many were sized which way
        self._sizes: dict[tuple[str, int, int], int] = {}
        self._sizing: dict[str, int] = {}
        self._sizing_lock = threading.Lock()
        #: why the provider's token count is not asked (None: it is)
        self._counting: str | None = None
        self._said_estimate = False
        #: waits `seconds` unless the batch is being abandoned; tests replace it
        self.sleep: Callable[[float], Any] = self._stop.wait

    # -- ModelBackend ----------------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        ident: dict[str, Any] = {"scheme": SCHEME, "model": self.model, "api_base": self.api_base}
        return {**ident, **self._sampling_identity()}

    def _sampling_identity(self) -> dict[str, Any]:
        """What changes which sampling parameters the server applies (not how it is reached)."""
        ident: dict[str, Any] = {}
        if self.options.get("thinking_switch", "enable_thinking") != "enable_thinking":
            ident["thinking_switch"] = self.options["thinking_switch"]
        if "repeat_penalty_field" in self.options:
            ident["repeat_penalty_field"] = self.options["repeat_penalty_field"]
        if self.options.get("explicit_sampling"):
            ident["explicit_sampling"] = True
        return ident

    def stats(self) -> dict[str, Any]:
        """The request counters, the sampling sent, and how contexts were sized for the
        provider's prompt cache (contexts per way: a tokenizer, the provider's count, characters)."""
        out = {**self._stats.as_dict(), "sampling": self._sampling.as_dict()}
        if self._sizing:
            out["cache_sizing"] = dict(self._sizing)
        return out

    # -- prices and batches ----------------------------------------------------------------
    def price(self, batch: bool = False) -> Price | None:
        """The user's per-million-token prices, else litellm's bundled map; a batch at the
        map's batch price, else at `batch_price_factor` of the direct one; with the provider's
        prompt-cache prices (`api_caching.cache_price`) at the lifetime a direct request or a
        batch asks for by default. None: unknown."""
        return self._price_at(batch, self.cache.lifetime(math.inf if batch else 0.0))

    def _price_at(self, batch: bool, lifetime: str | None) -> Price | None:
        factor = self.options.get("batch_price_factor", 0.5) if batch else 1.0
        pin, pout = self.options.get("input_cost_per_mtok"), self.options.get("output_cost_per_mtok")
        info = self._map_info()
        if pin is not None or pout is not None:
            base: Price | None = Price((pin or 0.0) * factor, (pout or 0.0) * factor)
        else:
            base = map_price(info, batch, factor) if info is not None else None
        if base is None or not self.cache.how:
            return base
        return cache_price(base, self.cache, lifetime, batch, info, self.options, factor)

    def _map_info(self) -> dict[str, Any] | None:
        """The model's entry in litellm's map, asked once (every request's price reads it)."""
        if self._info is _UNASKED:
            litellm = self._import()
            try:
                self._info = dict(litellm.get_model_info(self.model))
            except UserError:
                raise
            except Exception:  # noqa: BLE001 - a model litellm's map does not hold
                self._info = None
            # litellm makes up an entry, prices of 0 included, for a Claude model its map lacks:
            # a price it does not know is unknown, never free
            made_up = self._info is not None and self._info.get("key") is not None \
                and self._info["key"] not in getattr(litellm, "model_cost", {})
            if made_up:
                self._info = None
        return self._info  # type: ignore[return-value]

    # -- the provider's prompt cache (`api_caching`) ---------------------------------------------
    @property
    def cache(self) -> ProviderCache:
        """The provider's prompt cache, its options checked (once, before any request)."""
        if self._cache is None:
            self.reasoning_controls()  # the shape's checks, the cache options among them
            self._cache = self.shape.cache()
        return self._cache

    def prompt_caching(self, request: GenerationRequest, batch: bool = False) -> PromptCaching | None:
        use, priced = self._cache_plan(request, batch)
        return use if priced else None

    def _cache_plan(self, request: GenerationRequest, batch: bool) -> tuple[PromptCaching | None, bool]:
        """How the request uses the provider's cache (None: it does not; it is then not marked),
        and whether its price is known (an unknown one decides at the provider's ratios)."""
        shared, cache = request.shared, self.cache
        if shared is None or not cache.how:
            return None, False
        lifetime = cache.lifetime(shared.reuse_within_s)
        known = self._price_at(batch, lifetime)
        price = known or cache_price(Price(1.0, 1.0), cache, lifetime, batch, None, {}, 1.0)
        return caching_of(cache, shared, price, self._shared_size(shared, request)), known is not None

    def _shared_size(self, shared: Any, request: GenerationRequest) -> int:
        """The shared part's tokens, for the provider's minimum: the lent tokenizer's count, else
        the provider's own (`api_token_counts`, once per context), else an under-count by
        characters, the last resort, said once (a warning, and `stats()["cache_sizing"]`)."""
        key = (shared.group, shared.message, shared.chars)
        with self._sizing_lock:  # one count per context, however many threads ask at once
            if key not in self._sizes:
                self._sizes[key] = self._size(shared, request)
            return self._sizes[key]

    def _size(self, shared: Any, request: GenerationRequest) -> int:
        head = shared.head(request.messages)
        count, how = self.count_tokens(head), "the lent tokenizer"
        counter = COUNTERS.get(self.cache.counter or "") if self._counting is None else None
        if count is None and counter is not None:
            name = self.model.split("/", 1)[1] if "/" in self.model else self.model
            env = ("ANTHROPIC_API_KEY",) if self.cache.counter == "anthropic" else ("GEMINI_API_KEY", "GOOGLE_API_KEY")
            secret = self._api_key() or next((os.environ[e] for e in env if os.environ.get(e)), None)
            try:
                if secret is None:  # the provider would refuse it (a dry run without a key)
                    raise RuntimeError(f"no API key to ask it with ({' or '.join(env)})")
                count = counter(self.api_base, secret, name, [{"role": m.role, "content": m.content} for m in head])
                how = "the provider's token count"
            except Exception as exc:  # noqa: BLE001 - no count to be had: the estimate below, said
                # one failure says the endpoint is not there for this run
                self._counting = f"its token count failed: {scrub(str(exc)[:200], environment_secrets())}"
        chars = sum(len(m.content) for m in head)
        if count is None:
            how = f"estimated at {CHARS_PER_TOKEN:g} characters a token"
            # said where the estimate may decide wrongly: a part that even at 2 characters a
            # token is below the minimum, or at 6 above it, is on the same side counted
            if shared_tokens(None, chars) < self.cache.minimum() <= chars / 2 and not self._said_estimate:
                self._said_estimate = True
                why = self._counting or ("it lends no tokenizer and its provider has no token count"
                                         if self.cache.counter is None else "no token count")
                log.warning("litellm: %s: %s, so its contexts are sized for the prompt cache's minimum (%d tokens) at "
                            "%g characters a token, an under-count: a context near the minimum may go unmarked "
                            "and pay full price (give tokenizer=... to count them)", self.model, why,
                            self.cache.minimum(), CHARS_PER_TOKEN)
        self._sizing[how] = self._sizing.get(how, 0) + 1
        return shared_tokens(count, chars)

    def batch_protocol(self) -> str | None:
        """"openai", "anthropic" or None: which batch API this model has."""
        chosen = self.options.get("batch_api", "auto")
        if chosen != "auto":
            return None if chosen == "none" else chosen
        provider = self.model.split("/", 1)[0] if "/" in self.model else ""
        return provider if provider in ("openai", "anthropic") else None

    def batch_api(self) -> BatchAPI | None:
        from .batch_apis import AnthropicBatches, OpenAIBatches

        protocol = self.batch_protocol()
        if protocol is None:
            return None
        name = self.model.split("/", 1)[1] if "/" in self.model else self.model
        timeout = float(self.options["timeout"])
        if protocol == "openai":
            key = self._api_key() or os.environ.get("OPENAI_API_KEY") or None
            return OpenAIBatches(self.api_base or "https://api.openai.com/v1", key, name, self._batch_body,
                                 lambda: self.price(batch=True), timeout=timeout)
        key = self._api_key() or os.environ.get("ANTHROPIC_API_KEY") or None
        return AnthropicBatches(self.api_base or "https://api.anthropic.com", key, name, self._messages_body,
                                lambda: self.price(batch=True), timeout=timeout)

    def _batch_body(self, request: GenerationRequest) -> dict[str, Any]:
        """A request as the chat completions body the provider's HTTP API takes (what litellm
        would have sent: its `extra_body` fields at the top level, its names for the fields)."""
        return self.shape.wire(self._payload(request, batch=True))

    def _messages_body(self, request: GenerationRequest) -> dict[str, Any]:
        """A request in Anthropic's Messages terms (its batch API's lines), with its cache
        breakpoint where the shared part ends."""
        shape = self.shape
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        if isinstance(shape, Anthropic):
            use, _ = self._cache_plan(request, batch=True)
            mark = ((request.shared.message, request.shared.chars, use.lifetime)  # type: ignore[union-attr]
                    if use is not None and use.marked else None)
            return shape.messages_body(request.params, messages, mark)
        return Anthropic(self.model, self.options, self._import()).messages_body(request.params, messages)

    # -- a reasoning model: what its provider's API takes (`api_shapes`) ------------------------
    @property
    def shape(self) -> Shape:
        """The provider's request rules and reasoning controls, chosen once from the model name
        and options (a fleet's servers are servers of one's own)."""
        if self._shape is None:
            local = self._local_tokenizer
            self._shape = shape_of(self.model, self.options, self.self_hosted, self._import(),
                                   local_thinks=lambda: (t.thinks() if (t := local()) is not None else None))
        return self._shape

    @property  # type: ignore[override]
    def handles_reasoning_budget(self) -> bool:
        """Anthropic's and Gemini's APIs take a thinking budget; others take an effort, or (a
        server of one's own) nothing that ends a model's thinking."""
        return self.reasoning_controls().budget == "api"

    def thinks(self) -> bool | None:
        return self.reasoning_controls().thinks

    def reasoning_controls(self) -> ReasoningControls:
        """The provider's controls, asked of litellm's map once (every request reads them)."""
        if self._controls is None:
            shape = self.shape
            shape.check()
            self._controls = shape.controls()
        return self._controls

    # -- tokenizer: only with tokenizer=..., the model's own (an API hides it) -------------
    def _local_tokenizer(self) -> ModelBackend | None:
        """A local backend of the same model used only for its tokenizer and chat template
        (never to generate), so the context policy can cut inputs precisely."""
        spec = self.options.get("tokenizer")
        if spec is None:
            return None
        if self._tokenizer_backend is None:
            scheme, _, name = spec.partition(":")
            if scheme == "llamacpp":
                from .llamacpp import make_llamacpp

                self._tokenizer_backend = make_llamacpp(name, {})
            else:
                from .hf import make_hf

                self._tokenizer_backend = make_hf(name, {})
        return self._tokenizer_backend

    def count_tokens(self, messages: list[Message]) -> int | None:
        local = self._local_tokenizer()
        return local.count_tokens(messages) if local is not None else None

    def tokenize(self, text: str) -> list[int] | None:
        local = self._local_tokenizer()
        return local.tokenize(text) if local is not None else None

    def detokenize(self, tokens: list[int]) -> str:
        local = self._local_tokenizer()
        if local is None:
            return super().detokenize(tokens)
        return local.detokenize(tokens)

    def close(self) -> None:
        self._stop.set()  # retries still sleeping give up: the run is over
        if self._tokenizer_backend is not None:
            self._tokenizer_backend.close()
            self._tokenizer_backend = None

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        """Answers in order, one after the other in the calling thread: the engine runs up to
        `max_in_flight` calls at once, each on its own thread (see `lceval.dispatch`)."""
        if not requests:
            return []
        litellm = self._import()
        base = self._base_kwargs(litellm)
        return [self._one(litellm, base, r) for r in requests]

    # -- internals -------------------------------------------------------------------------
    def _import(self) -> Any:
        if self._litellm is None:
            litellm = import_litellm()
            try:
                litellm.get_llm_provider(self.model, api_base=self.api_base)
            except Exception as exc:  # noqa: BLE001  (litellm raises BadRequestError here)
                raise UserError(f"litellm does not know the provider of model '{self.model}' "
                                f"({str(exc).splitlines()[0][:200]})", field="--model",
                                hint="Write PROVIDER/MODEL, e.g. litellm:openai/gpt-4o or "
                                     "litellm:anthropic/claude-3-5-sonnet-20241022.") from None
            self._litellm = litellm
        return self._litellm

    def _api_key(self) -> str | None:
        name = self.options.get("api_key_env")
        if name is None:
            return None
        value = os.environ.get(name)
        if not value:
            raise UserError(f"environment variable {name} (api_key_env) is not set or empty",
                            field="api_key_env", hint=f"export {name}=... before running.")
        return value

    def _base_kwargs(self, litellm: Any) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model, "timeout": self.options["timeout"],
            # we retry ourselves (counted, with Retry-After); neither litellm nor the SDK may
            "num_retries": 0, "max_retries": 0,
            # a parameter the provider lacks (seed for Anthropic) is dropped, not an error
            "drop_params": True,
        }
        if self.api_base is not None:
            kwargs["api_base"] = self.api_base
        key = self._api_key()
        if key is not None:
            kwargs["api_key"] = key
        elif self.self_hosted and self.model.startswith("openai/") \
                and not os.environ.get("OPENAI_API_KEY"):
            # a local OpenAI-compatible server needs no key, but the SDK refuses to send none
            kwargs["api_key"] = "no-key"
        return kwargs

    def _payload(self, request: GenerationRequest, batch: bool = False) -> dict[str, Any]:
        params = request.params
        explicit = bool(self.options.get("explicit_sampling"))
        body: dict[str, Any] = {
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "max_tokens": params.max_new_tokens, "temperature": params.temperature,
            "seed": params.seed,
        }
        if params.top_p != 1.0 or explicit:
            # 1.0 is every API's default; some (recent Claude models) refuse top_p beside temperature
            body["top_p"] = params.top_p
        if params.stop:
            body["stop"] = list(params.stop)
        self.shape.shape(params, body)
        name = self.options.get("repeat_penalty_field") or ("repeat_penalty" if explicit else None)
        if name is not None:
            # named: sent on every request, 1.0 included, so no server default applies
            body.setdefault("extra_body", {})[name] = params.repeat_penalty
        elif params.repeat_penalty != 1.0:
            raise UserError(
                f"repeat_penalty={params.repeat_penalty} has no equivalent in the OpenAI-style "
                "chat API (frequency_penalty is additive and count-based, not the same thing)",
                field="generation.repeat_penalty",
                hint="Set it to 1.0, or name the server's body field with "
                     "repeat_penalty_field=repetition_penalty (vLLM) or repeat_penalty (llama.cpp).")
        self._sampling.note(params, body, penalty_field=name)
        use, _ = self._cache_plan(request, batch)
        if use is not None:  # the shared part marked, or the provider's key for it
            self.cache.mark(body, request.shared, use.lifetime)  # type: ignore[arg-type]
        return body

    def _secrets(self, base: dict[str, Any]) -> list[str]:
        key = base.get("api_key")
        return ([key] if isinstance(key, str) and key != "no-key" else []) + environment_secrets()

    def _one(self, litellm: Any, base: dict[str, Any], request: GenerationRequest) -> Generation:
        payload = self._payload(request)
        start = time.perf_counter()
        budget = self.options["max_retries"]
        attempt = 0
        while True:
            if self._stop.is_set():
                raise RuntimeError("run abandoned")
            self._stats.bump("attempts")
            where = self._acquire(request)
            sent = time.perf_counter()
            try:
                response = litellm.completion(**base, **self._route_kwargs(where), **payload)
                text, finish, reasoning = read_reply(response)
            except Exception as exc:  # noqa: BLE001  (every failure is classified below)
                kind = classify(exc, litellm)
                moved = self._release(where, kind, time.perf_counter() - sent)
                if kind == "internal":
                    raise
                self._stats.bump("errors", kind)
                message = scrub(f"{type(exc).__name__}: {exc}", self._secrets(base))
                if kind in FATAL_KINDS:
                    raise self._fatal(kind, message) from None
                if moved:
                    # its server is gone: asked again on another one at once, off the budget
                    self._stats.bump("retries")
                    continue
                if kind in FINAL_KINDS or attempt >= budget:
                    return self._failed(request, kind, message, attempt + 1, start)
                delay = self._delay(attempt, retry_after_seconds(exc))
                self._stats.bump("retries")
                self._stats.bump("slept_s", amount=delay)
                attempt += 1
                self.sleep(delay)
                continue
            except BaseException:
                self._release(where, "interrupted", time.perf_counter() - sent)
                raise
            self._release(where, None, time.perf_counter() - sent)
            return self._succeeded(request, response, text, finish, attempt + 1, start, litellm, reasoning)

    # -- where a request goes: one server here; the fleet overrides these three ------------
    def _acquire(self, request: GenerationRequest) -> Any:
        """Reserve a place for one attempt at `request` (blocking while none is free)."""
        return None

    def _route_kwargs(self, where: Any) -> dict[str, Any]:
        """Extra litellm arguments for the attempt (another api_base)."""
        return {}

    def _release(self, where: Any, failure: str | None, seconds: float) -> bool:
        """The attempt is over (`failure`: its kind, or None when it succeeded). True when
        the request should be asked again elsewhere at once (its server died)."""
        return False

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Full jitter: uniform in [0, min(max, base * 2^attempt)]; a server's Retry-After wins."""
        if retry_after is not None:
            return min(retry_after, RETRY_AFTER_CAP_S)
        cap = min(self.options["backoff_max"], self.options["backoff_base"] * (2 ** attempt))
        return self._rng.uniform(0.0, cap)

    def _succeeded(self, request: GenerationRequest, response: Any, text: str, finish: str,
                   attempts: int, start: float, litellm: Any, reasoning: str | None = None) -> Generation:
        usage = getattr(response, "usage", None)
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion = int(getattr(usage, "completion_tokens", 0) or 0)
        thought = self.shape.reported_reasoning_tokens(reasoning_tokens_of(usage))
        cached, written = self.shape.cache_tokens(reported_cached_tokens(usage), reported_cache_writes(usage))
        cost = self._cost(request, response, (prompt, completion, cached or 0, written or 0), litellm)
        stats = self._stats
        with stats.lock:
            stats.succeeded += 1
            stats.prompt_tokens += prompt
            stats.completion_tokens += completion
            stats.cached_prompt_tokens += cached or 0
            if cached is None:
                stats.responses_without_cached_tokens += 1
            if cost is None:
                stats.responses_without_cost += 1
            else:
                stats.cost_usd += cost
        extras: dict[str, Any] = {"attempts": attempts}
        if cost is not None:
            extras["cost_usd"] = round(cost, 8)
        if thought:
            with stats.lock:
                stats.reasoning_tokens += thought
        # a thinking the API returned apart, or one it hid and counted (OpenAI's reasoning models:
        # "" and its tokens); a text that opens its thinking itself is split by the engine
        reasoning = reasoning if reasoning is not None else ("" if thought else None)
        if reasoning is not None and finish == "length" and not text.strip():
            finish = "unclosed_thinking"  # the token limit ran out while it still thought: no answer
        return Generation(request_id=request.request_id, text=text, prompt_tokens=prompt,
                          prefilled_tokens=None if cached is None else max(0, prompt - cached),
                          completion_tokens=completion,
                          finish_reason=finish, seconds=time.perf_counter() - start, extras=extras,
                          reasoning=reasoning, reasoning_tokens=thought, cache_read_tokens=cached,
                          cache_write_tokens=written)

    def _cost(self, request: GenerationRequest, response: Any, tokens: tuple[int, int, int, int],
              litellm: Any) -> float | None:
        """The user's per-million-token prices win (the cache's reads and writes at their cache
        prices); then litellm's bundled price map, which prices them too; else unknown (never
        a guess)."""
        if "input_cost_per_mtok" in self.options or "output_cost_per_mtok" in self.options:
            lifetime = self.cache.lifetime(request.shared.reuse_within_s if request.shared else 0.0)
            price = self._price_at(False, lifetime)
            return price.cost(*tokens) if price is not None else None
        try:
            cost = litellm.completion_cost(completion_response=response)
        except Exception:  # noqa: BLE001  (unknown model: litellm raises)
            return None
        return float(cost) if cost else None

    def _failed(self, request: GenerationRequest, kind: str, message: str, attempts: int,
                start: float) -> Generation:
        self._stats.bump("failed")
        self._stats.bump("failed_by_kind", kind)
        error: dict[str, Any] = {"kind": kind, "message": message, "attempts": attempts}
        hint = hint_of(kind, message, self.options.get("api_key_env"))
        if hint is not None:
            error["hint"] = hint
        return Generation(request_id=request.request_id, text="", finish_reason="error",
                          seconds=time.perf_counter() - start, extras={"error": error})

    def _fatal(self, kind: str, message: str) -> UserError:
        if kind == "auth":
            env = self.options.get("api_key_env")
            hint = (f"Check the key in ${env}." if env else
                    "Set the provider's key variable (e.g. OPENAI_API_KEY, ANTHROPIC_API_KEY) "
                    "or name one with api_key_env=NAME.")
            return UserError(f"no usable credentials for model '{self.model}' ({message})",
                             field="--model", hint=hint)
        return UserError(f"the API does not know model '{self.model}' ({message})", field="--model",
                         hint="Check the model name and api_base.")


@requires("litellm", install="pip install 'lceval[api]'")
def make_litellm(model: str, options: dict[str, str]) -> LiteLLMBackend:
    return LiteLLMBackend(model, options)


@hookimpl
def register_models(register: Callable[[str, Any], None]) -> None:
    register(SCHEME, make_litellm, options_schema=OPTIONS)

