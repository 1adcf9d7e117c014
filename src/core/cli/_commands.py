"""One function per sub-command: read the parsed arguments, call the layers' public functions
(the engine's `Session` for anything that opens or reopens a run), print what they return,
and give the exit code. Nothing here computes anything; a program calls those same public
functions (README "From a program"), and tests call `lceval.cli.main`."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from lceval.engine import (Cache, DataNeeds, Plugins, RunConfig, RunRecord, Session, check_spec, family_file,
                           load_catalog, load_spec)
from lceval.errors import UserError


@dataclass(frozen=True)
class Invocation:
    """What every command gets besides its arguments: the plugins loaded once for this
    command, the ones `-p no:NAME` disabled (and `-p override:NAME` let win), and the
    command line (for the manifest)."""

    plugins: Plugins
    disabled: list[str]
    argv: list[str]
    overrides: list[str] = field(default_factory=list)

    @property
    def command(self) -> list[str]:
        return ["lceval", *self.argv]


Command = Callable[[argparse.Namespace, Invocation], int]

#: `lceval validate` and `lceval data status`: every spec is valid, some task's data is not installed
DATA_MISSING = 4


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def _wrote(table: str, run_dir: Path) -> None:
    print(table)
    try:
        replaced = RunRecord.read(run_dir).replaced
    except UserError:
        replaced = None
    if replaced:  # results.write_run: the same run again, served from the cache, takes its folder's place
        print(f"\nrewrote {run_dir} (the same run as before, every answer from the cache: its folder was replaced, "
              "not duplicated)")
    else:
        print(f"\nwrote {run_dir}")


def _report_hint(run_dirs: list[Path]) -> None:
    """The command that draws what was just written, so a run's end says where to look next."""
    import shlex

    print(f"report: lceval report {' '.join(shlex.quote(str(d)) for d in run_dirs)} --format html -o report.html")


# -- runs ----------------------------------------------------------------------------------

def run(args: argparse.Namespace, inv: Invocation) -> int:
    config = RunConfig.from_flags(vars(args), disabled_plugins=inv.disabled, command=inv.command)
    with Session(config, inv.plugins) as session:
        if config.dry_run:
            print(session.dry_run(), end="")
            return 0
        from lceval.results import console_text, run_and_write

        done = run_and_write(session)
        for run_dir, results, state in done:
            _wrote(console_text(state, results), run_dir)
        if done:
            _report_hint([run_dir for run_dir, _, _ in done])
    measured = [_said_failures(run_dir, state) for run_dir, _, state in done]
    stopped = [(run_dir, state) for run_dir, _, state in done if state.stopped]
    if stopped:
        return _stopped(*stopped[0], models_left=len(session.plan().models) - len(done))
    if config.shard:
        print(f"shard {config.shard[0]}/{config.shard[1]}: these are the scores of this share only; join the shards "
              "with `lceval merge RUN_DIR...`")
    return 0 if all(measured) else NOTHING_MEASURED


#: the exit code of a run in which no answer could be generated, or none judged (its run
#: directory is written, the failures recorded in it)
NOTHING_MEASURED = 5


def _said_failures(run_dir: Path, state: Any) -> bool:
    """Say on stderr what could not be generated or judged, by kind; False when the run
    measured nothing (no answer generated, or none judged)."""
    from lceval.results import format_failures, run_failures

    failures = run_failures(state)
    text = format_failures(failures, run_dir)
    if text:
        print(text, file=sys.stderr)
    return not failures.nothing_done


#: the exit code of a command a cost limit stopped (its partial run is written)
COST_LIMIT_EXIT = 3


def _stopped(run_dir: Path, state: Any, models_left: int = 0) -> int:
    """Say which cost limit stopped the command and how to go on; exit 3."""
    from lceval.io import format_rate
    from lceval.results import usd

    why = state.stopped
    limit = f"{why['limit']} {format_rate(why['limit_usd'])}" if why.get("limit_usd") is not None else why["limit"]
    left = f"; {models_left} more model(s) not started" if models_left else ""
    flying = int(why.get("in_flight_requests") or 0)
    flight = (f"{flying} request(s) were in flight when it was reached, reserved at {usd(why['in_flight_usd'])}; "
              "their answers are in it" if flying else "none in flight when it was reached")
    print(f"lceval: stopped at the cost limit: {limit} reached: spent {usd(why['spent_usd'])} in all ({flight}); "
          f"{why['requests_not_sent']} request(s) not sent{left}. The answers so far are written as a partial run: "
          f"{run_dir}. Run the same command again to go on (with a higher limit, or the same one: it counts what each "
          "command spends); what was paid is in the cache and is not paid again.", file=sys.stderr)
    return COST_LIMIT_EXIT
