"""Loads plugins from the `lceval` entry-point group and collects what they register.

Built-in plugins go through exactly this path, so a third party's plugin is a first-class
citizen. One plugin failing to import is reported and skipped: the rest keep working.

Three rules make a third party's plugin unable to break or silently shadow the built-ins:

- A plugin registers all or nothing. Its hooks run into a staging list first; if any of them
  raises (or registers something unusable: a bad options schema, the same name twice), the
  plugin is reported as failed and none of what it registered, from any hook, is used.
- Names are first come, first served in a fixed order: plugins the user named with
  `-p override:NAME` (or $LCEVAL_OVERRIDE_PLUGINS), then the built-ins (entry points of the
  `lceval` distribution), then everyone else by distribution and entry-point name. So a
  built-in name is never replaced unless the user asked for it, and the result does not
  depend on the order in which Python happens to list installed distributions.
- Every clash is a `Clash` in `Plugins.clashes`: the CLI prints each one on every command,
  `lceval plugins` lists them and the run manifest records them (`plugin_clashes`).
"""

from __future__ import annotations

import difflib
import os
import traceback
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable

import pluggy

from lceval import hookspecs
from lceval.errors import UserError
from lceval.options import CheckedFactory, check_schema

ENTRY_POINT_GROUP = "lceval"
DISABLE_ENV = "LCEVAL_DISABLE_PLUGINS"
OVERRIDE_ENV = "LCEVAL_OVERRIDE_PLUGINS"
#: The distribution whose entry points are the built-in plugins.
BUILTIN_DISTRIBUTION = "lceval"
#: The distribution shown for plugins given to `load_plugins(extra=...)`.
IN_PROCESS = "(in-process)"

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
    "register_methods": "method",
}


@dataclass
class PluginInfo:
    name: str
    distribution: str
    version: str
    module: str
    provides: dict[str, list[str]] = field(default_factory=dict)  # kind -> names it registered
    error: str | None = None
    disabled: bool = False
    builtin: bool = False  # an entry point of the lceval distribution itself
    overriding: bool = False  # named by -p override:NAME: its names win over the built-ins'
    warnings: list[str] = field(default_factory=list)  # e.g. a hook name lceval does not know
    label: str | None = None  # how clashes name it, when it is no plugin (the task catalog)

    @property
    def kinds(self) -> list[str]:
        return sorted(k for k, names in self.provides.items() if names)

    @property
    def origin(self) -> str:
        """"plugin 'x' (dist 1.0)", with "built-in" for lceval's own."""
        if self.label:
            return self.label
        where = ("built-in" if self.builtin else "in-process" if self.in_process
                 else f"{self.distribution} {self.version}")
        return f"plugin '{self.name}' ({where})"

    @property
    def in_process(self) -> bool:
        """Given to `load_plugins(extra=...)` (e.g. by `lceval validate FOLDER`), not installed."""
        return self.distribution == IN_PROCESS


@dataclass(frozen=True)
class Registration:
    """One thing a plugin registered, in effect or not (see `Plugins.clashes`)."""

    plugin: str
    kind: str
    name: str
    value: Any


@dataclass(frozen=True)
class Clash:
    """Two plugins (or a plugin's spec and the built-in catalog) gave one name; `kept`'s is
    used, `ignored`'s is not. `why` is "built-in", "override", "first" (neither is built-in:
    the first by distribution name) or "duplicate" (one plugin gave the name twice: neither
    is used, `kept` is empty)."""

    kind: str
    name: str
    kept: str  # e.g. "plugin 'lexical' (built-in)"
    ignored: str
    why: str
    kept_plugin: str = ""
    ignored_plugin: str = ""

    @property
    def message(self) -> str:
        what = describe_kind(self.kind, self.name)
        if self.why == "duplicate":
            return f"{what} is given twice by {self.ignored}; it uses neither"
        if self.why == "override":
            return (f"{what}: using {self.kept} instead of {self.ignored}, as -p override:{self.kept_plugin} "
                    "asks")
        advice = (f" To use the one from '{self.ignored_plugin}', pass -p override:{self.ignored_plugin}."
                  if self.ignored_plugin else "")
        return f"{what}: {self.ignored} also provides it and is ignored; using {self.kept}.{advice}"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "message": self.message}

    @classmethod
    def between(cls, kind: str, name: str, kept: PluginInfo, ignored: PluginInfo) -> "Clash":
        """`ignored` gave a name `kept` had taken first (see the module docstring's order)."""
        why = "override" if kept.overriding else "built-in" if kept.builtin else "first"
        return cls(kind=kind, name=name, kept=kept.origin, ignored=ignored.origin, why=why,
                   kept_plugin=kept.name, ignored_plugin="" if ignored.builtin else ignored.name)

    @classmethod
    def duplicate(cls, kind: str, name: str, plugin: PluginInfo) -> "Clash":
        return cls(kind=kind, name=name, kept="", ignored=plugin.origin, why="duplicate", ignored_plugin=plugin.name)


