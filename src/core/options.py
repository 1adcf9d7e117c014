"""Typed plugin options: a plugin declares what `,key=value` options it takes once, as a JSON
Schema, and the engine checks every value against it before the plugin sees it.

Why one mechanism for every kind: a backend, a judge, a pairwise judge and a retriever all
take options from a user (`--model llamacpp:M,n_ctx=8192`, `--judge rubric,max_attempts=5`,
a spec's `retriever_options`), and each used to parse them by hand, with different errors
for the same mistake. Declared options give every plugin - a third party's too - the same
checks (types, ranges, choices, unknown keys with a did-you-mean), the same defaults, and a
listing in `lceval plugins NAME`, for free. Task types already declare `options_schema`
the same way (JSON Schema), so a plugin author learns one format.

A schema is a JSON Schema object (draft 2020-12) whose `properties` each give a `type`
(string, integer, number, boolean, array, object, or a list of them), optionally `enum`,
`minimum`/`maximum`/`exclusiveMinimum`, `default` and `description`. Values given as text
(model spec strings) are converted by the declared type first; values that are already typed
(YAML from `--judge` or a spec) are checked as they are. Unknown keys are refused unless the
schema sets `additionalProperties` to something other than false.

What a plugin receives, whatever way the user wrote the value:
- an option declared `number` (and not `integer`) is a Python float (`temperature=1` -> 1.0),
  one declared `integer` an int (`3.0` from YAML -> 3), so a value that enters a cache key
  is spelled the same however it was typed;
- a string option with an `enum` matches case-insensitively (`dtype=FLOAT32` -> "float32");
- a string option is the text as written: paths, `pkg:MODULE/FILE` and `TYPE:FACTOR` values
  pass through unchanged (declare a `pattern` to check their form).

Secrets never reach a command line or an error message: the value of an option whose schema
says `writeOnly: true`, or whose name looks like a credential (`api_key`, `token`,
`password` ...), is never echoed, and such a name a plugin does not declare is refused with
the advice to use the environment instead.
"""

from __future__ import annotations

import copy
import difflib
import json
import re
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Mapping, Sequence

import jsonschema
import yaml

from lceval.errors import UserError

__all__ = ["NO_OPTIONS", "CheckedFactory", "Flag", "FlagSettings", "OptionRow", "OptionsSchema", "check_options", "check_schema",
           "defaults", "describe", "did_you_mean", "flag", "flags_of", "from_flags", "options_schema_of",
           "parse_judge_flag", "split_options", "unwrap", "whole_number"]

OptionsSchema = dict[str, Any]

#: Words accepted for a boolean given as text (`,verbose=yes`).
BOOL_WORDS = {"1": True, "true": True, "yes": True, "on": True,
              "0": False, "false": False, "no": False, "off": False}

#: The schema of a plugin that takes no options: any option given is refused by name.
NO_OPTIONS: OptionsSchema = {"type": "object", "additionalProperties": False, "properties": {}}

_INT = re.compile(r"[+-]?\d+")
#: Option names that hold credentials: never echoed, and refused unless a plugin declares one.
SECRET_NAME = re.compile(r"(api_?|access_|auth_|client_|secret_)?(key|token|secret|password|passwd)|"
                         r"authorization|credentials?|bearer", re.IGNORECASE)


#: schemas already found sound, by their canonical JSON: checking one against the meta-schema
#: costs milliseconds, and every command loads every plugin's schemas (~0.4 s a load without this)
_SOUND: set[str] = set()


def check_schema(schema: OptionsSchema) -> None:
    """Raise `ValueError` when a plugin declares a schema the engine cannot use, so the
    plugin is reported at load time rather than failing on a user's first option."""
    if not isinstance(schema, dict):
        raise ValueError(f"an options schema must be a mapping, got {type(schema).__name__}")
    try:
        key = json.dumps(schema, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        key = None
    if key is not None and key in _SOUND:
        return
    _check_schema(schema)
    if key is not None:
        _SOUND.add(key)


def _check_schema(schema: OptionsSchema) -> None:
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"invalid options schema: {exc.message}") from None
    if schema.get("type", "object") != "object":
        raise ValueError("an options schema must describe an object (type: object)")
    props = schema.get("properties", {})
    if not isinstance(props, dict):
        raise ValueError("an options schema's 'properties' must be a mapping")
    for key, prop in props.items():
        if "default" in prop:
            errors = list(jsonschema.Draft202012Validator(prop).iter_errors(prop["default"]))
            if errors:
                raise ValueError(f"the default of option '{key}' does not fit its own schema: "
                                 f"{errors[0].message}")


