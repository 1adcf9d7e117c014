"""lceval called from tests through its public doors only: the command line in-process
(`lceval.cli.main`, its printed output captured) and a run through the engine's `Session`."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any


class CommandFailed(AssertionError):
    """`lceval ARGV` exited with `code` (2: bad input, 1: an internal error)."""

    def __init__(self, code: int, stderr: str, stdout: str) -> None:
        super().__init__(f"exit {code}: {stderr.strip()}")
        self.code, self.stderr, self.stdout = code, stderr, stdout


def call(*argv: str | Path) -> tuple[int, str, str]:
    """`lceval ARGV` in this process: (exit code, stdout, stderr)."""
    from lceval.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def lceval(*argv: str | Path) -> str:
    """What `lceval ARGV` prints; a non-zero exit raises `CommandFailed`."""
    code, out, err = call(*argv)
    if code != 0:
        raise CommandFailed(code, err, out)
    return out


def run_config(config: Any, plugins: Any = None) -> list[tuple[Path, str]]:
    """`lceval run` of a `RunConfig`, as a program runs it: (run directory, console table) per model."""
    from lceval.engine import Session
    from lceval.results import console_text, run_and_write

    with Session(config, plugins) as session:
        return [(run_dir, console_text(state, results)) for run_dir, results, state in run_and_write(session)]


# -- the commands as functions, through the CLI in-process -------------------------------------
# Tests written against `lceval.cli._commands`' old plain functions call these instead: the same
# arguments, run as `lceval ARGS` would be (bad input raises `UserError` with what lceval printed,
# as the old functions raised it), so no test reaches into the CLI's private module.

def _checked(*argv: str | Path) -> str:
    from lceval.errors import UserError

    code, out, err = call(*argv)
    if code == 2:
        raise UserError(err.strip().removeprefix("lceval: error: "))
    if code != 0:
        raise CommandFailed(code, err, out)
    return out[:-1] if out.endswith("\n") else out


def _flags(**values: Any) -> list[str]:
    out: list[str] = []
    for name, value in values.items():
        flag = "--" + name.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            out.append(flag)
        elif isinstance(value, (list, tuple)):
            for item in value:
                out += [flag, str(item)]
        else:
            out += [flag, str(value)]
    return out


def run(config: Any = None, *, plugins: Any = None, **fields: Any) -> list[tuple[Path, str]]:
    from lceval.engine import RunConfig

    return run_config(config if config is not None else RunConfig(**fields), plugins)


def report(run_dirs: list[Any], fmt: str, *, pooled: bool = False, where: list[str] | None = None,
           by: list[str] | None = None) -> str:
    return _checked("report", *run_dirs, "--format", fmt, *_flags(pooled=pooled, where=where, by=by))


def report_html(paths: list[Any], output: Any, *, agreement: list[str] | None = None, bins_of: str | None = None,
                title: str | None = None) -> Path:
    _checked("report", *paths, "--format", "html", "-o", output, *_flags(agreement=agreement, bins_of=bins_of,
                                                                          title=title))
    return Path(output)


def judge_agreement(sources: list[str], *, task: str | None = None, bins_of: str | None = None,
                    fmt: str = "markdown", n_boot: int = 1000, seed: int = 0, resample: str = "clusters") -> str:
    return _checked("judge-agreement", *sources, *_flags(task=task, bins_of=bins_of, format=fmt, n_boot=n_boot,
                                                         seed=seed, resample=resample))


def merge(run_dirs: list[Any], *, output: Any = None) -> tuple[Path, str]:
    text = _checked("merge", *run_dirs, *_flags(output=output))
    table, _, wrote = text.rpartition("\n\nwrote ")
    return Path(wrote.strip()), table


def leaderboard(bundles: list[Any], output: Any, *, title: str = "lceval leaderboard", verify: bool = True,
                rejudge: int = 200, data_home: Any = None) -> str:
    return _checked("leaderboard", *bundles, "-o", output, "--title", title, "--rejudge", str(rejudge),
                    *_flags(no_verify=not verify, data_home=data_home))


def paths(home: Any = None, cache: Any = None) -> str:
    return _checked("data", "paths", *_flags(data_home=home, cache=cache))


def list_plugins(disabled: Any = (), name: str | None = None) -> str:
    return _checked(*[a for d in disabled for a in ("-p", f"no:{d}")], "plugins", *([name] if name else []))


def validate(paths_: list[Any], disabled: Any = ()) -> tuple[str, bool]:
    code, out, err = call(*[a for d in disabled for a in ("-p", f"no:{d}")], "validate", *paths_)
    if code not in (0, 2):
        raise CommandFailed(code, err, out)
    return out.rstrip("\n"), code == 0


def list_tasks() -> str:
    return _checked("tasks")


def show_task(name: str) -> str:
    return _checked("tasks", "show", name)


def rank(run_dirs: list[Any], *, judge: str | None = None, judge_model: str | None = None, options: Any = None,
         output: Any = Path("rankings"), fmt: str = "table") -> tuple[Path, str]:
    """`lceval rank` with a `lceval.analysis.RankOptions`' settings as its flags."""
    o = options
    flags = [] if o is None else _flags(criteria=",".join(o.criteria) if o.criteria else None, k_factor=o.k_factor,
                                        initial=o.initial, n_orders=o.n_orders, n_boot=o.n_boot, bt_prior=o.bt_prior,
                                        tie_margin=o.tie_margin, no_swap=not o.swap, seed=o.seed, level=o.level,
                                        reference_judge=o.reference_judge, task=o.tasks)
    text = _checked("rank", *run_dirs, *_flags(judge=judge, judge_model=judge_model, output=output, format=fmt),
                    *flags)
    body, _, wrote = text.rpartition("\n\nwrote ")
    return Path(wrote.strip()), body
