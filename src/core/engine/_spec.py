"""Task specs: load a YAML file safely, check it against the shipped JSON Schema and the task
type's options schema, and fill defaults. Every error names file, field and line."""

from __future__ import annotations

import copy
import difflib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import jsonschema

from lceval.errors import UserError
from lceval.options import defaults
from lceval.io._safeio import quote
from lceval.types import GenerationParams
from lceval.io._yaml import PathKey, line_of, load_yaml_with_lines

if TYPE_CHECKING:
    from lceval.engine._plugin_host import Plugins

#: JSON-Schema keyword a task type puts on an option that names a plugin, so `lceval
#: validate` and every run check the name exists and say where it is written:
#: `{"type": "string", "x-lceval-plugin": "retriever"}`, or with values that are not plugins
#: `{"x-lceval-plugin": {"kind": "retriever", "values": ["full"], "prefixes": ["stored:"]}}`.
PLUGIN_KEYWORD = "x-lceval-plugin"

DEFAULTS: dict[str, Any] = {
    "options": {},
    "generation": {"max_new_tokens": 512, "temperature": 0.0, "top_p": 1.0,
                   "repeat_penalty": 1.0, "stop": []},
    "context": {"policy": "error"},
    "judge": {"name": "lexical", "options": {}},
    "report": {"breakdowns": [], "tests": []},
}


@lru_cache(maxsize=None)
def load_schema(name: str) -> dict[str, Any]:
    text = resources.files("lceval.io.schemas").joinpath(name).read_text(encoding="utf-8")
    return json.loads(text)


@dataclass
class TaskSpec:
    name: str
    path: Path
    data: dict[str, Any]  # validated, defaults filled
    lines: dict[PathKey, int]

    @property
    def type(self) -> str:
        return self.data["type"]

    @property
    def description(self) -> str:
        return self.data["description"]

    def generation_params(self, seed: int) -> GenerationParams:
        g = self.data["generation"]
        return GenerationParams(
            max_new_tokens=int(g["max_new_tokens"]),
            temperature=float(g["temperature"]),
            top_p=float(g["top_p"]),
            repeat_penalty=float(g["repeat_penalty"]),
            seed=seed,
            stop=tuple(g.get("stop", [])),
        )

    def error(self, message: str, at: PathKey = ()) -> UserError:
        return UserError(message, file=self.path, field=".".join(map(str, at)) or None,
                         line=line_of(self.lines, at))


def _merge(defaults: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(defaults)
    for key, value in data.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _plugin_check(plugins: "Plugins | None"):  # noqa: ANN202 - a jsonschema keyword function
    def check(validator: Any, rule: Any, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
        if plugins is None or not isinstance(instance, str):
            return
        kind, values, prefixes = (rule["kind"], list(rule.get("values", [])), list(rule.get("prefixes", []))) \
            if isinstance(rule, dict) else (rule, [], [])
        table = plugins.table(kind)
        if instance in table or instance in values or any(instance.startswith(p) for p in prefixes):
            return
        yield jsonschema.ValidationError(_unknown(kind, instance, values + [f"{p}NAME" for p in prefixes]
                                                  + sorted(table)))
    return check


def _validator(schema: dict[str, Any], plugins: "Plugins | None") -> Any:
    cls = jsonschema.validators.extend(jsonschema.Draft202012Validator, {PLUGIN_KEYWORD: _plugin_check(plugins)})
    return cls(schema)


def _unknown_keys(error: Any) -> list[str]:
    """The keys an additionalProperties error is about (jsonschema only puts them in prose)."""
    allowed = set(error.schema.get("properties", {}))
    patterns = [re.compile(p) for p in error.schema.get("patternProperties", {})]
    return [k for k in error.instance if k not in allowed and not any(p.search(k) for p in patterns)]


def validate(instance: Any, schema: dict[str, Any], path: Path, lines: dict[PathKey, int],
             prefix: PathKey = (), plugins: "Plugins | None" = None) -> None:
    """Raise the first (most specific) schema error as a UserError with file, field, line.
    With `plugins`, options marked with PLUGIN_KEYWORD must name a registered plugin."""
    validator = _validator(schema, plugins)
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


def load_spec(path: Path) -> TaskSpec:
    """Parse and check the generic part of a spec; options are checked by `check_options`."""
    path = Path(path)
    raw, lines = load_yaml_with_lines(path)
    if not isinstance(raw, dict):
        raise UserError("a task spec must be a mapping of fields", file=path, line=1)
    validate(raw, load_schema("task_spec.schema.json"), path, lines)
    data = _merge(DEFAULTS, raw)
    return TaskSpec(name=data["name"], path=path, data=data, lines=lines)


def check_options(spec: TaskSpec, options_schema: dict[str, Any], plugins: "Plugins | None" = None) -> None:
    """Check the spec's `options` against its task type's schema and fill in the schema's
    declared defaults (in place), so the resolved spec - shown by `lceval tasks show` and
    recorded in the manifest - holds every option the task type will use. With `plugins`, an
    option naming a plugin (PLUGIN_KEYWORD) must name one that is installed."""
    validate(spec.data["options"], options_schema, spec.path, spec.lines, prefix=("options",), plugins=plugins)
    for key, value in defaults(options_schema).items():
        spec.data["options"].setdefault(key, value)


def task_type_of(spec: TaskSpec, plugins: "Plugins") -> Any:
    """The task-type plugin the spec's `type:` names; an unknown one is reported at that line
    of the spec file."""
    if spec.type in plugins.task_types:
        return plugins.task_types[spec.type]
    failed = [f"{i.name} ({i.error.splitlines()[-1]})" for i in plugins.infos if i.error]
    raise UserError(_unknown("task type", spec.type, sorted(plugins.task_types)), file=spec.path, field="type",
                    line=line_of(spec.lines, ("type",)),
                    hint=f"Plugins that failed to load: {', '.join(failed)}." if failed else None)


def check_references(spec: TaskSpec, plugins: "Plugins", judges: bool = True) -> Any:
    """Every plugin the spec names exists: its task type, its judge (`judges=False` when the
    command line picks the judge instead) and its rank judge; options are checked by
    `check_options`. Returns the task type."""
    task_type = task_type_of(spec, plugins)
    if judges:
        name = spec.data["judge"]["name"]
        if name not in plugins.judges:
            raise spec.error(_unknown("judge", name, sorted(plugins.judges)), ("judge", "name"))
    rank_judge = (spec.data.get("rank") or {}).get("judge")
    if isinstance(rank_judge, str):
        name = rank_judge.split(",", 1)[0].strip()
        if name not in plugins.pairwise_judges:
            raise spec.error(_unknown("pairwise judge", name, sorted(plugins.pairwise_judges)), ("rank", "judge"))
    return task_type


def _unknown(kind: str, name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    return (f"unknown {kind} {quote(name)} (known: {', '.join(known) or 'none'})"
            + (f"; did you mean '{close[0]}'?" if close else ""))


def with_overrides(spec: TaskSpec, overrides: dict[str, Any]) -> TaskSpec:
    """A copy of `spec` with run-time overrides (e.g. --context-policy) merged in and checked."""
    if not overrides:
        return spec
    data = _merge(spec.data, overrides)
    validate(data, load_schema("task_spec.schema.json"), spec.path, spec.lines)
    return TaskSpec(name=spec.name, path=spec.path, data=data, lines=spec.lines)
