"""A spec's `report.length_bins`: which length each sample is at, so the score can be read
per length bin and the effective length found for benchmarks whose lengths come with the data
(LongBench v2's short/medium/long, MRCR's bins, HELMET's 8k..128k), are one task per length
(LV-Eval's 16k..256k: `length` and `curve`), or are counted (`field: tokens`: the context's
length in the evaluated model's tokens, as the context policy measured it). `kilo` says how the
benchmark's authors count a K: 1,024 (lceval's default) or 1,000 (NeedleBench's and
Counting-Stars' 4K is 4,000 tokens), so a length the data names reads as the number they meant.

Everything that says where a sample falls lives here, so the check before a run (`lceval run`
stops with exit 2 on a field the data lacks, before any answer is asked for) and the scoring
after it bin alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as default
from typing import Any, Mapping, Sequence

from lceval.errors import UserError
from lceval.io import quote
from lceval.tokens import parse_length, tokens_label

__all__ = ["COUNTED", "DEFAULT_TOKEN_EDGES", "KILOS", "LengthBins", "length_value"]

#: the `field` that counts instead of reading: the context's tokens in the evaluated model's tokenizer
COUNTED = "tokens"
#: bins of counted lengths when the spec gives no edges: the usual window sizes
DEFAULT_TOKEN_EDGES = (4096, 8192, 16384, 32768, 65536, 131072)
WHERE = "report.length_bins"
#: how many tokens a K may be: lceval's (and most papers') 1,024, or 1,000 where the authors count so
KILOS = (1024, 1000)


def length_value(value: Any, kilo: int = 1024) -> int | None:
    """A length a dataset holds, read as people write it (lceval's one parser,
    `lceval.tokens.parse_length`: 4096, "16k", "1M", a K being `kilo` tokens), or a number as it
    is; None when `value` is no length (the caller says which field held it)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value) if value > 0 else None
    try:
        return parse_length(str(value), field=WHERE, kilo=kilo)
    except UserError:
        return None


def _length_of(value: Any, at: str, kilo: int) -> int:
    n = length_value(value, kilo)
    if n is None:
        raise UserError(f"{quote(value)} is no length (accepted: a positive number of tokens, or e.g. 16k, 1M)",
                        field=at)
    return n


