"""Errors a user can fix. The CLI turns them into one paragraph and exit code 2 (4 for what is
to be installed: `DataMissing` in `validate` and `data`, `PackageMissing` everywhere)."""

from __future__ import annotations

import copy
from pathlib import Path

__all__ = ["DataMissing", "FAILURE_KINDS", "NOT_RETRIED", "PackageMissing", "UserError"]

#: What a request that failed is called (`Generation.extras["error"]["kind"]`, recorded in
#: samples.jsonl and counted by the failure summary at the end of a run): backends classify a
#: failure by its HTTP status and the provider's error type into these words. `cost_limit` (a
#: request a cost limit kept from being sent) is the engine's own.
FAILURE_KINDS = ("bad_request", "auth", "not_found", "rate_limit", "server", "connection", "timeout",
                 "content_filter", "context_window", "malformed")
#: Kinds the same request meets again however often it is asked: never retried (the others are,
#: with backoff, by the backend or the batch that asked).
NOT_RETRIED = ("bad_request", "auth", "not_found", "content_filter", "context_window")


class UserError(Exception):
    """Bad input: a spec, a flag, a model string, a missing dataset or package.

    `file`, `field` and `line` are given whenever the error is about a file, so the message
    points at the exact place to fix.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        field: str | None = None,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.message = message
        self.file = str(file) if file is not None else None
        self.field = field
        self.line = line
        self.hint = hint
        super().__init__(self.render())

    def render(self) -> str:
        where = []
        if self.file:
            where.append(self.file if self.line is None else f"{self.file}:{self.line}")
        if self.field:
            where.append(f"field '{self.field}'")
        text = (", ".join(where) + ": " if where else "") + self.message
        if self.hint:
            text += ("" if text.endswith((".", "?", "!", ")")) else ".") + f" {self.hint}"
        return text

    def but(self, **changes: object) -> "UserError":
        """This error with some of `file`, `field`, `line`, `hint`, `message` changed, of the
        same class (so that a `DataMissing` placed at its spec line is still one)."""
        out = copy.copy(self)
        for name, value in changes.items():
            setattr(out, name, value)
        out.args = (out.render(),)
        return out


class DataMissing(UserError):
    """A spec that is valid but whose data is not installed here yet: a dataset not fetched, a
    Hub file not in the local cache while offline, an encoding or a model never downloaded.

    `command` is what installs it (`lceval data fetch NAME`), when the code that found it
    missing knows; the engine fills it in otherwise (the command that installs everything the
    task needs) and names the task. `lceval validate` reports it as "valid; data not installed"
    with an exit code of its own (4); other commands stop with exit 2, as for bad input.
    """

    def __init__(self, message: str, *, command: str | None = None, file: str | Path | None = None,
                 field: str | None = None, line: int | None = None, hint: str | None = None) -> None:
        self.command = command
        self.offline_hint: str | None = None  # set by the engine when the network is off
        super().__init__(message, file=file, field=field, line=line, hint=hint)

    def render(self) -> str:
        text = super().render()
        if self.command and self.command not in text:
            text += ("" if text.endswith((".", "?", "!")) else ".") + f" Install it: `{self.command}`."
        if self.offline_hint:
            text += ("" if text.endswith((".", "?", "!")) else ".") + f" {self.offline_hint}"
        return text


class PackageMissing(UserError):
    """An optional Python package that a spec, a plugin or a command needs is not installed.
    Nothing in the input is wrong, something is to be installed: `hint` is the pip line
    (`pip install 'lceval[documents]'`). Every command exits with 4 for it, as `validate` and
    `data status` do for data that is not installed (docs/errors.md), and `validate` reports
    the spec as valid. `install`: the command that installs it, when the raiser knows it (then
    also the hint, unless one is given)."""

    def __init__(self, message: str, *, install: str | None = None, file: str | Path | None = None,
                 field: str | None = None, line: int | None = None, hint: str | None = None) -> None:
        self.install = install
        super().__init__(message, file=file, field=field, line=line,
                         hint=hint if hint is not None or install is None else f"Run: {install}")