def launch_command(args: argparse.Namespace, inv: Invocation) -> int:
    """`lceval launch`: the run's shards on a scheduler, watched, retried and merged."""
    from lceval.launch import LaunchSettings, launch
    from lceval.results import format_table, load_run

    settings = LaunchSettings.from_flags(vars(args))
    config = RunConfig.from_flags(vars(args), disabled_plugins=inv.disabled, command=inv.command)

    def say(line: str) -> None:
        print(line, flush=True)

    report = launch(config, settings, inv.plugins, say=say, overrides=inv.overrides, command=inv.command)
    if config.dry_run:
        return 0
    if report.failed:
        print(f"lceval: {len(report.failed)} shard(s) failed after their retries: "
              f"{', '.join(f'{i}/{settings.shards}' for i in report.failed)}. The finished ones are kept: the same "
              "command submits only the others.", file=sys.stderr)
        return 1
    for run_dir in report.merged:
        _wrote(format_table(load_run(run_dir).results), run_dir)
    return 0


def score(args: argparse.Namespace, inv: Invocation) -> int:
    """Re-judge a finished run into a new run directory (the source stays as it is), or add
    further metrics to it in place (`--add-metric`: its answers and judgments stay)."""
    from lceval.io import check_writable
    from lceval.options import from_flags
    from lceval.results import console_text, load_run, rewrite_run, write_run

    if bool(args.judge) == bool(args.add_metric):
        raise UserError("give --judge (a new run judged again) or --add-metric (metrics added in place), one of them",
                        field="--judge" if args.judge else "--add-metric")
    source = load_run(Path(args.run_dir))
    if args.add_metric:
        check_writable(source.path.parent)
        with Session.reopen(source, inv.plugins, judge_model=args.judge_model, cache_path=_path(args.cache),
                            command=inv.command) as session:
            state = session.add_metrics(list(args.add_metric))
            run_dir, results = rewrite_run(state, source)
        _wrote(console_text(state, results), run_dir)
        return 0 if _said_failures(run_dir, state) else NOTHING_MEASURED
    output = _path(args.output) or source.path.parent
    check_writable(output)
    # --batch and --max-cost are the run's own settings, read by their `lceval run` flags
    limits = from_flags(RunConfig, {"max_cost": args.max_cost, "batch": args.batch})
    with Session.reopen(source, inv.plugins, judge=args.judge, judge_model=args.judge_model,
                        cache_path=_path(args.cache), command=inv.command, **limits) as session:
        state = session.rejudge()
        run_dir, results = write_run(state, inv.plugins, output)
    _wrote(console_text(state, results), run_dir)
    measured = _said_failures(run_dir, state)
    return _stopped(run_dir, state) if state.stopped else 0 if measured else NOTHING_MEASURED


def merge(args: argparse.Namespace, inv: Invocation) -> int:
    """Join the shards of one run into the run directory one machine would have written."""
    from lceval.results import format_table, load_run, merge_runs, write_run

    runs = [load_run(Path(d)) for d in args.run_dirs]
    with Session.reopen(runs[0], inv.plugins, command=inv.command) as session:
        run_dir, results = write_run(merge_runs(runs, session), inv.plugins, _path(args.output) or runs[0].path.parent)
    _wrote(format_table(results), run_dir)
    return 0


