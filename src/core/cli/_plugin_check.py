"""`lceval validate PLUGIN_DIR`: check a plugin package before publishing it, without
installing it and without running a model.

The folder's own code is what is checked, even when another copy of the package is installed
(an older release, an editable install elsewhere): modules of the same names are set aside
while the folder's are imported, an import that still resolves outside the folder is
refused, and the installed copy's entry points are not loaded beside it."""

from __future__ import annotations

import importlib
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import jsonschema

from lceval.errors import UserError
from lceval.engine import PluginInfo, Plugins, check_spec, load_catalog, load_plugins, load_spec

#: Names a plugin author may mean as a hook: a `register_*` function lceval would never call.
_HOOKISH = re.compile(r"register_\w+")


def _entry_points(pyproject: Path) -> dict[str, str]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        raise UserError("checking a plugin folder needs Python 3.11+ (tomllib)", file=pyproject) from None
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"invalid TOML: {exc}", file=pyproject) from None
    eps = data.get("project", {}).get("entry-points", {}).get("lceval")
    if not eps:
        raise UserError("declares no entry points in the 'lceval' group", file=pyproject,
                        field="project.entry-points.lceval",
                        hint='Add: [project.entry-points.lceval] NAME = "package.module"')
    return dict(eps)


@contextmanager
def _folder_first(roots: list[Path], tops: set[str]) -> Iterator[None]:
    """Import `tops` (top-level package names) from `roots` only: installed copies already
    imported are set aside and put back afterwards, so the process is left as it was."""
    def ours(name: str) -> bool:
        return name.split(".")[0] in tops

    saved = {name: module for name, module in sys.modules.items() if ours(name)}
    for name in saved:
        del sys.modules[name]
    sys.path[:0] = [str(r) for r in roots]
    importlib.invalidate_caches()
    try:
        yield
    finally:
        for r in roots:
            sys.path.remove(str(r))
        for name in [n for n in sys.modules if ours(n)]:
            del sys.modules[name]
        sys.modules.update(saved)


def _import_target(name: str, target: str, folder: Path, pyproject: Path) -> Any:
    module_name, _, attr = target.partition(":")
    field = f"project.entry-points.lceval.{name}"
    try:
        module = importlib.import_module(module_name.strip())
        obj = getattr(module, attr.strip()) if attr else module
    except Exception as exc:
        raise UserError(f"entry point '{name}' = '{target}' fails to import: {exc}", file=pyproject,
                        field=field) from None
    where = Path(getattr(module, "__file__", None) or "").resolve()
    if not where.is_relative_to(folder.resolve()):
        raise UserError(f"entry point '{name}' = '{target}' imports {where}, which is not in {folder}",
                        file=pyproject, field=field,
                        hint="Put the package in the folder (or its src/), so the folder's own code is checked.")
    return obj


def _unmarked_hooks(obj: Any) -> list[str]:
    """`register_*` functions without @lceval.hookimpl: lceval never calls them."""
    return sorted(name for name in dir(obj) if _HOOKISH.fullmatch(name) and callable(getattr(obj, name))
                  and not hasattr(getattr(obj, name), "lceval_impl"))


def check_plugin_package(folder: Path, disabled: list[str]) -> list[str]:
    pyproject = folder / "pyproject.toml"
    if not pyproject.is_file():
        raise UserError("a plugin package folder needs a pyproject.toml", file=folder)
    eps = _entry_points(pyproject)
    roots = [folder / "src", folder]
    tops = {target.partition(":")[0].strip().split(".")[0] for target in eps.values()}
    with _folder_first(roots, tops):
        modules = [(name, _import_target(name, target, folder, pyproject)) for name, target in eps.items()]
        # an installed copy of the same plugin is set aside: the folder's code is what is checked
        plugins = load_plugins([*disabled, *eps], extra=modules)
        load_catalog(plugins)  # task names: clashes with the catalog, duplicates in the folder
    lines = []
    for name, obj in modules:
        info = next(i for i in plugins.infos if i.name == name and i.in_process)
        lines.extend(_check_plugin(plugins, info, obj, pyproject, folder))
    lines.extend(f"warning {c.message}" for c in plugins.clashes)
    sources = sorted({p for r in roots if r.is_dir() for p in r.rglob("*.py")})
    lines.extend(f"warning {where}: {why}" for where, why in private_imports(sources))
    return lines


def _private_reason(module: str) -> str | None:
    """Why importing `module` leaves lceval's public API, or None when it does not."""
    parts = module.split(".")
    if parts[0] == "lceval_plugins":
        return (f"imports {module}, lceval's built-in plugins, which are not an API: take what you need "
                "from lceval's public modules")
    if parts[0] != "lceval":
        return None
    for i, part in enumerate(parts[1:], start=1):
        if part.startswith("_") and not (part.startswith("__") and part.endswith("__")):
            door = ".".join(parts[:i])
            return (f"imports {module}, a private module (a leading underscore: it changes without notice); "
                    f"import from {door} instead")
    return None


def private_imports(files: list[Path]) -> list[tuple[str, str]]:
    """(file:line, why) for every import in `files` that leaves lceval's public API: a module
    with a leading underscore in its path (`lceval.engine._cache`: use `lceval.engine`), or
    `lceval_plugins`. Read with `ast`, so imports inside functions count and nothing runs."""
    import ast

    found = []
    for path in files:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            continue  # importing it fails, and is reported, above
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for module in modules:
                why = _private_reason(module)
                if why:
                    found.append((f"{path}:{node.lineno}", why))
                    break
    return found


def _check_plugin(plugins: Plugins, info: PluginInfo, obj: Any, pyproject: Path, folder: Path) -> list[str]:
    field = f"project.entry-points.lceval.{info.name}"
    if info.error:
        raise UserError(f"plugin '{info.name}' failed: {info.error}", file=pyproject, field=field)
    if info.warnings:
        raise UserError(f"plugin '{info.name}' {info.warnings[0]}", file=pyproject, field=field,
                        hint=f"The hooks are: {', '.join(Plugins.KINDS)} (lceval.hookspecs).")
    unmarked = _unmarked_hooks(obj)
    if unmarked:
        raise UserError(f"plugin '{info.name}': {', '.join(unmarked)} is not decorated with @lceval.hookimpl, "
                        "so lceval never calls it", file=pyproject, field=field)
    if not info.provides:
        raise UserError(f"plugin '{info.name}' registers nothing (no @hookimpl register_* hooks ran)",
                        file=pyproject, field=field)
    lines = []
    for reg in [r for r in plugins.registrations if r.plugin == info.name and r.kind == "task-type"]:
        try:
            jsonschema.Draft202012Validator.check_schema(reg.value.options_schema)
        except jsonschema.SchemaError as exc:
            raise UserError(f"task type '{reg.name}' has an invalid options_schema: {exc.message}",
                            file=pyproject) from None
    duplicates = [c for c in plugins.clashes if c.why == "duplicate" and c.ignored_plugin == info.name]
    if duplicates:
        raise UserError(f"plugin '{info.name}': {duplicates[0].message}", file=pyproject, field=field)
    for reg in [r for r in plugins.registrations if r.plugin == info.name and r.kind == "specs"]:
        for spec_path in sorted(Path(reg.value).glob("*.yaml")):
            if spec_path.name.startswith("_"):  # the family file (_family.yaml), checked with each spec
                continue
            spec = load_spec(spec_path)
            check_spec(spec, plugins)
            lines.append(f"ok      {spec_path} (task '{spec.name}')")
    provides = "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(info.provides.items()))
    lines.append(f"ok      plugin '{info.name}' from {folder} ({provides})")
    return lines
