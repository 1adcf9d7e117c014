"""Model spec strings: `SCHEME:MODEL[,key=value...]` or a registry alias (optionally with
extra `,key=value` options that override the alias's).

A string is resolved once (`resolve_model`): parsed, its scheme looked up among the installed
backends and its options checked against the backend's `options_schema`. The resulting
`ModelSpec` carries the factory and the checked options, so building the backend later
(`open_backend`) checks nothing again, and every stage of a run sees the same spec."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

from lceval.engine._catalog import Catalog
from lceval.engine._plugin_host import Plugins, describe_kind
from lceval.errors import PackageMissing, UserError
from lceval.interfaces import ModelFactory, missing_requirements
from lceval.io import PLUGIN_KEYWORD, unknown_name
from lceval.options import check_options, options_schema_of, split_options, unwrap
from lceval.engine._spending import SPENDING_OPTIONS, spending_options
from lceval.reasoning import MODEL_OPTIONS, ReasoningOptions, reasoning_options

JUDGE_MODEL_FLAG = "--judge-model"
#: the model options every backend takes, read by the engine (the backend never sees them):
#: how the model's thinking is read, how its requests are sent and what they may cost
ENGINE_OPTIONS: dict[str, Any] = {**MODEL_OPTIONS, **SPENDING_OPTIONS["properties"]}


@dataclass(frozen=True)
class ModelSpec:
    #: the model options every backend takes, which the engine reads itself (listed with each backend's own)
    ENGINE_OPTIONS: ClassVar[dict[str, Any]] = ENGINE_OPTIONS
    text: str  # as the user wrote it
    scheme: str
    model: str
    options: dict[str, str]  # as written: they name the model in results and cache keys
    #: the backend's own factory and the options it is called with (typed and defaulted when
    #: it declared an options_schema); None until resolved against the installed plugins
    factory: ModelFactory | None = field(default=None, compare=False, repr=False)
    checked: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    #: how the engine reads the model's thinking (lceval.reasoning.MODEL_OPTIONS, options every
    #: backend takes: the backend never sees them)
    reasoning: ReasoningOptions = field(default_factory=ReasoningOptions, compare=False, repr=False)
    #: how its requests are sent and what it may cost (`_spending.SPENDING_OPTIONS`: batch=...,
    #: max_cost=...; options every backend takes, read by the engine), checked and defaulted
    spending: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    #: the flag the string came from ("--model", "--judge-model"), for messages
    flag: str = field(default="--model", compare=False, repr=False)

    @property
    def canonical(self) -> str:
        """The model string in one spelling: options sorted, and without how its requests are
        sent or what they may cost (batch=, max_cost= ...): answers are the same either way."""
        opts = "".join(f",{k}={v}" for k, v in sorted(self.options.items()) if k not in SPENDING_OPTIONS["properties"])
        return f"{self.scheme}:{self.model}{opts}"

    @property
    def label(self) -> str:
        """What a paper's table calls the model: `model_label` of the string as written."""
        return model_label(self.text)


def model_label(text: str) -> str:
    """A model string as a table's row names it: options dropped, then the name after a
    file's `#` (`replay:FILE#GPT-4` -> `GPT-4`, DESIGN's `replay:FILE#MODEL_NAME`), else the
    last path component (`hf:org/Model,opt=1` -> `Model`); an alias stays the alias. Needs no
    catalog: run folders and reports name models that may not be installed here."""
    base, _ = split_options(text.strip(), "--model")
    return re.split(r"[#/:]", base)[-1] or text


