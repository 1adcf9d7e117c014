"""What a backend calling a remote API needs whatever the client library: the kind of a
failed attempt (retry, give up, or stop the run), the server's Retry-After, error texts
with no credential left in them, thread-safe per-run accounting, and what an OpenAI-style
response says beside its text (cached prompt tokens, the reasoning and its tokens, which
sampling values were sent)."""

from __future__ import annotations

import email.utils
import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from lceval.errors import FAILURE_KINDS, NOT_RETRIED
from lceval.interfaces import Price

#: Kinds of failed attempts (`lceval.errors.FAILURE_KINDS`): retried with backoff, given up on
#: (the same request fails again: recorded as failed), or stopping the run (every request would
#: fail the same way).
RETRYABLE_KINDS = tuple(k for k in FAILURE_KINDS if k not in NOT_RETRIED)
FATAL_KINDS = ("auth", "not_found")
FINAL_KINDS = tuple(k for k in NOT_RETRIED if k not in FATAL_KINDS)
#: a provider's error type (OpenAI's `error.type`/`code`, Anthropic's `error.type`, Gemini's
#: `error.status`) -> kind, where the HTTP status alone does not tell
ERROR_TYPES = {
    "invalid_request_error": "bad_request", "INVALID_ARGUMENT": "bad_request", "FAILED_PRECONDITION": "bad_request",
    "authentication_error": "auth", "permission_error": "auth", "invalid_api_key": "auth",
    "UNAUTHENTICATED": "auth", "PERMISSION_DENIED": "auth",
    "not_found_error": "not_found", "model_not_found": "not_found", "NOT_FOUND": "not_found",
    "rate_limit_error": "rate_limit", "rate_limit_exceeded": "rate_limit", "RESOURCE_EXHAUSTED": "rate_limit",
    "api_error": "server", "overloaded_error": "server", "server_error": "server", "INTERNAL": "server",
    "UNAVAILABLE": "server", "timeout_error": "timeout", "DEADLINE_EXCEEDED": "timeout",
    "content_filter": "content_filter", "content_policy_violation": "content_filter",
}
#: Longest Retry-After honoured; a server asking for more is waited on this long per retry.
RETRY_AFTER_CAP_S = 600.0
ERROR_TEXT_MAX = 500


class MalformedResponse(Exception):
    """A 200 answer we cannot use (no choices, no message): retried like a server error."""


@dataclass
class ApiStats:
    """Per-run accounting, thread-safe. Tokens and cost count successful responses only, so
    nothing is charged twice however many attempts a request took."""

    attempts: int = 0  # HTTP requests sent
    succeeded: int = 0
    retries: int = 0
    failed: int = 0  # requests given up (past the retry budget, or not retryable)
    errors: dict[str, int] = field(default_factory=dict)  # failed attempts by kind
    failed_by_kind: dict[str, int] = field(default_factory=dict)  # last error of failed requests
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: of the completion tokens, those a reasoning model thought (where the API says)
    reasoning_tokens: int = 0
    cached_prompt_tokens: int = 0
    #: successful responses that said nothing about cached prompt tokens (prefill unknown)
    responses_without_cached_tokens: int = 0
    cost_usd: float = 0.0
    responses_without_cost: int = 0
    slept_s: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def bump(self, name: str, kind: str | None = None, amount: float = 1) -> None:
        with self.lock:
            if kind is None:
                setattr(self, name, getattr(self, name) + amount)
            else:
                table = getattr(self, name)
                table[kind] = table.get(kind, 0) + int(amount)

    def as_dict(self) -> dict[str, Any]:
        with self.lock:
            return {
                "attempts": self.attempts, "succeeded": self.succeeded, "retries": self.retries,
                "failed": self.failed, "errors": dict(sorted(self.errors.items())),
                "failed_by_kind": dict(sorted(self.failed_by_kind.items())),
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "cached_prompt_tokens": self.cached_prompt_tokens,
                "responses_without_cached_tokens": self.responses_without_cached_tokens,
                # a partial sum would understate the bill: unknown as soon as one price is
                "cost_usd": (round(self.cost_usd, 8) if self.responses_without_cost == 0 else None),
                "responses_without_cost": self.responses_without_cost,
                "backoff_seconds": round(self.slept_s, 3),
            }


