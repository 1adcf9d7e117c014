"""NVIDIA's kvpress presses as long-context methods (`hf:MODEL,press=snapkv,compression_ratio=0.5`).

Each name is a press as kvpress's own evaluation defines it (`evaluation/evaluate_registry.py`,
`PRESS_REGISTRY`: `expected_attention` is `AdaKVPress(ExpectedAttentionPress(epsilon=1e-2))`
there, and here), so a score is comparable with kvpress's published results. The presses are
kvpress's code, imported only when a model with a press is built; lceval re-implements none.
Listed are the presses that compress the context while it is prefilled with a
`compression_ratio` (kvpress's decoding presses, which compress while answering, and presses
that need a download of their own - DuoAttention's patterns, Q-Filters - are left out, and so
is PyramidKV, whose per-layer budgets give layers caches of different lengths, which
transformers' sdpa and eager attention cannot mask: kvpress's own pipeline fails on them too).

kvpress 0.5.5 pins transformers<5.3, so it lives in a virtual environment of its own
(docs/methods.md; `.ci/kvpress` builds one as CI does).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from lceval import hookimpl
from lceval.errors import UserError
from lceval.interfaces import requires
from lceval.methods import RATIO_OPTION, ContextMethod

INSTALL = ("pip install 'kvpress==0.5.5' in a virtual environment of its own (it pins transformers<5.3): "
           "docs/methods.md shows how")

_WINDOW = {"type": "integer", "minimum": 1, "default": 64,
           "description": "The last prompt tokens whose attention scores the others (SnapKV's observation window)."}
_KERNEL = {"type": "integer", "minimum": 1, "default": 5, "description": "Width of the scores' 1-D pooling."}
_SINK = {"type": "integer", "minimum": 0, "default": 4, "description": "First tokens always kept (attention sinks)."}


@dataclass(frozen=True)
class Press:
    """One registered name: kvpress's class (inside a wrapper class when given), its options
    and the values kvpress's evaluation registry gives that differ from the class's defaults."""

    cls: str
    description: str
    options: dict[str, Any] = field(default_factory=dict)
    wrapper: str | None = None
    registry_values: dict[str, Any] = field(default_factory=dict)
    needs_attention_weights: bool = False


PRESSES: dict[str, Press] = {
    "knorm": Press("KnormPress", "Keeps the keys of smallest L2 norm (Devoto et al., 2024)."),
    "snapkv": Press("SnapKVPress", "Scores keys by the attention the last window of the prompt pays them, pooled "
                    "(Li et al., 2024).", {"window_size": _WINDOW, "kernel_size": _KERNEL}),
    "streaming_llm": Press("StreamingLLMPress", "Keeps the first (sink) tokens and the most recent ones "
                           "(Xiao et al., 2024).", {"n_sink": _SINK}),
    "tova": Press("TOVAPress", "Scores keys by the last token's attention, averaged over heads (Oren et al., 2024)."),
    "keydiff": Press("KeyDiffPress", "Keeps the keys least similar to the mean key (Park et al., 2025)."),
    "random": Press("RandomPress", "Drops random positions: the floor any press should beat.",
                    {"seed": {"type": "integer", "default": 0, "description": "Seed of the positions dropped."}}),
    "expected_attention": Press(
        "ExpectedAttentionPress", "Scores keys by the attention future queries are expected to pay them, "
        "with kvpress's head-wise budget (AdaKV), as kvpress's evaluation runs it (Devoto et al., 2025).",
        {"n_future_positions": {"type": "integer", "minimum": 1, "default": 512,
                                "description": "Future positions the expected queries stand for."},
         "n_sink": _SINK,
         "epsilon": {"type": "number", "minimum": 0, "default": 0.01,
                     "description": "Added to the scores (kvpress's evaluation uses 1e-2)."}},
        wrapper="AdaKVPress", registry_values={"epsilon": 0.01}),
    "adakv_snapkv": Press("SnapKVPress", "SnapKV's scores with a head-wise budget (AdaKV; Feng et al., 2024).",
                          {"window_size": _WINDOW, "kernel_size": _KERNEL}, wrapper="AdaKVPress"),
    "critical_snapkv": Press("SnapKVPress", "SnapKV's scores corrected by the values' projected norms "
                             "(CriticalKV; Feng et al., 2025).", {"window_size": _WINDOW, "kernel_size": _KERNEL},
                             wrapper="CriticalKVPress"),
    "lagkv": Press("LagKVPress", "Scores each chunk of keys against the next chunk's statistics (Liang et al., 2025).",
                   {"n_sink": _SINK, "lag_size": {"type": "integer", "minimum": 1, "default": 128,
                                                  "description": "Tokens per chunk."}}),
    "kvzip": Press("KVzipPress", "Scores keys by how much the model needs them to repeat the context, query-agnostic "
                   "(Kim et al., 2025); 2-3 times the prefill's cost.",
                   {"n_sink": _SINK, "chunk_size": {"type": "integer", "minimum": 1, "default": 2048,
                                                    "description": "Context tokens reconstructed per pass."}}),
    "observed_attention": Press("ObservedAttentionPress", "Keeps the keys the prompt attended to most (H2O; Zhang "
                                "et al., 2023); runs eager attention to see the weights.",
                                needs_attention_weights=True),
}


def _kvpress() -> Any:
    try:
        import kvpress
    except ImportError as exc:
        raise UserError(f"press=NAME needs kvpress, which cannot be imported ({exc})", field="press",
                        hint=INSTALL) from None
    return kvpress


class KVPressMethod(ContextMethod):
    """One kvpress press, built with its options and ratio."""

    def __init__(self, name: str, press: Any, options: dict[str, Any], ratio: float, attention: bool) -> None:
        self.name = name
        self.press = press
        self.options = options
        self.ratio = ratio
        self.needs_attention_weights = attention

    def identity(self) -> dict[str, Any]:
        from importlib.metadata import version

        return {"method": "kvpress", "press": self.name, "compression_ratio": self.ratio,
                "options": dict(sorted(self.options.items())), "kvpress": version("kvpress")}

    def prefilling(self, model: Any, cache: Any) -> AbstractContextManager[Any]:
        return self.press(model)

    def masked_entries(self, model: Any) -> list[int] | None:
        """The keys a head-wise press masks, per layer: kvpress's AdaKVPress (and every press
        that fakes a head-wise budget) keeps every position in the cache and leaves, on each
        attention module, `masked_key_indices` = (batch, key/value head, position) index
        tensors of the entries its patched attention replaces with a key no query attends to
        (kvpress's `attention_patch.py`); a press that removes positions leaves None there."""
        modules = [m for m in model.modules() if hasattr(m, "masked_key_indices")]
        counts = [0 if m.masked_key_indices is None else int(len(m.masked_key_indices[0])) for m in modules]
        return counts if any(counts) else None

    def next_position(self, context_tokens: int, cache: Any) -> int:
        """kvpress's pipeline: a press that re-rotates the kept keys continues from the cache's length."""
        rerotates = getattr(_kvpress(), "KeyRerotationPress", None)
        return cache.get_seq_length() if rerotates is not None and isinstance(self.press, rerotates) else context_tokens


class KVPressFactory:
    """The factory of one name: checks the ratio, builds kvpress's press."""

    def __init__(self, name: str, spec: Press) -> None:
        self.name, self.spec = name, spec
        self.description = f"kvpress {spec.cls}{f' in {spec.wrapper}' if spec.wrapper else ''}: {spec.description}"

    def __call__(self, options: dict[str, Any]) -> KVPressMethod:
        ratio = options.get(RATIO_OPTION)
        if ratio is None:
            raise UserError(f"press '{self.name}' needs compression_ratio=R (the share of the context's key/value "
                            "pairs it removes, 0 <= R < 1)", field=RATIO_OPTION)
        own = {k: v for k, v in options.items() if k != RATIO_OPTION}
        kvpress = _kvpress()
        inner = getattr(kvpress, self.spec.cls)(**{**self.spec.registry_values, **own})
        press = getattr(kvpress, self.spec.wrapper)(inner) if self.spec.wrapper else inner
        press.compression_ratio = float(ratio)  # a wrapper passes it to the press it wraps
        return KVPressMethod(self.name, press, own, float(ratio), self.spec.needs_attention_weights)


def _schema(spec: Press) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "properties": dict(spec.options)}


@hookimpl
def register_methods(register: Callable[..., None]) -> None:
    for name, spec in PRESSES.items():
        register(name, requires("kvpress", install=INSTALL)(KVPressFactory(name, spec)), options_schema=_schema(spec))
