"""`documents_by_length`: the `documents` task type, one data file per length level.

A spec is a `documents` spec whose `options.source.data_files` holds `{length}` and whose
`splits` are the length levels (`[1k, 2k, 4k]`). Each level is read as its own split: the file
`data_files.format(length=L)`, the split named `L` (item ids `L/<id>`, `--split L` picks levels,
`--limit N` takes the first N questions of each level), and every question's metadata gets
`length: L` to break results down by (`report.breakdowns: [length]`). `options.take` keeps the
first N rows of a level (Ada-LEval's `dataset.py` keeps the first 1,000 rows below 32k and 200
from 32k for open models); `--limit` then cuts further.

Everything else - fields, templates, choices, prefill sharing, the checks with the spec's line -
is the `documents` type's, unchanged.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from lceval.errors import UserError
from lceval.interfaces import TaskContext
from lceval.io import quote
from lceval.needs import Need
from lceval.types import Conversation, Message

from lceval_plugins.documents.records import Question
from lceval_plugins.documents.needs import source_needs
from lceval_plugins.documents.schema import OPTIONS_SCHEMA, section_defaults
from lceval_plugins.documents.task import CHECK_ROWS, Builder, DocumentsTaskType

__all__ = ["ByLengthTaskType", "LengthBuilder", "OPTIONS", "level_context"]

OPTIONS: dict[str, Any] = {
    **OPTIONS_SCHEMA,
    "properties": {
        **OPTIONS_SCHEMA["properties"],
        "take": {"type": "object", "default": {},
                 "additionalProperties": {"type": "integer", "minimum": 1},
                 "description": "Per length level, the first N rows to keep (the authors' sample counts, e.g. "
                                "{1k: 1000, 32k: 200}); a level not named keeps every row."},
    },
}


def level_context(ctx: TaskContext, length: str) -> TaskContext:
    """`ctx` for one length level: its file, its split, the level's `take` folded into `limit`."""
    options = copy.deepcopy(ctx.options)
    source = dict(options.get("source") or {})
    files = source.get("data_files")
    entries = [files] if isinstance(files, str) else list(files or [])
    if not entries or not all("{length}" in e for e in entries):
        raise UserError("a documents_by_length spec reads one file per length: options.source.data_files must hold "
                        "{length} (e.g. ada_leval/stackselect_{length}.jsonl)", field="options.source.data_files")
    formatted = [e.replace("{length}", length) for e in entries]
    source.update(data_files=formatted[0] if isinstance(files, str) else formatted, split=length)
    options["source"] = source
    take = (options.get("take") or {}).get(length)
    limit = ctx.limit if take is None else (take if ctx.limit is None else min(take, ctx.limit))
    return dataclasses.replace(ctx, spec={**ctx.spec, "options": options}, splits=[length], limit=limit)


class LengthBuilder(Builder):
    """The documents builder of one level: each question gets `length`."""

    def __init__(self, ctx: TaskContext, length: str) -> None:
        super().__init__(ctx)
        self.length = length

    def annotate(self, row: dict[str, Any], messages: list[Message] | None, questions: list[Question]) -> bool:
        for q in questions:
            q.metadata["length"] = self.length
        return True


class ByLengthTaskType(DocumentsTaskType):
    """A documents benchmark with one file per length level, each level a split."""

    options_schema = OPTIONS
    description = ("documents over one data file per length level (options.source.data_files with {length}; "
                   "the spec's splits are the levels), each sample's `length` reported")
    builder = LengthBuilder

    def lengths(self, ctx: TaskContext) -> list[str]:
        known = list(ctx.spec.get("splits") or [])
        lengths = list(ctx.splits or known)
        if not lengths:
            raise UserError("name the length levels as the spec's splits (e.g. [1k, 2k, 4k])", field="splits")
        unknown = [s for s in lengths if known and s not in known]
        if unknown:
            raise UserError(f"{quote(unknown[0])} is no length level of this task (levels: {', '.join(known)})",
                            field="--split")
        for name in (ctx.options.get("take") or {}):
            if known and name not in known:
                raise UserError(f"options.take names {quote(name)}, which is no length level of this task (levels: "
                                f"{', '.join(known)})", field=f"options.take.{name}")
        return lengths

    def load(self, ctx: TaskContext) -> list[Conversation]:
        out: list[Conversation] = []
        for length in self.lengths(ctx):
            builder = self.builder(level_context(ctx, length), length)
            out += builder.conversations(builder.documents())
        return out

    def needs(self, ctx: TaskContext) -> list[Need]:
        """Every level's file."""
        return [need for length in self.lengths(ctx)
                for need in source_needs(section_defaults(level_context(ctx, length).options)["source"], ctx)]

    def check(self, ctx: TaskContext) -> None:
        """The spec against its first level's first rows (every level's file name is checked
        when it is read)."""
        length = self.lengths(ctx)[0]
        builder = self.builder(level_context(ctx, length), length)
        builder.conversations(builder.documents(max_rows=CHECK_ROWS))
