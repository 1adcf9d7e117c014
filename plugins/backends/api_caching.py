"""Each API provider's prompt cache as the `litellm:` backend uses it: what it caches, from how
many tokens, for how long, at what price, and how a request tells it (`api_shapes` gives each
provider shape one of these). The engine hands every request about a context the part the
context's requests share (`SharedPrefix`); this module turns it into the provider's terms.

- Anthropic (Messages API, also Message Batches): caches only a prefix a request marks with a
  `cache_control` breakpoint (at most 4 per request; lceval places one, at the end of the shared
  part, where the questions start: the system message, the context and the instruction after
  it are cached, the question is not). A write
  costs 1.25x the input price for the 5-minute lifetime and 2x for the 1-hour one, a read 0.1x
  ("Prompt caching", Anthropic's docs). A prefix below the model family's minimum is not
  cached (`ANTHROPIC_MINIMUM`). The lifetime: `cache_ttl=5m|1h`, else 5 minutes unless the
  engine may leave a context unused longer than half of that (`SharedPrefix.reuse_within_s`:
  long answers, thinking, a batch), then 1 hour. A context asked so few times that the write's
  premium outweighs the reads (twice with the 1-hour lifetime) is not marked.
- OpenAI: caches every prompt of 1,024 tokens or more by itself, in 128-token steps, reads at
  the model's cached-input price (50-90% off), writes nothing extra; `prompt_cache_key` (one per
  context) routes a context's requests to the machines that hold it; `cache_ttl=24h` asks for
  its extended retention (`prompt_cache_retention`).
- Gemini 2.5 and later: implicit caching, on by default, reads at 10% of the input price with
  no write premium and no storage fee. Google also offers explicit caches (`cachedContents`):
  the same read discount, the first write at the input price too, plus a storage fee per hour,
  and the cached part must be whole messages. For a run that sends a context's questions
  together, within minutes, the implicit cache is the cheaper one Google documents (no storage
  fee, nothing to create or delete), and it is served by the order lceval already sends: the
  context first, its questions next to each other. So lceval uses it and sends nothing more.
- DeepSeek: an automatic disk cache (64-token units), read at the map's cache-hit price.

Everything else (a server of one's own, providers lceval knows nothing particular about) has
no cache lceval prices: `prompt_cache=on` is refused there.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from lceval.errors import UserError
from lceval.interfaces import Price, PromptCaching
from lceval.types import SharedPrefix

#: characters per token when the shared part's size decides whether the provider caches it, the
#: model lends no tokenizer and the provider has no token-count endpoint (or it failed): the last
#: resort, generous (an under-count), so a part is never taken as cached when the provider would
#: find it below its minimum (`api_token_counts`: Anthropic's and Gemini's counts come first)
CHARS_PER_TOKEN = 6.0
#: Anthropic's minimum cacheable prompt length per model family ("Prompt caching", Anthropic's
#: docs), first match wins; a family not listed takes the map's `prompt_cache_min_tokens`, else
#: the largest (a part is never taken as cached below the minimum)
ANTHROPIC_MINIMUM = (
    ("opus-4-5", 4096), ("opus-4-6", 4096), ("haiku-4-5", 4096),
    ("sonnet-4-6", 2048), ("3-5-haiku", 2048), ("3-haiku", 2048), ("haiku-3", 2048),
    ("sonnet-4-5", 1024), ("opus-4-1", 1024), ("opus-4", 1024), ("sonnet-4", 1024),
    ("3-7-sonnet", 1024), ("3-5-sonnet", 1024), ("3-opus", 1024),
)
#: Gemini's minimum input for context caching ("Context caching", Google's docs)
GEMINI_MINIMUM = (("gemini-2.5", 2048), ("gemini-3", 4096), ("gemini-4", 4096))
LARGEST_MINIMUM = 4096
#: Anthropic's cache lifetimes, seconds, and what a write costs against the input price
ANTHROPIC_LIFETIMES = {"5m": (300.0, 1.25), "1h": (3600.0, 2.0)}
ANTHROPIC_READ = 0.1
#: Gemini 2.5 and later: a cached token costs a tenth of an input token
GEMINI_READ = 0.1
OPENAI_MINIMUM = 1024
DEEPSEEK_MINIMUM = 64


class ProviderCache:
    """A provider's prompt cache as lceval uses it; this base is none."""

    #: the mechanism in words (the console, errors); "" for none
    how = ""
    #: the lifetimes `cache_ttl` may ask for
    lifetimes: tuple[str, ...] = ()
    #: the request marks its shared part (else the provider finds it itself)
    marked = False
    #: what a read costs against the input price when neither the map nor the user says
    read_ratio: float | None = None
    #: the provider's token-count endpoint (`api_token_counts.COUNTERS`), None: it has none
    counter: str | None = None

    def __init__(self, model: str, options: dict[str, Any], litellm: Any) -> None:
        self.model = model
        self.options = options
        self.litellm = litellm

    def why_none(self) -> str:
        """Why there is no cache to use (for `prompt_cache=on`)."""
        return "lceval knows no prompt cache of this provider it could price"

    def minimum(self) -> int:
        """The fewest tokens the provider caches."""
        return LARGEST_MINIMUM

    def lifetime(self, reuse_within_s: float) -> str | None:
        """The lifetime a request asks for, when its context may go unused `reuse_within_s`
        seconds (`SharedPrefix.reuse_within_s`); None: the provider's own."""
        return self.options.get("cache_ttl")

    def write_ratio(self, lifetime: str | None) -> float:
        """What a cache write costs against the input price (1: nothing extra)."""
        return 1.0

    def map_write_key(self, lifetime: str | None) -> str | None:
        """The map's field for a write's price (None: writes cost the input price)."""
        return None

    def mark(self, body: dict[str, Any], shared: SharedPrefix, lifetime: str | None) -> None:
        """Tell the provider about the shared part in a chat body litellm sends (and the wire)."""

    def check(self, api: str) -> None:
        """UserError for the model options this cache cannot honour, before any request."""
        wanted, ttl = self.options.get("prompt_cache", "auto"), self.options.get("cache_ttl")
        if wanted == "on" and not self.how:
            raise UserError(f"prompt_cache=on: {api} has no prompt cache lceval can use ({self.why_none()})",
                            field="prompt_cache", hint="Drop prompt_cache=on (auto uses a provider's cache where it "
                                                       "has one).")
        if ttl is not None and wanted == "off":
            raise UserError(f"cache_ttl={ttl} with prompt_cache=off: there is no cache entry to keep",
                            field="cache_ttl")
        if ttl is not None and ttl not in self.lifetimes:
            offered = (f"offers {' or '.join(self.lifetimes)}" if self.lifetimes else
                       "has no lifetime to choose" if self.how else "is not there")
            raise UserError(f"cache_ttl={ttl}: the prompt cache of {api} {offered}", field="cache_ttl",
                            hint="Leave cache_ttl out: lceval picks the lifetime from how long it takes to send a "
                                 "context's questions.")
        for name in ("cache_read_cost_per_mtok", "cache_write_cost_per_mtok"):
            if name in self.options and ("input_cost_per_mtok" not in self.options
                                         or "output_cost_per_mtok" not in self.options):
                raise UserError(f"{name} is a price beside input_cost_per_mtok and output_cost_per_mtok, which are "
                                "not both given", field=name)


