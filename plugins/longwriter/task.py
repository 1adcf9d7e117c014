"""The `longwriter` task type: a `documents` spec of writing requests, each request's required
length binned into the paper's ranges and its language noted.

LongBench-Write has no document: the row's `prompt` is the whole user message (THUDM/LongWriter
evaluation/pred.py, commit 3fcfdff: `model.chat(tokenizer, prompt, history=[])`). The spec makes
it the context (`fields.context: prompt`, `prompt.user: "{{ context }}"`), so that the context
policy measures it with the answer's room reserved (`max_new_tokens` 32,768: a window that cannot
hold the request and that much answer stops the run, under `policy: error`, before any model
work; nothing is ever cut), and the question (`fields.question: prompt`), which the quality judge
reads as the user's request.

The ranges are the paper's (Bai et al., 2024, the LongBench-Write table): required lengths in
[0, 500), [500, 2k), [2k, 4k) and [4k, 20k), in `length_range`; the language is `zh` when the
request holds a CJK character (U+4E00-U+9FFF, the characters `count_words` counts), else `en`,
in `language`.
"""

from __future__ import annotations

import re
from typing import Any

from lceval.interfaces import TaskContext
from lceval.needs import Need
from lceval.types import Conversation, Message

from lceval_plugins.documents.bins import BinnedBuilder, bins_schema
from lceval_plugins.documents.records import Question
from lceval_plugins.documents.schema import OPTIONS_SCHEMA
from lceval_plugins.documents.task import CHECK_ROWS, DocumentsTaskType

__all__ = ["LENGTH_RANGES", "LongWriterTaskType", "language_of"]

LENGTH_RANGES = bins_schema(
    "length", [500, 2000, 4000], ["0-500", "500-2k", "2k-4k", "4k-20k"], "length_range",
    "Each request's range of required length (the row's `length`), as the paper's LongBench-Write table "
    "groups them: [0, 500), [500, 2k), [2k, 4k), [4k, 20k) (the last bin takes anything longer).")

_CJK = re.compile(r"[\u4e00-\u9fff]")


#: the authors' repository, whose archive at a commit the specs read
REPOSITORY = "https://github.com/THUDM/LongWriter"


def language_of(text: str) -> str:
    """zh when the text holds a CJK Unified Ideograph (what count_words counts as Chinese), else en."""
    return "zh" if _CJK.search(text) else "en"


class LongWriterBuilder(BinnedBuilder):
    """The binned documents builder, each request's language added."""

    def annotate(self, row: dict[str, Any], messages: list[Message] | None, questions: list[Question]) -> bool:
        super().annotate(row, messages, questions)
        for q in questions:
            q.metadata["language"] = language_of(q.question or "")
        return True


class LongWriterTaskType(DocumentsTaskType):
    """LongBench-Write and LongWrite-Ruler: writing requests, by required length range and language."""

    options_schema = {**OPTIONS_SCHEMA, "properties": {**OPTIONS_SCHEMA["properties"], "length_bins": LENGTH_RANGES}}
    description = ("LongWriter (THUDM/LongWriter): writing requests of a required length in words, by the "
                   "paper's length ranges and language")

    def load(self, ctx: TaskContext) -> list[Conversation]:
        builder = LongWriterBuilder(ctx, LENGTH_RANGES["default"])
        return builder.conversations(builder.documents())

    def check(self, ctx: TaskContext) -> None:
        builder = LongWriterBuilder(ctx, LENGTH_RANGES["default"])
        builder.conversations(builder.documents(max_rows=CHECK_ROWS))

    def needs(self, ctx: TaskContext) -> list[Need]:
        """GitHub's archive of the authors' commit (`LongWriter-<commit>.zip`, its members under
        `LongWriter-<commit>/`), made with git from the repository at that commit."""
        from lceval.io import DataHomePath, GitFiles

        out: list[Need] = []
        for need in super().needs(ctx):
            found = re.fullmatch(r"LongWriter-([0-9a-f]{40})\.zip", need.rel) if isinstance(need, DataHomePath) else None
            out.append(GitFiles(REPOSITORY, found.group(1), ctx.data_home, archive=need.rel,
                                prefix=f"LongWriter-{found.group(1)}/") if found else need)
        return out
