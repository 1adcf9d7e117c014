"""`litellm:` backend: hosted and self-hosted chat APIs (OpenAI, Anthropic, any
OpenAI-compatible server such as `python -m llama_cpp.server` or vLLM) through litellm.

An API is slow, rate-limited and unreliable where a local model is not, so this backend
owns three things the others do not need:

- bounded concurrency: the engine hands over `batch_size` requests, at most `concurrency` of
  them are in flight at once (a thread pool); the batch is kept small so an interrupt loses
  little (CachedModel stores a batch's answers when the batch returns);
- retries: 429, 5xx, timeouts, connection errors and malformed bodies are retried with
  exponential backoff and full jitter (AWS "Exponential Backoff and Jitter"), honouring
  `Retry-After`; 400 is not retried (recorded as failed), 401/403/404 stop the run with a
  UserError (every other request would fail the same way);
- honest accounting: `stats()` counts attempts, retries, errors by kind, failures, and the
  tokens and cost of successful responses only. A request that fails past its retry budget
  becomes a Generation with `finish_reason="error"`, which the cache does not store, so a
  rerun asks it again.

Secrets: the API key comes only from the environment (the provider's usual variable, or the
one named by `api_key_env`); a key on the command line is refused. `identity()` (in every
cache key and in manifests) holds the model name and the api_base without credentials.

litellm is imported only inside functions, with its remote cost map and telemetry off.
"""

from __future__ import annotations

import email.utils
import os
import random
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlsplit

from lceval import hookimpl
from lceval.errors import UserError
from lceval.interfaces import ModelBackend
from lceval.types import Generation, GenerationRequest

from . import local_files

SCHEME = "litellm"
_INSTALL_HINT = "Install it with: pip install 'lceval[api]'"
#: Kinds of failed attempts, in the order `stats()` lists them.
RETRYABLE_KINDS = ("rate_limit", "server", "timeout", "connection", "malformed")
FINAL_KINDS = ("bad_request", "context_window")  # not retried: the same request fails again
FATAL_KINDS = ("auth", "not_found")  # the run stops: every request would fail the same way
#: Longest Retry-After honoured; a server asking for more is waited on this long per retry.
RETRY_AFTER_CAP_S = 600.0
_ERROR_TEXT_MAX = 500


def _positive(cast: Callable[[str], Any]) -> Callable[[str], Any]:
    def convert(value: str) -> Any:
        number = cast(value)
        if number <= 0:
            raise ValueError(value)
        return number
    return convert


def _non_negative(cast: Callable[[str], Any]) -> Callable[[str], Any]:
    def convert(value: str) -> Any:
        number = cast(value)
        if number < 0:
            raise ValueError(value)
        return number
    return convert


def _env_name(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        raise ValueError(value)
    return value


def _api_base(value: str) -> str:
    """Credentials in a URL would end up in the manifest's command line: refused."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(value)
    if parts.username or parts.password or parts.query or parts.fragment:
        raise KeyError(value)
    return value.rstrip("/")


#: option -> (converter raising ValueError/KeyError, what a valid value looks like)
_OPTIONS: local_files.OptionTable = {
    "api_base": (_api_base, "an http(s) URL without user:password@, ?query or #fragment "
                 "(credentials come from the environment)"),
    "api_key_env": (_env_name, "the NAME of an environment variable holding the key"),
    "concurrency": (_positive(int), "a positive integer"),
    "batch_size": (_positive(int), "a positive integer"),
    "max_retries": (_non_negative(int), "a non-negative integer"),
    "timeout": (_positive(float), "a positive number of seconds"),
    "backoff_base": (_positive(float), "a positive number of seconds"),
    "backoff_max": (_positive(float), "a positive number of seconds"),
    "input_cost_per_mtok": (_non_negative(float), "a non-negative price in USD per million tokens"),
    "output_cost_per_mtok": (_non_negative(float), "a non-negative price in USD per million tokens"),
    "context_window": (_positive(int), "a positive integer (tokens)"),
    "repeat_penalty_field": (_env_name, "a request body field name, e.g. repetition_penalty"),
}
_DEFAULTS: dict[str, Any] = {"concurrency": 4, "max_retries": 6, "timeout": 600.0,
                             "backoff_base": 1.0, "backoff_max": 60.0}


def parse_options(options: dict[str, str], model: str) -> dict[str, Any]:
    for key in options:
        if key.lower() in ("api_key", "key", "token", "api_token", "secret", "password", "authorization"):
            raise UserError(f"the {SCHEME} backend never takes a secret on the command line "
                            f"(option '{key}')", field=key,
                            hint="Put the key in an environment variable (e.g. OPENAI_API_KEY) "
                                 "or name one with api_key_env=NAME.")
    parsed = {**_DEFAULTS, **local_files.parse_options(options, _OPTIONS, SCHEME, model)}
    parsed.setdefault("batch_size", 2 * parsed["concurrency"])
    return parsed


def import_litellm() -> Any:
    """Import litellm offline and quiet: the bundled cost map, no telemetry, no banners."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    try:
        import litellm
    except ImportError as exc:
        raise UserError(f"the {SCHEME} backend needs litellm, which cannot be imported ({exc})",
                        field="--model", hint=_INSTALL_HINT) from None
    litellm.telemetry = False
    litellm.suppress_debug_info = True
    litellm.set_verbose = False
    import logging
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "httpx", "openai"):
        logging.getLogger(name).setLevel(logging.ERROR)
    return litellm


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
    cached_prompt_tokens: int = 0
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


