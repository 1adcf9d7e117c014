"""A spec folder's family file (`_family.yaml`): what every spec of one benchmark family shares,
written once. Today it holds the family's fidelity record against its authors' code: which
commit was compared, what is identical (prompts, caps, cut, metric), the published answers
re-scored, and each departure with its measured effect. The docs' fidelity ledger is generated
from it, and a departure is added to the `report.differs_from_paper` of the tasks it names, so
results.json and every table mark those numbers without 55 specs repeating a sentence."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from lceval.errors import UserError
from lceval.io import load_schema, load_yaml_with_lines, validate

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
    return FamilyFile(path=path, fidelity=_fidelity(raw["fidelity"]) if "fidelity" in raw else None)


def _fidelity(data: dict[str, Any]) -> Fidelity:
    source = data["checked_against"]
    return Fidelity(repository=source.get("repository"), commit=source.get("commit"), paper=source.get("paper"),
                    files=tuple(source.get("files") or ()),
                    identical=dict(data["identical"]), published=data["published"], unverified=data.get("unverified"),
                    departures=tuple(Departure(what=d["what"], effect=d["effect"], tasks=tuple(d.get("tasks") or ()))
                                     for d in data.get("differs") or ()))


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
