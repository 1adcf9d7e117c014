"""Safe YAML loading that remembers where every value came from.

Specs are data, never code: only the plain YAML types are built (no `!function`, no
`!!python/...`), and any tag is refused with its line. Line numbers are kept per path so
schema errors can point at the exact line to fix.

Specs are also small: a file is refused past `SPEC_MAX_BYTES` before it is parsed, nesting
past `MAX_DEPTH` is refused from the event stream (PyYAML's composer recurses, and 5,000
brackets end in a RecursionError), and building stops after `MAX_VALUES` values, so nested
aliases ("billion laughs": nine anchors of nine aliases each expand to 9^9 values) are
refused in a few milliseconds instead of eating the machine's memory. Aliases themselves are
allowed; they only count for what they expand to.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from lceval.errors import UserError
from lceval.io._readers import SPEC_MAX_BYTES, quote, read_text

PathKey = tuple[Any, ...]

#: libyaml's parser when PyYAML was built with it (10x faster: every command reads every
#: spec of the catalog); both build the same nodes with the same marks
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: deeper than any real spec (they nest 4-5 levels) and far below Python's recursion limit
MAX_DEPTH = 64
#: values built, aliases expanded: real specs and the catalog hold a few hundred
MAX_VALUES = 20_000

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
    text = read_text(path, what="YAML file", limit=SPEC_MAX_BYTES)
    return loads_yaml_with_lines(text, path)


def _check_shape(text: str, path: Path | str, loader: Any = _LOADER) -> None:
    """Refuse nesting past MAX_DEPTH before composing (the event parser does not recurse)."""
    depth = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                raise UserError(f"nested more than {MAX_DEPTH} levels deep", file=path,
                                line=event.start_mark.line + 1)
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1


def loads_yaml_with_lines(text: str, path: Path | str) -> tuple[Any, dict[PathKey, int]]:
    if len(text.encode("utf-8", "surrogatepass")) > SPEC_MAX_BYTES:
        raise UserError(f"more than {SPEC_MAX_BYTES // (1 << 20)} MB of YAML: not a spec", file=path)
    try:
        try:
            _check_shape(text, path)
        except yaml.YAMLError:
            # libyaml's scanner reads ahead and has nesting limits of its own (PyYAML 6.0.4 stops
            # 5,000 brackets with "exceeded maximum nesting depth" before our check sees them):
            # the pure-Python parser, which emits events one by one, decides whether our bound is
            # what the file breaks, so the message does not depend on the libyaml build
            if _LOADER is not yaml.SafeLoader:
                _check_shape(text, path, yaml.SafeLoader)
            raise
        node = yaml.compose(text, Loader=_LOADER)  # after _check_shape: libyaml's composer recurses in C
    except yaml.MarkedYAMLError as exc:
        opened = exc.context_mark if "quoted scalar" in (exc.context or "") else None
        if opened is not None and exc.problem_mark is not None:
            # an unclosed quote is found at the end of the stream (or at a bad character far
            # below): the line to fix is the one where the quote opened, which PyYAML marks too
            where = f"{exc.problem} at line {exc.problem_mark.line + 1}"
            text = (f"the quoted string that opens here (column {opened.column + 1}) is never closed ({where})"
                    if "end of stream" in (exc.problem or "") or "document" in (exc.problem or "") else
                    f"in the quoted string that opens here (column {opened.column + 1}): {where}, column "
                    f"{exc.problem_mark.column + 1}")
            raise UserError(f"invalid YAML: {text}", file=path, line=opened.line + 1) from None
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise UserError(f"invalid YAML: {exc.problem or exc}", file=path, line=line) from None
    except yaml.YAMLError as exc:
        raise UserError(f"invalid YAML: {exc}", file=path) from None
    except RecursionError:  # a shape _check_shape let through; never a traceback
        raise UserError(f"nested too deeply to read (more than {MAX_DEPTH} levels)", file=path) from None
    if node is None:
        raise UserError("the file is empty", file=path, line=1)
    lines: dict[PathKey, int] = {}
    return _build(node, (), lines, path, [MAX_VALUES]), lines


def _build(node: yaml.Node, at: PathKey, lines: dict[PathKey, int], path: Path | str,
           budget: list[int]) -> Any:
    budget[0] -= 1
    if budget[0] < 0:
        raise UserError(f"expands to more than {MAX_VALUES:,} values (nested aliases?): not a spec",
                        file=path, field=".".join(str(p) for p in at) or None, line=node.start_mark.line + 1)
    if len(at) > MAX_DEPTH:  # an alias inside its own anchor never ends
        raise UserError(f"nested more than {MAX_DEPTH} levels deep (an alias inside its own anchor?)",
                        file=path, line=node.start_mark.line + 1)
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
            key = _build(key_node, at, {}, path, budget)
            if not isinstance(key, str):
                raise UserError(f"keys must be strings, got {quote(key)}", file=path, field=field,
                                line=key_node.start_mark.line + 1)
            if key in out:
                raise UserError(f"duplicate key '{key}'", file=path, field=field,
                                line=key_node.start_mark.line + 1)
            out[key] = _build(value_node, at + (key,), lines, path, budget)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(child, at + (i,), lines, path, budget) for i, child in enumerate(node.value)]
    try:  # a bare constructor: a whole SafeLoader (reader, scanner, parser) per scalar is 10x slower
        return yaml.constructor.SafeConstructor().construct_object(node, deep=True)
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
