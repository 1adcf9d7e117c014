"""`lceval data ...`: fetch, list, paths, status, pack, unpack. Each reads its arguments, calls
the engine's `DataNeeds` (or the io layer, for a registered dataset), prints, and gives the
exit code (4, DATA_MISSING: a task's data is not installed, as `lceval validate` says it)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from lceval.cli._commands import DATA_MISSING, Invocation
from lceval.engine import Cache, DataNeeds
from lceval.errors import UserError


def _path(value: str | None) -> Path | None:
    return Path(value).expanduser() if value else None


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _names(values: list[str]) -> list[str]:
    return [n.strip() for text in values for n in text.split(",") if n.strip()]


def _needs(inv: Invocation) -> DataNeeds:
    return DataNeeds(inv.plugins)


def _specs(needs: DataNeeds, values: list[str]) -> list:
    try:
        return needs.specs(_names(values))
    except UserError as exc:
        raise exc.but(hint="`lceval tasks` lists the tasks and suites, `lceval tasks --families` the families, "
                           "`lceval data list` the datasets.") from None


def _summary(needs: DataNeeds, rows: list) -> int:
    """Print the per-task lines; the exit code they call for."""
    print("\n".join(needs.lines(rows)))
    ready = sum(r.ready for r in rows)
    print(f"{ready} of {len(rows)} task(s) have all their data (data home: {needs.home})")
    lacking = [r.task for r in rows if r.missing and r.package is None]
    if lacking:
        print(needs.pack_hint(",".join(lacking) if len(lacking) <= 3 else "TASKS"))
    if any(r.error for r in rows):
        return 2
    return 0 if ready == len(rows) else DATA_MISSING


def data_fetch(args: argparse.Namespace, inv: Invocation) -> int:
    """A registered dataset as before; else everything the named tasks, suites or families
    need (Hub files at their revisions, authors' files, encodings, models) that is missing."""
    from lceval.io import fetch, using_data_home

    names = _names(args.names)
    if len(names) == 1 and names[0] in inv.plugins.datasets:
        rep = fetch(inv.plugins.datasets[names[0]], args.source, _path(args.data_home), progress=sys.stderr.isatty())
        print(f"{rep.name}: {rep.status} at {rep.path}")
        return 0
    with using_data_home(_path(args.data_home)):
        needs = _needs(inv)
        got, rows = needs.fetch(_specs(needs, names), _path(args.source), _say, progress=sys.stderr.isatty())
    print(f"fetched {len(got)} item(s)" if got else "nothing to fetch")
    return _summary(needs, rows)


def data_status(args: argparse.Namespace, inv: Invocation) -> int:
    """Per task: present, or what is missing and the command that gets it (exit 4 if any is)."""
    from lceval.io import using_data_home

    with using_data_home(_path(args.data_home)):
        needs = _needs(inv)
        rows = needs.status(_specs(needs, args.tasks) if args.tasks else needs.specs(None))
    return _summary(needs, rows)


def data_pack(args: argparse.Namespace, inv: Invocation) -> int:
    from lceval.io import using_data_home

    with using_data_home(_path(args.data_home)):
        needs = _needs(inv)
        rep = needs.pack(_specs(needs, args.tasks), Path(args.output).expanduser(), _path(args.source), _say,
                         progress=sys.stderr.isatty(), skip_missing=args.skip_missing)
    for task, why in rep.skipped.items():
        print(f"not packed  {task}: {why}")
    print(f"wrote {rep.path}: {len(rep.tasks)} task(s), {rep.needs} need(s), {rep.files} file(s), "
          f"{needs.size(rep.bytes)}. Copy it to the machine without network and run there: "
          f"lceval data unpack {rep.path.name}")
    if rep.skipped:
        print(f"{len(rep.skipped)} task(s) not packed: their data is not here (the lines above say how to get it)")
        return DATA_MISSING
    return 0


def data_unpack(args: argparse.Namespace, inv: Invocation) -> int:
    from lceval.io import using_data_home

    with using_data_home(_path(args.data_home)):
        needs = _needs(inv)
        rep = needs.unpack(Path(args.file), _say)
    print(f"installed {len(rep.installed)} need(s), {len(rep.present)} already present; {len(rep.tasks)} task(s) "
          f"ready without network (data home: {needs.home}): {', '.join(rep.tasks)}")
    return 0


def data_list(args: argparse.Namespace, inv: "Invocation") -> int:
    from lceval.io import data_home

    root = _path(args.data_home) or data_home()
    for name, ds in sorted(inv.plugins.datasets.items()):
        present = "installed" if (root / name / "CHECKSUMS.json").is_file() else "not fetched"
        print(f"{name}  [{present}]  {ds.description}")
    print(f"(data home: {root})")
    return 0


def data_paths(args: argparse.Namespace, inv: "Invocation") -> int:
    """The data home and the cache a command would use, and where each choice comes from, so
    `$LCEVAL_DATA` in the README's examples can be looked up."""
    from lceval.io import data_home

    home, cache = _path(args.data_home), _path(args.cache)

    def origin(flag: Path | None, env: str) -> str:
        if flag is not None:
            return "--data-home" if env == "LCEVAL_DATA" else "--cache"
        if env == "LCEVAL_CACHE" and not os.environ.get(env) and os.environ.get("LCEVAL_DATA"):
            return "beside the data home, $LCEVAL_DATA (set $LCEVAL_CACHE to change it)"
        return f"${env}" if os.environ.get(env) else f"default (set ${env} to change it)"

    data, cache_file = Path(home or data_home()), Path(cache or Cache.default_path())
    installed = sorted(p.name for p in data.iterdir() if (p / "CHECKSUMS.json").is_file()) if data.is_dir() else []
    data_state = ("does not exist yet: `lceval data fetch NAME` creates it" if not data.exists() else
                  f"datasets: {', '.join(installed)}" if installed else "exists, no dataset fetched yet")
    cache_state = (f"exists, {cache_file.stat().st_size / 1e6:.1f} MB" if cache_file.is_file() else
                   "does not exist yet: the first run creates it")
    old = Cache.user_path()
    if cache is None and old.is_file() and old.resolve() != cache_file.resolve():  # left by an earlier default
        cache_state += (f"\n           another cache is at {old} (the place before $LCEVAL_DATA was set): "
                        + (f"`lceval cache import {old}` adds its answers to this one" if cache_file.exists()
                           else "the next command that opens the cache moves it here"))
    print(f"data home: {data}  [{origin(home, 'LCEVAL_DATA')}]\n"
          f"           {data_state}\n"
          f"cache:     {cache_file}  [{origin(cache, 'LCEVAL_CACHE')}]\n"
          f"           {cache_state}")
    return 0
