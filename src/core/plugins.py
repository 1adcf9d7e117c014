"""Loads plugins from the `lceval` entry-point group and collects what they register.

Built-in plugins go through exactly this path, so a third party's plugin is a first-class
citizen. One plugin failing to import is reported and skipped: the rest keep working.
"""

from __future__ import annotations

import os
import traceback
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterable

import pluggy

from . import hookspecs
from .errors import UserError
from .options import CheckedFactory, check_schema

ENTRY_POINT_GROUP = "lceval"
DISABLE_ENV = "LCEVAL_DISABLE_PLUGINS"

#: hook name -> the kind shown by `lceval plugins`
KINDS = {
    "register_models": "model",
    "register_judges": "judge",
    "register_pairwise_judges": "pairwise-judge",
    "register_retrievers": "retriever",
    "register_task_types": "task-type",
    "register_datasets": "dataset",
    "register_spec_dirs": "specs",
    "register_score_sources": "score-source",
    "register_commands": "command",
    "register_report_panels": "report-panel",
}


@dataclass
class PluginInfo:
    name: str
    distribution: str
    version: str
    module: str
    provides: dict[str, list[str]] = field(default_factory=dict)  # kind -> names
    error: str | None = None
    disabled: bool = False

    @property
    def kinds(self) -> list[str]:
        return sorted(k for k, names in self.provides.items() if names)


@dataclass
class Plugins:
    models: dict[str, Any] = field(default_factory=dict)
    judges: dict[str, Any] = field(default_factory=dict)
    pairwise_judges: dict[str, Any] = field(default_factory=dict)
    retrievers: dict[str, Any] = field(default_factory=dict)
    task_types: dict[str, Any] = field(default_factory=dict)
    datasets: dict[str, Any] = field(default_factory=dict)
    score_sources: dict[str, Any] = field(default_factory=dict)
    commands: dict[str, Any] = field(default_factory=dict)
    report_panels: dict[str, Any] = field(default_factory=dict)
    spec_dirs: list[Path] = field(default_factory=list)
    infos: list[PluginInfo] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    owner: dict[tuple[str, str], str] = field(default_factory=dict)  # (kind, name) -> plugin

    def table(self, kind: str) -> dict[str, Any]:
        """The registry of one plugin kind (every kind but "specs", which is a folder list)."""
        return {
            "model": self.models,
            "judge": self.judges,
            "pairwise-judge": self.pairwise_judges,
            "retriever": self.retrievers,
            "task-type": self.task_types,
            "dataset": self.datasets,
            "score-source": self.score_sources,
            "command": self.commands,
            "report-panel": self.report_panels,
        }[kind]

    def get(self, kind: str, name: str) -> Any:
        table = self.table(kind)
        if name not in table:
            failed = [i for i in self.infos if i.error]
            hint = ""
            if failed:
                hint = " Plugins that failed to load: " + ", ".join(
                    f"{i.name} ({i.error.splitlines()[-1]})" for i in failed
                )
            known = ", ".join(sorted(table)) or "none"
            raise UserError(f"unknown {kind} '{name}' (known: {known}).{hint}", field=kind)
        return table[name]


def disabled_from_env() -> set[str]:
    raw = os.environ.get(DISABLE_ENV, "")
    return {n.strip() for n in raw.split(",") if n.strip()}


def _entry_points() -> Iterable[metadata.EntryPoint]:
    seen: set[tuple[str, str]] = set()
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        key = (ep.name, ep.value)
        if key in seen:  # the same distribution visible twice on sys.path
            continue
        seen.add(key)
        yield ep


