"""Rows binned by a number of the row (its length, or a required output length): the documents
builder with one addition, the bin of a number field as each question's metadata, for
`report.breakdowns`. LongBench-E bins by length (THUDM/LongBench eval.py `scorer_e`); LongWriter
by the required output length."""

from __future__ import annotations

import copy
from typing import Any

from lceval.errors import UserError
from lceval.interfaces import TaskContext
from lceval.io import quote
from lceval.types import Message

from .records import Question
from .task import Builder

__all__ = ["BinnedBuilder", "bin_of", "bins_schema"]


def bins_schema(field: str, edges: list[float], labels: list[str], into: str, why: str) -> dict[str, Any]:
    """The typed `length_bins` option with these defaults."""
    return {
        "type": "object", "additionalProperties": False,
        "default": {"field": field, "edges": edges, "labels": labels, "into": into},
        "description": why,
        "properties": {
            "field": {"type": "string", "minLength": 1, "default": field,
                      "description": "The row's number field to bin (it must be one of fields.metadata)."},
            "edges": {"type": "array", "items": {"type": "number"}, "minItems": 1, "default": edges,
                      "description": "Increasing edges: a value below edges[0] is in the first bin, below edges[i] "
                                     "in bin i, anything else in the last."},
            "labels": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 2,
                       "uniqueItems": True, "default": labels,
                       "description": "The bins' names, one more than the edges."},
            "into": {"type": "string", "minLength": 1, "default": into,
                     "description": "The metadata field that holds the bin (for report.breakdowns)."},
        },
    }


def bin_of(value: float, edges: list[float], labels: list[str]) -> str:
    """`labels[i]` for the first edge `value` is below, else the last label (`scorer_e`)."""
    for label, edge in zip(labels, edges):
        if value < edge:
            return label
    return labels[-1]


class BinnedBuilder(Builder):
    """The documents builder, each question given the bin of its row's number field."""

    #: the option holding the bins (the task type's schema fills its defaults)
    BINS_OPTION = "length_bins"

    def __init__(self, ctx: TaskContext, default: dict[str, Any]) -> None:
        super().__init__(ctx)
        bins = {**copy.deepcopy(default), **(ctx.options.get(self.BINS_OPTION) or {})}
        field = f"options.{self.BINS_OPTION}"
        self.bin_field, self.edges, self.labels, self.into = bins["field"], bins["edges"], bins["labels"], bins["into"]
        if len(self.labels) != len(self.edges) + 1:
            raise UserError(f"{len(self.edges)} edges make {len(self.edges) + 1} bins, and {len(self.labels)} labels "
                            f"name them ({', '.join(self.labels)})", field=f"{field}.labels")
        if any(b <= a for a, b in zip(self.edges, self.edges[1:])):
            raise UserError(f"the edges must increase, got {self.edges}", field=f"{field}.edges")
        if self.bin_field not in self.fields["metadata"]:
            raise UserError(f"the binned field {quote(self.bin_field)} must be one of options.fields.metadata "
                            f"({', '.join(self.fields['metadata']) or 'none'})", field=f"{field}.field")

    def annotate(self, row: dict[str, Any], messages: list[Message] | None, questions: list[Question]) -> bool:
        for q in questions:
            value = q.metadata.get(self.bin_field)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise UserError(f"{q.where}: field {quote(self.bin_field)} must be a number to bin, got "
                                f"{quote(value)}", field=f"options.{self.BINS_OPTION}.field")
            q.metadata[self.into] = bin_of(value, self.edges, self.labels)
        return True
