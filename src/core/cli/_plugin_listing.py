"""What `lceval plugins [NAME]` prints and the warnings every command prints about plugins:
name clashes (who wins a name and how to change it), hooks lceval does not know, and plugin
commands that a built-in command hides."""

from __future__ import annotations

import difflib
import inspect
import sys
from typing import Any

from lceval.errors import UserError
from lceval.options import describe, options_schema_of, unwrap
from lceval.engine import BUILTIN_DISTRIBUTION, PluginInfo, Plugins, Registration, describe_kind

#: How a user passes options to each kind, shown above its options table.
_WHERE_OPTIONS = {
    "model": "--model {name}:MODEL,key=value,...",
    "judge": "--judge {name},key=value,... or a judge preset's options",
    "pairwise-judge": "lceval rank --judge {name},key=value,...",
    "retriever": "a task spec's options.retriever_options, or --set options.retriever_options.KEY=VALUE",
    "task-type": "the options of a task spec of type {name}, or --set options.KEY=VALUE",
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


def plugin_table(plugins: Plugins) -> str:
    rows = [("plugin", "kinds", "provides", "distribution", "version", "status")]
    for info in sorted(plugins.infos, key=lambda i: i.name):
        rows.append((info.name, ",".join(info.kinds), _provides(plugins, info), info.distribution, info.version,
                     _status(info)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:-1], widths)) + "  " + r[-1] for r in rows]
    lines.extend(f"clash: {c.message}" for c in plugins.clashes)
    lines.extend(f"warning: {info.origin}: {w}" for info in plugins.infos for w in info.warnings)
    return "\n".join(lines)


def _status(info: PluginInfo) -> str:
    if info.disabled:
        return "disabled"
    if info.error:
        return "FAILED: " + info.error.splitlines()[-1]
    return "ok (overriding built-ins)" if info.overriding else "ok"


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
                      f"({'built-in' if info.distribution == BUILTIN_DISTRIBUTION else 'third party'}); "
                      f"status: {_status(info)}")
        blocks.extend(f"  spec folder: {r.value}" for r in plugins.registrations
                      if r.kind == "specs" and r.plugin == info.name)
    blocks.extend(_describe_registration(plugins, reg) for reg in regs)
    return "\n\n".join(blocks)


def _describe_registration(plugins: Plugins, reg: Registration) -> str:
    in_effect = plugins.owner.get((reg.kind, reg.name)) == reg.plugin
    head = f"{describe_kind(reg.kind, reg.name)} from plugin '{reg.plugin}'"
    if not in_effect:
        head += f" (ignored: '{plugins.owner.get((reg.kind, reg.name))}' provides it)"
    lines = [head]
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
    return "\n".join(lines)


def _options_table(rows: list[Any]) -> list[str]:
    if not rows:
        return []
    table = [("name", "type", "default", "description")] + [(r.name, r.type, _short(r.default), r.description)
                                                           for r in rows]
    widths = [max(len(t[i]) for t in table) for i in range(3)]
    return ["    " + "  ".join(c.ljust(w) for c, w in zip(t[:3], widths)) + "  " + t[3] for t in table]


def _short(text: str, limit: int = 40) -> str:
    """A default such as a whole prompt is cut for the table (`lceval tasks show` has it)."""
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _summary(value: Any) -> str:
    """The first paragraph of what documents a registered thing: a dataset's description, a
    command's help, else its own docstring, else its module's."""
    for attribute in ("description", "help"):
        text = getattr(value, attribute, None)
        if isinstance(text, str) and text:
            return text
    target = unwrap(value)
    if not (inspect.isfunction(target) or inspect.isclass(target)):
        target = type(target)
    module = sys.modules.get(getattr(target, "__module__", "") or "")
    doc = target.__doc__ or (module.__doc__ if module is not None else None) or ""
    return inspect.cleandoc(doc).split("\n\n")[0].replace("\n", " ")
