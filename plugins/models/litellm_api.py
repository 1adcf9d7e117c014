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

import os
import random
import threading
import time
from typing import Any, Callable
from urllib.parse import urlsplit

from lceval import hookimpl
from lceval.errors import UserError
from lceval.interfaces import ModelBackend
from lceval.options import check_options
from lceval.types import Generation, GenerationRequest, Message

from .api_calls import (FATAL_KINDS, FINAL_KINDS, RETRY_AFTER_CAP_S, ApiStats, MalformedResponse,
                        classify, environment_secrets, retry_after_seconds, scrub)

SCHEME = "litellm"
_INSTALL_HINT = "Install it with: pip install 'lceval[api]'"


_NAME = "^[A-Za-z_][A-Za-z0-9_]*$"
#: Typed options (`litellm:MODEL,api_base=...`); the engine checks them before the factory runs.
#: A secret (api_key, token ...) is refused by the engine without being echoed.
OPTIONS = {"type": "object", "additionalProperties": False, "properties": {
    "api_base": {"type": "string", "pattern": "^https?://[^/?#@\\s]+(/[^?#\\s]*)?$", "writeOnly": True,
                 "description": "an http(s) URL without user:password@, ?query or #fragment (credentials come "
                                "from the environment: api_key_env=NAME); never echoed."},
    "api_key_env": {"type": "string", "pattern": _NAME,
                    "description": "the NAME of an environment variable holding the key."},
    "concurrency": {"type": "integer", "minimum": 1, "default": 4, "description": "requests in flight at once."},
    "batch_size": {"type": "integer", "minimum": 1,
                   "description": "requests handed over at once (default: 2 x concurrency)."},
    "max_retries": {"type": "integer", "minimum": 0, "default": 6, "description": "retries of a failed request."},
    "timeout": {"type": "number", "exclusiveMinimum": 0, "default": 600.0, "description": "seconds per request."},
    "backoff_base": {"type": "number", "exclusiveMinimum": 0, "default": 1.0,
                     "description": "seconds of the first backoff (doubled per retry, full jitter)."},
    "backoff_max": {"type": "number", "exclusiveMinimum": 0, "default": 60.0, "description": "longest backoff, seconds."},
    "input_cost_per_mtok": {"type": "number", "minimum": 0, "description": "USD per million prompt tokens."},
    "output_cost_per_mtok": {"type": "number", "minimum": 0, "description": "USD per million completion tokens."},
    "context_window": {"type": "integer", "minimum": 1, "description": "the model's window in tokens, for the context policy."},
    "repeat_penalty_field": {"type": "string", "pattern": _NAME,
                             "description": "request body field for repeat_penalty, e.g. repetition_penalty."},
    "tokenizer": {"type": "string", "pattern": "^(llamacpp|hf):.+",
                  "description": "llamacpp:GGUF (a path or pkg:MODULE/FILE.gguf) or hf:NAME_OR_FOLDER: the "
                                 "model's tokenizer, so the context policy can cut precisely."},
}}


def _api_base(value: str) -> str:
    """An http(s) URL with a host, without the trailing slash; ValueError otherwise."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(value)
    return value.rstrip("/")


def parse_options(options: dict[str, Any], model: str) -> dict[str, Any]:
    """The options checked against OPTIONS, with the defaults that depend on other options."""
    parsed = check_options(OPTIONS, options, what=f"backend '{SCHEME}'")
    parsed.setdefault("batch_size", 2 * parsed["concurrency"])
    if "api_base" in parsed:
        try:
            parsed["api_base"] = _api_base(parsed["api_base"])
        except ValueError:  # said without echoing the URL: what is in it may be a credential
            raise UserError(f"backend '{SCHEME}' option api_base (value not shown) has no host name",
                            field="api_base", hint=f"api_base: {OPTIONS['properties']['api_base']['description']}"
                            ) from None
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
        self._tokenizer_backend: ModelBackend | None = None
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
        if self._tokenizer_backend is not None:
            self._tokenizer_backend.close()
            self._tokenizer_backend = None

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
            "seed": params.seed,
        }
        if params.top_p != 1.0:
            # 1.0 is every API's default; some (recent Claude models) refuse top_p beside temperature
            body["top_p"] = params.top_p
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
        return ([key] if isinstance(key, str) and key != "no-key" else []) + environment_secrets()

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
                message = scrub(f"{type(exc).__name__}: {exc}", self._secrets(base))
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
            return UserError(f"no usable credentials for model '{self.model}' ({message})",
                             field="--model", hint=hint)
        return UserError(f"the API does not know model '{self.model}' ({message})", field="--model",
                         hint="Check the model name and api_base.")


def make_litellm(model: str, options: dict[str, str]) -> LiteLLMBackend:
    return LiteLLMBackend(model, options)


@hookimpl
def register_models(register: Callable[[str, Any], None]) -> None:
    register(SCHEME, make_litellm, options_schema=OPTIONS)