def retry_after_seconds(exc: BaseException) -> float | None:
    """`Retry-After` of the failed response (seconds or an HTTP date), wherever litellm or the
    openai SDK kept the headers."""
    candidates: list[Any] = []
    response = getattr(exc, "response", None)
    candidates.append(getattr(response, "headers", None))
    candidates.append(getattr(exc, "litellm_response_headers", None))
    candidates.append(getattr(exc, "headers", None))
    for headers in candidates:
        if not headers:
            continue
        try:
            value = headers.get("retry-after") or headers.get("Retry-After")
        except Exception:  # noqa: BLE001  (a header container we do not know)
            continue
        if value is None:
            continue
        value = str(value).strip()
        try:
            return max(0.0, float(value))
        except ValueError:
            pass
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            continue
        return max(0.0, when.timestamp() - time.time())
    return None


def kind_of_status(status: int | None, error_type: str | None = None) -> str | None:
    """The kind of a failure the provider answered with HTTP `status` and its error type
    (None: neither tells). The type decides where it is more precise than the status (a 400
    that is a content filter's refusal, a 403 that is a rate limit)."""
    named = ERROR_TYPES.get(str(error_type or ""))
    if named is not None and named != "bad_request":
        return named
    if not isinstance(status, int) or status < 400:
        return named
    if status == 429:
        return "rate_limit"
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "not_found"
    if status == 408:
        return "timeout"
    return "server" if status >= 500 else "bad_request"


def classify(exc: BaseException, litellm: Any) -> str:
    """The kind of a failed attempt; decides retry, failure or stop. "internal" (not an API
    error at all, e.g. a bug) is re-raised rather than retried."""
    if isinstance(exc, MalformedResponse):
        return "malformed"
    if not _is_api_error(exc):
        return "internal"
    text = str(exc).lower()
    status = getattr(exc, "status_code", None)
    if re.search(r"missing[^.]{0,40}(credentials|api[ _-]?key)|api_key client option must be set", text):
        # no key at all: litellm reports it as a 500 of its own
        return "auth"
    if _looks_malformed(text) and not (isinstance(status, int) and status < 500):
        # litellm reports a 200 body it cannot parse as an InternalServerError of its own
        return "malformed"
    if _lost_connection(exc):
        # litellm reports a refused or dropped connection as a 500 of its own; the server never
        # answered (a fleet moves such a request to another server)
        return "connection"
    checks = [
        ("Timeout", "timeout"),
        ("RateLimitError", "rate_limit"),
        ("AuthenticationError", "auth"),
        ("PermissionDeniedError", "auth"),
        ("NotFoundError", "not_found"),
        ("ContentPolicyViolationError", "content_filter"),
        ("ContextWindowExceededError", "context_window"),
        ("InternalServerError", "server"),
        ("ServiceUnavailableError", "server"),
        ("BadGatewayError", "server"),
    ]
    for name, kind in checks:
        cls = getattr(litellm, name, None)
        if isinstance(cls, type) and isinstance(exc, cls):
            return kind
    answered = _answered_status(exc)
    if answered is not None and 400 <= answered < 500:
        # the server's own 4xx, wherever in the chain it is (litellm maps an answer it cannot
        # parse to an APIConnectionError of its own, a 500: a 400 is no connection error)
        return _content_filter(text) or kind_of_status(answered, _error_type(exc)) or "bad_request"
    if isinstance(status, int) and 400 <= status < 500:
        return _content_filter(text) or kind_of_status(status, _error_type(exc)) or "bad_request"
    if isinstance(status, int) and status >= 500 and not _catch_all(exc, litellm):
        return "server"
    if "timed out" in text or "timeout" in text:
        return "timeout"
    return "server" if _catch_all(exc, litellm) else "connection"


def _content_filter(text: str) -> str | None:
    """A 400 that is a provider's content filter refusing the prompt (Azure OpenAI's
    `code: content_filter`, OpenAI's `content_policy_violation`)."""
    return "content_filter" if re.search(r"content[_ ](filter|policy|management)", text) else None


def _answered_status(exc: BaseException) -> int | None:
    """The HTTP status the server answered with, from the first exception in the chain that
    holds a response (httpx's, the SDK's), or from the text of litellm's catch-all error
    ("Error code: 400", "status_code: 400"); None when no server answered."""
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            break
        response = getattr(seen, "response", None)
        code = getattr(response, "status_code", None)
        if isinstance(code, int) and code >= 400:
            return code
        seen = seen.__cause__ or seen.__context__
    found = re.search(r"(?:error code|status[_ ]code|http)[\"':= ]+([45]\d\d)\b", str(exc), re.IGNORECASE)
    return int(found.group(1)) if found else None


