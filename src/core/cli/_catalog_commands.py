"""The commands that read the catalog and the plugins, not a run: `lceval tasks` (one spec
resolved, or the families with where their data comes from), `lceval plugins` and `lceval
validate` (a spec, a family file, a plugin folder, a task or suite name). Kept apart from
`_commands` (runs and finished runs) so that each stays one screenful of concerns."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import yaml

from lceval.cli._commands import DATA_MISSING, Invocation
from lceval.engine import DataNeeds, check_spec, family_file, load_catalog, load_spec
from lceval.errors import UserError

def tasks(args: argparse.Namespace, inv: Invocation) -> int:
    catalog = load_catalog(inv.plugins)
    if args.action == "show":
        if not args.name:
            raise UserError("`lceval tasks show` needs a task name", field="name")
        (spec,) = catalog.resolve_tasks(args.name)[:1]
        check_spec(spec, inv.plugins)
        print(f"# {spec.name}: resolved spec (defaults filled) from {spec.path}\n"
              + yaml.safe_dump(spec.data, sort_keys=False, allow_unicode=True, width=100) + _where_from(spec))
        return 0
    if args.families:
        print(_families(catalog, DataNeeds(inv.plugins, catalog=catalog)))
        return 0
    lines: list[str] = []
    width = max((len(n) for n in catalog.specs), default=4)
    for key, names in catalog.by_family().items():
        family = catalog.family(key)
        lines.append(("\n" if lines else "") + f"{family.name}" + (f" ({family.citation})" if family.citation else "")
                     + f": {len(names)} task{'s' if len(names) != 1 else ''}")
        for name in names:
            try:
                desc = catalog.spec(name).description
            except UserError as exc:
                desc = f"(invalid spec: {exc.render()})"
            lines.append(f"  {name.ljust(width)}  {desc}")
    if catalog.suites:
        lines.append("\nsuites:")
        lines += [f"{suite.ljust(width)}  {', '.join(members)}" for suite, members in sorted(catalog.suites.items())]
    if catalog.models:
        lines.append("\nmodel aliases:")
        lines += [f"{a.name.ljust(width)}  {a.spec}" for a in sorted(catalog.models.values(), key=lambda a: a.name)]
    print("\n".join(lines))
    return 0


def _where_from(spec: Any) -> str:
    """`lceval tasks show`'s closing comment: each source of the resolved spec and the fields
    it gave (siblings together: `generation.{top_p, stop}`), wrapped as YAML comments."""
    by_source: dict[str, list[tuple[Any, ...]]] = {}
    for at, source in spec.sources().items():
        by_source.setdefault(source, []).append(at)
    lines = ["# where each value came from:"] if by_source else []
    order = [layer.describe() for layer in reversed(spec.layers)]  # the most specific first
    for source, paths in sorted(by_source.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)):
        groups: list[tuple[tuple[Any, ...], list[str]]] = []
        for at in paths:
            if groups and groups[-1][0] == at[:-1]:
                groups[-1][1].append(str(at[-1]))
            else:
                groups.append((at[:-1], [str(at[-1])]))
        fields = [", ".join(names) if not parent else ".".join(map(str, parent)) + "."
                  + (names[0] if len(names) == 1 else "{" + ", ".join(names) + "}") for parent, names in groups]
        line = f"#   {source}:"
        for item in fields:
            if len(line) + len(item) + 2 > 100 and not line.endswith(":"):
                lines.append(line + ",")
                line = "#     " + item
            else:
                line += (" " if line.endswith(":") else ", ") + item
        lines.append(line)
    return "\n".join(lines) + ("\n" if lines else "")


def _family_data(rows: list[Any]) -> str:
    """A family's "data" cell: here, nothing to get, or the command that gets what is missing
    (a download, or `--from FOLDER` for files only the user can get)."""
    missing = [row for row in rows if row.missing]
    if missing:
        return f"download: {missing[0].command}" if "--from" not in (missing[0].command or "") \
            else f"your files: {missing[0].command}"
    return "here" if any(row.needs for row in rows) else "none needed"


def _families(catalog: Any, needs: Any) -> str:
    """`lceval tasks --families`: a row per benchmark family, with whether its data is here
    and, if not, the command that gets it."""
    rows = [("family", "tasks", "languages", "metrics", "data", "paper")]
    for key, names in catalog.by_family().items():
        languages: list[str] = []
        metrics: list[str] = []
        specs = []
        for name in names:
            try:
                spec = catalog.spec(name)
            except UserError:
                continue
            specs.append(spec)
            for value, seen in [(x, languages) for x in spec.languages] + [
                    (m, metrics) for m in [spec.judge.name, *(m.name for m in spec.metrics)]]:
                if value not in seen:  # once each, also when one spec names a metric twice
                    seen.append(value)
        family = catalog.family(key)
        data = _family_data(needs.status(specs))
        rows.append((family.name, str(len(names)), ", ".join(languages), ", ".join(metrics), data, family.citation))
    from lceval.io import text_table

    return "\n".join(text_table(rows))


def plugins(args: argparse.Namespace, inv: Invocation) -> int:
    """Every plugin with its kinds, distribution and status, then the clashes; or, with a
    name, what that plugin (or the thing of that name) is and the options it takes."""
    from lceval.cli._plugin_listing import describe_plugin, plugin_table

    if args.name:
        print(describe_plugin(inv.plugins, args.name))
        return 0
    load_catalog(inv.plugins)  # task-name clashes join the plugins' own in the listing
    print(plugin_table(inv.plugins))
    return 0


def validate(args: argparse.Namespace, inv: Invocation) -> int:
    """Check spec files, or tasks and suites by name (schema, their type's options, that every
    plugin they name exists, and what the task type checks against its data), and plugin
    packages; never runs a model. A valid spec whose data or optional package is not installed
    is said to be, with the command that installs it: exit 4 when that is all (2 when anything
    is invalid). A family file (`_family.yaml`) is checked as one, not as a spec."""
    from lceval.cli._plugin_check import check_plugin_package
    from lceval.errors import DataMissing, PackageMissing

    out, ok, installed = [], True, True
    catalog = None
    needs = DataNeeds(inv.plugins)
    for raw in args.paths:
        path = Path(raw)
        try:
            if path.is_dir():
                out.extend(check_plugin_package(path, list(inv.disabled)))
                continue
            if path.name.startswith("_") and path.is_file() and _is_family_file(path):
                out.append(_family_line(path, catalog := catalog or load_catalog(inv.plugins)))
                continue
            if path.is_file() or raw.endswith((".yaml", ".yml")) or os.sep in raw:
                specs = [load_spec(path)]
            else:  # a task or suite name, as `--tasks` takes it: a wheel user has no spec file at hand
                catalog = catalog or load_catalog(inv.plugins)
                specs = _named_specs(catalog, raw)
        except UserError as exc:
            ok = False
            out.append(f"invalid {exc.render()}")
            continue
        for spec in specs:
            where = f"{path if path.is_file() else spec.path} (task '{spec.name}', type '{spec.type}')"
            try:  # the spec against what of its data is here (first rows), then what else it needs
                check_spec(spec, inv.plugins, data=True)
                row = needs.status([spec])[0]
                if row.package is not None:
                    installed = False
                    out.append(f"valid; package not installed: {where}: {row.package.render()}")
                elif row.missing:
                    installed = False
                    out.append(f"valid; data not installed: {where}: {needs.summary(row)}. Run: {row.how}. "
                               + needs.pack_hint(spec.name))
                else:
                    out.append(f"ok      {where}")
            except DataMissing as exc:
                installed = False
                out.append(f"valid; data not installed: {exc.render()}")
            except PackageMissing as exc:
                installed = False
                out.append(f"valid; package not installed: {where}: {exc.render()}")
            except ModuleNotFoundError as exc:  # a plugin's import of a package an extra installs
                from lceval.cli._install import install_hint, package_missing

                hint = install_hint(exc.name or "")
                if hint is None:
                    raise
                installed = False
                out.append(f"valid; package not installed: {where}: {package_missing(exc, hint).render()}")
            except UserError as exc:
                ok = False
                out.append(f"invalid {exc.render()}")
    print("\n".join(out))
    return 2 if not ok else 0 if installed else DATA_MISSING


def _is_family_file(path: Path) -> bool:
    """The folder's family file (a file with a leading underscore is never a task's spec)."""
    try:
        found = family_file(path.parent)
    except UserError as exc:  # bad content: when it is this file's, `_family_line` says it
        return exc.file is not None and Path(exc.file).resolve() == path.resolve()
    return found is not None and found.path == path.resolve()


def _family_line(path: Path, catalog: Any) -> str:
    """`validate`'s line for a family file: checked against its schema (`family_file`), with
    the tasks of its folder it gives defaults to; bad content raises the UserError naming it."""
    family_file(path.parent)
    folder = path.parent.resolve()
    tasks = [name for name, spec_path in catalog.specs.items() if Path(spec_path).parent.resolve() == folder]
    return f"ok      {path} (family file{f' of {len(tasks)} task(s)' if tasks else ''})"


def _named_specs(catalog: Any, name: str) -> list[Any]:
    """The specs a task or suite name stands for; an unknown name says what `validate` takes."""
    try:
        return catalog.resolve_tasks(name)
    except UserError as exc:
        raise UserError(f"'{name}' is neither a spec file, a plugin folder nor a task or suite name"
                        + (exc.message[exc.message.index("."):] if "Did you mean" in exc.message else ""),
                        hint="`lceval tasks` lists the task names.") from None


