"""JSON Schemas, ours and plugins': the shipped ones (task specs, results, samples) loaded
from the package, and one `validate` that turns the most specific error into a `UserError`
naming the file, the field and its line (an unknown key at its own line, with a
did-you-mean), so every reader of a user's file reports the same way."""

from __future__ import annotations

import difflib
import json
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Collection, Iterator

import jsonschema

from lceval.errors import UserError
from lceval.io._readers import quote
from lceval.io._yaml import PathKey, line_of

__all__ = ["PLUGIN_KEYWORD", "PluginNames", "load_schema", "unknown_name", "validate"]

#: kind ("retriever", "judge" ...) -> the names installed plugins registered for it
PluginNames = Callable[[str], Collection[str]]

#: JSON-Schema keyword a task type puts on an option that names a plugin, so `lceval
#: validate` and every run check the name exists and say where it is written:
#: `{"type": "string", "x-lceval-plugin": "retriever"}`, or with values that are not plugins
#: `{"x-lceval-plugin": {"kind": "retriever", "values": ["full"], "prefixes": ["stored:"]}}`.
PLUGIN_KEYWORD = "x-lceval-plugin"

@lru_cache(maxsize=None)
def load_schema(name: str) -> dict[str, Any]:
    text = resources.files("lceval.io.schemas").joinpath(name).read_text(encoding="utf-8")
    return json.loads(text)


def _plugin_check(plugin_names: PluginNames | None):  # noqa: ANN202 - a jsonschema keyword function
    def check(validator: Any, rule: Any, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
        if plugin_names is None or not isinstance(instance, str):
            return
        kind, values, prefixes = (rule["kind"], list(rule.get("values", [])), list(rule.get("prefixes", []))) \
            if isinstance(rule, dict) else (rule, [], [])
        table = plugin_names(kind)
        if instance in table or instance in values or any(instance.startswith(p) for p in prefixes):
            return
        yield jsonschema.ValidationError(unknown_name(kind, instance, values + [f"{p}NAME" for p in prefixes]
                                                  + sorted(table)))
    return check


def _validator(schema: dict[str, Any], plugin_names: PluginNames | None) -> Any:
    cls = jsonschema.validators.extend(jsonschema.Draft202012Validator, {PLUGIN_KEYWORD: _plugin_check(plugin_names)})
    return cls(schema)


def _unknown_keys(error: Any) -> list[str]:
    """The keys an additionalProperties error is about (jsonschema only puts them in prose)."""
    allowed = set(error.schema.get("properties", {}))
    patterns = [re.compile(p) for p in error.schema.get("patternProperties", {})]
    return [k for k in error.instance if k not in allowed and not any(p.search(k) for p in patterns)]


def validate(instance: Any, schema: dict[str, Any], path: Path, lines: dict[PathKey, int],
             prefix: PathKey = (), plugin_names: PluginNames | None = None) -> None:
    """Raise the first (most specific) schema error as a UserError with file, field, line.
    With `plugin_names` (kind -> the registered names), options marked with PLUGIN_KEYWORD
    must name a registered plugin."""
    validator = _validator(schema, plugin_names)
    errors = sorted(validator.iter_errors(instance), key=lambda e: (-len(e.absolute_path), str(e.message)))
    if not errors:
        return
    best = jsonschema.exceptions.best_match(errors) or errors[0]
    at = prefix + tuple(best.absolute_path)
    message = best.message
    if best.validator == "additionalProperties" and isinstance(best.instance, dict):
        unknown = _unknown_keys(best)
        allowed = sorted(best.schema.get("properties", {}))
        if unknown:  # point at the stray key's own line, not at its parent's
            at = at + (unknown[0],)
            close = difflib.get_close_matches(unknown[0], allowed, n=1)
            message = f"unknown field {quote(unknown[0])}" + (f"; did you mean '{close[0]}'?" if close else "")
        message = f"{message} (allowed: {', '.join(allowed)})"
    elif len(message) > 200:  # jsonschema quotes the whole value: keep the message one line
        message = f"{quote(best.instance)} fails '{best.validator}' of the schema"
    raise UserError(message, file=path, field=".".join(map(str, at)) or "(top level)",
                    line=line_of(lines, at))


def unknown_name(kind: str, name: str, known: list[str]) -> str:
    """"unknown judge 'rubrik' (known: ...); did you mean 'rubric'?"."""
    close = difflib.get_close_matches(name, known, n=1)
    return (f"unknown {kind} {quote(name)} (known: {', '.join(known) or 'none'})"
            + (f"; did you mean '{close[0]}'?" if close else ""))