def _error_type(exc: BaseException) -> str | None:
    """The provider's error code or type (`content_filter`, `rate_limit_error`, `NOT_FOUND`),
    from the SDK's parsed body or the response's JSON, wherever in the chain it is."""
    import json

    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            return None
        body = getattr(seen, "body", None)
        if not isinstance(body, dict):
            try:
                body = json.loads(getattr(getattr(seen, "response", None), "text", "") or "null")
            except (ValueError, TypeError):
                body = None
        for _ in range(3):  # {"error": {...}}, Anthropic's {"type": "error", "error": {...}}
            if isinstance(body, dict) and isinstance(body.get("error"), dict):
                body = body["error"]
        if isinstance(body, dict):
            for name in ("code", "type", "status"):
                if isinstance(body.get(name), str) and body[name] in ERROR_TYPES:
                    return str(body[name])
        seen = seen.__cause__ or seen.__context__
    return None


def _catch_all(exc: BaseException, litellm: Any) -> bool:
    """litellm's APIConnectionError: what it raises for any failure it does not map (a 500 of
    its own), not only for a lost connection (that one `_lost_connection` finds in the chain)."""
    cls = getattr(litellm, "APIConnectionError", None)
    return isinstance(cls, type) and isinstance(exc, cls)


def _lost_connection(exc: BaseException) -> bool:
    """Whether the exception's chain holds a connection that was refused, reset or closed
    before a response (not a timeout: a slow server may still be alive). litellm's own
    APIConnectionError is its catch-all, so only what it wraps tells."""
    import httpx
    import openai

    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            return False
        if isinstance(seen, (openai.APITimeoutError, httpx.TimeoutException, TimeoutError)):
            return False
        if isinstance(seen, (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError,
                             ConnectionError)):
            return True
        if isinstance(seen, openai.APIConnectionError) and not type(seen).__module__.startswith("litellm"):
            return True  # the SDK's own: raised only when no response came
        seen = seen.__cause__ or seen.__context__
    return False


def _is_api_error(exc: BaseException) -> bool:
    import httpx
    import openai

    return isinstance(exc, (openai.OpenAIError, httpx.HTTPError, ConnectionError, TimeoutError))


def _looks_malformed(text: str) -> bool:
    return any(s in text for s in ("expecting value", "jsondecodeerror", "json decode",
                                   "unterminated string", "extra data", "'choices' that is not"))


def hint_of(kind: str, message: str, key_variable: str | None = None) -> str | None:
    """What to do about a failure of `kind`, where it is known: recorded beside the error and
    said by the run's failure summary. `key_variable`: the variable the key came from."""
    text = message.lower()
    if kind == "bad_request" and ("cache_control" in text or "prompt_cache" in text):
        return ("the server refuses the prompt-cache marks lceval adds: run the model with the option "
                "prompt_cache=off")
    if kind == "auth":
        where = f"${key_variable}" if key_variable else "the provider's key variable (OPENAI_API_KEY, ANTHROPIC_API_KEY ...)"
        return f"check the key in {where}, or name another variable with api_key_env=NAME"
    if kind == "rate_limit":
        return "lower the model option concurrency=N, or raise max_retries=N"
    if kind == "context_window":
        return "cut the context: --context-policy truncate-middle, or the model option context_window=N"
    if kind == "bad_request" and "reasoning_effort" in text:
        return "drop --reasoning-effort: this model or server does not take it"
    return None