def _types(prop: Mapping[str, Any]) -> list[str]:
    declared = prop.get("type")
    if isinstance(declared, str):
        return [declared]
    if isinstance(declared, list):
        return [t for t in declared if isinstance(t, str)]
    if "enum" in prop:
        return sorted({_json_type(v) for v in prop["enum"]})
    return []


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "string"


def _from_text(text: str, types: list[str]) -> Any:
    """Convert an option given as text by the types its schema declares, most specific first.
    Returns the text unchanged when no declared type reads it (the schema check then names
    the expected type)."""
    stripped = text.strip()
    for kind in ("boolean", "integer", "number", "null", "array", "object", "string"):
        if kind not in types:
            continue
        if kind == "boolean" and stripped.lower() in BOOL_WORDS:
            return BOOL_WORDS[stripped.lower()]
        if kind == "integer" and _INT.fullmatch(stripped):
            return int(stripped)
        if kind == "number":
            try:
                number = float(stripped)
            except ValueError:
                continue
            if number == number and number not in (float("inf"), float("-inf")):  # no NaN/inf
                return number
        if kind == "null" and stripped.lower() in ("null", "none", ""):
            return None
        if kind in ("array", "object"):
            import yaml

            try:
                value = yaml.safe_load(stripped)
            except yaml.YAMLError:
                continue
            if _json_type(value) == kind:
                return value
        if kind == "string":
            return text
    return text


def did_you_mean(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    listing = f"Known options: {', '.join(sorted(known))}." if known else "It takes no options."
    return (f"Did you mean '{close[0]}'? " if close else "") + listing


def check_options(schema: OptionsSchema, values: Mapping[str, Any], *, what: str,
                  field: str | None = None, field_prefix: str = "", also_known: Sequence[str] = ()) -> dict[str, Any]:
    """`values` checked against `schema`, text converted to the declared types and the
    declared defaults filled in. `what` names the plugin in errors ("backend 'llamacpp'",
    "judge 'rubric'"); `field` is the flag or spec field the options came from, else each
    error names `field_prefix + key` (e.g. "judge.options.top_p"). `also_known`: names taken
    beside the schema's (the options every backend takes), offered by an unknown key's
    did-you-mean.

    Checking options that were already checked returns them unchanged, so a plugin may check
    again what the engine checked (its factory is then also safe to call directly)."""
    if not isinstance(values, Mapping):
        raise UserError(f"{what} options must be a mapping of name: value, got {_show(values)}",
                        field=field or field_prefix.rstrip(".") or None)
    props: dict[str, Any] = schema.get("properties", {})
    closed = schema.get("additionalProperties", True) is False
    out: dict[str, Any] = {}
    for key, value in values.items():
        where = field or f"{field_prefix}{key}"
        pattern = _pattern_prop(schema, key) if key not in props else None
        if pattern is not None:  # a key of a declared form (`press.KEY`): typed as declared, else as given
            out[key] = _normalize(value, pattern)
            continue
        if key not in props:
            if SECRET_NAME.fullmatch(str(key)):
                raise UserError(f"{what} never takes a secret as an option (option '{key}', value not shown).",
                                field=where, hint="Put it in an environment variable. "
                                + did_you_mean(key, [*props, *also_known]))
            if closed:
                raise UserError(f"{what} has no option '{key}' (given {key}={_show(value)}).",
                                field=where, hint=did_you_mean(key, [*props, *also_known]))
            out[key] = value
            continue
        out[key] = _normalize(value, props[key])
    for key, needed in (schema.get("dependentRequired") or {}).items():
        missing = [d for d in needed if key in out and d not in out]
        if missing:
            raise UserError(f"{what} option {key}={_show(values.get(key, out[key]))} needs {missing[0]}=... too",
                            field=field or f"{field_prefix}{key}", hint=_describe_hint(key, props.get(key, {})))
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(out), key=lambda e: (list(e.absolute_path), e.message))
    if errors:
        error = errors[0]
        key = str(error.absolute_path[0]) if error.absolute_path else ""
        if key:
            prop = props.get(key, {})
            where = field or f"{field_prefix}{key}"
            if _secret(key, prop):
                raise UserError(f"{what} option {key} (value not shown) is not valid", field=where,
                                hint=_describe_hint(key, prop))
            given = values.get(key, out.get(key))
            message = "not of the expected form" if error.validator == "pattern" else error.message
            raise UserError(f"{what} option {key}={_show(given)}: {message}", field=where,
                            hint=_describe_hint(key, prop))
        raise UserError(f"{what} options: {error.message}", field=field or field_prefix.rstrip(".") or None)
    for key, prop in props.items():
        if key not in out and "default" in prop:
            out[key] = copy.deepcopy(prop["default"])
    return out


