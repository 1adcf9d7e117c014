"""The providers' own token counts of a prompt, for what their prompt cache decides by size: a
context's shared part is cached only from the provider's minimum (`api_caching`), and a part
near it must be counted as the provider counts it, not guessed. Without a lent tokenizer, an API
model's tokens are the provider's to count, and two providers count them for free:

- Anthropic: `POST /v1/messages/count_tokens` with the Messages body's `model`, `system` and
  `messages`, answering `{"input_tokens": N}` ("Token counting", Anthropic's docs);
- Gemini: `POST {api_base}/models/MODEL:countTokens` (the base as litellm takes it, by default
  `https://generativelanguage.googleapis.com/v1beta`) with a `generateContentRequest` (its
  `contents` and `systemInstruction`), answering `{"totalTokens": N}` ("Count tokens", Google's
  Gemini API reference).

OpenAI has no such endpoint; its contexts are sized by a lent tokenizer or, as a last resort,
by characters (`api_caching.CHARS_PER_TOKEN`, said once on the console and in the backend's
stats). Our own small HTTP client (`batch_apis._Client`), so a count never goes through litellm
(which would price it as a completion).
"""

from __future__ import annotations

from typing import Any

from .batch_apis import ANTHROPIC_VERSION, _Client

ANTHROPIC_BASE = "https://api.anthropic.com"
GEMINI_BASE = "https://generativelanguage.googleapis.com/v1beta"
#: seconds a count may take: it decides a cache marker, and the estimate is there if it fails
TIMEOUT_S = 20.0


def anthropic_tokens(base: str | None, key: str | None, model: str, messages: list[dict[str, str]]) -> int:
    """Anthropic's count of `messages` (a system message goes to `system`, as the Messages API
    takes it)."""
    headers = {"anthropic-version": ANTHROPIC_VERSION, **({"x-api-key": key} if key else {})}
    client = _Client((base or ANTHROPIC_BASE).removesuffix("/v1"), headers, TIMEOUT_S, "Anthropic")
    system = "".join(m["content"] for m in messages if m["role"] == "system")
    body: dict[str, Any] = {"model": model, "messages": [m for m in messages if m["role"] != "system"]
                            or [{"role": "user", "content": ""}]}
    if system:
        body["system"] = system
    return int(client.json("POST", "/v1/messages/count_tokens", body)["input_tokens"])


def gemini_tokens(base: str | None, key: str | None, model: str, messages: list[dict[str, str]]) -> int:
    """Gemini's count of `messages` (a system message as its `systemInstruction`)."""
    headers = {"x-goog-api-key": key} if key else {}
    client = _Client(base or GEMINI_BASE, headers, TIMEOUT_S, "Gemini")
    system = "".join(m["content"] for m in messages if m["role"] == "system")
    contents = [{"role": "model" if m["role"] == "assistant" else "user", "parts": [{"text": m["content"]}]}
                for m in messages if m["role"] != "system"]
    request: dict[str, Any] = {"model": f"models/{model}", "contents": contents}
    if system:
        request["systemInstruction"] = {"parts": [{"text": system}]}
    reply = client.json("POST", f"/models/{model}:countTokens", {"generateContentRequest": request})
    return int(reply["totalTokens"])


#: the count endpoint of each provider that has one (`ProviderCache.counter`)
COUNTERS = {"anthropic": anthropic_tokens, "gemini": gemini_tokens}
