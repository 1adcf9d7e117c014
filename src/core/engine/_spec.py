"""Task specs: load a YAML file safely, check it against the shipped JSON Schema and the task
type's options schema, and fill defaults. Every error names file, field and line."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lceval.errors import UserError
from lceval.io import load_schema, unknown_name, validate
from lceval.io import PathKey, line_of, load_yaml_with_lines
from lceval.options import defaults
from lceval.types import GenerationParams

if TYPE_CHECKING:
    from lceval.engine._plugin_host import Plugins

DEFAULTS: dict[str, Any] = {
    "options": {},
    "generation": {"max_new_tokens": 512, "temperature": 0.0, "top_p": 1.0,
                   "repeat_penalty": 1.0, "stop": []},
    "context": {"policy": "error"},
    "judge": {"name": "lexical", "options": {}},
    "report": {"breakdowns": [], "tests": []},
}


@dataclass(frozen=True)
class ContextSettings:
    """The spec's `context:` section: how a long context is fitted to the model's window."""

    policy: str
    #: tokens kept for each answer; None = the spec's generation.max_new_tokens
    answer_reserve: int | None
    #: one budget of `--context-lengths`: the context is cut to at most this many tokens
    max_tokens: int | None

    def reserve(self, max_new_tokens: int) -> int:
        return int(self.answer_reserve if self.answer_reserve is not None else max_new_tokens)


@dataclass(frozen=True)
class JudgeChoice:
    """The spec's `judge:` section, or the `--judge` flag with its options."""

    name: str
    options: dict[str, Any]


@dataclass
class TaskSpec:
    """A checked task spec. `data` is the resolved mapping (defaults filled once, here, and
    the task type's option defaults by `check_options`): what `lceval tasks show` prints and
    the manifest records. The engine reads it through the typed sections below, never by
    indexing `data`."""

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

    @property
    def dataset(self) -> str | None:
        return self.data.get("dataset")

    @property
    def splits(self) -> list[str] | None:
        return self.data.get("splits")

    @property
    def options(self) -> dict[str, Any]:
        """The task type's options (checked against its schema, its defaults filled)."""
        return self.data["options"]

    @property
    def context(self) -> ContextSettings:
        c = self.data["context"]
        return ContextSettings(policy=c["policy"], answer_reserve=c.get("answer_reserve"),
                               max_tokens=c.get("max_tokens"))

    @property
    def judge(self) -> JudgeChoice:
        return JudgeChoice(name=self.data["judge"]["name"], options=dict(self.data["judge"].get("options") or {}))

    @property
    def rank(self) -> dict[str, Any]:
        return dict(self.data.get("rank") or {})

    @property
    def report(self) -> dict[str, Any]:
        return self.data["report"]

    @property
    def max_new_tokens(self) -> int:
        return int(self.data["generation"]["max_new_tokens"])

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
    validate(spec.options, options_schema, spec.path, spec.lines, prefix=("options",),
             plugin_names=plugins.table if plugins is not None else None)
    for key, value in defaults(options_schema).items():
        spec.options.setdefault(key, value)


def task_type_of(spec: TaskSpec, plugins: "Plugins") -> Any:
    """The task-type plugin the spec's `type:` names; an unknown one is reported at that line
    of the spec file."""
    if spec.type in plugins.task_types:
        return plugins.task_types[spec.type]
    failed = [f"{i.name} ({i.error.splitlines()[-1]})" for i in plugins.infos if i.error]
    raise UserError(unknown_name("task type", spec.type, sorted(plugins.task_types)), file=spec.path, field="type",
                    line=line_of(spec.lines, ("type",)),
                    hint=f"Plugins that failed to load: {', '.join(failed)}." if failed else None)


def check_references(spec: TaskSpec, plugins: "Plugins", judges: bool = True) -> Any:
    """Every plugin the spec names exists: its task type, its judge (`judges=False` when the
    command line picks the judge instead) and its rank judge; options are checked by
    `check_options`. Returns the task type."""
    task_type = task_type_of(spec, plugins)
    if judges:
        name = spec.judge.name
        if name not in plugins.judges:
            raise spec.error(unknown_name("judge", name, sorted(plugins.judges)), ("judge", "name"))
    rank_judge = spec.rank.get("judge")
    if isinstance(rank_judge, str):
        name = rank_judge.split(",", 1)[0].strip()
        if name not in plugins.pairwise_judges:
            raise spec.error(unknown_name("pairwise judge", name, sorted(plugins.pairwise_judges)), ("rank", "judge"))
    return task_type


def with_overrides(spec: TaskSpec, overrides: dict[str, Any]) -> TaskSpec:
    """A copy of `spec` with run-time overrides (e.g. --context-policy) merged in and checked."""
    if not overrides:
        return spec
    data = _merge(spec.data, overrides)
    validate(data, load_schema("task_spec.schema.json"), spec.path, spec.lines)
    return TaskSpec(name=spec.name, path=spec.path, data=data, lines=spec.lines)
