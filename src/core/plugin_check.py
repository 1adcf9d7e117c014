"""`lceval validate PLUGIN_DIR`: check a plugin package before publishing it, without
installing it and without running a model."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import jsonschema

from .errors import UserError
from .plugins import load_plugins
from .spec import check_options, load_spec


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


def check_plugin_package(folder: Path, disabled: list[str]) -> list[str]:
    pyproject = folder / "pyproject.toml"
    if not pyproject.is_file():
        raise UserError("a plugin package folder needs a pyproject.toml", file=folder)
    eps = _entry_points(pyproject)
    roots = [str(folder / "src"), str(folder)]
    sys.path[:0] = roots
    modules = []
    try:
        for name, target in eps.items():
            module_name, _, attr = target.partition(":")
            try:
                obj = importlib.import_module(module_name)
                if attr:
                    obj = getattr(obj, attr)
            except Exception as exc:
                raise UserError(f"entry point '{name}' = '{target}' fails to import: {exc}",
                                file=pyproject, field=f"project.entry-points.lceval.{name}") from None
            modules.append((name, obj))
        # an installed copy of the same plugin is set aside: the folder's code is what is checked
        plugins = load_plugins([*disabled, *eps], extra=modules)
    finally:
        for r in roots:
            sys.path.remove(r)
    lines = []
    for name, _ in modules:
        info = next(i for i in plugins.infos if i.name == name and i.distribution == "(in-process)")
        if info.error:
            raise UserError(f"plugin '{name}' failed: {info.error}", file=pyproject)
        if not info.provides:
            raise UserError(f"plugin '{name}' registers nothing (no @hookimpl register_* hooks ran)",
                            file=pyproject, field=f"project.entry-points.lceval.{name}")
        for tname in info.provides.get("task-type", []):
            schema = plugins.task_types[tname].options_schema
            try:
                jsonschema.Draft202012Validator.check_schema(schema)
            except jsonschema.SchemaError as exc:
                raise UserError(f"task type '{tname}' has an invalid options_schema: {exc.message}",
                                file=pyproject) from None
        for folder_str in info.provides.get("specs", []):
            for spec_path in sorted(Path(folder_str).glob("*.yaml")):
                spec = load_spec(spec_path)
                check_options(spec, plugins.get("task-type", spec.type).options_schema)
                lines.append(f"ok      {spec_path} (task '{spec.name}')")
        provides = "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(info.provides.items()))
        lines.append(f"ok      plugin '{name}' from {folder} ({provides})")
    lines.extend(f"warning {c}" for c in plugins.conflicts)
    return lines