def rank(args: argparse.Namespace, inv: Invocation) -> int:
    """Rank the systems of finished runs with a pairwise judge; writes a rankings directory."""
    from lceval.analysis import RankOptions, collect_systems, format_ranking, make_pairwise_judge, write_ranking
    from lceval.analysis import rank as rank_systems
    from lceval.io import check_writable
    from lceval.results import load_run

    opts = RankOptions(
        criteria=[c.strip() for c in args.criteria.split(",") if c.strip()] if args.criteria else None,
        k_factor=args.k_factor, initial=args.initial, n_orders=args.n_orders, n_boot=args.n_boot,
        bt_prior=args.bt_prior, tie_margin=args.tie_margin, swap=not args.no_swap, seed=args.seed,
        level=args.level, reference_judge=args.reference_judge, tasks=args.task)
    opts.check()
    runs = [load_run(Path(d)) for d in args.run_dirs]
    systems, section = collect_systems(runs, opts.tasks)
    flag = args.judge or opts.judge or section.get("judge")
    if not flag:
        raise UserError("no pairwise judge: the task spec has no rank.judge", field="--judge",
                        hint=f"Pass --judge NAME (installed: {', '.join(sorted(inv.plugins.pairwise_judges)) or 'none'}).")
    check_writable(Path(args.output))
    with Session(plugins=inv.plugins, judge_model=args.judge_model, cache_path=_path(args.cache)) as session:
        model = session.judge_model()
        ranking = rank_systems(runs, make_pairwise_judge(flag, inv.plugins, model, opts.seed), flag, opts, systems,
                               section)
        if model is not None:
            ranking.report["judge_usage"] = model.usage.as_dict()
            ranking.report["judge_backend_stats"] = model.backend.stats()
    task = systems[0].task if len({s.task for s in systems}) == 1 else "tasks"
    path = write_ranking(ranking, Path(args.output), f"rank-{task}-{time.strftime('%Y%m%d-%H%M%S')}")
    if args.format == "json":
        print(json.dumps(ranking.report, indent=2, ensure_ascii=False))
    else:
        print(format_ranking(ranking, markdown=args.format == "markdown"))
    print(f"\nwrote {path}", file=sys.stderr if args.format == "json" else sys.stdout)
    return 0


# -- tasks, plugins, specs -----------------------------------------------------------------

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


def cache_export(args: argparse.Namespace, inv: Invocation) -> int:
    """A cache's answers written to a file, for another machine's cache (`cache import`)."""
    since = None
    if args.since:
        from datetime import datetime

        try:
            since = datetime.fromisoformat(args.since).timestamp()
        except ValueError:
            raise UserError(f"--since takes an ISO 8601 time (e.g. 2025-06-01T12:00), got '{args.since}'",
                            field="--since") from None
    where = _path(args.cache) or Cache.default_path(migrate=True)
    if not where.is_file():
        raise UserError("there is no cache here yet", file=where, field="--cache")
    with Session(plugins=inv.plugins, cache_path=where) as session:
        count = session.cache.export(Path(args.file), since=since)
        print(f"exported {count} answers from {session.cache.path} to {args.file}")
    return 0


def cache_import(args: argparse.Namespace, inv: Invocation) -> int:
    """Answers from exported files or other caches added to a cache; none it has replaced."""
    files = [Path(f) for f in args.files]
    for path in files:
        if not path.is_file():
            raise UserError("no such file", file=path, field="FILE")
    with Session(plugins=inv.plugins, cache_path=_path(args.cache)) as session:
        for path in files:
            counts = session.cache.import_from(path)
            print(f"{path}: {counts['added']} answers added, {counts['same']} already there, {counts['kept']} "
                  f"kept as they were (this cache has another answer to the same request) -> {session.cache.path}")
    return 0


# -- reading finished runs -----------------------------------------------------------------

def report(args: argparse.Namespace, inv: Invocation) -> int:
    """`table`/`json`: each run's own results; `markdown`/`csv`/`latex`: the papers' tables
    (models x tasks x groups, breakdowns per group or `--pooled`, tests) over all the runs
    given; `html`: one self-contained page. Inputs are run directories or recorded score
    files; `--where` keeps a subset of the samples and `--by` adds breakdowns. A launch folder
    stands for the runs its shards were merged into, a folder of run folders for each of them."""
    args.run_dirs = run_folders(args.run_dirs)
    if args.format == "html":
        from lceval.report import write_report

        if not args.output:
            raise UserError("--format html writes a file: pass -o FILE.html", field="-o")
        path = write_report([Path(p) for p in args.run_dirs], Path(args.output), inv.plugins,
                            agreement=args.agreement, bins_of=args.bins_of, title=args.title)
        print(f"wrote {path}")
        return 0
    from lceval.report import load_inputs, paper_tables, parse_where, rescored
    from lceval.results import format_table

    catalog = load_catalog(inv.plugins)

    def spec_of(task: str) -> Any:
        if task not in catalog.specs:
            raise UserError(f"recorded scores name task '{task}', which is not installed", field="run_dirs")
        return catalog.spec(task)

    runs = [rescored(r, parse_where(args.where or []), args.by or [])
            for r in load_inputs([str(d) for d in args.run_dirs], inv.plugins, spec_of)]
    if args.format in ("markdown", "csv", "latex"):
        print(paper_tables(runs, args.format, pooled=args.pooled, subset=", ".join(args.where or [])))
    elif args.format == "json":
        print("\n\n".join(json.dumps(run.results, indent=2) for run in runs))
    else:
        print("\n\n".join(f"## {run.run_id} ({run.model})\n\n{format_table(run.results)}" for run in runs))
    return 0


