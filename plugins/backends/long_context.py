"""RoPE scaling as a model option of the `hf:` and `vllm:` backends, shared: its syntax, its
checks, the config dict it becomes, and the scaling read back from a config.

Syntax: `rope_scaling=TYPE:FACTOR` (TYPE linear, dynamic or yarn; FACTOR at least 1) stretches
the window the model was trained on FACTOR times; `original_max_position_embeddings=N` names
that trained window when the config's `max_position_embeddings` is not it (a checkpoint whose
config already records a stretched length). The window then defaults to N x FACTOR.

How each type reads the config follows transformers' `modeling_rope_utils` (its
`_compute_linear_scaling_rope_parameters`, `_compute_dynamic_ntk_parameters`,
`_compute_yarn_parameters`), which vLLM's `get_rope` mirrors: YaRN takes the trained window
from the scaling's `original_max_position_embeddings` and expects `max_position_embeddings` to
hold the stretched one (transformers 4.x derives YaRN's factor from their ratio); dynamic NTK
takes the trained window from `max_position_embeddings`; linear needs neither.
"""

from __future__ import annotations

from typing import Any

from lceval.errors import UserError
from lceval.types import RopeScaling

ROPE_TYPES = ("linear", "dynamic", "yarn")
OPTION = "rope_scaling"
ORIGINAL = "original_max_position_embeddings"
#: TYPE:FACTOR, TYPE any case, FACTOR a number of at least 1 (a smaller one would shrink the window)
_FORM = f"^(?i:{'|'.join(ROPE_TYPES)}):0*[1-9][0-9]*(\\.[0-9]*)?$"
#: the options schema fragment both backends merge into their own: the engine checks a model
#: string against it when it resolves it, before any work, and a bad value exits 2 naming the
#: option, the value and (the description) what is accepted
ROPE_OPTIONS: dict[str, Any] = {
    "properties": {
        OPTION: {"type": "string", "pattern": _FORM,
                 "description": f"TYPE:FACTOR with TYPE one of {', '.join(ROPE_TYPES)} and FACTOR a number of at "
                                "least 1, e.g. yarn:4: stretches the trained window FACTOR times (RoPE scaling)."},
        ORIGINAL: {"type": "integer", "minimum": 1,
                   "description": "The window the model was trained on, which rope_scaling stretches (default: "
                                  "the config's max_position_embeddings); needs rope_scaling."},
    },
    "dependentRequired": {ORIGINAL: [OPTION]},
}
#: keys of a config's RoPE dict that are not scaling (transformers 5 keeps the base there)
_BASE_KEYS = ("rope_theta", "partial_rotary_factor")


def rope_option(options: dict[str, Any]) -> RopeScaling | None:
    """The `rope_scaling` option of options checked against `ROPE_OPTIONS`, its
    `original_window` the option of that name when given; None when not set."""
    text = options.get(OPTION)
    if text is None:
        return None
    kind, _, factor = str(text).strip().lower().partition(":")
    original = options.get(ORIGINAL)
    return RopeScaling(kind, float(factor), None if original is None else int(original))


def rope_parameters(scaling: RopeScaling, trained: int, base: dict[str, Any] | None) -> dict[str, Any]:
    """The config's RoPE dict for `scaling` of a model trained on `trained` tokens: the base of
    `base` (the config's dict: rope_theta under transformers 5) kept, its other scaling keys (a
    llama3 scaling's frequency factors) dropped. Both spellings of the type (`type`, read by
    transformers before 4.45, and `rope_type`)."""
    params = {k: v for k, v in (base or {}).items() if k in _BASE_KEYS}
    params.update(rope_type=scaling.type, type=scaling.type, factor=scaling.factor)
    if scaling.type in ("yarn", "dynamic"):
        params[ORIGINAL] = trained
    return params


def stretched_positions(scaling: RopeScaling, trained: int) -> int:
    """`max_position_embeddings` the config must hold: YaRN's the stretched window, the others'
    the trained one (dynamic NTK reads it as such)."""
    return int(trained * scaling.factor) if scaling.type == "yarn" else trained


def rope_dict(config: Any) -> dict[str, Any] | None:
    """The config's RoPE dict: `rope_parameters` (transformers 5) or `rope_scaling` (before)."""
    for name in ("rope_parameters", "rope_scaling"):
        found = getattr(config, name, None)
        if isinstance(found, dict) and found:
            return found
    return None


def replaced_rope(config: Any, model: str) -> dict[str, Any] | None:
    """The config's RoPE dict that `rope_scaling` replaces; a model with RoPE parameters per
    layer type (Gemma 3's local and global layers) is refused: one setting cannot say which."""
    found = rope_dict(config)
    if found and any(isinstance(v, dict) for v in found.values()):
        raise UserError(f"'{model}' has RoPE parameters per layer type; rope_scaling cannot set them",
                        field=OPTION)
    return found


def read_rope(config: Any) -> RopeScaling | None:
    """The scaling `config` holds, as the model is built from it; None: none (`default` RoPE,
    no dict, or one per layer type, which one setting cannot describe)."""
    found = rope_dict(config)
    if found is None or any(isinstance(v, dict) for v in found.values()):
        return None
    kind = found.get("rope_type") or found.get("type")
    if not kind or kind == "default" or found.get("factor") is None:
        return None
    original = found.get(ORIGINAL) or getattr(config, ORIGINAL, None)
    return RopeScaling(str(kind), float(found["factor"]), int(original) if original else None)