@dataclass
class Plugins:
    """What the plugins registered, by kind, with who gave what (`infos`, `owner`) and the
    names two of them gave (`clashes`)."""

    #: hook name -> the kind `lceval plugins` shows
    KINDS: ClassVar[dict[str, str]] = KINDS
    #: one thing a plugin registered (the type of `registrations`' items)
    Registration: ClassVar[type] = Registration

    models: dict[str, Any] = field(default_factory=dict)
    judges: dict[str, Any] = field(default_factory=dict)
    pairwise_judges: dict[str, Any] = field(default_factory=dict)
    retrievers: dict[str, Any] = field(default_factory=dict)
    task_types: dict[str, Any] = field(default_factory=dict)
    datasets: dict[str, Any] = field(default_factory=dict)
    score_sources: dict[str, Any] = field(default_factory=dict)
    commands: dict[str, Any] = field(default_factory=dict)
    report_panels: dict[str, Any] = field(default_factory=dict)
    methods: dict[str, Any] = field(default_factory=dict)
    spec_dirs: list[Path] = field(default_factory=list)
    infos: list[PluginInfo] = field(default_factory=list)
    clashes: list[Clash] = field(default_factory=list)
    owner: dict[tuple[str, str], str] = field(default_factory=dict)  # (kind, name) -> plugin
    #: every registration of every plugin that loaded, the shadowed ones included
    registrations: list[Registration] = field(default_factory=list)

    @staticmethod
    def describe(kind: str, name: str) -> str:
        """How messages name a thing a plugin provides: "judge 'rubric'", "backend 'hf'"."""
        return describe_kind(kind, name)

    @property
    def conflicts(self) -> list[str]:
        return [c.message for c in self.clashes]

    def add_clash(self, clash: Clash) -> None:
        if clash not in self.clashes:
            self.clashes.append(clash)

    def info(self, name: str) -> PluginInfo | None:
        return next((i for i in self.infos if i.name == name and not i.disabled), None)

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
            "method": self.methods,
        }[kind]

    @staticmethod
    def current() -> "Plugins":
        """The plugins this command loaded (the last `load_plugins` of this thread's context),
        else a fresh load (a backend built directly, as in a test)."""
        return _LOADED.get() or load_plugins()

    def open_method(self, name: str, options: dict[str, Any], compression_ratio: float | None) -> Any:
        """The method plugin `name` built with its own `options` (`press.KEY` without the
        prefix) and the backend's `compression_ratio`: what a backend that takes `press=NAME`
        calls (lceval.methods)."""
        from lceval.io import unknown_name
        from lceval.methods import METHOD_OPTION, ContextMethod

        if name not in self.methods:
            raise UserError(unknown_name("method", name, sorted(self.methods)), field=METHOD_OPTION,
                            hint="`lceval plugins` lists what is installed and what failed to load.")
        method = self.methods[name]({**options, "compression_ratio": compression_ratio})
        if not isinstance(method, ContextMethod):
            raise TypeError(f"method '{name}': its factory returned {type(method).__name__}, not a "
                            "lceval.methods.ContextMethod")
        method.name = name
        return method

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


#: The plugins the running command loaded last (`Plugins.current`: a backend builds its method
#: from them, so `-p no:NAME` and overrides hold there too).
_LOADED: ContextVar[Plugins | None] = ContextVar("lceval_plugins", default=None)


def _names_from_env(variable: str) -> set[str]:
    raw = os.environ.get(variable, "")
    return {n.strip() for n in raw.split(",") if n.strip()}


def disabled_from_env() -> set[str]:
    return _names_from_env(DISABLE_ENV)


def overrides_from_env() -> set[str]:
    return _names_from_env(OVERRIDE_ENV)


def _entry_points() -> Iterable[metadata.EntryPoint]:
    seen: set[tuple[str, str]] = set()
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        key = (ep.name, ep.value)
        if key in seen:  # the same distribution visible twice on sys.path
            continue
        seen.add(key)
        yield ep