@dataclass(frozen=True)
class LengthBins:
    """The typed `report.length_bins`. Exactly one of `field` (a metadata field, or `tokens`)
    and `length` (every sample of the task is at this length) says where a sample falls."""

    field: str | None = None
    #: every sample at this one length (a benchmark with a task per length level)
    length: int | None = None
    #: named values of `field` -> their length, in order (None: the value is in no bin)
    levels: dict[str, int | None] = default(default_factory=dict)
    #: upper edges of the bins of a numeric `field` or of counted tokens ("a-b" holds a < n <= b)
    edges: tuple[int, ...] = ()
    #: the curve the task is a point of (tasks of a run with the same curve are one curve)
    curve: str | None = None
    threshold: float | None = None
    #: the tokens of a K in every length given here and in the data (1,000 where the authors count so)
    kilo: int = 1024

    @classmethod
    def from_data(cls, data: Mapping[str, Any] | None) -> "LengthBins | None":
        """None without the section; a UserError naming the sub-field when it is inconsistent
        (the schema checked the types)."""
        if not data:
            return None
        has_field, has_length = data.get("field") is not None, data.get("length") is not None
        if has_field == has_length:
            raise UserError("give exactly one of `field` (a metadata field, or `tokens` to count the context in the "
                            "model's tokens) and `length` (the task's one length)", field=WHERE)
        kilo = data.get("kilo") or 1024
        if kilo not in KILOS or isinstance(kilo, bool):
            raise UserError(f"{quote(kilo)} is no K (accepted: 1024, or 1000 where the authors count so)",
                            field=f"{WHERE}.kilo")
        levels = {str(k): (None if v is None else _length_of(v, f"{WHERE}.levels.{k}", kilo))
                  for k, v in (data.get("levels") or {}).items()}
        edges = tuple(sorted(_length_of(v, f"{WHERE}.edges.{i}", kilo) for i, v in enumerate(data.get("edges") or ())))
        if levels and edges:
            raise UserError("`levels` names a field's values, `edges` bins its numbers: give one", field=f"{WHERE}.edges")
        if has_length and (levels or edges):
            raise UserError("a task at one `length` has no levels or edges", field=f"{WHERE}.length")
        if data.get("field") == COUNTED and levels:
            raise UserError("counted tokens are binned by `edges`, not `levels`", field=f"{WHERE}.levels")
        if data.get("field") == COUNTED and not edges:
            edges = DEFAULT_TOKEN_EDGES
        return cls(field=data.get("field"),
                   length=_length_of(data["length"], f"{WHERE}.length", kilo) if has_length else None,
                   levels=levels, edges=edges, curve=data.get("curve"), threshold=data.get("threshold"), kilo=kilo)

    @property
    def counted(self) -> bool:
        return self.field == COUNTED

    def accepted(self) -> str:
        """What a value of `field` may be, for an error message."""
        if self.edges:
            return "a number"
        named = [k for k in self.levels]
        return (f"one of {', '.join(named)}, or " if named else "") + "a length such as 16k or 1M"

    def label(self, n: int) -> str:
        """A length as the benchmark writes it: "16k" (K = 1,024, `tokens_label`), or under
        K = 1,000 "16K", "1M" (a count of no whole K as it is)."""
        if self.kilo == 1024:
            return tokens_label(n)
        for unit, scale in (("M", self.kilo ** 2), ("K", self.kilo)):
            if n % scale == 0:
                return f"{n // scale}{unit}"
        return str(n)

    def bin_names(self) -> list[str]:
        """The names of the edge bins: "0-4k", "4k-8k", ..., ">128k"."""
        e, label = self.edges, self.label
        return [f"0-{label(e[0])}"] + [f"{label(a)}-{label(b)}" for a, b in zip(e, e[1:])] + [f">{label(e[-1])}"]

    def place(self, metadata: Mapping[str, Any], counted: int | None) -> tuple[str, int] | None:
        """(bin, its length) of a sample with this `metadata` and `counted` context tokens; None
        when the sample is in no bin (uncounted, or a level mapped to null). A bin's length is
        its nominal length, or for an edge bin its upper edge (the open last bin: the sample's
        own length, so it says how long the samples it holds are). Raises a UserError on a
        value `field` cannot place, or without the field."""
        if self.length is not None:
            return self.label(self.length), self.length
        if self.counted:
            return None if not counted else self._edge_bin(counted)
        assert self.field is not None
        if self.field not in metadata:
            known = sorted(metadata)
            listed = ", ".join(known[:12]) + (f" and {len(known) - 12} more" if len(known) > 12 else "")
            raise UserError(f"the data has no field {quote(self.field)} (its items' fields: {listed or 'none'}).",
                            field=f"{WHERE}.field", hint=f"Accepted: a field every item has, holding {self.accepted()}; "
                                                         "`tokens` to count each context; or --set report.length_bins= "
                                                         "for no bins.")
        value = metadata[self.field]
        if self.edges:
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            n = value if number else length_value(value, self.kilo)
            if n is None:
                raise self._bad(value)
            return self._edge_bin(int(n))
        if str(value) in self.levels:
            length = self.levels[str(value)]
            return None if length is None else (str(value), length)
        length = length_value(value, self.kilo)
        if length is None:
            raise self._bad(value)
        return str(value), length

    def _bad(self, value: Any) -> UserError:
        return UserError(f"field {quote(self.field)} holds {quote(value)}, which is no length (accepted: "
                         f"{self.accepted()}).", field=f"{WHERE}.field",
                         hint="Name the field's values with their lengths in report.length_bins.levels.")

    def _edge_bin(self, n: int) -> tuple[str, int]:
        names = self.bin_names()
        i = next((i for i, e in enumerate(self.edges) if n <= e), len(self.edges))
        return names[i], self.edges[i] if i < len(self.edges) else n

    def check(self, items: Sequence[Mapping[str, Any]]) -> None:
        """Every item (a turn's metadata, its conversation's under it) placed, or the first one
        that cannot be raised: the run stops before it asks anything."""
        if self.length is not None or self.counted:
            return
        for metadata in items:
            self.place(metadata, None)