def _pattern_prop(schema: OptionsSchema, key: str) -> Mapping[str, Any] | None:
    """The `patternProperties` entry whose pattern `key` matches (JSON Schema's search), if any."""
    for pattern, prop in (schema.get("patternProperties") or {}).items():
        if re.search(pattern, str(key)):
            return prop
    return None


def _normalize(value: Any, prop: Mapping[str, Any]) -> Any:
    """One spelling per value: text converted by type, numbers made int or float as declared,
    enum text matched without regard to case (see the module docstring)."""
    types = _types(prop)
    if isinstance(value, str):
        value = _from_text(value, types)
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and "number" in types and "integer" not in types:
        return float(value)
    if isinstance(value, float) and "integer" in types and "number" not in types and value.is_integer():
        return int(value)
    if isinstance(value, str) and isinstance(prop.get("enum"), list) and value not in prop["enum"]:
        same = [v for v in prop["enum"] if isinstance(v, str) and v.lower() == value.lower()]
        if len(same) == 1:
            return same[0]
    return value


def _secret(key: str, prop: Mapping[str, Any]) -> bool:
    return bool(prop.get("writeOnly")) or bool(SECRET_NAME.fullmatch(key))


def defaults(schema: OptionsSchema | None) -> dict[str, Any]:
    """The declared defaults of a schema's options (a fresh copy each call), for code that
    needs them outside a check, e.g. a task type called directly in a test."""
    return {key: copy.deepcopy(prop["default"])
            for key, prop in (schema or {}).get("properties", {}).items() if "default" in prop}


def _show(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


def _describe_hint(key: str, prop: Mapping[str, Any]) -> str | None:
    doc = prop.get("description")
    return f"{key}: {doc}" if isinstance(doc, str) and doc else None


@dataclass(frozen=True)
class OptionRow:
    """One declared option, for `lceval plugins NAME` and the docs."""

    name: str
    type: str
    default: str
    description: str


def describe(schema: OptionsSchema | None) -> list[OptionRow]:
    """One row per declared option; a `patternProperties` entry is one row named by its
    `title` (e.g. `press.OPTION`), else by its pattern."""
    rows = []
    patterns = {prop.get("title") or pattern: prop
                for pattern, prop in ((schema or {}).get("patternProperties") or {}).items()}
    for key, prop in {**(schema or {}).get("properties", {}), **patterns}.items():
        kind = " | ".join(_types(prop)) or "any"
        if "enum" in prop:
            kind = " | ".join(str(v) for v in prop["enum"])
        bounds = []
        for word, sign in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="),
                           ("exclusiveMaximum", "<")):
            if word in prop:
                bounds.append(f"{sign} {prop[word]}")
        if bounds:
            kind += f" ({', '.join(bounds)})"
        default = repr(prop["default"]) if "default" in prop else "-"
        rows.append(OptionRow(name=key, type=kind, default=default, description=prop.get("description", "")))
    return rows


class CheckedFactory:
    """A registered factory with its declared options: calling it checks the options first,
    so every way of building a plugin (run, score, rank, a plugin command) gets the checks.

    `options_at(*args)` returns the options mapping inside the factory's arguments and
    `with_options(args, options)` puts the checked one back: model factories take
    `(model, options)`, judge factories a `JudgeContext`, retriever factories a mapping.
    """

    def __init__(self, factory: Callable[..., Any], schema: OptionsSchema, what: str,
                 options_at: Callable[[tuple[Any, ...]], Mapping[str, Any]],
                 with_options: Callable[[tuple[Any, ...], dict[str, Any]], tuple[Any, ...]],
                 passthrough: tuple[str, ...] = (), field_prefix: str = "") -> None:
        self.factory = factory
        self.field_prefix = field_prefix
        self.options_schema = schema
        self.what = what
        self._options_at = options_at
        self._with_options = with_options
        self._passthrough = passthrough

    def __call__(self, *args: Any) -> Any:
        given = dict(self._options_at(args))
        declared = self.options_schema.get("properties", {})
        # keys the engine adds (a retriever's seed) pass as they are unless the plugin declares them
        kept = {k: given.pop(k) for k in self._passthrough if k in given and k not in declared}
        checked = check_options(self.options_schema, given, what=self.what, field_prefix=self.field_prefix)
        return self.factory(*self._with_options(args, {**kept, **checked}))

    def __repr__(self) -> str:
        return f"CheckedFactory({self.factory!r}, {self.what})"


def options_schema_of(factory: Any) -> OptionsSchema | None:
    """The declared options of a registered factory (None when it declared none)."""
    return getattr(factory, "options_schema", None)


