"""The `longbench_e` task type: a `documents` spec whose rows get the bin of a number field as
metadata, for `report.breakdowns`. LongBench-E's bins are THUDM/LongBench LongBench/eval.py
`scorer_e` (commit 2e00731), by the row's `length` (words of input + context + answers, as the
data count them): `length < 4000` "0-4k", `length < 8000` "4-8k", else "8k+".

The binning is the documents package's `BinnedBuilder`, which LongWriter's required output
length uses too.
"""

from __future__ import annotations

from lceval.interfaces import TaskContext
from lceval.types import Conversation

from lceval_plugins.documents.bins import BinnedBuilder, bins_schema
from lceval_plugins.documents.schema import OPTIONS_SCHEMA
from lceval_plugins.documents.task import CHECK_ROWS, DocumentsTaskType

__all__ = ["LongBenchETaskType"]


#: scorer_e's bins (eval.py lines 48-64)
LONGBENCH_E_BINS = bins_schema(
    "length", [4000, 8000], ["0-4k", "4-8k", "8k+"], "length_bin",
    "Each row's bin of its length (LongBench's `length`: words of input, context and answers), as "
    "eval.py's scorer_e bins LongBench-E: < 4000 0-4k, < 8000 4-8k, else 8k+.")


class LongBenchETaskType(DocumentsTaskType):
    """LongBench-E: a LongBench task's `_e` rows, each with its length bin."""

    options_schema = {**OPTIONS_SCHEMA, "properties": {**OPTIONS_SCHEMA["properties"], "length_bins": LONGBENCH_E_BINS}}
    description = ("LongBench-E (THUDM/LongBench eval.py --e): a documents spec whose rows get scorer_e's "
                   "length bin (0-4k, 4-8k, 8k+) as metadata")

    def load(self, ctx: TaskContext) -> list[Conversation]:
        builder = BinnedBuilder(ctx, LONGBENCH_E_BINS["default"])
        return builder.conversations(builder.documents())

    def check(self, ctx: TaskContext) -> None:
        builder = BinnedBuilder(ctx, LONGBENCH_E_BINS["default"])
        builder.conversations(builder.documents(max_rows=CHECK_ROWS))
