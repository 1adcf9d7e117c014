"""The `lceval` command: parses arguments and calls the engine (which tests call directly).

Exit codes: 0 success, 2 bad input (one paragraph naming file, field and line), 1 internal
error, 3 stopped by a cost limit (`--max-cost`: the partial run is written; the same command
resumes), 4 something to install: an optional package (every command, with its pip line), or
(`validate`, `data`) the data of a valid task, 130 interrupted (finished work is in the cache;
the same command resumes).

`lceval --tasks T --model M` (no sub-command, as lm-evaluation-harness users type it) is
`lceval run --tasks T --model M`; `-p no:NAME` / `-p override:NAME` work anywhere on the line.
The plugins are loaded once, before the arguments are parsed (plugins add sub-commands), and
handed to the command.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Sequence

from lceval.cli._install import install_hint, package_missing
from lceval.errors import PackageMissing, UserError

DEFAULT_COMMAND = "run"
#: an optional package (or, for `validate` and `data`, a task's data) is to be installed
TO_INSTALL = 4


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
    `lceval`, `lceval --help`, `lceval --version` and `lceval COMMAND ...` keep their meaning."""
    argv = _hoist_plugin_flags(argv)
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "-p":
            i += 2
        elif arg.startswith("-p") and not arg.startswith("--"):
            i += 1  # -pno:NAME
        elif arg in ("-h", "--help", "--version") or arg in commands or not arg.startswith("-"):
            return argv
        else:
            return argv[:i] + [DEFAULT_COMMAND] + argv[i:]
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    import lceval.engine
    from lceval.cli._commands import Invocation
    from lceval.cli._parser import build_parser
    from lceval.cli._plugin_listing import plugin_warnings

    if getattr(sys.modules.get("__main__"), "__name__", "") == "__mp_main__":
        # a worker process an engine started with "spawn" (vLLM) is re-running the script
        # that called us (a script without `if __name__ == "__main__":`): the command is
        # the parent's to run, not each worker's
        return 0
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        argv = _hoist_plugin_flags(argv)
        disabled, overriding = _plugin_flags(_early_plugin_flags(argv))
        plugins = lceval.engine.load_plugins(disabled, overrides=overriding)
        built = build_parser(plugins.commands)
        for line in plugin_warnings(plugins, built.shadowed_commands):
            print(f"lceval: warning: {line}", file=sys.stderr)
        argv = with_default_command(argv, built.commands)
        args = built.parser.parse_args(argv)
        _plugin_flags(args.plugin_flags)  # every -p value, also one that is neither no: nor override:
        _configure_logging(args)
        return args.handler(args, Invocation(plugins=plugins, disabled=disabled, argv=argv, overrides=overriding))
    except UserError as exc:
        print(f"lceval: error: {exc.render()}", file=sys.stderr)
        return TO_INSTALL if isinstance(exc, PackageMissing) else 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("lceval: interrupted. Finished answers are in the cache: run the same command again "
              "to resume.", file=sys.stderr)
        return 130
    except ModuleNotFoundError as exc:
        hint = install_hint(exc.name or "")
        if hint is None:  # not a package an extra of lceval installs: a bug, with its traceback
            raise_internal()
            return 1
        print(f"lceval: error: {package_missing(exc, hint).render()}", file=sys.stderr)
        return TO_INSTALL
    except Exception:  # a bug in lceval or a plugin: say so, with the traceback to report
        raise_internal()
        return 1


def raise_internal() -> None:
    """The traceback of the exception being handled, and what to do with it."""
    import traceback

    traceback.print_exc()
    print("lceval: internal error (exit 1). Please report it with the traceback above.", file=sys.stderr)


class _TqdmHandler(logging.Handler):
    """Log lines on stderr that do not break a progress bar being drawn there."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            from tqdm import tqdm

            tqdm.write(self.format(record), file=sys.stderr)
        except Exception:  # noqa: BLE001 - logging must never take a run down
            self.handleError(record)


def _configure_logging(args: Any) -> None:
    """The `lceval` logger's level from -v / --log-level (anywhere on the line): warning by
    default, info with -v (a run's phases), debug with -vv (every request)."""
    verbose = getattr(args, "verbose", 0) + getattr(args, "verbose_top", 0)
    named = getattr(args, "log_level", None) or getattr(args, "log_level_top", None)
    level = getattr(logging, named.upper()) if named else \
        logging.DEBUG if verbose >= 2 else logging.INFO if verbose == 1 else logging.WARNING
    logger = logging.getLogger("lceval")
    logger.setLevel(level)
    if not any(isinstance(h, _TqdmHandler) for h in logger.handlers):
        handler = _TqdmHandler()
        handler.setFormatter(logging.Formatter("lceval: %(message)s"))
        logger.addHandler(handler)
    logger.propagate = False


def _early_plugin_flags(argv: list[str]) -> list[str]:
    """The `-p` values, read before the parser exists: the plugins they choose add
    sub-commands to it (register_commands), and their clashes are printed on every command."""
    flags = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "-p"]
    flags += [a[2:] for a in argv if a.startswith("-p") and len(a) > 2 and not a.startswith("--")]
    return [f for f in flags if f.startswith(("no:", "override:"))]
