"""The `lceval` command: parses arguments and calls the engine (which tests call directly).

Exit codes: 0 success, 2 bad input (one paragraph naming file, field and line), 1 internal
error, 130 interrupted (finished work is in the cache; the same command resumes).

`lceval --tasks T --model M` (no sub-command, as lm-evaluation-harness users type it) is
`lceval run --tasks T --model M`; `-p no:NAME` / `-p override:NAME` work anywhere on the line.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from lceval.errors import UserError


DEFAULT_COMMAND = "run"


def _parser(plugin_commands: dict[str, Any]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lceval",
        usage="%(prog)s [-p no:NAME] COMMAND [options]\n"
              "       %(prog)s [-p no:NAME] --tasks TASKS --model MODEL [run options]",
        description="Evaluate long-context language models. Without a COMMAND, "
                    "`lceval --tasks ... --model ...` is `lceval run --tasks ... --model ...` "
                    "(same flags: see `lceval run --help`).")
    p.add_argument("-p", dest="plugin_flags", action="append", default=[], metavar="no:NAME|override:NAME",
                   help="no:NAME disables the plugin NAME, like pytest's -p no:NAME; override:NAME lets its "
                   "names win over the built-ins' (a clash is otherwise won by the built-in); repeatable, "
                   "anywhere on the command line")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", prog="lceval")

    r = sub.add_parser("run", help="generate, judge and score (the default command)")
    r.add_argument("--tasks", required=True, help="task names, suite names or YAML paths, comma-separated")
    r.add_argument("--model", required=True, action="append",
                   help="SCHEME:MODEL[,key=value...] or an alias (repeat for several models)")
    r.add_argument("--judge", help="judge name or preset (default: the spec's)")
    r.add_argument("--judge-model", help="model spec the judge calls, if it needs one")
    r.add_argument("--split", action="append", help="dataset split (repeatable; default: the spec's)")
    r.add_argument("--limit", type=int, help="at most N scored items per split (the first ones, in the "
                   "dataset's order)")
    r.add_argument("--limit-per-context", type=int, metavar="K",
                   help="at most K items about each long context (meeting, haystack), spread over it; with "
                   "--limit N, N/K contexts per split, e.g. --limit 9 --limit-per-context 3")
    r.add_argument("--seed", default="0", help="seed or comma-separated seeds (mean ± std across them)")
    r.add_argument("--output", default="runs", help="folder for run directories (default: ./runs)")
    r.add_argument("--context-policy", choices=["error", "skip", "truncate-middle", "truncate-left"])
    r.add_argument("--context-lengths", metavar="8k,16k,...,full",
                   help="run each task with its context cut to each budget (k = 1024 tokens; full = uncut): "
                   "a curve of score against context length")
    r.add_argument("--retriever", help="retriever plugin for tasks that retrieve (sets options.retriever)")
    r.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                   help="override a spec field, e.g. --set options.history=gold (YAML value)")
    r.add_argument("--cache", help="cache database (default: $LCEVAL_CACHE or the user cache dir)")
    r.add_argument("--data-home", help="data home (default: $LCEVAL_DATA or the user cache dir)")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.add_argument("--contexts", action="append", metavar="ID,...",
                   help="only these contexts (meetings, haystacks): ids or globs, e.g. dev/meeting_en_dev_001, "
                   "'test2/*'; an id also matches its leading or trailing '/'-separated parts")
    r.add_argument("--shard", metavar="I/N",
                   help="run share I of N (0-based, e.g. $SLURM_ARRAY_TASK_ID/4); join with `lceval merge`")

    r.add_argument("--dry-run", action="store_true",
                   help="print the exact prompts of the selected items (context policy applied when the "
                   "model's tokenizer can be loaded) and stop: no answer generated, nothing written")

    mg = sub.add_parser("merge", help="join the shards of a run (`run --shard I/N`) into one run")
    mg.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    mg.add_argument("-o", "--output", help="folder for the merged run directory (default: next to the first shard)")

    t = sub.add_parser("tasks", help="list tasks, or show one resolved spec")
    t.add_argument("action", nargs="?", choices=["list", "show"], default="list")
    t.add_argument("name", nargs="?")

    pl = sub.add_parser("plugins", help="list loaded plugins, their kinds, distributions, versions and clashes; "
                        "with NAME, what it provides and the options it takes")
    pl.add_argument("name", nargs="?", help="a plugin, or a backend, judge, retriever, task type ... name")

    v = sub.add_parser("validate", help="check task specs or a plugin package without running")
    v.add_argument("paths", nargs="+", help="spec YAML files, or folders of a plugin package (pyproject.toml)")

    d = sub.add_parser("data", help="manage datasets in the data home")
    dsub = d.add_subparsers(dest="data_command", required=True)
    f = dsub.add_parser("fetch", help="download (or copy with --from) a dataset into the data home")
    f.add_argument("name")
    f.add_argument("--from", dest="source", help="local folder holding the published archives, or a URL prefix")
    f.add_argument("--data-home")
    dl = dsub.add_parser("list", help="datasets known to the installed plugins")
    dl.add_argument("--data-home")
    dp = dsub.add_parser("paths", help="where the data home and the request cache are, and why")
    dp.add_argument("--data-home")
    dp.add_argument("--cache")

    rep = sub.add_parser("report", help="print finished runs, or the papers' tables over several runs")
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

    sc = sub.add_parser("score", help="re-judge a finished run without generating again")
    sc.add_argument("run_dir")
    sc.add_argument("--judge", required=True, help="judge name or preset")
    sc.add_argument("--judge-model", help="model spec the judge calls, if it needs one")
    sc.add_argument("--output", help="folder for the new run directory (default: next to the source)")
    sc.add_argument("--cache", help="cache database (default: $LCEVAL_CACHE or the user cache dir)")

    cmp_ = sub.add_parser("compare", help="paired comparison of two runs on the same items")
    cmp_.add_argument("run_a")
    cmp_.add_argument("run_b")
    cmp_.add_argument("--task", action="append", help="only this task (repeatable; default: every shared task)")
    cmp_.add_argument("--format", choices=["table", "markdown", "json"], default="table")
    cmp_.add_argument("--seed", type=int, default=0, help="seed of the bootstrap and permutation draws")

    ag = sub.add_parser("judge-agreement", help="agreement between judges, and between judges and people")
    ag.add_argument("sources", nargs="+", metavar="[LABEL=]PATH[#SOURCE]",
                    help="run directories and recorded-score files (e.g. an ELITR *-eval.json)")
    ag.add_argument("--task", help="task of the run directories to read (default: all)")
    ag.add_argument("--bins-of", help="source whose score bins the others are spread over (default: the first)")
    ag.add_argument("--format", choices=["markdown", "json"], default="markdown")
    ag.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples (default 1000)")
    ag.add_argument("--resample", choices=["clusters", "items"], default="clusters",
                    help="bootstrap unit: whole clusters (meetings; default) or single items")
    ag.add_argument("--seed", type=int, default=0)

    rk = sub.add_parser("rank", help="rank the systems of runs by pairwise comparison (Elo, Bradley-Terry)")
    rk.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    rk.add_argument("--judge", help="pairwise judge NAME[,key=value...] (default: the spec's rank.judge)")
    rk.add_argument("--judge-model", help="model spec the judge calls, if it needs one")
    rk.add_argument("--task", action="append", help="only this task (repeatable; default: every task of the runs)")
    rk.add_argument("--criteria", help="comma-separated criteria to rank on (default: the spec's, else the judge's)")
    rk.add_argument("--k-factor", type=float, default=32.0, help="Elo K-factor (default 32)")
    rk.add_argument("--initial", type=float, default=1000.0, help="initial Elo rating (default 1000)")
    rk.add_argument("--n-orders", type=int, default=1000, help="random match orders Elo is averaged over (default 1000)")
    rk.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples of units (default 1000)")
    rk.add_argument("--bt-prior", type=float, default=0.0,
                    help="virtual draws per pair of systems in the Bradley-Terry fit (default 0: maximum likelihood)")
    rk.add_argument("--tie-margin", type=float, default=0.0,
                    help="score differences up to this count as a draw (default 0: only equal scores)")
    rk.add_argument("--no-swap", action="store_true", help="judge each pair in one order only (no position-bias control)")
    rk.add_argument("--reference-judge", help="judge of the runs whose details give the reference ranking (default: any)")
    rk.add_argument("--level", type=float, default=0.95, help="confidence level of the intervals (default 0.95)")
    rk.add_argument("--seed", type=int, default=0, help="seed of the judge, match orders and resamples")
    rk.add_argument("--output", default="rankings", help="folder for the rankings directory (default: ./rankings)")
    rk.add_argument("--format", choices=["table", "markdown", "json"], default="table")
    rk.add_argument("--cache", help="cache database (default: $LCEVAL_CACHE or the user cache dir)")

    sb = sub.add_parser("submit", help="pack finished runs into a leaderboard bundle (a zip file)")
    sb.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    sb.add_argument("-o", "--output", required=True, help="bundle file to write, e.g. my-model.lceval.zip")
    sb.add_argument("--name", help="the submission's name on a leaderboard (default: the models)")

    vf = sub.add_parser("verify", help="recompute a bundle's numbers from its samples, data and judge (exit 2 if rejected)")
    vf.add_argument("bundle")
    vf.add_argument("--rejudge", type=int, default=200,
                    help="items per task (a seeded sample) judged again, and answered again for recorded models "
                    "(default 200; a larger number than the task has checks every item)")
    vf.add_argument("--seed", type=int, default=0, help="seed of the sample of items checked again")
    vf.add_argument("--accept-unpinned", action="store_true",
                    help="accept data of datasets without pinned checksums when it matches this machine's copy")
    vf.add_argument("--data-home", help="data home holding the verified datasets (default: $LCEVAL_DATA ...)")
    vf.add_argument("--format", choices=["text", "json"], default="text")

    lb = sub.add_parser("leaderboard", help="a static leaderboard site from bundles (each verified first)")
    lb.add_argument("bundles", nargs="+", metavar="BUNDLE")
    lb.add_argument("-o", "--output", required=True, help="folder to write the site into")
    lb.add_argument("--title", default="lceval leaderboard")
    lb.add_argument("--no-verify", action="store_true", help="list bundles without verifying them (marked so)")
    lb.add_argument("--rejudge", type=int, default=200, help="as for verify")
    lb.add_argument("--data-home", help="as for verify")

    p.set_defaults(shadowed_commands=[])
    for name, command in sorted(plugin_commands.items()):
        if name in sub.choices:  # a built-in command keeps its name (and the clash is printed)
            p.get_default("shadowed_commands").append(name)
            continue
        command.add_arguments(sub.add_parser(name, help=command.help))
    return p


def _plugin_flags(flags: list[str]) -> tuple[list[str], list[str]]:
    """`-p no:NAME` and `-p override:NAME` values: (disabled, overriding) plugin names."""
    out: dict[str, list[str]] = {"no": [], "override": []}
    for flag in flags:
        word, _, name = flag.partition(":")
        if word not in out or not name:
            raise UserError(f"-p takes no:NAME or override:NAME, got '{flag}'", field="-p")
        out[word].append(name)
    return out["no"], out["override"]


def _hoist_plugin_flags(argv: list[str]) -> list[str]:
    """`-p no:NAME` / `-p override:NAME` anywhere (after a sub-command, a nested one, or a run
    option) moved to the front, where the top-level parser reads it, as pytest takes -p."""
    flags: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] == "-p" and i + 1 < len(argv) and argv[i + 1].startswith(("no:", "override:")):
            flags += argv[i:i + 2]
            i += 2
            continue
        if argv[i].startswith(("-pno:", "-poverride:")):
            flags.append(argv[i])
        else:
            rest.append(argv[i])
        i += 1
    return flags + rest


def with_default_command(argv: list[str], commands: set[str]) -> list[str]:
    """`argv` with the -p flags first and `run` inserted where the sub-command belongs when
    none is given (the first argument after those flags is an option, such as `--tasks`).
    `lceval`, `lceval --help` and `lceval COMMAND ...` keep their meaning."""
    argv = _hoist_plugin_flags(argv)
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "-p":
            i += 2
        elif arg.startswith("-p") and not arg.startswith("--"):
            i += 1  # -pno:NAME
        elif arg in ("-h", "--help") or arg in commands or not arg.startswith("-"):
            return argv
        else:
            return argv[:i] + [DEFAULT_COMMAND] + argv[i:]
    return argv


def _seeds(text: str) -> list[int]:
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise UserError(f"seeds must be integers, got '{text}'", field="--seed") from None


def _context_lengths(text: str | None) -> list[int | None] | None:
    from lceval.engine._context_policy import parse_context_lengths

    return parse_context_lengths(text) if text is not None else None


def _overrides(items: list[str]) -> dict[str, Any]:
    """`--set FIELD=VALUE` with VALUE read by the spec loader (no tags, bounded aliases and
    nesting); an empty VALUE is null, as in a YAML file."""
    from lceval.io._yaml import loads_yaml_with_lines

    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"--set takes FIELD=VALUE, got '{item}'", field="--set")
        try:
            out[key.strip()] = loads_yaml_with_lines(value, "--set")[0] if value.strip() else None
        except UserError as exc:
            raise UserError(f"value of '{key}' is not a plain YAML value ({exc.message}): {value[:80]!r}",
                            field="--set") from None
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from lceval.engine._plugin_host import OVERRIDE_ENV

    argv = list(sys.argv[1:] if argv is None else argv)
    saved_overrides = os.environ.get(OVERRIDE_ENV)
    try:
        plugins = _early_plugins(argv)
        parser = _parser(plugins.commands)
        from lceval.cli._plugin_listing import plugin_warnings

        for line in plugin_warnings(plugins, parser.get_default("shadowed_commands")):
            print(f"lceval: warning: {line}", file=sys.stderr)
        names = set(next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices)
        argv = with_default_command(argv, names)
        args = parser.parse_args(argv)
        return _dispatch(args, argv, plugins.commands)
    except UserError as exc:
        print(f"lceval: error: {exc.render()}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("lceval: interrupted. Finished answers are in the cache: run the same command again "
              "to resume.", file=sys.stderr)
        return 130
    except Exception:  # a bug in lceval or a plugin: say so, with the traceback to report
        import traceback

        traceback.print_exc()
        print("lceval: internal error (exit 1). Please report it with the traceback above.", file=sys.stderr)
        return 1
    finally:
        if saved_overrides is None:
            os.environ.pop(OVERRIDE_ENV, None)
        else:
            os.environ[OVERRIDE_ENV] = saved_overrides


def _early_plugins(argv: list[str]) -> Any:
    """The plugins as the command will see them, before its arguments are parsed: they add
    sub-commands (register_commands), and their clashes are printed on every command.
    `-p override:NAME` is passed on as $LCEVAL_OVERRIDE_PLUGINS for this process, so every
    later load of the plugins (and the manifest) sees the same choice."""
    from lceval.engine._plugin_host import OVERRIDE_ENV, load_plugins, overrides_from_env

    flags = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "-p"]
    flags += [a[2:] for a in argv if a.startswith("-p") and len(a) > 2]
    disabled, overriding = _plugin_flags([f for f in flags if f.startswith(("no:", "override:"))])
    if overriding:
        os.environ[OVERRIDE_ENV] = ",".join(sorted(overrides_from_env() | set(overriding)))
    return load_plugins(disabled)


def _dispatch(args: argparse.Namespace, argv: list[str], plugin_commands: dict[str, Any]) -> int:
    from lceval.cli import _commands as commands
    from lceval.engine._selection import parse_contexts, parse_shard

    disabled, _ = _plugin_flags(args.plugin_flags)
    if args.command == "run":
        run_args = dict(
            tasks=args.tasks, models=args.model, judge=args.judge, judge_model=args.judge_model,
            splits=args.split, limit=args.limit, limit_per_context=args.limit_per_context, seeds=_seeds(args.seed),
            output=Path(args.output), context_policy=args.context_policy, retriever=args.retriever,
            overrides=_overrides(args.overrides), cache_path=Path(args.cache) if args.cache else None,
            context_lengths=_context_lengths(args.context_lengths),
            data_home=Path(args.data_home) if args.data_home else None,
            disabled_plugins=disabled, progress=not args.no_progress, command=["lceval", *argv],
            contexts=parse_contexts(args.contexts), shard=parse_shard(args.shard),
        )
        if args.dry_run:
            print(commands.dry_run(**run_args), end="")
            return 0
        reports = commands.run(**run_args)
        for run_dir, table in reports:
            print(table)
            print(f"\nwrote {run_dir}")
        if args.shard:
            print(f"shard {args.shard}: these are the scores of this share only; join the shards with "
                  "`lceval merge RUN_DIR...`")
        return 0
    if args.command == "merge":
        run_dir, table = commands.merge([Path(p) for p in args.run_dirs],
                                        output=Path(args.output) if args.output else None,
                                        disabled_plugins=disabled, command=["lceval", *argv])
        print(table)
        print(f"\nwrote {run_dir}")
        return 0
    if args.command == "tasks":
        if args.action == "show":
            if not args.name:
                raise UserError("`lceval tasks show` needs a task name", field="name")
            print(commands.show_task(args.name, disabled))
        else:
            print(commands.list_tasks(disabled))
        return 0
    if args.command == "plugins":
        print(commands.list_plugins(disabled, args.name))
        return 0
    if args.command == "validate":
        text, ok = commands.validate(args.paths, disabled)
        print(text)
        return 0 if ok else 2
    if args.command == "data":
        home = Path(args.data_home) if args.data_home else None
        if args.data_command == "fetch":
            print(commands.fetch_data(args.name, args.source, home, disabled))
        elif args.data_command == "paths":
            print(commands.paths(home, Path(args.cache) if args.cache else None))
        else:
            print(commands.list_datasets(home, disabled))
        return 0
    if args.command == "report":
        if args.format == "html":
            print(f"wrote {commands.report_html([Path(p) for p in args.run_dirs], args.output, agreement=args.agreement, bins_of=args.bins_of, title=args.title, disabled_plugins=disabled)}")
            return 0
        print(commands.report(args.run_dirs, args.format, pooled=args.pooled, where=args.where, by=args.by,
                              disabled_plugins=disabled))
        return 0
    if args.command == "score":
        run_dir, table = commands.score(
            run_dir=Path(args.run_dir), judge=args.judge, judge_model=args.judge_model,
            output=Path(args.output) if args.output else None,
            cache_path=Path(args.cache) if args.cache else None, disabled_plugins=disabled,
            command=["lceval", *argv])
        print(table)
        print(f"\nwrote {run_dir}")
        return 0
    if args.command == "compare":
        print(commands.compare(Path(args.run_a), Path(args.run_b), args.task, args.format, args.seed))
        return 0
    if args.command == "judge-agreement":
        print(commands.judge_agreement(args.sources, task=args.task, bins_of=args.bins_of, fmt=args.format,
                                       n_boot=args.n_boot, seed=args.seed, resample=args.resample,
                                       disabled_plugins=disabled))
        return 0
    if args.command == "rank":
        from lceval.analysis._rank import RankOptions

        opts = RankOptions(
            criteria=[c.strip() for c in args.criteria.split(",") if c.strip()] if args.criteria else None,
            k_factor=args.k_factor, initial=args.initial, n_orders=args.n_orders, n_boot=args.n_boot,
            bt_prior=args.bt_prior, tie_margin=args.tie_margin, swap=not args.no_swap, seed=args.seed,
            level=args.level, reference_judge=args.reference_judge, tasks=args.task)
        path, text = commands.rank([Path(p) for p in args.run_dirs], judge=args.judge, judge_model=args.judge_model,
                                   options=opts, output=Path(args.output), fmt=args.format,
                                   cache_path=Path(args.cache) if args.cache else None, disabled_plugins=disabled)
        print(text)
        print(f"\nwrote {path}", file=sys.stderr if args.format == "json" else sys.stdout)
        return 0
    if args.command == "submit":
        print(f"wrote {commands.submit([Path(p) for p in args.run_dirs], Path(args.output), args.name, disabled)}")
        return 0
    if args.command == "verify":
        text, ok = commands.verify(Path(args.bundle), rejudge=args.rejudge, seed=args.seed,
                                   accept_unpinned=args.accept_unpinned, fmt=args.format,
                                   data_home=Path(args.data_home) if args.data_home else None, disabled_plugins=disabled)
        print(text)
        return 0 if ok else 2
    if args.command == "leaderboard":
        print(commands.leaderboard([Path(p) for p in args.bundles], Path(args.output), title=args.title,
                                   verify=not args.no_verify, rejudge=args.rejudge,
                                   data_home=Path(args.data_home) if args.data_home else None, disabled_plugins=disabled))
        return 0
    if args.command in plugin_commands:
        print(plugin_commands[args.command].run(args))
        return 0
    raise AssertionError(args.command)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