def classify(exc: BaseException, litellm: Any) -> str:
    """The kind of a failed attempt; decides retry, failure or stop. "internal" (not an API
    error at all, e.g. a bug) is re-raised rather than retried."""
    if isinstance(exc, MalformedResponse):
        return "malformed"
    if not _is_api_error(exc):
        return "internal"
    text = str(exc).lower()
    status = getattr(exc, "status_code", None)
    if _looks_malformed(text) and not (isinstance(status, int) and status < 500):
        # litellm reports a 200 body it cannot parse as an InternalServerError of its own
        return "malformed"
    checks = [
        ("Timeout", "timeout"),
        ("RateLimitError", "rate_limit"),
        ("AuthenticationError", "auth"),
        ("PermissionDeniedError", "auth"),
        ("NotFoundError", "not_found"),
        ("ContextWindowExceededError", "context_window"),
        ("InternalServerError", "server"),
        ("ServiceUnavailableError", "server"),
        ("BadGatewayError", "server"),
    ]
    for name, kind in checks:
        cls = getattr(litellm, name, None)
        if isinstance(cls, type) and isinstance(exc, cls):
            return kind
    if isinstance(status, int):
        if status == 429:
            return "rate_limit"
        if status in (401, 403):
            return "auth"
        if status == 404:
            return "not_found"
        if status == 408:
            return "timeout"
        if 500 <= status < 600:
            return "server"
        if 400 <= status < 500:
            return "bad_request"
    if "timed out" in text or "timeout" in text:
        return "timeout"
    return "connection"


def _is_api_error(exc: BaseException) -> bool:
    import httpx
    import openai

    return isinstance(exc, (openai.OpenAIError, httpx.HTTPError, ConnectionError, TimeoutError))


def _looks_malformed(text: str) -> bool:
    return any(s in text for s in ("expecting value", "jsondecodeerror", "json decode",
                                   "unterminated string", "extra data", "'choices' that is not"))


