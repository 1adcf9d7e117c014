"""The providers' prompt caches as their documentation describes them, and what each charges,
for the local servers that speak their wire formats (tests/provider_servers.py for direct
requests, tests/batch_server.py for Message Batches). Written from the providers' docs, not from
lceval's code, so a test can hold lceval's bill against the provider's arithmetic:

- Anthropic ("Prompt caching"): a request caches only the prefix ending at a block marked with
  `cache_control` ({"type": "ephemeral", "ttl": "5m" | "1h"}; more than 4 marked blocks is a
  400); a prefix below the model's minimum is not cached; an entry written by one request is
  read by a later one with the same prefix within its lifetime, counted from its last use. A
  write is billed at 1.25x the input price (5 minutes) or 2x (1 hour), a read at 0.1x, through
  the batch API at half of each. usage: `input_tokens` (the rest), `cache_creation_input_tokens`,
  `cache_read_input_tokens`, `cache_creation.ephemeral_5m_input_tokens` / `..._1h_...`.
- OpenAI ("Prompt caching"): automatic for prompts of 1,024 tokens or more; the part of a prompt
  that a recent one (used within 5 minutes) began with is cached in 128-token steps;
  `usage.prompt_tokens_details.cached_tokens`, billed at the model's cached-input price.
- Gemini ("Context caching", implicit): automatic from the model's minimum (2,048 tokens on 2.5);
  the prefix a recent request shared, `usageMetadata.cachedContentTokenCount` (left out when
  nothing was read), billed at 10% of the input price.

A token is four characters of the request's text as the provider lays it out (roles, then each
block's text in order); Anthropic's and Gemini's token-count endpoints count the same way
(`count_anthropic`, `count_gemini`; `counted` says how often they were asked). `bills` holds
each request's charge in USD; `now` is the clock (a test moves it to let entries expire).
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

#: USD per million tokens as the providers list them: input, output, cache read, and a cache
#: write for 5 minutes and 1 hour (None: writes are not billed apart)
PRICES: dict[str, tuple[float, float, float, float | None, float | None]] = {
    "claude-sonnet-4-5": (3.0, 15.0, 0.30, 3.75, 6.0),
    "claude-haiku-4-5": (1.0, 5.0, 0.10, 1.25, 2.0),
    #: a Claude model litellm's price map does not hold (lceval knows no price for it)
    "claude-unpriced-1": (3.0, 15.0, 0.30, 3.75, 6.0),
    "gpt-4.1": (2.0, 8.0, 0.50, None, None),
    "gemini-2.5-flash": (0.30, 2.50, 0.03, None, None),
}
MINIMUM = {"claude-sonnet-4-5": 1024, "claude-haiku-4-5": 4096, "claude-unpriced-1": 1024,
           "gpt-4.1": 1024, "gemini-2.5-flash": 2048}
LIFETIMES = {"5m": 300.0, "1h": 3600.0}
#: how long OpenAI's and Gemini's automatic caches keep a prefix unused (OpenAI: 5-10 minutes)
AUTOMATIC_LIFETIME = 300.0
OPENAI_STEP = 128
CHARS_PER_TOKEN = 4


def tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _common_chars(a: str, b: str) -> int:
    """Length of the common prefix of two strings (bisection on C-speed slice comparisons)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _anthropic_text(body: dict[str, Any]) -> tuple[str, list[tuple[str, dict[str, Any]]], list[int]]:
    """A Messages body laid out as the ledger counts it: its text, its blocks (role, block) and
    where each block ends in the text."""
    blocks: list[tuple[str, dict[str, Any]]] = []
    system = body.get("system")
    for block in ([{"type": "text", "text": system}] if isinstance(system, str) else system or []):
        blocks.append(("system", block))
    for message in body.get("messages") or []:
        content = message["content"]
        for block in ([{"type": "text", "text": content}] if isinstance(content, str) else content):
            blocks.append((message["role"], block))
    text, ends = "", []
    for role, block in blocks:
        text += f"<{role}>" + str(block.get("text") or "")
        ends.append(len(text))
    return text, blocks, ends


def _gemini_text(body: dict[str, Any]) -> str:
    system = body.get("systemInstruction") or body.get("system_instruction") or {}
    parts = [("system", p) for p in system.get("parts") or []]
    parts += [(c.get("role"), p) for c in body.get("contents") or [] for p in c.get("parts") or []]
    return "".join(f"<{role}>" + str(p.get("text") or "") for role, p in parts)


class Refusal(Exception):
    """A request the provider refuses (400) with this message."""


@dataclass
class Bill:
    model: str
    usd: float
    uncached: int
    read: int
    written: int
    output: int
    batch: bool = False


