"""Model spec strings: `SCHEME:MODEL[,key=value...]` or a registry alias (optionally with
extra `,key=value` options that override the alias's).

A string is resolved once (`resolve_model`): parsed, its scheme looked up among the installed
backends and its options checked against the backend's `options_schema`. The resulting
`ModelSpec` carries the factory and the checked options, so building the backend later
(`open_backend`) checks nothing again, and every stage of a run sees the same spec."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from lceval.engine._cache import Cache, default_cache_path
from lceval.engine._cached_model import CachedModel
from lceval.engine._catalog import Catalog, load_catalog
from lceval.engine._plugin_host import Plugins, describe_kind, load_plugins
from lceval.errors import UserError
from lceval.interfaces import ModelBackend, ModelFactory
from lceval.options import check_options, options_schema_of, unwrap

JUDGE_MODEL_FLAG = "--judge-model"


@dataclass(frozen=True)
class ModelSpec:
    text: str  # as the user wrote it
    scheme: str
    model: str
    options: dict[str, str]  # as written: they name the model in results and cache keys
    #: the backend's own factory and the options it is called with (typed and defaulted when
    #: it declared an options_schema); None until resolved against the installed plugins
    factory: ModelFactory | None = field(default=None, compare=False, repr=False)
    checked: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

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


def parse_model_spec(text: str, catalog: Catalog, field: str = "--model") -> ModelSpec:
    """The string's parts, aliases expanded; not yet checked against the installed backends."""
    base, extra = _split_options(text.strip(), field)
    if base in catalog.models:
        alias_base, alias_opts = _split_options(catalog.models[base].spec, field)
        base, extra = alias_base, {**alias_opts, **extra}
    scheme, sep, model = base.partition(":")
    if not sep or not scheme or not model:
        raise UserError(
            f"model '{text}' is neither SCHEME:MODEL nor a known alias",
            field=field,
            hint=f"Aliases: {', '.join(sorted(catalog.models)) or 'none'}.",
        )
    return ModelSpec(text=text, scheme=scheme, model=model, options=extra)


def resolve_model(text: str, catalog: Catalog, plugins: Plugins, field: str = "--model") -> ModelSpec:
    """Parse `text` and check it against the installed backends: an unknown scheme, or an
    option the backend does not declare or of the wrong type, fails here, before any work."""
    spec = parse_model_spec(text, catalog, field)
    if spec.scheme not in plugins.models:
        raise UserError(
            f"no backend for scheme '{spec.scheme}' (model '{spec.text}')",
            field=field,
            hint=f"Installed schemes: {', '.join(sorted(plugins.models)) or 'none'}; "
            "`lceval plugins` shows what failed to load.",
        )
    registered = plugins.models[spec.scheme]
    schema = options_schema_of(registered)
    checked = (check_options(schema, spec.options, what=describe_kind("model", spec.scheme))
               if schema is not None else dict(spec.options))
    return ModelSpec(text=spec.text, scheme=spec.scheme, model=spec.model, options=spec.options,
                     factory=unwrap(registered), checked=checked)


def resolve_judge_model(text: str | None, catalog: Catalog, plugins: Plugins) -> ModelSpec | None:
    """`--judge-model`, resolved before any work is done; None if absent."""
    return resolve_model(text, catalog, plugins, field=JUDGE_MODEL_FLAG) if text else None


def open_backend(spec: ModelSpec) -> ModelBackend:
    """The backend of a resolved spec (its options were checked when it was resolved)."""
    if spec.factory is None:
        raise ValueError(f"model spec '{spec.text}' was not resolved against the installed backends")
    return spec.factory(spec.model, dict(spec.checked))


class ModelHandle:
    """One model of a run, built on first use and closed once. A task type may ask for its
    tokenizer while the run's data is read (a synthetic task builds each context to a length
    in the model's own tokens); generation then uses the same backend, so the model loads
    once, and a run whose task types never ask loads it only after its data is read."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self._backend: ModelBackend | None = None

    @property
    def built(self) -> bool:
        return self._backend is not None

    def backend(self) -> ModelBackend:
        if self._backend is None:
            self._backend = open_backend(self.spec)
        return self._backend

    def tokenizer(self) -> ModelBackend | None:
        """The backend when it lends a tokenizer (`tokenize` gives ids), else None."""
        backend = self.backend()
        return backend if backend.tokenize("lceval") is not None else None

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()


def open_judge_model(spec: ModelSpec | None, cache: Cache) -> CachedModel | None:
    """The judge model behind the request cache (its calls cached and counted), or None."""
    if spec is None:
        return None
    return CachedModel(open_backend(spec), cache, spec.canonical)


@contextmanager
def open_model(text: str, *, cache_path: Path | None = None, plugins: Plugins | None = None) -> Iterator[CachedModel]:
    """A model by spec string, through the request cache, for a plugin's own command (e.g.
    synthesizing a haystack): every call cached and resumable like a run's; the backend and
    the cache are closed when the block ends. `cache_path` defaults to the run cache."""
    plugins = plugins if plugins is not None else load_plugins()
    spec = resolve_model(text, load_catalog(plugins), plugins)
    cache = Cache(Path(cache_path) if cache_path else default_cache_path())
    backend = None
    try:
        backend = open_backend(spec)
        yield CachedModel(backend, cache, spec.canonical)
    finally:
        if backend is not None:
            backend.close()
        cache.close()
