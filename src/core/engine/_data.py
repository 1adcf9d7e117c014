"""`DataNeeds`: the one door to what tasks need on disk, for `lceval data status / fetch / pack /
unpack` and `lceval validate` (and a program that prepares a cluster's data)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from lceval.engine._catalog import Catalog, load_catalog
from lceval.engine._needs import (TaskData, fetch_needs, human_size, missing_text, resolve_names, status_lines,
                                  task_data, unique_needs)
from lceval.engine._pack import PackReport, UnpackReport, pack, unpack
from lceval.engine._plan import pack_hint
from lceval.engine._plugin_host import Plugins
from lceval.engine._spec import TaskSpec
from lceval.io import data_home

Say = Callable[[str], None]


class DataNeeds:
    """What the tasks of a catalog need in one data home (and the caches), whether it is here,
    and getting it: `status` (a `TaskData` per task), `fetch`, `pack`, `unpack`."""

    size = staticmethod(human_size)
    summary = staticmethod(missing_text)
    lines = staticmethod(status_lines)
    #: the pack/unpack way in for tasks on a machine without network (one sentence)
    pack_hint = staticmethod(pack_hint)

    def __init__(self, plugins: Plugins, home: Path | None = None, catalog: Catalog | None = None) -> None:
        """`home`: the data home (default: the command's, $LCEVAL_DATA or the user data dir)."""
        self.plugins, self.home = plugins, Path(home) if home is not None else data_home()
        self._catalog = catalog

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = load_catalog(self.plugins)
        return self._catalog

    def specs(self, names: list[str] | None) -> list[TaskSpec]:
        """Tasks, suites, spec files or families by name; None or empty: every task."""
        if not names:
            return [self.catalog.spec(name) for name in sorted(self.catalog.specs)]
        return resolve_names(names, self.catalog)

    def status(self, specs: list[TaskSpec]) -> list[TaskData]:
        return [task_data(spec, self.plugins, self.home) for spec in specs]

    def fetch(self, specs: list[TaskSpec], source: Path | None, say: Say, progress: bool = False
              ) -> tuple[list[str], list[TaskData]]:
        """Get what the tasks lack (sizes first, then a progress bar): (what was got, the tasks'
        status afterwards). An invalid task is refused before anything is downloaded."""
        from lceval.errors import UserError

        rows = self.status(specs)
        bad = [row for row in rows if row.error]
        if bad:
            raise UserError(f"task '{bad[0].task}' is invalid: {bad[0].error}")
        lacking = [row.package for row in rows if row.package is not None]
        if lacking:  # exit 4 with the pip line: nothing can be fetched for it before
            raise lacking[0]
        got = fetch_needs(unique_needs(rows), source, say, progress)
        return got, self.status(specs)

    def pack(self, specs: list[TaskSpec], out: Path, source: Path | None, say: Say,
             progress: bool = False, skip_missing: bool = False) -> PackReport:
        return pack(specs, self.plugins, self.catalog, self.home, out, source, say, progress, skip_missing)

    def unpack(self, file: Path, say: Say) -> UnpackReport:
        return unpack(file, self.plugins, self.catalog, self.home, say)
