"""The `litellm:` backend's options (`litellm:MODEL,api_base=...`), checked by the engine
before the factory runs, and what reading them takes: the server's address without
credentials, litellm imported offline and quiet, a model name that is there.

A model behind an OpenAI-compatible server of one's own (vLLM, SGLang) may think: the server
cannot say so, so the model string does (`reasoning=separate` for a server started with a
reasoning parser, which returns the thinking apart; `reasoning=inline` for one without, whose
text holds the thinking between the model's markers), with the chat template's thinking switch
(`thinking_switch`) and whether the model takes an effort (`takes_effort`, gpt-oss)."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

from lceval.errors import UserError
from lceval.options import check_options

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
    "prefix_cache": {"enum": ["none", "last-prompt", "shared"], "default": "shared",
                     "description": "what the server's cache keeps: shared (OpenAI, Anthropic, vLLM, SGLang), "
                                    "last-prompt (llama.cpp's server) or none; it decides the order of requests."},
    "cache_tokens": {"type": "integer", "minimum": 1,
                     "description": "tokens the server's prefix cache holds (with prefix_cache=shared)."},
    "max_retries": {"type": "integer", "minimum": 0, "default": 6, "description": "retries of a failed request."},
    "timeout": {"type": "number", "exclusiveMinimum": 0, "default": 600.0, "description": "seconds per request."},
    "backoff_base": {"type": "number", "exclusiveMinimum": 0, "default": 1.0,
                     "description": "seconds of the first backoff (doubled per retry, full jitter)."},
    "backoff_max": {"type": "number", "exclusiveMinimum": 0, "default": 60.0, "description": "longest backoff, seconds."},
    "input_cost_per_mtok": {"type": "number", "minimum": 0, "description": "USD per million prompt tokens."},
    "output_cost_per_mtok": {"type": "number", "minimum": 0, "description": "USD per million completion tokens."},
    "context_window": {"type": "integer", "minimum": 1, "description": "the model's window in tokens, for the context policy."},
    "repeat_penalty_field": {"type": "string", "pattern": _NAME,
                             "description": "request body field for repeat_penalty, e.g. repetition_penalty; "
                                            "named, it is sent on every request."},
    "explicit_sampling": {"type": "boolean", "default": False,
                          "description": "send top_p and repeat_penalty even at 1.0, so no server default applies "
                                         "(llama.cpp's server uses repeat_penalty 1.1 and top_p 0.95 otherwise)."},
    "batch_api": {"enum": ["auto", "openai", "anthropic", "none"], "default": "auto",
                  "description": "the batch protocol used with --batch: auto (openai/ models: OpenAI's /v1/batches, also "
                                 "at api_base; anthropic/ models: Anthropic's Message Batches; others: none)."},
    "batch_price_factor": {"type": "number", "minimum": 0, "default": 0.5,
                           "description": "what a batch request costs against a direct one, where litellm's map gives "
                                          "no batch price or input/output_cost_per_mtok are given (OpenAI, Anthropic: "
                                          "0.5)."},
    "tokenizer": {"type": "string", "pattern": "^(llamacpp|hf):.+",
                  "description": "llamacpp:GGUF (a path or pkg:MODULE/FILE.gguf) or hf:NAME_OR_FOLDER: the "
                                 "model's tokenizer, so the context policy can cut precisely."},
    "reasoning": {"enum": ["auto", "none", "separate", "inline"], "default": "auto",
                  "description": "whether a model behind a server of one's own thinks, and where its thinking comes "
                                 "back: separate (a vLLM or SGLang server started with --reasoning-parser: "
                                 "reasoning_content), inline (no parser: in the text, between the model's markers), "
                                 "none; auto: its tokenizer's chat template, or litellm's map for hosted APIs."},
    "thinking_switch": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "default": "enable_thinking",
                        "description": "the chat template's keyword that --thinking on|off sets through a server's "
                                       "chat_template_kwargs (Qwen3, GLM: enable_thinking; DeepSeek-V3.1: thinking); "
                                       "none: the template has no switch."},
    "takes_effort": {"type": "boolean", "default": False,
                     "description": "the server's model takes --reasoning-effort (gpt-oss behind vLLM or SGLang); "
                                    "a model declared with reasoning=separate|inline takes it anyway."},
    "prompt_cache": {"enum": ["auto", "on", "off"], "default": "auto",
                     "description": "the provider's prompt cache for the part a context's requests share (system message "
                                    "and context): auto uses it where the provider has one (Anthropic's cache breakpoints, "
                                    "OpenAI's automatic cache with prompt_cache_key, Gemini 2.5's implicit cache, "
                                    "DeepSeek's) and prices it; on also refuses a provider without one; off marks nothing "
                                    "and estimates without it (an automatic cache's reads are still counted)."},
    "cache_ttl": {"enum": ["5m", "1h", "24h"],
                  "description": "how long the provider keeps a context's cache entry unused: Anthropic 5m or 1h "
                                 "(default: 5m, 1h when a context may wait longer than 150 s between two requests: "
                                 "long answers or thinking, batches), OpenAI 24h (its extended retention; default: in "
                                 "memory, 5-10 minutes)."},
    "cache_read_cost_per_mtok": {"type": "number", "minimum": 0,
                                 "description": "USD per million prompt tokens read from the provider's cache, beside "
                                                "input_cost_per_mtok (default: that price at the map's or the "
                                                "provider's cache discount)."},
    "cache_write_cost_per_mtok": {"type": "number", "minimum": 0,
                                  "description": "USD per million prompt tokens written into the provider's cache, "
                                                 "beside input_cost_per_mtok (default: that price times the provider's "
                                                 "write premium: Anthropic 1.25 for 5m, 2 for 1h; others 1)."},
}}


def _api_base(value: str) -> str:
    """An http(s) URL with a host, without the trailing slash; ValueError otherwise."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(value)
    return value.rstrip("/")


def parse_options(options: dict[str, Any], model: str) -> dict[str, Any]:
    """The options checked against OPTIONS."""
    if "|" in str(options.get("api_base", "")):
        raise UserError(f"backend '{SCHEME}' option api_base (value not shown) takes one server",
                        field="api_base", hint="Several servers of one model form a fleet: "
                        "--model fleet:MODEL,servers=URL1|URL2 (see README, Endpoint fleets).")
    parsed = check_options(OPTIONS, options, what=f"backend '{SCHEME}'")
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


def check_model_name(model: str, scheme: str = SCHEME) -> str:
    if not model.strip():
        raise UserError(f"{scheme} model name is empty", field="--model",
                        hint=f"Use {scheme}:PROVIDER/MODEL, e.g. {scheme}:openai/gpt-4o.")
    return model.strip()
