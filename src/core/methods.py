"""Long-context methods as a model setting: the contract a method plugin implements and the
options a backend that applies methods declares.

Why a plugin kind of its own: a KV-cache press (SnapKV, StreamingLLM, Expected Attention,
KVzip ...) or a sparse prefill changes how a given model holds its context, not which model
it is, so it is evaluated as a setting of a backend (`hf:MODEL,press=snapkv,
compression_ratio=0.5`) on the same items as the model without it. The backend owns the
model and its cache; a method only hooks into the model while the context is prefilled
(and, for a method that also compresses while decoding, while answering). NVIDIA's kvpress
presses are the built-in methods (`lceval_plugins.methods.kvpress`); a third party registers
its own with the `register_methods` hook (`lceval.hookspecs`).

The option names are the same for every backend that takes methods (`press`,
`compression_ratio`, `press_query_aware`, and a method's own options as `press.KEY=VALUE`),
so `--press-sweep` and the report read them without knowing the backend. A backend merges
`METHOD_OPTIONS` into its options schema, builds the method with
`lceval.engine.Plugins.current().open_method(name, options, compression_ratio)` and reports
what a method changes per answer in `Generation.extras` under the `EXTRAS` names.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Callable

__all__ = ["EXTRAS", "METHOD_OPTION", "METHOD_OPTIONS", "OPTION_PREFIX", "QUERY_AWARE_OPTION", "RATIO_OPTION",
           "ContextMethod", "MethodFactory", "method_options_of"]

#: The model option naming the method (a registered method plugin).
METHOD_OPTION = "press"
#: The share of the context's key/value pairs the method removes, in [0, 1).
RATIO_OPTION = "compression_ratio"
#: Whether the question is compressed with the context (query-aware) or kept apart.
QUERY_AWARE_OPTION = "press_query_aware"
#: A method's own options are written `press.KEY=VALUE` in a model string.
OPTION_PREFIX = METHOD_OPTION + "."

#: The options schema fragment a backend that applies methods merges into its own: its
#: `properties` into the backend's, and its `patternProperties` and `dependentRequired` (a
#: ratio needs a press) beside them.
METHOD_OPTIONS: dict[str, Any] = {
    "properties": {
        METHOD_OPTION: {
            "type": "string", "minLength": 1, "x-lceval-plugin": "method",
            "description": "A long-context method applied to the model (a KV-cache press such as snapkv, knorm, "
                           "streaming_llm, expected_attention; `lceval plugins` lists the installed ones): the "
                           "context's cache is built under it and every question is answered from that cache."},
        RATIO_OPTION: {
            "type": "number", "minimum": 0, "exclusiveMaximum": 1,
            "description": "Share of the context's key/value pairs the press removes (0: none; needs press=NAME)."},
        QUERY_AWARE_OPTION: {
            "type": "boolean", "default": False,
            "description": "Compress each prompt with its question in view (SnapKV's original setting) instead of "
                           "the context alone: no cache is shared between a context's questions."},
    },
    "dependentRequired": {RATIO_OPTION: [METHOD_OPTION]},
    "patternProperties": {
        r"^press\.[A-Za-z_][A-Za-z0-9_]*$": {
            "title": "press.OPTION",
            "description": "An option of the press, typed by the press (`lceval plugins NAME` lists them), "
                           "e.g. press.window_size=64."},
    },
}


def method_options_of(options: dict[str, Any]) -> dict[str, Any]:
    """The method's own options in a backend's options (`press.KEY` -> `KEY`), as given."""
    return {key[len(OPTION_PREFIX):]: value for key, value in options.items() if key.startswith(OPTION_PREFIX)}


#: What a backend that applies a method records per answer in `Generation.extras`, so a
#: sweep's report can draw memory and time against the compression ratio: the positions the
#: cache held when the answer ended (mean over layers; its peak, since it only grows while
#: decoding) and their keys' and values' bytes (the memory the cache takes), the bytes of the
#: entries the method kept (the memory a cache that removed what the method masks would
#: take: the same as the first for a method that removes what it drops), the context's
#: positions the cache holds after compression, the share of the context's key/value entries
#: (positions times key/value heads) the method kept, masked ones counted as dropped, and the
#: seconds spent prefilling (context and question) and decoding.
EXTRAS = ("kv_cache_tokens", "kv_cache_bytes", "kv_kept_bytes", "kv_context_tokens", "kv_kept_share",
          "prefill_seconds", "decode_seconds")


class ContextMethod(ABC):
    """One long-context method, built with its options for one model.

    The backend prefills a context into a transformers `Cache` inside `prefilling(model,
    cache)` and answers inside `decoding(model, cache)`. A kvpress press hooks the attention
    layers for the block and compresses each layer's keys and values as they are written; a
    simpler method may instead change `cache` when the block ends (the example plugin's
    `ends` keeps the first and last tokens). The method never sees requests, prompts or the
    engine: only the model and its cache."""

    #: the registered name (set by the factory), for messages
    name: str = "method"
    #: reads the attention weights while prefilling (kvpress's ObservedAttentionPress): the
    #: backend then computes them (eager attention) for the context
    needs_attention_weights: bool = False

    @abstractmethod
    def identity(self) -> dict[str, Any]:
        """Everything that changes the answers (name, ratio, options, the library's version):
        part of the model's identity, so of every cache key."""

    @abstractmethod
    def prefilling(self, model: Any, cache: Any) -> AbstractContextManager[Any]:
        """In effect while `model` (a transformers causal LM) prefills the context into
        `cache` (a `transformers.DynamicCache`)."""

    def decoding(self, model: Any, cache: Any) -> AbstractContextManager[Any]:
        """In effect while the answers are decoded from `cache` (default: nothing)."""
        return nullcontext()

    def masked_entries(self, model: Any) -> list[int] | None:
        """After `prefilling`: per layer of the cache, how many of the context's key/value
        entries (a key/value head at a position) the method masks out of attention but leaves
        in the cache. kvpress's head-wise presses (AdaKV's budget: `expected_attention`,
        `adakv_snapkv`) keep every position and mask keys instead, so the cache's size says
        nothing of what they dropped; the backend reports the share kept and the memory the
        kept entries would take from these counts. None (default): the method removes what it
        drops, and the cache's size says it."""
        return None

    def next_position(self, context_tokens: int, cache: Any) -> int:
        """The position the question's first token takes after a context of `context_tokens`
        tokens was prefilled into `cache`: the context's length (default), or the cache's own
        for a method that re-rotates the kept keys to close the gaps (kvpress's KeyRerotationPress)."""
        return context_tokens


MethodFactory = Callable[[dict[str, Any]], ContextMethod]
"""options -> method: the method's own options (checked against its `options_schema`,
defaults filled) plus `compression_ratio` (the backend's, None when not given; declare it to
check it yourself)."""
