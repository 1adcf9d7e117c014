"""What tasks need on disk, whether it is here, and getting it (`lceval data status`, `lceval
data fetch TASKS_OR_FAMILY`): the engine's side of `lceval.needs.Need`.

A task's needs are the dataset its spec (or task type) names, plus what its task type declares
(`TaskType.needs`); a file the type says lies in a folder of the data home named like a
registered dataset is that dataset. The engine names no benchmark: the command that installs a
task's data is `lceval data fetch` of its family (of the task itself when the family is
also a dataset's name, which `data fetch` takes as the dataset), or a need's own command.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from lceval.engine._catalog import Catalog
from lceval.engine._plan import completed, install_command, needs_of
from lceval.engine._plugin_host import Plugins
from lceval.engine._spec import TaskSpec
from lceval.errors import DataMissing, PackageMissing, UserError
from lceval.needs import Need

Say = Callable[[str], None]


def human_size(n: int | None) -> str:
    if n is None:
        return "size unknown"
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


@dataclass
class TaskData:
    """One task's needs and which are missing (what `lceval data status` prints)."""

    task: str
    needs: list[Need] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)  # need key -> what is missing
    command: str | None = None  # installs the missing ones
    error: str | None = None  # the spec is invalid
    package: PackageMissing | None = None  # an optional package it needs first (then `command` installs it)

    @property
    def how(self) -> str:
        """The command, and what its FOLDER is when it takes one."""
        folders = list(dict.fromkeys(n.from_folder for n in self.needs if n.key in self.missing and n.from_folder))
        where = f" (FOLDER: {'; '.join(folders)})" if folders and self.command and "FOLDER" in self.command else ""
        return f"`{self.command}`{where}"

    @property
    def ready(self) -> bool:
        return self.error is None and not self.missing


def task_data(spec: TaskSpec, plugins: Plugins, data_home: Path) -> TaskData:
    try:
        needs = needs_of(spec, plugins, data_home)
        missing = {need.key: why for need in needs if (why := need.missing()) is not None}
    except DataMissing as exc:  # a type that must read something to say what it needs
        done = completed(exc, spec, plugins, data_home)
        return TaskData(spec.name, missing={"?": done.message}, command=done.command)
    except PackageMissing as exc:  # installed first: a fetch could not get (or tell) what it needs
        return TaskData(spec.name, missing={"package": exc.message}, package=exc,
                        command=exc.install or "pip install ...")
    except UserError as exc:
        return TaskData(spec.name, error=exc.render())
    command = install_command(spec, [n for n in needs if n.key in missing], plugins) if missing else None
    return TaskData(spec.name, needs=needs, missing=missing, command=command)


def missing_text(row: TaskData, shown: int = 3) -> str:
    """What a task lacks, in a phrase: the missing needs by name (the first few)."""
    if row.package is not None:
        return row.package.message
    labels = {need.key: need.label for need in row.needs}
    names = [labels.get(key, why) for key, why in row.missing.items()]
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    if len(names) == 1 and row.needs:
        return next(iter(row.missing.values()))
    return f"{len(names)} of {len(row.needs) or len(names)} not here: {'; '.join(names[:shown])}{more}"


def status_lines(rows: list[TaskData]) -> list[str]:
    """`lceval data status`: per task, present / missing and the command that gets it."""
    out = []
    for row in rows:
        if row.error:
            out.append(f"invalid  {row.task}: {row.error}")
        elif not row.missing:
            what = f"{len(row.needs)} need{'s' if len(row.needs) != 1 else ''}" if row.needs else "needs no data"
            out.append(f"present  {row.task} ({what})")
        else:
            out.append(f"missing  {row.task}: {missing_text(row)}. Run: {row.how}")
    return out


def resolve_names(names: list[str], catalog: Catalog) -> list[TaskSpec]:
    """Tasks, suites, spec files or benchmark families (`lceval tasks --families` keys)."""
    specs: list[TaskSpec] = []
    families: dict[str, list[str]] | None = None
    for name in [n.strip() for text in names for n in text.split(",") if n.strip()]:
        if name not in catalog.specs and name not in catalog.suites and not name.endswith((".yaml", ".yml")):
            families = families if families is not None else catalog.by_family()
            if name in families:
                specs += [catalog.spec(task) for task in families[name]]
                continue
        try:
            specs += catalog.resolve_tasks(name)
        except UserError as exc:
            raise UserError(exc.message.replace("unknown task or suite", "unknown task, suite or family"),
                            field="TASKS", hint=exc.hint) from None
    return list({spec.path.resolve(): spec for spec in specs}.values())


def unique_needs(rows: list[TaskData]) -> list[Need]:
    return list({need.key: need for row in rows for need in row.needs}.values())


def fetch_needs(needs: list[Need], source: Path | None, say: Say, progress: bool = False) -> list[str]:
    """Get every need that is missing: its size first (what will be downloaded), then each with
    a progress bar; the failures are gathered and reported at the end, one line each."""
    todo = [need for need in needs if need.missing() is not None]
    if not todo:
        return []
    sizes = {need.key: None if need.from_folder else need.size() for need in todo}
    known = [size for size in sizes.values() if size is not None]
    unknown = sum(1 for need in todo if not need.from_folder and sizes[need.key] is None)
    copied = sum(1 for need in todo if need.from_folder)
    parts = [f"{human_size(sum(known))} to download"] if known else []
    parts += [f"{unknown} download(s) of unknown size"] if unknown else []
    parts += [f"{copied} from --from FOLDER"] if copied else []
    say(f"to get: {len(todo)} item{'s' if len(todo) != 1 else ''} ({', '.join(parts)})")
    for need in todo:
        say(f"  {'--from FOLDER' if need.from_folder else human_size(sizes[need.key]):>14}  {need.label}")
    from tqdm import tqdm

    failed: list[str] = []
    done: list[str] = []
    with tqdm(total=len(todo), unit="item", desc="fetching", disable=not progress, file=sys.stderr) as bar:
        for need in todo:
            try:
                need.fetch(source)
                still = need.missing()
                if still is not None:
                    raise UserError(f"fetched, but {still}")
                done.append(need.label)
            except UserError as exc:
                failed.append(f"{need.label}: {exc.render()}")
            bar.update(1)
    if failed:
        more = f" (and {len(failed) - 1} more: {'; '.join(failed[1:])})" if len(failed) > 1 else ""
        raise UserError(f"could not get {failed[0]}{more}", hint=f"Got {len(done)} of {len(todo)}." if done else None)
    return done