def load_plugins(disabled: Iterable[str] = (), extra: Iterable[tuple[str, object]] = ()) -> Plugins:
    """Load every entry point of the group except `disabled` (and $LCEVAL_DISABLE_PLUGINS).

    `extra` adds (name, module-or-object) plugins without an installed distribution; the
    tests use it for throwaway plugins.
    """
    disabled_set = set(disabled) | disabled_from_env()
    pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
    pm.add_hookspecs(hookspecs)
    result = Plugins()
    loaded: list[tuple[PluginInfo, object]] = []

    for ep in _entry_points():
        dist = getattr(ep, "dist", None)
        info = PluginInfo(
            name=ep.name,
            distribution=dist.metadata["Name"] if dist is not None else "?",
            version=dist.version if dist is not None else "?",
            module=ep.value,
        )
        result.infos.append(info)
        if ep.name in disabled_set:
            info.disabled = True
            continue
        try:
            obj = ep.load()
            pm.register(obj, name=ep.name)
        except Exception as exc:  # a broken plugin must not take the others down
            info.error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            continue
        loaded.append((info, obj))

    for name, obj in extra:
        info = PluginInfo(name=name, distribution="(in-process)", version="-", module=repr(obj))
        result.infos.append(info)
        try:
            pm.register(obj, name=name)
        except Exception as exc:
            info.error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            continue
        loaded.append((info, obj))

    by_name = {info.name: info for info, _ in loaded}
    for hook_name, kind in KINDS.items():
        # get_hookimpls() is in registration order (entry points first): the first name wins
        for impl in getattr(pm.hook, hook_name).get_hookimpls():
            info = by_name[impl.plugin_name]
            try:
                impl.function(register=_registrar(result, info, kind))
            except Exception as exc:
                info.error = f"{hook_name} failed: " + "".join(
                    traceback.format_exception_only(type(exc), exc)
                ).strip()
    return result


#: How each kind whose factories take user options finds them in the factory's arguments:
#: (options in the arguments, the arguments with checked options put back, keys the engine
#: adds that are not the user's). Model factories take (model, options), judges a
#: JudgeContext, retrievers {"seed": ..., **options}.
_OPTION_SLOTS: dict[str, tuple[Callable[[tuple[Any, ...]], Any],
                              Callable[[tuple[Any, ...], dict[str, Any]], tuple[Any, ...]],
                              tuple[str, ...]]] = {
    "model": (lambda a: a[1], lambda a, o: (a[0], o), ()),
    "judge": (lambda a: a[0].options, lambda a, o: (replace(a[0], options=o),), ()),
    "pairwise-judge": (lambda a: a[0].options, lambda a, o: (replace(a[0], options=o),), ()),
    "retriever": (lambda a: a[0], lambda a, o: (o,), ("seed",)),
}


def _with_declared_options(kind: str, name: str, factory: Any, schema: Any) -> Any:
    if schema is None:
        return factory
    if kind not in _OPTION_SLOTS:
        raise TypeError(f"{kind} '{name}': options_schema is only taken by "
                        f"{', '.join(_OPTION_SLOTS)} (task types declare TaskType.options_schema)")
    check_schema(schema)
    options_at, put_back, passthrough = _OPTION_SLOTS[kind]
    what = f"{'backend' if kind == 'model' else kind} '{name}'"
    return CheckedFactory(factory, schema, what, options_at, put_back, passthrough)


def _registrar(result: Plugins, info: PluginInfo, kind: str) -> Callable[..., None]:
    def register(*args: Any, options_schema: Any = None) -> None:
        if kind == "specs":
            (path,) = args
            result.spec_dirs.append(Path(path))
            info.provides.setdefault(kind, []).append(str(path))
            return
        if kind == "dataset":
            (dataset,) = args
            name, value = dataset.name, dataset
        else:
            name, value = args
        value = _with_declared_options(kind, name, value, options_schema)
        table = result.table(kind)
        if name in table:
            first = result.owner[(kind, name)]
            result.conflicts.append(
                f"{kind} '{name}' registered by both '{first}' and '{info.name}'; using '{first}'"
            )
            return
        table[name] = value
        result.owner[(kind, name)] = info.name
        info.provides.setdefault(kind, []).append(name)

    return register