class Anthropic(ProviderCache):
    how = "Anthropic's cache breakpoints"
    lifetimes = tuple(ANTHROPIC_LIFETIMES)
    marked = True
    read_ratio = ANTHROPIC_READ
    counter = "anthropic"

    def minimum(self) -> int:
        name = self.model.rsplit("/", 1)[-1]
        for family, tokens in ANTHROPIC_MINIMUM:
            if family in name:
                return tokens
        return _map_minimum(self.litellm, self.model) or LARGEST_MINIMUM

    def lifetime(self, reuse_within_s: float) -> str | None:
        chosen = self.options.get("cache_ttl")
        if chosen is not None:
            return str(chosen)
        short = ANTHROPIC_LIFETIMES["5m"][0]
        # an entry lives `short` seconds from its last use; half of it leaves room for retries
        return "5m" if reuse_within_s <= short / 2 else "1h"

    def write_ratio(self, lifetime: str | None) -> float:
        return ANTHROPIC_LIFETIMES[lifetime or "5m"][1]

    def map_write_key(self, lifetime: str | None) -> str | None:
        return "cache_creation_input_token_cost_above_1hr" if lifetime == "1h" else "cache_creation_input_token_cost"

    def mark(self, body: dict[str, Any], shared: SharedPrefix, lifetime: str | None) -> None:
        messages = body["messages"]
        if shared.message < len(messages):
            messages[shared.message] = marked_message(messages[shared.message], shared.chars, lifetime)