def unwrap(factory: Any) -> Any:
    """The plugin's own factory behind a `CheckedFactory`."""
    return getattr(factory, "factory", factory)


def split_options(text: str, field: str = "--model") -> tuple[str, dict[str, str]]:
    """A model string's `BASE,key=value,...` -> (BASE, options as written); a comma before the
    first `key=value` belongs to BASE (a file name may hold one). The one parser of the engine's
    model specs, and of a report reading a run's press and ratio from its model string."""
    parts = text.strip().split(",")
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


def parse_judge_flag(text: str) -> tuple[str, dict[str, Any]]:
    """`--judge NAME[,key=value...]`: a judge or preset, with options (YAML values) that
    override the preset's (`lceval run --judge`, `lceval score --judge`, `lceval rank --judge`)."""
    name, *pairs = [p.strip() for p in text.split(",")]
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UserError(f"judge option '{pair}' is not key=value", field="--judge")
        try:
            options[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError:
            raise UserError(f"value of judge option '{key}' is not valid YAML: {value!r}", field="--judge") from None
    if not name:
        raise UserError("--judge needs a judge name", field="--judge")
    return name, options


def whole_number(flag: str, minimum: int = 1) -> Callable[[Any], int]:
    """The parser of a flag that takes a whole number of at least `minimum` (`--limit`,
    `--shards` ...): one wording for every such flag of `run` and `launch`."""
    def parse(text: Any) -> int:
        try:
            value = int(str(text).strip())
        except ValueError:
            raise UserError(f"{flag} takes a whole number, got '{text}'", field=flag) from None
        if value < minimum:
            raise UserError(f"{flag} must be at least {minimum}, got {value}", field=flag)
        return value
    return parse


# -- command-line flags, declared on the settings they set -----------------------------------

@dataclass(frozen=True)
class Flag:
    """How one field of a settings dataclass (`lceval run`'s `RunConfig`, `lceval launch`'s
    `LaunchSettings`) is spelled and read on the command line. The CLI builds its options from
    these declarations (`flags_of`) and `from_flags` turns the given text into the field's
    value, so an option is declared once, and a bad value is one line naming its flag."""

    names: tuple[str, ...]
    help: str
    metavar: str | None = None
    #: given several times, each value kept (argparse's "append")
    repeat: bool = False
    #: a switch without a value (True when given)
    switch: bool = False
    required: bool = False
    #: the only values argparse accepts
    choices: tuple[str, ...] | None = None
    #: the given text (a list of texts for `repeat`) -> the field's value; None keeps the text
    parse: Callable[[Any], Any] | None = None

    @property
    def name(self) -> str:
        return self.names[0]


def flag(*names: str, help: str, default: Any = None, default_factory: Callable[[], Any] | None = None,
         metadata: Mapping[str, Any] | None = None, **kind: Any) -> Any:
    """A dataclass field set by the flag `names` (`kind`: `Flag`'s other attributes);
    `metadata` is kept beside the flag for the settings' own use."""
    meta = {**(metadata or {}), "flag": Flag(names=names, help=help, **kind)}
    if default_factory is not None:
        return field(default_factory=default_factory, metadata=meta)
    return field(default=default, metadata=meta)


def flags_of(settings: type) -> list[tuple[str, Flag]]:
    """(field name, its flag) for every flagged field of the dataclass `settings`, in
    declaration order."""
    return [(f.name, f.metadata["flag"]) for f in fields(settings) if "flag" in f.metadata]


def from_flags(settings: type, given: Mapping[str, Any]) -> dict[str, Any]:
    """The values of the flags given (`given`: the command line's text by field name; None,
    or False for a switch, is not given), each converted by its flag's `parse`."""
    values: dict[str, Any] = {}
    for name, declared in flags_of(settings):
        raw = given.get(name)
        if raw is None or (declared.switch and raw is False):
            continue
        values[name] = declared.parse(raw) if declared.parse is not None else raw
    return values


class FlagSettings:
    """A dataclass of settings whose fields carry their flags (`lceval run`'s `RunConfig`,
    `lceval launch`'s `LaunchSettings`): built from the command line by `from_flags`, then
    checked as a whole by `check`, which a settings object built by code calls too."""

    @classmethod
    def from_flags(cls, given: Mapping[str, Any], **extra: Any) -> Any:
        """The settings from the command line's values by field name (None = not given; a
        switch's value is whether it was given), each converted by its flag, over `extra`."""
        settings = cls(**{**extra, **from_flags(cls, given)})
        settings.check()
        return settings

    def check(self) -> None:
        """What no single flag can say wrong."""