def _scrub(text: str, secrets: list[str]) -> str:
    """Error texts go into samples.jsonl: no key may survive in them, whole or masked."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    text = re.sub(r"\b(sk|pk|key)-[A-Za-z0-9*_\-]{6,}", r"\1-***", text)
    return text[:_ERROR_TEXT_MAX]


def _environment_secrets() -> list[str]:
    """Values of variables that look like credentials (OPENAI_API_KEY, HF_TOKEN ...)."""
    markers = ("KEY", "TOKEN", "SECRET", "PASSWORD")
    return [v for k, v in os.environ.items() if any(m in k.upper() for m in markers) and len(v) >= 8]


class LiteLLMBackend(ModelBackend):
    """One API model. Requests of a batch run on a thread pool of `concurrency` workers."""

    def __init__(self, model: str, options: dict[str, str]) -> None:
        if not model.strip():
            raise UserError("litellm model name is empty", field="--model",
                            hint="Use litellm:PROVIDER/MODEL, e.g. litellm:openai/gpt-4o.")
        self.model = model.strip()
        self.options = parse_options(options, model)
        self.concurrency: int = self.options["concurrency"]
        self.batch_size = self.options["batch_size"]
        self.context_window = self.options.get("context_window")
        self.api_base: str | None = self.options.get("api_base")
        self._stats = ApiStats()
        self._stop = threading.Event()
        self._rng = random.Random()
        self._litellm: Any = None
        #: waits `seconds` unless the batch is being abandoned; tests replace it
        self.sleep: Callable[[float], Any] = self._stop.wait

    # -- ModelBackend ----------------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        ident: dict[str, Any] = {"scheme": SCHEME, "model": self.model, "api_base": self.api_base}
        if "repeat_penalty_field" in self.options:
            ident["repeat_penalty_field"] = self.options["repeat_penalty_field"]
        return ident

    def stats(self) -> dict[str, Any]:
        return self._stats.as_dict()

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        if not requests:
            return []
        litellm = self._import()
        base = self._base_kwargs(litellm)
        self._stop.clear()
        return self._run_pool(lambda r: self._one(litellm, base, r), requests)

    def _run_pool(self, work: Callable[[GenerationRequest], Generation],
                  requests: list[GenerationRequest]) -> list[Generation]:
        """At most `concurrency` requests in flight. Daemon threads, not a ThreadPoolExecutor:
        on Ctrl-C the process must exit at once, not wait for in-flight requests to time out."""
        results: list[Generation | None] = [None] * len(requests)
        errors: list[BaseException] = []
        pending = iter(range(len(requests)))
        lock = threading.Lock()
        done = threading.Event()
        left = [len(requests)]

        def worker() -> None:
            while not self._stop.is_set():
                with lock:
                    i = next(pending, None)
                if i is None:
                    return
                try:
                    results[i] = work(requests[i])
                except BaseException as exc:  # noqa: BLE001  (re-raised in the caller's thread)
                    with lock:
                        errors.append(exc)
                    self._stop.set()
                    done.set()
                    return
                with lock:
                    left[0] -= 1
                    if left[0] == 0:
                        done.set()

        for n in range(min(self.concurrency, len(requests))):
            threading.Thread(target=worker, name=f"lceval-litellm-{n}", daemon=True).start()
        try:
            while not done.wait(0.2):
                pass
        except BaseException:
            self._stop.set()  # Ctrl-C: stop sleeping workers, send nothing more
            raise
        if errors:
            raise errors[0]
        return [r for r in results if r is not None]

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
        elif self.api_base is not None and self.model.startswith("openai/") \
                and not os.environ.get("OPENAI_API_KEY"):
            # a local OpenAI-compatible server needs no key, but the SDK refuses to send none
            kwargs["api_key"] = "no-key"
        return kwargs

    def _payload(self, request: GenerationRequest) -> dict[str, Any]:
        params = request.params
        body: dict[str, Any] = {
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "max_tokens": params.max_new_tokens, "temperature": params.temperature,
            "top_p": params.top_p, "seed": params.seed,
        }
        if params.stop:
            body["stop"] = list(params.stop)
        if params.repeat_penalty != 1.0:
            name = self.options.get("repeat_penalty_field")
            if name is None:
                raise UserError(
                    f"repeat_penalty={params.repeat_penalty} has no equivalent in the OpenAI-style "
                    "chat API (frequency_penalty is additive and count-based, not the same thing)",
                    field="generation.repeat_penalty",
                    hint="Set it to 1.0, or name the server's body field with "
                         "repeat_penalty_field=repetition_penalty (vLLM) or repeat_penalty (llama.cpp).")
            body["extra_body"] = {name: params.repeat_penalty}
        return body

    def _secrets(self, base: dict[str, Any]) -> list[str]:
        key = base.get("api_key")
        return ([key] if isinstance(key, str) and key != "no-key" else []) + _environment_secrets()

    def _one(self, litellm: Any, base: dict[str, Any], request: GenerationRequest) -> Generation:
        payload = self._payload(request)
        start = time.perf_counter()
        budget = self.options["max_retries"]
        attempt = 0
        while True:
            if self._stop.is_set():
                raise RuntimeError("batch abandoned")
            self._stats.bump("attempts")
            try:
                response = litellm.completion(**base, **payload)
                text, finish = self._read(response)
            except Exception as exc:  # noqa: BLE001  (every failure is classified below)
                kind = classify(exc, litellm)
                if kind == "internal":
                    raise
                self._stats.bump("errors", kind)
                message = _scrub(f"{type(exc).__name__}: {exc}", self._secrets(base))
                if kind in FATAL_KINDS:
                    raise self._fatal(kind, message) from None
                if kind in FINAL_KINDS or attempt >= budget:
                    return self._failed(request, kind, message, attempt + 1, start)
                delay = self._delay(attempt, retry_after_seconds(exc))
                self._stats.bump("retries")
                self._stats.bump("slept_s", amount=delay)
                attempt += 1
                self.sleep(delay)
                continue
            return self._succeeded(request, response, text, finish, attempt + 1, start, litellm)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Full jitter: uniform in [0, min(max, base * 2^attempt)]; a server's Retry-After wins."""
        if retry_after is not None:
            return min(retry_after, RETRY_AFTER_CAP_S)
        cap = min(self.options["backoff_max"], self.options["backoff_base"] * (2 ** attempt))
        return self._rng.uniform(0.0, cap)

    @staticmethod
    def _read(response: Any) -> tuple[str, str]:
        choices = getattr(response, "choices", None)
        if not choices:
            raise MalformedResponse("response has no choices")
        choice = choices[0]
        message = getattr(choice, "message", None)
        content = getattr(message, "content", None) if message is not None else None
        if message is None or not (content is None or isinstance(content, str)):
            raise MalformedResponse("response choice has no message text")
        finish = getattr(choice, "finish_reason", None) or "stop"
        return (content or "").strip(), "length" if finish == "length" else "stop"

    def _succeeded(self, request: GenerationRequest, response: Any, text: str, finish: str,
                   attempts: int, start: float, litellm: Any) -> Generation:
        usage = getattr(response, "usage", None)
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion = int(getattr(usage, "completion_tokens", 0) or 0)
        details = getattr(usage, "prompt_tokens_details", None)
        cached = int(getattr(details, "cached_tokens", 0) or 0) if details is not None else 0
        cost = self._cost(response, prompt, completion, litellm)
        stats = self._stats
        with stats.lock:
            stats.succeeded += 1
            stats.prompt_tokens += prompt
            stats.completion_tokens += completion
            stats.cached_prompt_tokens += cached
            if cost is None:
                stats.responses_without_cost += 1
            else:
                stats.cost_usd += cost
        extras: dict[str, Any] = {"attempts": attempts}
        if cost is not None:
            extras["cost_usd"] = round(cost, 8)
        return Generation(request_id=request.request_id, text=text, prompt_tokens=prompt,
                          prefilled_tokens=max(0, prompt - cached), completion_tokens=completion,
                          finish_reason=finish, seconds=time.perf_counter() - start, extras=extras)

    def _cost(self, response: Any, prompt: int, completion: int, litellm: Any) -> float | None:
        """The user's per-million-token prices win; then litellm's bundled price map; else
        unknown (never a guess)."""
        pin, pout = self.options.get("input_cost_per_mtok"), self.options.get("output_cost_per_mtok")
        if pin is not None or pout is not None:
            return (prompt * (pin or 0.0) + completion * (pout or 0.0)) / 1e6
        try:
            cost = litellm.completion_cost(completion_response=response)
        except Exception:  # noqa: BLE001  (unknown model: litellm raises)
            return None
        return float(cost) if cost else None

    def _failed(self, request: GenerationRequest, kind: str, message: str, attempts: int,
                start: float) -> Generation:
        self._stats.bump("failed")
        self._stats.bump("failed_by_kind", kind)
        return Generation(request_id=request.request_id, text="", finish_reason="error",
                          seconds=time.perf_counter() - start,
                          extras={"error": {"kind": kind, "message": message, "attempts": attempts}})

    def _fatal(self, kind: str, message: str) -> UserError:
        if kind == "auth":
            env = self.options.get("api_key_env")
            hint = (f"Check the key in ${env}." if env else
                    "Set the provider's key variable (e.g. OPENAI_API_KEY, ANTHROPIC_API_KEY) "
                    "or name one with api_key_env=NAME.")
            return UserError(f"the API refused the credentials for model '{self.model}' ({message})",
                             field="--model", hint=hint)
        return UserError(f"the API does not know model '{self.model}' ({message})", field="--model",
                         hint="Check the model name and api_base.")


def make_litellm(model: str, options: dict[str, str]) -> LiteLLMBackend:
    return LiteLLMBackend(model, options)


@hookimpl
def register_models(register: Callable[[str, Any], None]) -> None:
    register(SCHEME, make_litellm)
