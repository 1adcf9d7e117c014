"""The catalog: which task specs exist (tasks/<benchmark>/*.yaml plus plugin spec folders),
suites, model aliases and judge presets. Read from the installed package, never from the
working directory, so an installed lceval behaves the same everywhere."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from lceval.errors import UserError
from lceval.engine._plugin_host import Clash, PluginInfo, Plugins
from lceval.engine._spec import TaskSpec, load_spec
from lceval.io import line_of, load_yaml_with_lines, loads_yaml_with_lines

REGISTRY_RESOURCE = ("lceval", "registry.yaml")


@dataclass
class ModelAlias:
    name: str
    spec: str
    description: str = ""


@dataclass(frozen=True)
class Family:
    """A benchmark family as registry.yaml names it (`families:`): its display name, the paper
    to cite (authors and year) and its docs page."""

    key: str
    name: str
    citation: str = ""
    page: str = ""


@dataclass
class Catalog:
    specs: dict[str, Path] = field(default_factory=dict)  # task name -> spec file
    suites: dict[str, list[str]] = field(default_factory=dict)
    models: dict[str, ModelAlias] = field(default_factory=dict)
    judges: dict[str, dict[str, Any]] = field(default_factory=dict)  # preset -> {name, options}
    #: task names a plugin's spec folders define twice (that plugin gives neither; another
    #: plugin's or the catalog's spec of the name is used if there is one): name -> why
    broken: dict[str, str] = field(default_factory=dict)
    #: benchmark families by key (a spec's `family`, else its folder); one the registry does
    #: not name is shown by its key
    families: dict[str, Family] = field(default_factory=dict)
    _loaded: dict[str, TaskSpec] = field(default_factory=dict)

    def family(self, key: str) -> Family:
        return self.families.get(key) or Family(key=key, name=key)

    def by_family(self) -> dict[str, list[str]]:
        """Every task that loads, grouped by family (families and tasks in name order); a task
        whose spec does not load is under the folder it is in."""
        out: dict[str, list[str]] = {}
        for name in sorted(self.specs):
            try:
                key = self.spec(name).family
            except UserError:
                key = self.specs[name].parent.name
            out.setdefault(key, []).append(name)
        return dict(sorted(out.items(), key=lambda kv: self.family(kv[0]).name.lower()))

    def spec(self, name: str) -> TaskSpec:
        if name not in self._loaded:
            spec = load_spec(self.specs[name])
            if spec.name != name:
                raise spec.error(f"name '{spec.name}' differs from the registered name '{name}'", ("name",))
            self._loaded[name] = spec
        return self._loaded[name]

    def resolve_tasks(self, text: str) -> list[TaskSpec]:
        """`--tasks` value: comma-separated task names, suite names or YAML paths."""
        out: list[TaskSpec] = []
        seen: set[Path] = set()
        for entry in [t.strip() for t in text.split(",") if t.strip()]:
            for spec in self._resolve_one(entry):
                if spec.path.resolve() not in seen:
                    seen.add(spec.path.resolve())
                    out.append(spec)
        if not out:
            raise UserError("no task given", field="--tasks")
        return out

    def _resolve_one(self, entry: str) -> list[TaskSpec]:
        if entry.endswith((".yaml", ".yml")) or Path(entry).is_file():
            path = Path(entry)
            if not path.is_file():
                raise UserError("task spec file not found", file=path, field="--tasks")
            return [load_spec(path)]
        if entry in self.suites:
            return [s for name in self.suites[entry] for s in self._resolve_one(name)]
        if entry in self.specs:
            return [self.spec(entry)]
        if entry in self.broken:
            raise UserError(self.broken[entry], field="--tasks")
        close = difflib.get_close_matches(entry, list(self.specs) + list(self.suites), n=3)
        hint = f" Did you mean: {', '.join(close)}?" if close else " Run `lceval tasks` to list them."
        raise UserError(f"unknown task or suite '{entry}'.{hint}", field="--tasks")

    def resolve_judge(self, name: str) -> dict[str, Any]:
        return dict(self.judges.get(name, {"name": name, "options": {}}))


def _read_catalog() -> tuple[dict[str, Any], dict, str]:
    resource = resources.files(REGISTRY_RESOURCE[0]).joinpath(REGISTRY_RESOURCE[1])
    text = resource.read_text(encoding="utf-8")
    data, lines = loads_yaml_with_lines(text, str(resource))
    return data, lines, str(resource)


def load_catalog(plugins: Plugins) -> Catalog:
    """The catalog, with every plugin's spec folders. A task name is first come, first served
    in the order of `lceval.plugins` (overriding plugins, the built-in catalog, the others);
    each clash goes to `plugins.clashes`, so the CLI prints it and the manifest records it."""
    data, lines, where = _read_catalog()
    reg = Catalog()
    tasks_dir = Path(str(resources.files("lceval").joinpath("tasks")))
    builtin: dict[str, Path] = {}
    for path in sorted(tasks_dir.glob("*/*.yaml")):  # one sub-folder per benchmark
        if path.name.startswith("_"):  # the family file (_family.yaml), no task
            continue
        name = _spec_name(path)
        if name in builtin and builtin[name].resolve() != path.resolve():
            raise UserError(f"task '{name}' is defined twice: also in {builtin[name]}", file=path, field="name")
        builtin[name] = path
    _add_specs(reg, plugins, builtin)
    for suite, members in (data.get("suites") or {}).items():
        reg.suites[suite] = list(members)
    for name, entry in (data.get("models") or {}).items():
        reg.models[name] = ModelAlias(name=name, spec=entry["spec"], description=entry.get("description", ""))
    for name, entry in (data.get("judges") or {}).items():
        reg.judges[name] = {"name": entry["judge"], "options": dict(entry.get("options") or {})}
    for key, entry in (data.get("families") or {}).items():
        reg.families[key] = Family(key=key, name=str(entry.get("name") or key), citation=str(entry.get("citation") or ""),
                                   page=str(entry.get("page") or ""))
    for suite, members in reg.suites.items():
        for i, member in enumerate(members):
            if member not in reg.specs and member not in reg.suites:
                raise UserError(f"suite member '{member}' is not a known task", file=where,
                                field=f"suites.{suite}.{i}", line=line_of(lines, ("suites", suite, i)))
    return reg


#: The task specs listed in registry.yaml, as a party to task-name clashes.
CATALOG = PluginInfo(name="catalog", distribution="lceval", version="", module="registry.yaml", builtin=True,
                     label="the built-in catalog")


def _add_specs(reg: Catalog, plugins: Plugins, builtin: dict[str, Path]) -> None:
    by_plugin: dict[str, dict[str, list[Path]]] = {}  # plugin -> task name -> its spec files
    for folder in plugins.spec_dirs:
        names = by_plugin.setdefault(plugins.owner.get(("specs", str(folder)), "?"), {})
        for path in sorted(Path(folder).glob("*.yaml")):
            if path.name.startswith("_"):
                continue
            names.setdefault(_spec_name(path), []).append(path)
    infos = {i.name: i for i in plugins.infos}
    parties = [(infos[p], names) for p, names in by_plugin.items() if p in infos]
    # the plugins' folders come in precedence order already: put the catalog after the overriding ones
    parties.insert(sum(1 for info, _ in parties if info.overriding), (CATALOG, {n: [p] for n, p in builtin.items()}))
    owner: dict[str, PluginInfo] = {}
    for info, names in parties:
        for name, paths in names.items():
            if len(paths) > 1:  # this plugin gives neither; another's spec of the name still counts
                files = ", ".join(str(p) for p in paths)
                reg.broken.setdefault(name, f"task '{name}' is defined twice by {info.origin} ({files}); "
                                            "neither is used")
                plugins.add_clash(Clash.duplicate("task", name, info))
            elif name in owner:
                plugins.add_clash(Clash.between("task", name, owner[name], info))
            else:
                reg.specs[name], owner[name] = paths[0], info


#: a spec's top-level `name: value` line (a key at column 0 is a top-level key in YAML)
_NAME_LINE = re.compile(r"""^name:[ \t]*(['"]?)([A-Za-z0-9_.\-]+)\1[ \t]*(?:#.*)?$""", re.MULTILINE)


def _spec_name(path: Path) -> str:
    """A spec's `name`, read without validating the spec fully (that happens on use), so one
    broken third-party spec does not hide every other task from `lceval tasks`. A plain
    `name:` line is read as it stands (every command lists the catalog: parsing 356 specs'
    YAML for their names cost 0.3 s of each); anything else is parsed."""
    try:
        found = _NAME_LINE.findall(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return path.stem
    if len(found) == 1:
        return found[0][1]
    try:
        head, _ = load_yaml_with_lines(path)
        if isinstance(head, dict) and isinstance(head.get("name"), str):
            return head["name"]
    except (UserError, OSError, UnicodeDecodeError):
        pass
    return path.stem