def run_folders(given: list[str]) -> list[str]:
    """`lceval report`'s inputs with each launch folder replaced by the runs merged from its
    shards and each folder of run folders (`runs/`) by the run folders in it, each run once
    (`runs/*/` names a launch folder and the run merged from it alike). Anything else (a run
    folder, a `lceval rank` folder, a recorded file) stays as given."""
    from lceval.launch import launched_runs

    out: list[str] = []

    def add(path: Path | str) -> None:
        if not any(Path(path).resolve() == Path(seen).resolve() for seen in out if Path(seen).exists()):
            out.append(str(path))

    for arg in given:
        path = Path(arg)
        launched = launched_runs(path) if path.is_dir() else None
        if launched is not None:
            merged, done, shards = launched
            if not merged:
                raise UserError(f"a launch folder whose shards are not merged into a run yet ({done} of {shards} "
                                "shard(s) finished)", file=path, field="RUN_DIR",
                                hint="Run the same `lceval launch` command again: it submits the unfinished shards "
                                     "and merges them.")
            for run_dir in merged:
                add(run_dir)
        elif path.is_dir() and not (path / "results.json").exists() and not (path / "rankings.json").exists():
            inside = sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")
                            and ((p / "results.json").is_file() or (p / "rankings.json").is_file()))
            for run_dir in inside or [path]:  # none inside: the run folder's own error names what is missing
                add(run_dir)
        else:
            add(arg)
    return out


def compare(args: argparse.Namespace, inv: Invocation) -> int:
    from lceval.analysis import compare_runs, format_comparison
    from lceval.results import load_run

    a, b = load_run(Path(args.run_a)), load_run(Path(args.run_b))
    print(format_comparison(a, b, compare_runs(a, b, args.task, seed=args.seed), args.format))
    return 0


def judge_agreement(args: argparse.Namespace, inv: Invocation) -> int:
    from lceval.analysis import agreement, format_agreement, merge_sources, read_sources

    found = merge_sources([s for arg in args.sources for s in read_sources(arg, inv.plugins, args.task)])
    rep = agreement(found, bins_of=args.bins_of, n_boot=args.n_boot, seed=args.seed, resample=args.resample)
    print(json.dumps(rep, indent=2) if args.format == "json" else format_agreement(rep))
    return 0


# -- leaderboards --------------------------------------------------------------------------

def submit(args: argparse.Namespace, inv: Invocation) -> int:
    from lceval.leaderboard import submit as pack

    print(f"wrote {pack([Path(p) for p in args.run_dirs], Path(args.output), inv.plugins, args.name)}")
    return 0


def verify(args: argparse.Namespace, inv: Invocation) -> int:
    from lceval.io import data_home
    from lceval.leaderboard import format_verification, verify_bundle

    result = verify_bundle(Path(args.bundle), inv.plugins, load_catalog(inv.plugins),
                           Path(args.data_home or data_home()), rejudge=args.rejudge, seed=args.seed,
                           accept_unpinned=args.accept_unpinned)
    print(json.dumps(result.as_dict(), indent=1) if args.format == "json" else format_verification(result))
    return 0 if result.ok else 2


def leaderboard(args: argparse.Namespace, inv: Invocation) -> int:
    from lceval.io import data_home
    from lceval.leaderboard import write_site

    print(write_site([Path(p) for p in args.bundles], Path(args.output), inv.plugins, load_catalog(inv.plugins),
                     Path(args.data_home or data_home()), title=args.title, verify=not args.no_verify,
                     rejudge=args.rejudge))
    return 0


def plugin_command(command: Any) -> Command:
    """The command a plugin added (`register_commands`): it prints what the command's `run`
    returns."""
    def handle(args: argparse.Namespace, inv: Invocation) -> int:
        print(command.run(args))
        return 0
    return handle
