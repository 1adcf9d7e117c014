"""Task specs: load a YAML file safely, check it against the shipped JSON Schema and the task
type's options schema, and fill defaults. Every error names file, field and line."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from .errors import UserError
from .options import defaults
from .types import GenerationParams
from .yamlsafe import PathKey, line_of, load_yaml_with_lines

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
    text = resources.files("lceval.schemas").joinpath(name).read_text(encoding="utf-8")
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


def validate(instance: Any, schema: dict[str, Any], path: Path, lines: dict[PathKey, int],
             prefix: PathKey = ()) -> None:
    """Raise the first (most specific) schema error as a UserError with file, field, line."""
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(instance), key=lambda e: (-len(e.absolute_path), str(e.message)))
    if not errors:
        return
    best = jsonschema.exceptions.best_match(errors) or errors[0]
    at = prefix + tuple(best.absolute_path)
    message = best.message
    if best.validator == "additionalProperties":
        message = f"{message} (allowed: {', '.join(sorted(best.schema.get('properties', {})))})"
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


def check_options(spec: TaskSpec, options_schema: dict[str, Any]) -> None:
    """Check the spec's `options` against its task type's schema and fill in the schema's
    declared defaults (in place), so the resolved spec - shown by `lceval tasks show` and
    recorded in the manifest - holds every option the task type will use."""
    validate(spec.data["options"], options_schema, spec.path, spec.lines, prefix=("options",))
    for key, value in defaults(options_schema).items():
        spec.data["options"].setdefault(key, value)


def with_overrides(spec: TaskSpec, overrides: dict[str, Any]) -> TaskSpec:
    """A copy of `spec` with run-time overrides (e.g. --context-policy) merged in and checked."""
    if not overrides:
        return spec
    data = _merge(spec.data, overrides)
    validate(data, load_schema("task_spec.schema.json"), spec.path, spec.lines)
    return TaskSpec(name=spec.name, path=spec.path, data=data, lines=spec.lines)
