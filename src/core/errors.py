"""Errors a user can fix. The CLI turns them into one paragraph and exit code 2."""

from __future__ import annotations

from pathlib import Path

__all__ = ["UserError"]


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
