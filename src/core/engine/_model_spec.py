"""Model spec strings: `SCHEME:MODEL[,key=value...]` or a registry alias (optionally with
extra `,key=value` options that override the alias's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lceval.errors import UserError
from lceval.interfaces import ModelBackend, ModelFactory
from lceval.options import check_options, options_schema_of
from lceval.engine._plugin_host import Plugins, describe_kind
from lceval.engine._catalog import Registry

if TYPE_CHECKING:
    from lceval.engine._cache import Cache, CachedModel

JUDGE_MODEL_FLAG = "--judge-model"


@dataclass(frozen=True)
class ModelSpec:
    text: str  # as the user wrote it
    scheme: str
    model: str
    options: dict[str, str]

    @property
    def canonical(self) -> str:
        opts = "".join(f",{k}={v}" for k, v in sorted(self.options.items()))
        return f"{self.scheme}:{self.model}{opts}"


def _split_options(text: str, field: str) -> tuple[str, dict[str, str]]:
    parts = text.split(",")
    head, options = [parts[0]], {}
    for part in parts[1:]:
        if "=" in part:
            key, _, value = part.partition("=")
            key = key.strip()
            if not key:
                raise UserError(f"empty option name in '{text}'", field=field)
            options[key] = value.strip()
        elif options:
            raise UserError(f"option '{part}' in '{text}' is not key=value", field=field)
        else:
            head.append(part)
    return ",".join(head), options


def parse_model_spec(text: str, registry: Registry, field: str = "--model") -> ModelSpec:
    base, extra = _split_options(text.strip(), field)
    if base in registry.models:
        alias_base, alias_opts = _split_options(registry.models[base].spec, field)
        base, extra = alias_base, {**alias_opts, **extra}
    scheme, sep, model = base.partition(":")
    if not sep or not scheme or not model:
        raise UserError(
            f"model '{text}' is neither SCHEME:MODEL nor a known alias",
            field=field,
            hint=f"Aliases: {', '.join(sorted(registry.models)) or 'none'}.",
        )
    return ModelSpec(text=text, scheme=scheme, model=model, options=extra)


def make_model(spec: ModelSpec, plugins: Plugins, field: str = "--model") -> ModelBackend:
    return backend_factory(spec, plugins, field)(spec.model, dict(spec.options))


def backend_factory(spec: ModelSpec, plugins: Plugins, field: str = "--model") -> ModelFactory:
    """The factory for the spec's scheme; an unknown scheme, or an option the backend does
    not declare or of the wrong type, fails here, before any work."""
    if spec.scheme not in plugins.models:
        raise UserError(
            f"no backend for scheme '{spec.scheme}' (model '{spec.text}')",
            field=field,
            hint=f"Installed schemes: {', '.join(sorted(plugins.models)) or 'none'}; "
            "`lceval plugins` shows what failed to load.",
        )
    factory = plugins.models[spec.scheme]
    schema = options_schema_of(factory)
    if schema is not None:
        check_options(schema, spec.options, what=describe_kind("model", spec.scheme))
    return factory


def judge_model_spec(text: str | None, registry: Registry, plugins: Plugins) -> ModelSpec | None:
    """`--judge-model`, parsed and its scheme checked before any work is done; None if absent."""
    if not text:
        return None
    spec = parse_model_spec(text, registry, field=JUDGE_MODEL_FLAG)
    backend_factory(spec, plugins, field=JUDGE_MODEL_FLAG)
    return spec


def open_judge_model(spec: ModelSpec | None, plugins: Plugins, cache: "Cache") -> "CachedModel | None":
    """The judge model behind the request cache (its calls cached and counted), or None."""
    from lceval.engine._cache import CachedModel

    if spec is None:
        return None
    return CachedModel(make_model(spec, plugins, field=JUDGE_MODEL_FLAG), cache, spec.canonical)