def parse_model_spec(text: str, catalog: Catalog, field: str = "--model") -> ModelSpec:
    """The string's parts, aliases expanded; not yet checked against the installed backends."""
    base, extra = split_options(text.strip(), field)
    if base in catalog.models:
        alias_base, alias_opts = split_options(catalog.models[base].spec, field)
        base, extra = alias_base, {**alias_opts, **extra}
    scheme, sep, model = base.partition(":")
    if not sep and base.lower().endswith(".gguf"):  # a model file given as it is: name the backend that runs it
        raise UserError(f"model '{text}' is a GGUF file without a backend", field=field,
                        hint=f"Run it with llama.cpp: --model llamacpp:{text.strip()} (or hf:{text.strip()}, which "
                             "dequantizes it with transformers).")
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
    own = {k: v for k, v in spec.options.items() if k not in MODEL_OPTIONS and k not in SPENDING_OPTIONS["properties"]}
    if schema is not None:
        _refuse_others_options(spec.scheme, schema, own, plugins, field)
    checked = (check_options(schema, own, what=describe_kind("model", spec.scheme), also_known=list(ENGINE_OPTIONS))
               if schema is not None else dict(own))
    if schema is not None:
        _check_plugin_options(schema, checked, plugins)
    return ModelSpec(text=spec.text, scheme=spec.scheme, model=spec.model, options=spec.options,
                     factory=unwrap(registered), checked=checked,
                     reasoning=reasoning_options(spec.options, field=field, model=f"{spec.scheme}:{spec.model}"),
                     spending=spending_options(spec.options, field), flag=field)


def _refuse_others_options(scheme: str, schema: dict[str, Any], options: dict[str, Any], plugins: Plugins,
                           field: str) -> None:
    """An option this backend does not declare but another installed backend does (a press on
    llama.cpp): one line naming the option and the backends that take it, rather than a
    did-you-mean among this backend's options."""
    if schema.get("additionalProperties", True) is not False:
        return
    for key, value in options.items():
        if check_options_known(schema, key):
            continue
        takers = sorted(name for name, factory in plugins.models.items() if name != scheme
                        and check_options_known(options_schema_of(factory) or {}, key))
        if takers:
            raise UserError(f"backend '{scheme}' takes no option '{key}' (given {key}={value}); "
                            f"it is an option of {', '.join(f'{t}:' for t in takers)} models", field=field,
                            hint=f"e.g. --model {takers[0]}:MODEL,{key}={value}")


def check_options_known(schema: dict[str, Any], key: str) -> bool:
    """Whether `schema` declares option `key` (by name, or by a `patternProperties` form)."""
    if key in (schema.get("properties") or {}):
        return True
    return any(re.search(pattern, key) for pattern in (schema.get("patternProperties") or {}))


def _check_plugin_options(schema: dict[str, Any], checked: dict[str, Any], plugins: Plugins) -> None:
    """An option that names a plugin (`"x-lceval-plugin": KIND`, e.g. `press=snapkv`) must name
    an installed one, and the options written `OPTION.KEY=VALUE` are that plugin's: both are
    checked now, before any work, with the plugin's own options schema, and the plugin's
    packages must be installed (`interfaces.requires`)."""
    for key, prop in (schema.get("properties") or {}).items():
        rule = prop.get(PLUGIN_KEYWORD)
        if not rule:
            continue
        kind = rule["kind"] if isinstance(rule, dict) else str(rule)
        own = {k[len(key) + 1:]: v for k, v in checked.items() if k.startswith(key + ".")}
        if checked.get(key) is None:
            if own:
                raise UserError(f"option '{key}.{next(iter(own))}' is an option of the {kind} that {key}=NAME "
                                f"names, and no {key} is given", field=f"{key}.{next(iter(own))}")
            continue
        table = plugins.table(kind)
        name = str(checked[key])
        if name not in table:
            raise UserError(unknown_name(kind, name, sorted(table)), field=key,
                            hint="`lceval plugins` lists what is installed and what failed to load.")
        plugin_schema = options_schema_of(table[name])
        if plugin_schema is not None:
            check_options(plugin_schema, own, what=describe_kind(kind, name), field_prefix=key + ".")
        install = missing_requirements(table[name])
        if install:
            raise PackageMissing(f"{describe_kind(kind, name)} ({key}={name}) needs a package that is not installed",
                                 field=key, install=install, hint=install)


def resolve_judge_model(text: str | None, catalog: Catalog, plugins: Plugins) -> ModelSpec | None:
    """`--judge-model`, resolved before any work is done; None if absent."""
    return resolve_model(text, catalog, plugins, field=JUDGE_MODEL_FLAG) if text else None