def _error_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def load_plugins(disabled: Iterable[str] = (), extra: Iterable[tuple[str, object]] = (),
                 overrides: Iterable[str] = ()) -> Plugins:
    """Load every entry point of the group except `disabled` (and $LCEVAL_DISABLE_PLUGINS).

    `extra` adds (name, module-or-object) plugins without an installed distribution; the
    tests and `lceval validate FOLDER` use it. `overrides` (and $LCEVAL_OVERRIDE_PLUGINS)
    name plugins whose registrations win over the built-ins' (see the module docstring).
    """

    disabled_set = set(disabled) | disabled_from_env()
    override_set = set(overrides) | overrides_from_env()
    pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
    pm.add_hookspecs(hookspecs)
    result = Plugins()
    loaded: list[tuple[PluginInfo, object]] = []

    candidates: list[tuple[PluginInfo, Callable[[], object]]] = []  # entry points, then `extra`
    for ep in _entry_points():
        dist = getattr(ep, "dist", None)
        info = PluginInfo(
            name=ep.name,
            distribution=dist.metadata["Name"] if dist is not None else "?",
            version=dist.version if dist is not None else "?",
            module=ep.value,
        )
        info.builtin = info.distribution == BUILTIN_DISTRIBUTION
        candidates.append((info, ep.load))
    for name, obj in extra:
        info = PluginInfo(name=name, distribution=IN_PROCESS, version="-", module=repr(obj))
        candidates.append((info, lambda obj=obj: obj))

    # built-ins take their plugin names first: a third party's entry point named like one
    # cannot push a built-in out (pluggy keeps one plugin per name)
    candidates.sort(key=lambda pair: not pair[0].builtin)
    for info, load in candidates:
        result.infos.append(info)
        if info.name in disabled_set and info.distribution != IN_PROCESS:  # `extra` is never disabled
            info.disabled = True
            continue
        holder = next((i for i, _ in loaded if i.name == info.name), None)
        if holder is not None:
            info.error = f"its plugin name '{info.name}' is taken by {holder.origin}; rename the entry point"
            result.add_clash(Clash(kind="plugin", name=info.name, kept=holder.origin, ignored=info.origin,
                                   why="built-in" if holder.builtin else "first", kept_plugin=holder.name))
            continue
        info.overriding = info.name in override_set
        try:
            obj = load()
            pm.register(obj, name=info.name)
        except Exception as exc:  # a broken plugin must not take the others down
            info.error = _error_text(exc)
            continue
        info.warnings.extend(_unknown_hooks(pm, obj))
        loaded.append((info, obj))

    missing = sorted(override_set - {i.name for i, _ in loaded})
    if missing:
        known = ", ".join(sorted(i.name for i, _ in loaded))
        raise UserError(f"no loaded plugin named {', '.join(repr(m) for m in missing)} to override with",
                        field=f"-p override:{missing[0]}", hint=f"Loaded plugins: {known}.")

    staged = {info.name: _stage(pm, info) for info, _ in loaded}
    for info, _ in sorted(loaded, key=lambda pair: _precedence(pair[0])):
        for reg in staged[info.name] or []:
            _apply(result, info, reg)
    _LOADED.set(result)
    return result




def _precedence(info: PluginInfo) -> tuple[int, str, str]:
    rank = 0 if info.overriding else 1 if info.builtin else 2
    return (rank, "" if rank < 2 else info.distribution.lower(), "" if rank < 2 else info.name)


