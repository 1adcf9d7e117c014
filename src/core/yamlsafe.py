"""Safe YAML loading that remembers where every value came from.

Specs are data, never code: only the plain YAML types are built (no `!function`, no
`!!python/...`), and any tag is refused with its line. Line numbers are kept per path so
schema errors can point at the exact line to fix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import UserError

PathKey = tuple[Any, ...]

_PLAIN_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:map",
    "tag:yaml.org,2002:seq",
}


def load_yaml_with_lines(path: Path) -> tuple[Any, dict[PathKey, int]]:
    """Parse `path` into plain Python data plus a map from key path to 1-based line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read file: {exc.strerror}", file=path) from None
    return loads_yaml_with_lines(text, path)


def loads_yaml_with_lines(text: str, path: Path | str) -> tuple[Any, dict[PathKey, int]]:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise UserError(f"invalid YAML: {exc.problem or exc}", file=path, line=line) from None
    except yaml.YAMLError as exc:
        raise UserError(f"invalid YAML: {exc}", file=path) from None
    if node is None:
        raise UserError("the file is empty", file=path, line=1)
    lines: dict[PathKey, int] = {}
    return _build(node, (), lines, path), lines


def _build(node: yaml.Node, at: PathKey, lines: dict[PathKey, int], path: Path | str) -> Any:
    lines[at] = node.start_mark.line + 1
    field = ".".join(str(p) for p in at) or None
    if node.tag not in _PLAIN_TAGS:
        raise UserError(
            f"YAML tag '{node.tag}' is not allowed: specs are data and cannot run code",
            file=path,
            field=field,
            line=node.start_mark.line + 1,
        )
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise UserError("YAML merge keys (<<) are not supported in specs", file=path,
                                line=key_node.start_mark.line + 1)
            key = _build(key_node, at, {}, path)
            if not isinstance(key, str):
                raise UserError(f"keys must be strings, got {key!r}", file=path, field=field,
                                line=key_node.start_mark.line + 1)
            if key in out:
                raise UserError(f"duplicate key '{key}'", file=path, field=field,
                                line=key_node.start_mark.line + 1)
            out[key] = _build(value_node, at + (key,), lines, path)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(child, at + (i,), lines, path) for i, child in enumerate(node.value)]
    constructor = yaml.SafeLoader("")
    try:
        return constructor.construct_object(node, deep=True)
    except yaml.constructor.ConstructorError as exc:
        raise UserError(f"invalid value: {exc.problem}", file=path, field=field,
                        line=node.start_mark.line + 1) from None


def line_of(lines: dict[PathKey, int], at: PathKey) -> int | None:
    """Line of the deepest known ancestor of `at` (a missing field points at its parent)."""
    at = tuple(at)
    while True:
        if at in lines:
            return lines[at]
        if not at:
            return None
        at = at[:-1]
