"""Where each value of a resolved task spec came from. A spec is resolved from layers, each
over the one before: lceval's defaults, the folder (its `family`), the family's defaults
(`_family.yaml`), the spec file, then what is derived from them (the family's departures added
to `report.differs_from_paper`, the judge taken from the headline metric); the task type's
option defaults fill what none of them gave. `lceval tasks show` prints the layer of every
value, and an error about a value names the file it is written in (a family's defaults, not a
spec that only inherits them)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from lceval.io import PathKey

__all__ = ["SpecLayer", "has_path", "layer_of", "leaf_paths", "merge_specs"]


@dataclass(frozen=True)
class SpecLayer:
    """One source of a spec's values: what it gives, and where it is written (None: nowhere
    a user edits, e.g. lceval's own defaults)."""

    label: str
    data: dict[str, Any]
    file: Path | None = None
    #: line of each value in `file`, keyed by its path from the file's top (`prefix` + path)
    lines: dict[PathKey, int] = field(default_factory=dict)
    #: where the layer's mapping sits in `file` (("defaults",) in a family file)
    prefix: PathKey = ()

    def describe(self) -> str:
        return f"{self.label} ({self.file.parent.name}/{self.file.name})" if self.file is not None else self.label


def has_path(data: Any, at: PathKey) -> bool:
    for key in at:
        if isinstance(data, dict) and key in data:
            data = data[key]
        elif isinstance(data, list) and isinstance(key, int) and 0 <= key < len(data):
            data = data[key]
        else:
            return False
    return True


def layer_of(layers: tuple[SpecLayer, ...], at: PathKey, exact: bool = False) -> SpecLayer | None:
    """The last layer that gives the value at `at`, else (unless `exact`) the mapping or list
    holding it (a value a schema says is missing is missing from the file that wrote its
    parent)."""
    for cut in range(len(at), len(at) - 1 if exact else 0, -1):
        for layer in reversed(layers):
            if has_path(layer.data, at[:cut]):
                return layer
    return None


def leaf_paths(data: Any, at: PathKey = ()) -> Iterator[PathKey]:
    """The path of every value that is not a non-empty mapping (a list is one value)."""
    if isinstance(data, dict) and data:
        for key, value in data.items():
            yield from leaf_paths(value, at + (key,))
    elif at:
        yield at


def merge_specs(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` on `base`: mappings merged key by key, anything else (a list too) replaced."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_specs(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out
