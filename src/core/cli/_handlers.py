"""One handler per sub-command: read the parsed arguments, call the command's function in
`lceval.cli._commands` with the plugins the command line loaded, print what it returns, and
give the exit code. Nothing here computes anything."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from lceval.cli import _commands as commands
from lceval.engine import Plugins, RunConfig
from lceval.errors import UserError


@dataclass(frozen=True)
class Invocation:
    """What every handler gets besides its arguments: the plugins loaded once for this
    command, the ones `-p no:NAME` disabled, and the command line (for the manifest)."""

    plugins: Plugins
    disabled: list[str]
    argv: list[str]

    @property
    def command(self) -> list[str]:
        return ["lceval", *self.argv]


Handler = Callable[[argparse.Namespace, Invocation], int]


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def run(args: argparse.Namespace, inv: Invocation) -> int:
    config = RunConfig.from_flags(vars(args), disabled_plugins=inv.disabled, command=inv.command)
    if config.dry_run:
        print(commands.dry_run(config, plugins=inv.plugins), end="")
        return 0
    for run_dir, table in commands.run(config, plugins=inv.plugins):
        print(table)
        print(f"\nwrote {run_dir}")
    if config.shard:
        print(f"shard {config.shard[0]}/{config.shard[1]}: these are the scores of this share only; join the shards "
              "with `lceval merge RUN_DIR...`")
    return 0


def merge(args: argparse.Namespace, inv: Invocation) -> int:
    run_dir, table = commands.merge([Path(p) for p in args.run_dirs], output=_path(args.output),
                                    plugins=inv.plugins, command=inv.command)
    print(table)
    print(f"\nwrote {run_dir}")
    return 0


def tasks(args: argparse.Namespace, inv: Invocation) -> int:
    if args.action == "show":
        if not args.name:
            raise UserError("`lceval tasks show` needs a task name", field="name")
        print(commands.show_task(args.name, plugins=inv.plugins))
    else:
        print(commands.list_tasks(plugins=inv.plugins))
    return 0


def plugins(args: argparse.Namespace, inv: Invocation) -> int:
    print(commands.list_plugins(name=args.name, plugins=inv.plugins))
    return 0


def validate(args: argparse.Namespace, inv: Invocation) -> int:
    text, ok = commands.validate(args.paths, inv.disabled, plugins=inv.plugins)
    print(text)
    return 0 if ok else 2


def data_fetch(args: argparse.Namespace, inv: Invocation) -> int:
    print(commands.fetch_data(args.name, args.source, _path(args.data_home), plugins=inv.plugins))
    return 0


def data_list(args: argparse.Namespace, inv: Invocation) -> int:
    print(commands.list_datasets(_path(args.data_home), plugins=inv.plugins))
    return 0


def data_paths(args: argparse.Namespace, inv: Invocation) -> int:
    print(commands.paths(_path(args.data_home), _path(args.cache)))
    return 0


def report(args: argparse.Namespace, inv: Invocation) -> int:
    if args.format == "html":
        path = commands.report_html([Path(p) for p in args.run_dirs], args.output, agreement=args.agreement,
                                    bins_of=args.bins_of, title=args.title, plugins=inv.plugins)
        print(f"wrote {path}")
        return 0
    print(commands.report(args.run_dirs, args.format, pooled=args.pooled, where=args.where, by=args.by,
                          plugins=inv.plugins))
    return 0


def score(args: argparse.Namespace, inv: Invocation) -> int:
    run_dir, table = commands.score(run_dir=Path(args.run_dir), judge=args.judge, judge_model=args.judge_model,
                                    output=_path(args.output), cache_path=_path(args.cache), plugins=inv.plugins,
                                    command=inv.command)
    print(table)
    print(f"\nwrote {run_dir}")
    return 0


def compare(args: argparse.Namespace, inv: Invocation) -> int:
    print(commands.compare(Path(args.run_a), Path(args.run_b), args.task, args.format, args.seed))
    return 0


def judge_agreement(args: argparse.Namespace, inv: Invocation) -> int:
    print(commands.judge_agreement(args.sources, task=args.task, bins_of=args.bins_of, fmt=args.format,
                                   n_boot=args.n_boot, seed=args.seed, resample=args.resample, plugins=inv.plugins))
    return 0


def rank(args: argparse.Namespace, inv: Invocation) -> int:
    from lceval.analysis import RankOptions

    opts = RankOptions(
        criteria=[c.strip() for c in args.criteria.split(",") if c.strip()] if args.criteria else None,
        k_factor=args.k_factor, initial=args.initial, n_orders=args.n_orders, n_boot=args.n_boot,
        bt_prior=args.bt_prior, tie_margin=args.tie_margin, swap=not args.no_swap, seed=args.seed,
        level=args.level, reference_judge=args.reference_judge, tasks=args.task)
    path, text = commands.rank([Path(p) for p in args.run_dirs], judge=args.judge, judge_model=args.judge_model,
                               options=opts, output=Path(args.output), fmt=args.format, cache_path=_path(args.cache),
                               plugins=inv.plugins)
    print(text)
    print(f"\nwrote {path}", file=sys.stderr if args.format == "json" else sys.stdout)
    return 0


def submit(args: argparse.Namespace, inv: Invocation) -> int:
    path = commands.submit([Path(p) for p in args.run_dirs], Path(args.output), args.name, plugins=inv.plugins)
    print(f"wrote {path}")
    return 0


def verify(args: argparse.Namespace, inv: Invocation) -> int:
    text, ok = commands.verify(Path(args.bundle), rejudge=args.rejudge, seed=args.seed,
                               accept_unpinned=args.accept_unpinned, fmt=args.format,
                               data_home=_path(args.data_home), plugins=inv.plugins)
    print(text)
    return 0 if ok else 2


def leaderboard(args: argparse.Namespace, inv: Invocation) -> int:
    print(commands.leaderboard([Path(p) for p in args.bundles], Path(args.output), title=args.title,
                               verify=not args.no_verify, rejudge=args.rejudge, data_home=_path(args.data_home),
                               plugins=inv.plugins))
    return 0


def plugin_command(command: Any) -> Handler:
    """The handler of a sub-command a plugin added (`register_commands`): it prints what the
    command's `run` returns."""
    def handle(args: argparse.Namespace, inv: Invocation) -> int:
        print(command.run(args))
        return 0
    return handle
