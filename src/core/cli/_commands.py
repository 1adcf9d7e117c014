"""One function per sub-command: read the parsed arguments, call the layers' public functions
(the engine's `Session` for anything that opens or reopens a run), print what they return,
and give the exit code. Nothing here computes anything; a program calls those same public
functions (README "From a program"), and tests call `lceval.cli.main`."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from lceval.engine import Cache, Plugins, RunConfig, RunRecord, Session, load_catalog
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