class Automatic(ProviderCache):
    """A cache the provider keeps by itself (OpenAI, Gemini's implicit one, DeepSeek): no write
    premium; lceval only keeps the shared part first and byte-identical, as it always does."""

    def __init__(self, model: str, options: dict[str, Any], litellm: Any, how: str, minimum: int,
                 read_ratio: float | None = None, lifetimes: tuple[str, ...] = (), keyed: bool = False,
                 counter: str | None = None) -> None:
        super().__init__(model, options, litellm)
        self.how, self._minimum, self.read_ratio, self.counter = how, minimum, read_ratio, counter
        self.lifetimes, self.keyed = lifetimes, keyed

    def minimum(self) -> int:
        return self._minimum

    def mark(self, body: dict[str, Any], shared: SharedPrefix, lifetime: str | None) -> None:
        if self.keyed:  # OpenAI: the context's requests routed to the machines that cache it
            body["prompt_cache_key"] = "lceval-" + hashlib.sha256(shared.group.encode()).hexdigest()[:24]
            if lifetime == "24h":  # litellm 1.106 passes it only inside extra_body
                body.setdefault("extra_body", {})["prompt_cache_retention"] = "24h"


class NoCache(ProviderCache):
    def __init__(self, model: str, options: dict[str, Any], litellm: Any, why: str = "") -> None:
        super().__init__(model, options, litellm)
        self._why = why

    def why_none(self) -> str:
        return self._why or super().why_none()


def openai_cache(model: str, options: dict[str, Any], litellm: Any) -> ProviderCache:
    return Automatic(model, options, litellm, "OpenAI's automatic prompt cache", OPENAI_MINIMUM,
                     lifetimes=("24h",), keyed=True)


def gemini_cache(model: str, options: dict[str, Any], litellm: Any) -> ProviderCache:
    name = model.rsplit("/", 1)[-1]
    for family, tokens in GEMINI_MINIMUM:
        if name.startswith(family) or f"/{family}" in model:
            return Automatic(model, options, litellm, "Gemini's implicit cache", tokens, read_ratio=GEMINI_READ,
                             counter="gemini")
    return NoCache(model, options, litellm, "Gemini caches implicitly from its 2.5 models on; lceval does not create "
                                            "explicit caches")


def deepseek_cache(model: str, options: dict[str, Any], litellm: Any) -> ProviderCache:
    return Automatic(model, options, litellm, "DeepSeek's automatic disk cache", DEEPSEEK_MINIMUM)


def marked_message(message: dict[str, Any], chars: int, lifetime: str | None) -> dict[str, Any]:
    """`message` with a cache breakpoint after its first `chars` characters: its text as two
    blocks, the first marked (the second, the question, left out of the cache)."""
    text = message["content"]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text[:chars], "cache_control": cache_control(lifetime)}]
    if text[chars:]:
        blocks.append({"type": "text", "text": text[chars:]})
    return {**message, "content": blocks}


