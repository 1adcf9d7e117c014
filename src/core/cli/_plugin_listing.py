"""What `lceval plugins [NAME]` prints and the warnings every command prints about plugins:
name clashes (who wins a name and how to change it), hooks lceval does not know, and plugin
commands that a built-in command hides."""

from __future__ import annotations

import difflib
import inspect
import sys
import textwrap
from typing import Any

from lceval.errors import UserError
from lceval.options import describe, options_schema_of, unwrap
from lceval.engine import ModelSpec, PluginInfo, Plugins
from lceval.interfaces import missing_requirements

#: How a user passes options to each kind, shown above its options table.
_WHERE_OPTIONS = {
    "model": "--model {name}:MODEL,key=value,...",
    "judge": "--judge {name},key=value,... or a judge preset's options",
    "pairwise-judge": "lceval rank --judge {name},key=value,...",
    "retriever": "a task spec's options.retriever_options, or --set options.retriever_options.KEY=VALUE",
    "task-type": "the options of a task spec of type {name}, or --set options.KEY=VALUE",
    "method": "--model SCHEME:MODEL,press={name},compression_ratio=R,press.KEY=VALUE (a backend that takes methods)",
}


def plugin_warnings(plugins: Plugins, shadowed_commands: list[str]) -> list[str]:
    """One line per clash, unknown hook and hidden command, for stderr on every command. Task
    names are compared only when a third-party plugin contributes spec folders (the built-in
    catalog has no clashes of its own), so most commands pay nothing for it."""
    if any(not _is_builtin(plugins, plugins.owner.get(("specs", str(d)), "")) for d in plugins.spec_dirs):
        from lceval.engine import load_catalog

        try:
            load_catalog(plugins)  # records task-name clashes in plugins.clashes
        except UserError:
            pass  # the command that needs the catalog reports it
    lines = [c.message for c in plugins.clashes]
    for info in plugins.infos:
        lines.extend(f"{info.origin}: {w}" for w in info.warnings)
    for name in shadowed_commands:
        owner = plugins.info(plugins.owner.get(("command", name), ""))
        who = owner.origin if owner is not None else "a plugin"
        lines.append(f"command '{name}': {who} also provides it and is ignored; lceval's own command is used "
                     "(built-in commands cannot be overridden)")
    return lines


def _is_builtin(plugins: Plugins, plugin: str) -> bool:
    info = plugins.info(plugin)
    return info is not None and info.builtin


#: the listing fits a terminal of this many columns (`lceval plugins NAME` has the details)
WIDTH = 100


def _status(info: PluginInfo, plugins: Plugins | None = None) -> str:
    if info.disabled:
        return "disabled"
    if info.error:
        return "FAILED: " + info.error.splitlines()[-1]
    if plugins is not None:
        for reg in plugins.registrations:
            install = missing_requirements(reg.value) if reg.plugin == info.name else None
            if install:
                return f"not installed: {install}"
    return "ok (overriding built-ins)" if info.overriding else "ok"


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(0, width - 3)] + "..."


