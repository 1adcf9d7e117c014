"""A spec folder's family file (`_family.yaml`): what every spec of one benchmark family shares,
written once. Two sections:

- `defaults`: values every spec of the folder has unless it writes its own (a partial spec,
  merged under each one as lm-evaluation-harness's `include:` gives a family's YAML a shared
  base), so a spec holds only what sets it apart; the folder is the spec's `family`;
- `fidelity`: the family's record against its authors' code: which commit was compared, what is
  identical (prompts, caps, cut, metric), the published answers re-scored, and each departure
  with its measured effect. The docs' fidelity ledger is generated from it, and a departure is
  added to the `report.differs_from_paper` of the tasks it names, so results.json and every
  table mark those numbers without 55 specs repeating a sentence."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from lceval.engine._spec_layers import SpecLayer, merge_specs
from lceval.errors import UserError
from lceval.io import PathKey, line_of, load_schema, load_yaml_with_lines, validate

#: the family file's name in a spec folder (a leading underscore: the catalog reads no task from it)
FAMILY_FILE = "_family.yaml"


@dataclass(frozen=True)
class Departure:
    """One way lceval departs on purpose from the authors' protocol, and by how much."""

    what: str
    effect: str
    #: task names or shell-style patterns it concerns; empty: every task of the folder
    tasks: tuple[str, ...] = ()

    def concerns(self, task: str) -> bool:
        return not self.tasks or any(fnmatch.fnmatchcase(task, pattern) for pattern in self.tasks)

    def sentence(self) -> str:
        return f"{self.what.rstrip('.')}; effect: {self.effect.rstrip('.')}."


@dataclass(frozen=True)
class Fidelity:
    """A family's record against its authors' code (`fidelity:` of the family file)."""

    #: the authors' repository and the commit compared (None: not recorded), or the paper alone
    repository: str | None
    commit: str | None
    paper: str | None
    files: tuple[str, ...]
    #: aspect (prompts, caps, cut, metric) -> what is identical and how it is known
    identical: dict[str, str]
    published: str
    unverified: str | None
    departures: tuple[Departure, ...]

    def departures_of(self, task: str) -> list[Departure]:
        return [d for d in self.departures if d.concerns(task)]


@dataclass(frozen=True)
class FamilyFile:
    """A spec folder's `_family.yaml`, checked against its schema."""

    path: Path
    fidelity: Fidelity | None
    #: what every spec of the folder has unless it writes its own (checked field by field
    #: against the task spec schema; a spec with them is checked whole)
    defaults: dict[str, Any] = field(default_factory=dict)
    #: line of each value of the file, by its path from the file's top
    lines: dict[PathKey, int] = field(default_factory=dict)


def family_file(folder: Path) -> FamilyFile | None:
    """The folder's family file, or None when it has none. Bad content is a UserError naming
    the file, field and line."""
    path = Path(folder) / FAMILY_FILE
    if not path.is_file():
        return None
    return _read(path.resolve(), path.stat().st_mtime_ns)


@lru_cache(maxsize=128)
def _read(path: Path, _mtime: int) -> FamilyFile:
    raw, lines = load_yaml_with_lines(path)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise UserError("a family file must be a mapping of fields", file=path, line=1)
    validate(raw, load_schema("family.schema.json"), path, lines)
    defaults = raw.get("defaults") or {}
    for key, why in (("name", "each spec names itself"), ("family", "the folder is the family")):
        if key in defaults:
            raise UserError(f"a family's defaults cannot give `{key}`: {why}", file=path, field=f"defaults.{key}",
                            line=line_of(lines, ("defaults", key)))
    validate(defaults, partial_spec_schema(), path, lines, prefix=("defaults",))
    return FamilyFile(path=path, fidelity=_fidelity(raw["fidelity"]) if "fidelity" in raw else None,
                      defaults=defaults, lines=lines)


@lru_cache(maxsize=1)
def partial_spec_schema() -> dict[str, Any]:
    """The task spec schema with no field required: a family's defaults, and a spec that has
    some, are checked field by field against it before they are merged and checked whole."""
    def loose(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: loose(v) for k, v in node.items() if not (k == "required" and isinstance(v, list))}
        return [loose(v) for v in node] if isinstance(node, list) else node

    return loose(load_schema("task_spec.schema.json"))


def _fidelity(data: dict[str, Any]) -> Fidelity:
    source = data["checked_against"]
    return Fidelity(repository=source.get("repository"), commit=source.get("commit"), paper=source.get("paper"),
                    files=tuple(source.get("files") or ()),
                    identical=dict(data["identical"]), published=data["published"], unverified=data.get("unverified"),
                    departures=tuple(Departure(what=d["what"], effect=d["effect"], tasks=tuple(d.get("tasks") or ()))
                                     for d in data.get("differs") or ()))


def with_family(raw: dict[str, Any], path: Path, lines: dict[PathKey, int]) -> tuple[dict[str, Any], list[SpecLayer]]:
    """The spec file's mapping over its family's defaults, its `family` the folder's name
    (unless it writes one: a spec kept outside its family's folder) and its family's
    departures added, checked field by field and then whole (errors name the spec file,
    field and line); with the layers it was resolved from, in order."""
    validate(raw, partial_spec_schema(), path, lines)
    family = family_file(path.parent)
    layers: list[SpecLayer] = []
    folder = Path(path).resolve().parent.name
    if "family" not in raw and folder:
        layers.append(SpecLayer("the folder", {"family": folder}))
    if family is not None and family.defaults:
        layers.append(SpecLayer("the family's defaults", family.defaults, family.path, family.lines, ("defaults",)))
    layers.append(SpecLayer("the spec", raw, path, lines))
    merged: dict[str, Any] = {}
    for layer in layers:
        merged = merge_specs(merged, layer.data)
    validate(merged, load_schema("task_spec.schema.json"), path, lines)
    with_departures = with_family_departures(merged, path)
    if with_departures is not merged:
        own = bool((raw.get("report") or {}).get("differs_from_paper"))
        label = "the spec and the family's fidelity record" if own else "the family's fidelity record"
        layers.append(SpecLayer(label, {"report": {"differs_from_paper": with_departures["report"]["differs_from_paper"]}},
                                family.path if family is not None else None))
    return with_departures, layers


def with_family_departures(raw: dict[str, Any], path: Path) -> dict[str, Any]:
    """The spec's raw mapping with the departures its family file names for it appended to
    `report.differs_from_paper` (the spec's own sentence first)."""
    family = family_file(path.parent)
    if family is None or family.fidelity is None or not isinstance(raw.get("name"), str):
        return raw
    sentences = [d.sentence() for d in family.fidelity.departures_of(raw["name"])]
    if not sentences:
        return raw
    report = dict(raw.get("report") or {})
    own = (report.get("differs_from_paper") or "").rstrip()
    if own and not own.endswith("."):
        own += "."
    report["differs_from_paper"] = " ".join(([own] if own else []) + sentences)
    return {**raw, "report": report}