@dataclass
class CacheLedger:
    now: Callable[[], float] = time.monotonic
    #: Anthropic: prefix digest -> (expires at, tokens, lifetime)
    entries: dict[str, tuple[float, int, str]] = field(default_factory=dict)
    #: OpenAI and Gemini: recent prompts, (last used, model, text)
    recent: list[list[Any]] = field(default_factory=list)
    bills: list[Bill] = field(default_factory=list)
    #: the `prompt_cache_key` of each OpenAI request
    keys: list[str | None] = field(default_factory=list)
    #: False: the provider serves nothing from its caches (and bills every prompt in full)
    enabled: bool = True
    #: requests to a token-count endpoint
    counted: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def total(self) -> float:
        return sum(b.usd for b in self.bills)

    def _bill(self, model: str, uncached: int, read: int, written: int, output: int, lifetime: str | None = None,
              batch: bool = False) -> None:
        pin, pout, pread, w5, w1 = PRICES[model]
        write = (w1 if lifetime == "1h" else w5) or pin
        usd = (uncached * pin + read * pread + written * write + output * pout) / 1e6 * (0.5 if batch else 1.0)
        self.bills.append(Bill(model, usd, uncached, read, written, output, batch))

    # -- Anthropic ---------------------------------------------------------------------------
    def anthropic(self, model: str, body: dict[str, Any], output: int, batch: bool = False) -> dict[str, Any]:
        """The usage of a Messages request (and its charge in `bills`)."""
        text, blocks, ends = _anthropic_text(body)
        marks = [i for i, (_, b) in enumerate(blocks) if "cache_control" in b]
        if len(marks) > 4:
            raise Refusal("A maximum of 4 blocks with cache_control may be provided. Found " + str(len(marks)) + ".")
        total = tokens(text)
        read = written = 0
        lifetime = None
        with self.lock:
            for i in reversed(marks):  # the longest marked prefix decides
                control = blocks[i][1]["cache_control"]
                lifetime = control.get("ttl", "5m")
                if control.get("type") != "ephemeral" or lifetime not in LIFETIMES:
                    raise Refusal("cache_control.ttl: Input should be '5m' or '1h'")
                prefix = text[:ends[i]]
                size = tokens(prefix)
                if size < MINIMUM[model] or not self.enabled:
                    continue
                key = hashlib.sha256(prefix.encode()).hexdigest()
                entry = self.entries.get(key)
                if entry is not None and entry[0] > self.now():
                    read = size
                    lifetime = entry[2]
                else:
                    written = size
                self.entries[key] = (self.now() + LIFETIMES[lifetime], size, lifetime)
                break
            self._bill(model, total - read - written, read, written, output, lifetime, batch)
        return {"input_tokens": total - read - written, "output_tokens": output,
                "cache_creation_input_tokens": written, "cache_read_input_tokens": read,
                "cache_creation": {"ephemeral_5m_input_tokens": written if lifetime == "5m" else 0,
                                   "ephemeral_1h_input_tokens": written if lifetime == "1h" else 0}}

    # -- the providers' token-count endpoints ----------------------------------------------------
    def count_anthropic(self, body: dict[str, Any]) -> dict[str, Any]:
        """`POST /v1/messages/count_tokens`: the prompt's tokens as a Messages request lays it out."""
        with self.lock:
            self.counted += 1
        return {"input_tokens": tokens(_anthropic_text(body)[0])}

    def count_gemini(self, body: dict[str, Any]) -> dict[str, Any]:
        """`POST .../models/MODEL:countTokens` (a `generateContentRequest`, or bare `contents`)."""
        with self.lock:
            self.counted += 1
        return {"totalTokens": tokens(_gemini_text(body.get("generateContentRequest") or body))}

    # -- OpenAI and Gemini: automatic -----------------------------------------------------------------
    def _automatic(self, model: str, text: str, step: int) -> int:
        """Tokens of `text` a recent prompt of the model began with (0 below the minimum)."""
        now = self.now()
        best, used = 0, None
        self.recent = [r for r in self.recent if r[0] + AUTOMATIC_LIFETIME > now]
        for entry in self.recent:
            if entry[1] == model:
                shared = _common_chars(entry[2], text) // CHARS_PER_TOKEN
                if shared > best:
                    best, used = shared, entry
        cached = best // step * step
        if cached < MINIMUM[model] or not self.enabled:
            cached = 0
        elif used is not None:
            used[0] = now
        self.recent.append([now, model, text])
        return min(cached, tokens(text))

    def openai(self, model: str, body: dict[str, Any], output: int, batch: bool = False) -> dict[str, Any]:
        text = "".join(f"<{m['role']}>" + (m["content"] if isinstance(m["content"], str) else
                                           "".join(str(p.get("text") or "") for p in m["content"]))
                       for m in body.get("messages") or [])
        with self.lock:
            self.keys.append(body.get("prompt_cache_key"))
            total = tokens(text)
            cached = self._automatic(model, text, OPENAI_STEP)
            self._bill(model, total - cached, cached, 0, output, batch=batch)
        return {"prompt_tokens": total, "completion_tokens": output, "total_tokens": total + output,
                "prompt_tokens_details": {"cached_tokens": cached}}

    def gemini(self, model: str, body: dict[str, Any], output: int) -> dict[str, Any]:
        """The prompt's part of a generateContent answer's usageMetadata (`output`: its tokens,
        thoughts included, billed at the output price)."""
        text = _gemini_text(body)
        with self.lock:
            total = tokens(text)
            cached = self._automatic(model, text, 1)
            self._bill(model, total - cached, cached, 0, output)
        usage = {"promptTokenCount": total}
        if cached:  # Gemini's JSON leaves a count of zero out
            usage["cachedContentTokenCount"] = cached
        return usage