def plugin_table(plugins: Plugins) -> str:
    """One line per plugin, within WIDTH columns: its name, what it provides (names only, cut
    to fit), the distribution of a plugin that is not built in, and its status (ok, disabled,
    FAILED with the error below the table, or the install line of an optional package it
    needs)."""
    rows = [("plugin", "provides", "from", "status")]
    for info in sorted(plugins.infos, key=lambda i: i.name):
        names = list(dict.fromkeys(n for kind, names in sorted(info.provides.items()) if kind != "specs"
                                   for n in names))
        status = _status(info, plugins)
        if status.startswith(("FAILED", "not installed")):  # said whole below the table
            status = status.split(":")[0] + " (below)"
        origin = "" if info.builtin else f"{info.distribution} {info.version}"
        rows.append((info.name, ", ".join(names) or "-", origin, status))
    name_w = max(len(r[0]) for r in rows)
    from_w = max(len(r[2]) for r in rows)
    status_w = min(max(len(r[3]) for r in rows), WIDTH // 2)
    provides_w = max(12, WIDTH - name_w - from_w - status_w - 6)
    from lceval.io import text_table

    lines = text_table([(r[0], _fit(r[1], provides_w), r[2], _fit(r[3], status_w)) for r in rows], rule=False,
                       widths=[None, provides_w, None, None])
    for info in sorted(plugins.infos, key=lambda i: i.name):
        status = _status(info, plugins)
        if info.error and not info.disabled:
            lines.extend(textwrap.wrap(f"{info.name}: FAILED: {info.error}", WIDTH, subsequent_indent="  "))
        elif status.startswith("not installed"):
            lines.extend(textwrap.wrap(f"{info.name}: {status}", WIDTH, subsequent_indent="  "))
    for text in [f"clash: {c.message}" for c in plugins.clashes] + \
            [f"warning: {info.origin}: {w}" for info in plugins.infos for w in info.warnings]:
        lines.extend(textwrap.wrap(text, WIDTH, subsequent_indent="  "))
    lines.append("details, options and install lines: lceval plugins NAME")
    return "\n".join(lines)


def _provides(plugins: Plugins, info: PluginInfo) -> str:
    parts = []
    for kind, names in sorted(info.provides.items()):
        shown = [n if kind == "specs" or plugins.owner.get((kind, n)) == info.name else f"{n} (ignored: clash)"
                 for n in names]
        parts.append(f"{kind}: {', '.join(shown)}")
    return "; ".join(parts)


def describe_plugin(plugins: Plugins, name: str) -> str:
    """Everything registered under `name` (any kind), or everything plugin `name` registered,
    with each one's options: type, default and description."""
    info = plugins.info(name) or next((i for i in plugins.infos if i.name == name), None)
    regs = [r for r in plugins.registrations if r.kind != "specs" and (r.name == name or r.plugin == name)]
    if info is None and not regs:
        known = sorted({r.name for r in plugins.registrations if r.kind != "specs"} | {i.name for i in plugins.infos})
        close = difflib.get_close_matches(name, known, n=3)
        hint = f"Did you mean: {', '.join(close)}?" if close else "`lceval plugins` lists them."
        raise UserError(f"no plugin and nothing registered named '{name}'", field="plugins NAME", hint=hint)
    blocks = []
    if info is not None:
        blocks.append(f"plugin '{info.name}': {info.module}, from {info.distribution} {info.version} "
                      f"({'built-in' if info.builtin else 'third party'}); "
                      f"status: {_status(info, plugins)}")
        blocks.extend(f"  spec folder: {r.value}" for r in plugins.registrations
                      if r.kind == "specs" and r.plugin == info.name)
    blocks.extend(_describe_registration(plugins, reg) for reg in regs)
    return "\n\n".join(blocks)


def _describe_registration(plugins: Plugins, reg: Any) -> str:
    """`reg`: one of `plugins.registrations` (a `Plugins.Registration`)."""
    in_effect = plugins.owner.get((reg.kind, reg.name)) == reg.plugin
    head = f"{Plugins.describe(reg.kind, reg.name)} from plugin '{reg.plugin}'"
    if not in_effect:
        head += f" (ignored: '{plugins.owner.get((reg.kind, reg.name))}' provides it)"
    lines = [head]
    install = missing_requirements(reg.value)
    if install:
        lines.append(f"  not installed: {install}")
    doc = _summary(reg.value)
    if doc:
        lines.append(f"  {doc}")
    schema = getattr(reg.value, "options_schema", None) if reg.kind == "task-type" else options_schema_of(reg.value)
    if reg.kind in _WHERE_OPTIONS:
        if schema is None:
            lines.append("  options: not declared (passed to the plugin unchecked)")
        else:
            rows = describe(schema)
            where = _WHERE_OPTIONS[reg.kind].format(name=reg.name)
            lines.append(f"  options, given as {where}:" if rows else "  options: none")
            lines.extend(_options_table(rows))
    if reg.kind == "model":  # read by lceval itself, whichever the backend
        lines.append("  options every backend takes (read by lceval: how the thinking is read, batches, cost limits):")
        lines.extend(_options_table(describe({"type": "object", "properties": ModelSpec.ENGINE_OPTIONS})))
    return "\n".join(lines)


def _options_table(rows: list[Any]) -> list[str]:
    if not rows:
        return []
    from lceval.io import text_table

    table = [("name", "type", "default", "description")] + [(r.name, r.type, _short(r.default), r.description)
                                                           for r in rows]
    return ["    " + line for line in text_table(table, rule=False, strip=False)]


def _short(text: str, limit: int = 40) -> str:
    """A default such as a whole prompt is cut for the table (`lceval tasks show` has it)."""
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _summary(value: Any) -> str:
    """The first paragraph of what documents a registered thing: a dataset's description, a
    command's help; for a factory function, its module's docstring (what the backend or judge
    is), since the function's own says how it is built; else the class's docstring."""
    for attribute in ("description", "help"):
        text = getattr(value, attribute, None) or getattr(unwrap(value), attribute, None)
        if isinstance(text, str) and text:
            return text
    target = unwrap(value)
    if not (inspect.isfunction(target) or inspect.isclass(target)):
        target = type(target)
    module = sys.modules.get(getattr(target, "__module__", "") or "")
    module_doc = module.__doc__ if module is not None else None
    doc = (module_doc or target.__doc__) if inspect.isfunction(target) else (target.__doc__ or module_doc)
    return inspect.cleandoc(doc or "").split("\n\n")[0].replace("\n", " ")
