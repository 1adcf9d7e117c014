"""The `lceval` argument parser: one sub-parser per command, each bound to the function in
`lceval.cli._commands` that runs it. `run`'s and `launch`'s options come from their one
declaration, the fields of `RunConfig` and `LaunchSettings` (`add_flags`)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, NoReturn

from lceval.cli import _catalog_commands as catalog_commands
from lceval.cli import _commands as commands
from lceval.cli import _data_commands as data_commands
from lceval.engine import RunConfig
from lceval.errors import UserError
from lceval.options import Flag, flags_of

USAGE = ("%(prog)s [-p no:NAME] COMMAND [options]\n"
         "       %(prog)s [-p no:NAME] --tasks TASKS --model MODEL [run options]")


class ArgumentParser(argparse.ArgumentParser):
    """argparse that reports a bad flag as lceval reports bad input: one line naming what is
    wrong and how to see the options, exit 2, instead of the whole usage block first."""

    def error(self, message: str) -> NoReturn:
        raise UserError(message, hint=f"`{self.prog} --help` lists the options.")


@dataclass
class Parser:
    """The parser, the names of its sub-commands, and the plugin commands it did not add
    because a built-in command has the name."""

    parser: argparse.ArgumentParser
    commands: set[str]
    shadowed_commands: list[str] = field(default_factory=list)


def add_flags(parser: Any, declared: list[tuple[str, Flag]]) -> None:
    """Options from their declaration (`lceval.options.flags_of`): `run`'s and `launch`'s. A
    value stays text here (argparse checks only `choices`): the settings convert it
    (`RunConfig.from_flags`, `LaunchSettings.from_flags`), so a bad value is one line naming
    the flag."""
    for dest, flag in declared:
        metavar = flag.metavar or (None if flag.choices else flag.name.lstrip("-").upper().replace("-", "_"))
        kind: dict[str, Any] = {"action": "store_true"} if flag.switch else \
            {"action": "append", "metavar": metavar} if flag.repeat else {"metavar": metavar}
        if flag.choices:
            kind["choices"] = flag.choices
        parser.add_argument(*flag.names, dest=dest, required=flag.required, help=flag.help, **kind)


LOG_LEVELS = ("debug", "info", "warning", "error")


def _verbosity(parser: argparse.ArgumentParser, suffix: str = "") -> None:
    """-v / --log-level, on the top-level parser and on every command (so they may come anywhere)."""
    parser.add_argument("-v", "--verbose", dest=f"verbose{suffix}", action="count", default=0,
                        help="say more: -v the phases of a run, -vv every request (and the engines' own logs)")
    parser.add_argument("--log-level", dest=f"log_level{suffix}", choices=LOG_LEVELS, default=None,
                        help="the lceval logger's level (default warning; -v is info, -vv debug)")


def build_parser(plugin_commands: dict[str, Any]) -> Parser:
    p = ArgumentParser(
        prog="lceval", usage=USAGE,
        description="Evaluate long-context language models. Without a COMMAND, "
                    "`lceval --tasks ... --model ...` is `lceval run --tasks ... --model ...` "
                    "(same flags: see `lceval run --help`).")
    p.add_argument("-p", dest="plugin_flags", action="append", default=[], metavar="no:NAME|override:NAME",
                   help="no:NAME disables the plugin NAME, like pytest's -p no:NAME; override:NAME lets its "
                   "names win over the built-ins' (a clash is otherwise won by the built-in); repeatable, "
                   "anywhere on the command line")
    from lceval import __version__

    p.add_argument("--version", action="version", version=f"lceval {__version__}",
                   help="print lceval's version and exit")
    _verbosity(p, "_top")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", prog="lceval")

    def command(name: str, handler: Any, **kw: Any) -> argparse.ArgumentParser:
        parser = sub.add_parser(name, **kw)
        parser.set_defaults(handler=handler)
        _verbosity(parser)
        return parser

    add_flags(command("run", commands.run, help="generate, judge and score (the default command)"), flags_of(RunConfig))

    from lceval.launch import LaunchSettings

    la = command("launch", commands.launch_command,
                 help="run a run's shards on Slurm, Ray or this machine's processes, retry, merge")
    add_flags(la, flags_of(RunConfig))
    add_flags(la.add_argument_group("where the shards run (the other options are `lceval run`'s)"),
              flags_of(LaunchSettings))

    mg = command("merge", commands.merge, help="join the shards of a run (`run --shard I/N`) into one run")
    mg.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    mg.add_argument("-o", "--output", help="folder for the merged run directory (default: next to the first shard)")

    t = command("tasks", catalog_commands.tasks, help="list tasks by benchmark family, or show one resolved spec")
    t.add_argument("action", nargs="?", choices=["list", "show"], default="list")
    t.add_argument("name", nargs="?")
    t.add_argument("--families", action="store_true",
                   help="list the benchmark families: their tasks, languages, metrics and paper")

    pl = command("plugins", catalog_commands.plugins, help="list loaded plugins, their kinds, distributions, versions and "
                 "clashes; with NAME, what it provides and the options it takes")
    pl.add_argument("name", nargs="?", help="a plugin, or a backend, judge, retriever, task type ... name")

    v = command("validate", catalog_commands.validate, help="check task specs or a plugin package without running")
    v.add_argument("paths", nargs="+", help="spec YAML files, task or suite names (as --tasks takes them), or "
                   "folders of a plugin package (pyproject.toml)")

    d = command("data", None, help="manage datasets in the data home")
    dsub = d.add_subparsers(dest="data_command", required=True)
    f = dsub.add_parser("fetch", help="download (or copy with --from) a dataset, or what tasks, suites or benchmark "
                        "families need (Hub files, authors' files, encodings, models), into the data home and caches")
    f.set_defaults(handler=data_commands.data_fetch)
    _verbosity(f)
    f.add_argument("names", nargs="+", metavar="NAME", help="a dataset (`lceval data list`), or tasks, suites or "
                   "families (`lceval tasks --families`)")
    f.add_argument("--from", dest="source", help="local folder holding the published archives or the files only you "
                   "can provide, or a URL prefix")
    f.add_argument("--data-home")
    ds = dsub.add_parser("status", help="per task: is its data here (usable without network), and the command that "
                         "gets what is missing (exit 4 if anything is)")
    ds.set_defaults(handler=data_commands.data_status)
    _verbosity(ds)
    ds.add_argument("tasks", nargs="*", metavar="TASKS", help="tasks, suites or families (default: every task)")
    ds.add_argument("--data-home")
    dk = dsub.add_parser("pack", help="on a connected machine: fetch everything the tasks need and write it to one "
                         "file for a machine without network")
    dk.set_defaults(handler=data_commands.data_pack)
    _verbosity(dk)
    dk.add_argument("tasks", nargs="+", metavar="TASKS", help="tasks, suites or families")
    dk.add_argument("-o", "--output", required=True, metavar="FILE", help="the pack to write (a tar file)")
    dk.add_argument("--from", dest="source", help="folder holding the files only you can provide (as data fetch)")
    dk.add_argument("--skip-missing", action="store_true",
                    help="pack the tasks whose data is here or can be fetched, and list the others (default: "
                    "refuse the whole pack when one task's data cannot be got)")
    dk.add_argument("--data-home")
    du = dsub.add_parser("unpack", help="on the machine without network: install a pack into the data home and "
                         "caches, checksums verified")
    du.set_defaults(handler=data_commands.data_unpack)
    _verbosity(du)
    du.add_argument("file", metavar="FILE")
    du.add_argument("--data-home")
    dl = dsub.add_parser("list", help="datasets known to the installed plugins")
    dl.set_defaults(handler=data_commands.data_list)
    _verbosity(dl)
    dl.add_argument("--data-home")
    dp = dsub.add_parser("paths", help="where the data home and the request cache are, and why")
    dp.set_defaults(handler=data_commands.data_paths)
    _verbosity(dp)
    dp.add_argument("--data-home")
    dp.add_argument("--cache")

    ca = command("cache", None, help="move answers between request caches (one per machine)")
    csub = ca.add_subparsers(dest="cache_command", required=True)
    ce = csub.add_parser("export", help="write a cache's answers to a file (JSON Lines; gzip for .gz)")
    ce.set_defaults(handler=commands.cache_export)
    _verbosity(ce)
    ce.add_argument("file", metavar="FILE")
    ce.add_argument("--cache", help="cache database to read (default: $LCEVAL_CACHE or the user cache dir)")
    ce.add_argument("--since", help="only answers stored at or after this time (ISO 8601, e.g. 2025-06-01T12:00)")
    ci = csub.add_parser("import", help="add the answers of exported files or other caches that a cache lacks "
                         "(an answer it has is never replaced)")
    ci.set_defaults(handler=commands.cache_import)
    _verbosity(ci)
    ci.add_argument("files", nargs="+", metavar="FILE", help="a file `cache export` wrote, or a cache database")
    ci.add_argument("--cache", help="cache database to add to (default: $LCEVAL_CACHE or the user cache dir)")

    rep = command("report", commands.report, help="print finished runs, or the papers' tables over several runs")
    rep.add_argument("run_dirs", nargs="+", metavar="RUN_DIR|FILE[#SCORER]",
                     help="run directories, or recorded score files (e.g. ELITR-Bench's *_gpt-4-eval.json); "
                     "html also takes `lceval rank` directories")
    rep.add_argument("--format", choices=["table", "json", "markdown", "csv", "latex", "html"], default="table",
                     help="table/json: each run on its own; markdown/csv/latex: models x tasks x groups, "
                     "breakdowns and tests over all runs given; html: one self-contained page with plots and "
                     "a sample browser (needs -o)")
    rep.add_argument("--pooled", action="store_true",
                     help="breakdowns and tests over all groups (splits) together, not per group")
    rep.add_argument("--where", action="append", default=[], metavar="FIELD=VALUE",
                     help="only samples whose metadata FIELD is VALUE (repeatable), e.g. qa_conv_differs=true")
    rep.add_argument("--by", action="append", default=[], metavar="FIELD",
                     help="a further breakdown by a sample metadata field (repeatable)")
    rep.add_argument("-o", "--output", help="file to write (html)")
    rep.add_argument("--agreement", action="append", metavar="[LABEL=]PATH[#SOURCE]",
                     help="html: further score sources (e.g. recorded human scores) to set the runs' judges "
                     "against, as in judge-agreement (repeatable)")
    rep.add_argument("--bins-of", help="html: the reference source of the agreement plots (default: the first)")
    rep.add_argument("--title", help="html: page title")

    sc = command("score", commands.score, help="re-judge a finished run without generating again, or add metrics "
                 "to it in place")
    sc.add_argument("run_dir")
    sc.add_argument("--judge", help="judge name or preset: a new run directory judged by it")
    sc.add_argument("--add-metric", action="append", default=[], metavar="NAME[,label=L][,key=value...]",
                    help="a further metric of the run's answers (a judge), added to the run in place (repeatable)")
    sc.add_argument("--judge-model", help="model spec the judge calls, if it needs one")
    sc.add_argument("--output", help="folder for the new run directory (default: next to the source)")
    sc.add_argument("--cache", help="cache database (default: $LCEVAL_CACHE or the user cache dir)")
    sc.add_argument("--batch", action="store_true",
                    help="send the judge model's requests through its batch API (half the price, within hours)")
    sc.add_argument("--max-cost", metavar="USD", help="stop sending judge requests past USD (exit 3, partial run)")

    cmp_ = command("compare", commands.compare, help="paired comparison of two runs on the same items")
    cmp_.add_argument("run_a")
    cmp_.add_argument("run_b")
    cmp_.add_argument("--task", action="append", help="only this task (repeatable; default: every shared task)")
    cmp_.add_argument("--format", choices=["table", "markdown", "json"], default="table")
    cmp_.add_argument("--seed", type=int, default=0, help="seed of the bootstrap and permutation draws")

    ag = command("judge-agreement", commands.judge_agreement,
                 help="agreement between judges, and between judges and people")
    ag.add_argument("sources", nargs="+", metavar="[LABEL=]PATH[#SOURCE]",
                    help="run directories and recorded-score files (e.g. an ELITR *-eval.json)")
    ag.add_argument("--task", help="task of the run directories to read (default: all)")
    ag.add_argument("--bins-of", help="source whose score bins the others are spread over (default: the first)")
    ag.add_argument("--format", choices=["markdown", "json"], default="markdown")
    ag.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples (default 1000)")
    ag.add_argument("--resample", choices=["clusters", "items"], default="clusters",
                    help="bootstrap unit: whole clusters (meetings; default) or single items")
    ag.add_argument("--seed", type=int, default=0)

    rk = command("rank", commands.rank, help="rank the systems of runs by pairwise comparison (Elo, Bradley-Terry)")
    rk.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    rk.add_argument("--judge", help="pairwise judge NAME[,key=value...] (default: the spec's rank.judge)")
    rk.add_argument("--judge-model", help="model spec the judge calls, if it needs one")
    rk.add_argument("--task", action="append", help="only this task (repeatable; default: every task of the runs)")
    rk.add_argument("--criteria", help="comma-separated criteria to rank on (default: the spec's, else the judge's)")
    rk.add_argument("--k-factor", type=float, default=32.0, help="Elo K-factor (default 32)")
    rk.add_argument("--initial", type=float, default=1000.0, help="initial Elo rating (default 1000)")
    rk.add_argument("--n-orders", type=int, default=1000,
                    help="random match orders Elo is averaged over (default 1000)")
    rk.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples of units (default 1000)")
    rk.add_argument("--bt-prior", type=float, default=0.0,
                    help="virtual draws per pair of systems in the Bradley-Terry fit (default 0: maximum likelihood)")
    rk.add_argument("--tie-margin", type=float, default=0.0,
                    help="score differences up to this count as a draw (default 0: only equal scores)")
    rk.add_argument("--no-swap", action="store_true",
                    help="judge each pair in one order only (no position-bias control)")
    rk.add_argument("--reference-judge",
                    help="judge of the runs whose details give the reference ranking (default: any)")
    rk.add_argument("--level", type=float, default=0.95, help="confidence level of the intervals (default 0.95)")
    rk.add_argument("--seed", type=int, default=0, help="seed of the judge, match orders and resamples")
    rk.add_argument("--output", default="rankings", help="folder for the rankings directory (default: ./rankings)")
    rk.add_argument("--format", choices=["table", "markdown", "json"], default="table")
    rk.add_argument("--cache", help="cache database (default: $LCEVAL_CACHE or the user cache dir)")

    sb = command("submit", commands.submit, help="pack finished runs into a leaderboard bundle (a zip file)")
    sb.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    sb.add_argument("-o", "--output", required=True, help="bundle file to write, e.g. my-model.lceval.zip")
    sb.add_argument("--name", help="the submission's name on a leaderboard (default: the models)")

    vf = command("verify", commands.verify,
                 help="recompute a bundle's numbers from its samples, data and judge (exit 2 if rejected)")
    vf.add_argument("bundle")
    vf.add_argument("--rejudge", type=int, default=200,
                    help="items per task (a seeded sample) judged again, and answered again for recorded models "
                    "(default 200; a larger number than the task has checks every item)")
    vf.add_argument("--seed", type=int, default=0, help="seed of the sample of items checked again")
    vf.add_argument("--accept-unpinned", action="store_true",
                    help="accept data of datasets without pinned checksums when it matches this machine's copy")
    vf.add_argument("--data-home", help="data home holding the verified datasets (default: $LCEVAL_DATA ...)")
    vf.add_argument("--format", choices=["text", "json"], default="text")

    lb = command("leaderboard", commands.leaderboard,
                 help="a static leaderboard site from bundles (each verified first)")
    lb.add_argument("bundles", nargs="+", metavar="BUNDLE")
    lb.add_argument("-o", "--output", required=True, help="folder to write the site into")
    lb.add_argument("--title", default="lceval leaderboard")
    lb.add_argument("--no-verify", action="store_true", help="list bundles without verifying them (marked so)")
    lb.add_argument("--rejudge", type=int, default=200, help="as for verify")
    lb.add_argument("--data-home", help="as for verify")

    built = Parser(parser=p, commands=set(sub.choices))
    for name, plugin_command in sorted(plugin_commands.items()):
        if name in built.commands:  # a built-in command keeps its name (and the clash is printed)
            built.shadowed_commands.append(name)
            continue
        plugin_command.add_arguments(command(name, commands.plugin_command(plugin_command), help=plugin_command.help))
    built.commands = set(sub.choices)
    return built