def _unknown_hooks(pm: pluggy.PluginManager, obj: object) -> list[str]:
    """Hooks the plugin implements that lceval does not define (a typo such as
    `register_model` registers nothing, silently, unless someone says so)."""
    out = []
    for caller in pm.get_hookcallers(obj) or []:
        if caller.has_spec():
            continue
        impls = [i for i in caller.get_hookimpls() if i.plugin is obj and not i.optionalhook]
        if impls:
            close = difflib.get_close_matches(caller.name, list(KINDS), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            out.append(f"implements '{caller.name}', which is not an lceval hook{hint}; it is never called")
    return out


def _stage(pm: pluggy.PluginManager, info: PluginInfo) -> list[Registration] | None:
    """Everything one plugin registers, from all its hooks, or None (and `info.error`) when a
    hook fails: a plugin that fails keeps nothing."""
    staged: list[Registration] = []
    for hook_name, kind in KINDS.items():
        for impl in getattr(pm.hook, hook_name).get_hookimpls():
            if impl.plugin_name != info.name:
                continue
            try:
                impl.function(register=_registrar(staged, info, kind))
            except Exception as exc:
                info.error = f"{hook_name} failed: {_error_text(exc)}"
                return None
    provides: dict[str, list[str]] = {}
    for reg in staged:
        provides.setdefault(reg.kind, []).append(reg.name)
    info.provides = provides
    return staged


def _apply(result: Plugins, info: PluginInfo, reg: Registration) -> None:
    result.registrations.append(reg)
    if reg.kind == "specs":
        result.spec_dirs.append(reg.value)
        result.owner[("specs", str(reg.value))] = info.name
        return
    table = result.table(reg.kind)
    key = (reg.kind, reg.name)
    if reg.name not in table:
        table[reg.name] = reg.value
        result.owner[key] = info.name
        return
    first = result.info(result.owner[key])
    assert first is not None
    result.add_clash(Clash.between(reg.kind, reg.name, first, info))


#: How each kind whose factories take user options finds them in the factory's arguments:
#: (options in the arguments, the arguments with checked options put back, keys the engine
#: adds that are not the user's, the prefix of the field an error names). Model factories
#: take (model, options), judges a JudgeContext, retrievers {"seed": ..., **options}.
_OPTION_SLOTS: dict[str, tuple[Callable[[tuple[Any, ...]], Any],
                              Callable[[tuple[Any, ...], dict[str, Any]], tuple[Any, ...]],
                              tuple[str, ...], str]] = {
    "model": (lambda a: a[1], lambda a, o: (a[0], o), (), ""),
    "judge": (lambda a: a[0].options, lambda a, o: (replace(a[0], options=o),), (), "judge.options."),
    "pairwise-judge": (lambda a: a[0].options, lambda a, o: (replace(a[0], options=o),), (), "judge.options."),
    "retriever": (lambda a: a[0], lambda a, o: (o,), ("seed",), "retriever_options."),
    "method": (lambda a: a[0], lambda a, o: (o,), ("compression_ratio",), "press."),
}


def _with_declared_options(kind: str, name: str, factory: Any, schema: Any) -> Any:
    if schema is None:
        return factory
    if kind not in _OPTION_SLOTS:
        raise TypeError(f"{kind} '{name}': options_schema is only taken by "
                        f"{', '.join(_OPTION_SLOTS)} (task types declare TaskType.options_schema)")
    check_schema(schema)
    options_at, put_back, passthrough, prefix = _OPTION_SLOTS[kind]
    return CheckedFactory(factory, schema, describe_kind(kind, name), options_at, put_back, passthrough,
                          field_prefix=prefix)


def describe_kind(kind: str, name: str) -> str:
    """How errors name a plugin: "backend 'llamacpp'", "judge 'rubric'"."""
    return f"{'backend' if kind == 'model' else kind} '{name}'"


#: What each kind's registered value must be, checked at registration so that a plugin
#: registering something unusable fails at load, not in the middle of a user's run.
def _check_value(kind: str, name: str, value: Any) -> None:
    from lceval.interfaces import Command, Dataset, TaskType

    expected = {"task-type": TaskType, "command": Command, "dataset": Dataset}.get(kind)
    if expected is not None and not isinstance(value, expected):
        raise TypeError(f"{kind} '{name}' must be a lceval.interfaces.{expected.__name__}, "
                        f"got {type(value).__name__}")
    if expected is None and not callable(value):
        raise TypeError(f"{kind} '{name}' must be a callable factory, got {type(value).__name__}")


def _registrar(staged: list[Registration], info: PluginInfo, kind: str) -> Callable[..., None]:
    def register(*args: Any, options_schema: Any = None) -> None:
        if kind == "specs":
            (path,) = args
            path = Path(path)
            if not path.is_dir():
                raise ValueError(f"spec folder {path} does not exist")
            if all(r.value != path for r in staged if r.kind == "specs"):
                staged.append(Registration(info.name, kind, str(path), path))
            return
        if kind == "dataset":
            (dataset,) = args
            name, value = getattr(dataset, "name", None), dataset
        else:
            name, value = args
        if not isinstance(name, str) or not name:
            raise TypeError(f"a {kind} needs a non-empty name, got {name!r}")
        _check_value(kind, name, value)
        if any(r.kind == kind and r.name == name for r in staged):
            raise ValueError(f"registers {kind} '{name}' twice")
        staged.append(Registration(info.name, kind, name, _with_declared_options(kind, name, value, options_schema)))

    return register
