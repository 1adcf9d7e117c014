"""What a HELMET loader gives the task type: one `Item` per test row, the values its templates are
filled with, its answers and what the metrics and reports need."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from lceval.errors import UserError


@dataclass
class Item:
    """One test row, as the authors' loader leaves it before `prompt_template.format(**row)`."""

    key: str  # unique within the length (the item id is `<length>/<key>`)
    context: str  # the `{context}` field: the only text the run-time cut shortens (model_utils.py `tokenize`)
    values: dict[str, Any]  # every other field the templates may name
    answers: list[str]  # the references (a metric's best-of)
    question: str  # the bare question, for judges and reports
    metadata: dict[str, Any] = field(default_factory=dict)
    #: rows sharing a document (NarrativeQA's questions about one book) share a context id, so the
    #: engine prefills the document once; default: the item alone
    context_key: str | None = None


@dataclass
class Inputs:
    """What a loader reads: the test rows of one length, and helpers to open other sources."""

    rows: list[dict[str, Any]]
    label: str  # where the rows came from, for messages
    options: dict[str, Any]
    k: int  # the length's size parameter (passages, pairs, documents, shots or tokens)
    length: str
    open_rows: Callable[[str], tuple[list[dict[str, Any]], str]]  # rows of another source option
    read_json: Callable[[str], Any]  # a JSON file named by an option (recorded in the manifest)
    #: how to read the rows again ({"builder", "data_files"}: the files under the data home by their
    #: relative path): ALCE's citation check reads a row's retrieved documents past those shown
    where: dict[str, Any] = field(default_factory=dict)


def need(row: dict[str, Any], names: list[str], label: str, index: int) -> None:
    """The fields a loader reads, or an error naming the first missing one."""
    for name in names:
        if name not in row:
            raise UserError(f"{label} row {index} has no field {name!r} (fields: {', '.join(sorted(row))}); "
                            "HELMET's files have it", field="options.source.data_files")