def scrub(text: str, secrets: list[str]) -> str:
    """Error texts go into samples.jsonl: no key may survive in them, whole or masked."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    text = re.sub(r"\b(sk|pk|key)-[A-Za-z0-9*_\-]{6,}", r"\1-***", text)
    return text[:ERROR_TEXT_MAX]


def environment_secrets() -> list[str]:
    """Values of variables that look like credentials (OPENAI_API_KEY, HF_TOKEN ...)."""
    markers = ("KEY", "TOKEN", "SECRET", "PASSWORD")
    return [v for k, v in os.environ.items() if any(m in k.upper() for m in markers) and len(v) >= 8]


# -- what an OpenAI-style response says (litellm's objects or plain JSON) --------------------

def reported_cached_tokens(usage: Any) -> int | None:
    """Prompt tokens the provider says it served from its prompt cache, or None when it says
    nothing (no `prompt_tokens_details`, or no count in it): unknown, not zero."""
    details = getattr(usage, "prompt_tokens_details", None)
    if details is None and isinstance(usage, dict):
        details = usage.get("prompt_tokens_details")
    if details is None:
        return None
    value = details.get("cached_tokens") if isinstance(details, dict) else getattr(details, "cached_tokens", None)
    return None if value is None else int(value)


def reported_cache_writes(usage: Any) -> int | None:
    """Prompt tokens the provider says it wrote into its prompt cache (Anthropic's
    `cache_creation_input_tokens`, which litellm keeps on the usage), or None when it says nothing."""
    value = getattr(usage, "cache_creation_input_tokens", None)
    if value is None and isinstance(usage, dict):
        value = usage.get("cache_creation_input_tokens")
    if value is None:
        details = getattr(usage, "prompt_tokens_details", None)
        value = getattr(details, "cache_creation_tokens", None) if details is not None else None
    return None if value is None else int(value)


def map_price(info: dict[str, Any], batch: bool, factor: float) -> Price | None:
    """A model's price from litellm's map entry: per million tokens, a batch at the map's batch
    price, else at `factor` of the direct one (None: the map gives no price)."""
    direct_in, direct_out = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    if direct_in is None or direct_out is None:
        return None
    if batch:
        tin, tout = info.get("input_cost_per_token_batches"), info.get("output_cost_per_token_batches")
        if tin is not None and tout is not None:
            return Price(float(tin) * 1e6, float(tout) * 1e6)
    return Price(float(direct_in) * 1e6 * factor, float(direct_out) * 1e6 * factor)


class SamplingRecord:
    """Which sampling values were sent, and which were left to the server's own default
    (top_p or repeat_penalty at 1.0 when not sent explicitly): what a manifest must say,
    since the spec records the engine's values whether or not the server used them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sent: dict[str, set[Any]] = {}
        self._left: dict[str, set[Any]] = {}

    def note(self, params: Any, body: dict[str, Any], penalty_field: str | None = None) -> None:
        """`body` as sent for `params` (`penalty_field`: the extra body field that carries the
        repeat penalty): a value the provider's rules left out (temperature for a reasoning
        model, stop strings for GPT-5) is recorded as left to the provider's default."""
        extra = body.get("extra_body") or {}
        sent: dict[str, Any] = {"max_new_tokens": params.max_new_tokens}
        if body.get("max_tokens") not in (None, params.max_new_tokens):  # the thinking's room or budget on top
            sent["token_limit"] = body["max_tokens"]
        for name in ("temperature", "seed", "top_p"):
            if name in body:
                sent[name] = body[name]
        if penalty_field is not None and penalty_field in extra:
            sent["repeat_penalty"] = extra[penalty_field]
        left = [n for n in ("temperature", "top_p", "repeat_penalty") if n not in sent]
        with self._lock:
            for name, value in sent.items():
                self._sent.setdefault(name, set()).add(value)
            for name in left:
                self._left.setdefault(name, set()).add(getattr(params, name))
            if params.stop and "stop" not in body:
                self._left.setdefault("stop", set()).add(tuple(params.stop))

    def as_dict(self) -> dict[str, Any]:
        with self._lock:
            return {"sent": {k: sorted(v) for k, v in sorted(self._sent.items())},
                    "left_to_server_default": {k: [list(x) if isinstance(x, tuple) else x for x in sorted(v)]
                                               for k, v in sorted(self._left.items())}}


def read_reply(response: Any) -> tuple[str, str, str | None]:
    """A chat completion's answer, finish reason ("stop" or "length") and the model's
    reasoning when the API returns it apart (`reasoning_content`, which litellm also fills from
    Anthropic's thinking blocks, Gemini's thought parts and DeepSeek's field; else the thinking
    blocks themselves). Raises MalformedResponse for a body without a message."""
    choices = getattr(response, "choices", None)
    if not choices:
        raise MalformedResponse("response has no choices")
    choice = choices[0]
    message = getattr(choice, "message", None)
    content = getattr(message, "content", None) if message is not None else None
    if message is None or not (content is None or isinstance(content, str)):
        raise MalformedResponse("response choice has no message text")
    finish = getattr(choice, "finish_reason", None) or "stop"
    return content or "", "length" if finish == "length" else "stop", reasoning_of(message)


def reasoning_of(message: Any) -> str | None:
    """A chat message's reasoning text, where the API returns it apart from the answer."""
    text = getattr(message, "reasoning_content", None)
    if isinstance(text, str) and text:
        return text
    blocks = getattr(message, "thinking_blocks", None) or []
    parts = [b.get("thinking") if isinstance(b, dict) else getattr(b, "thinking", None) for b in blocks]
    joined = "\n\n".join(p for p in parts if isinstance(p, str) and p)
    return joined or None


def reasoning_tokens_of(usage: Any) -> int | None:
    """`usage.completion_tokens_details.reasoning_tokens` (OpenAI, and litellm for others)."""
    details = getattr(usage, "completion_tokens_details", None)
    if details is None and isinstance(usage, dict):
        details = usage.get("completion_tokens_details")
    value = details.get("reasoning_tokens") if isinstance(details, dict) else getattr(details, "reasoning_tokens", None)
    return int(value) if isinstance(value, (int, float)) and value else None