def cache_control(lifetime: str | None) -> dict[str, Any]:
    """Anthropic's marker; the 5-minute lifetime is its default, so `ttl` is sent for the
    1-hour one only (the request any Claude endpoint takes without it)."""
    return {"type": "ephemeral", **({"ttl": lifetime} if lifetime and lifetime != "5m" else {})}


def shared_tokens(count: int | None, text_chars: int) -> int:
    """The shared part's tokens for the provider's minimum: a count (a lent tokenizer's, the
    provider's), else an under-count by characters."""
    return count if count is not None else math.floor(text_chars / CHARS_PER_TOKEN)


def cache_price(base: Price, cache: ProviderCache, lifetime: str | None, batch: bool, info: dict[str, Any] | None,
                options: dict[str, Any], factor: float) -> Price:
    """`base` (the model's price, direct or batch) with its cache prices at `lifetime`: the
    user's (`cache_read/write_cost_per_mtok`, or their input price at the map's or the
    provider's ratio), else litellm's map (its `_batches` prices, else `factor` of the direct
    ones), else the provider's documented ratio; a read with no price anywhere costs the input."""
    read: float | None = None
    write: float | None = None
    user = "input_cost_per_mtok" in options
    if info and not user:
        read = _per_mtok(info, "cache_read_input_token_cost", batch, factor)
        key = cache.map_write_key(lifetime)
        write = _per_mtok(info, key, batch, factor) if key else None
    if "cache_read_cost_per_mtok" in options:
        read = float(options["cache_read_cost_per_mtok"]) * (factor if batch else 1.0)
    if "cache_write_cost_per_mtok" in options:
        write = float(options["cache_write_cost_per_mtok"]) * (factor if batch else 1.0)
    ratio = _map_ratio(info) if info and user else None
    if read is None:
        ratio = ratio if ratio is not None else cache.read_ratio
        read = base.input_per_mtok * ratio if ratio is not None else base.input_per_mtok
    if write is None:
        write = base.input_per_mtok * cache.write_ratio(lifetime)
    return Price(base.input_per_mtok, base.output_per_mtok, cache_read_per_mtok=read, cache_write_per_mtok=write)


def caching_of(cache: ProviderCache, shared: SharedPrefix, price: Price, tokens: int) -> PromptCaching | None:
    """The request's use of the cache (`price` with its cache prices): None when switched off,
    below the minimum, and where writing the part costs more than its later reads save
    (`shared.requests` requests: one write, the rest reads)."""
    if not cache.how or cache.options.get("prompt_cache", "auto") == "off" or tokens < cache.minimum():
        return None
    read = price.cache_read_per_mtok if price.cache_read_per_mtok is not None else price.input_per_mtok
    write = price.cache_write_per_mtok if price.cache_write_per_mtok is not None else price.input_per_mtok
    if write + (shared.requests - 1) * read >= shared.requests * price.input_per_mtok:
        return None
    return PromptCaching(price=price, lifetime=cache.lifetime(shared.reuse_within_s), marked=cache.marked)


def _per_mtok(info: dict[str, Any], key: str, batch: bool, factor: float) -> float | None:
    if batch and info.get(f"{key}_batches") is not None:
        return float(info[f"{key}_batches"]) * 1e6
    value = info.get(key)
    return None if value is None else float(value) * 1e6 * (factor if batch else 1.0)


def _map_ratio(info: dict[str, Any]) -> float | None:
    """The map's cache-read price against its input price (the provider's discount for the model)."""
    read, plain = info.get("cache_read_input_token_cost"), info.get("input_cost_per_token")
    return float(read) / float(plain) if read is not None and plain else None


def _map_minimum(litellm: Any, model: str) -> int | None:
    try:
        value = litellm.get_model_info(model).get("prompt_cache_min_tokens")
    except Exception:  # noqa: BLE001 - a model the map does not hold
        return None
    return int(value) if value else None
