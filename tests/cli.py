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
    from lceval.results import RUN_OUTPUTS, console_text

    with Session(config, plugins, outputs=RUN_OUTPUTS) as session:
        return [(run_dir, console_text(state, results)) for run_dir, results, state in session.run()]
