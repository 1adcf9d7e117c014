"""Lengths as the authors name them (`32000`, `32K`, K = 1,000): each is a split of the task
(`--split 32K`), not a budget of the model's tokens, for the families whose lengths are counted
otherwise (NeedleBench in GPT-4's tokens, NoLiMa the haystack without its needle, Counting-Stars
words). They are read by lceval's one length parser (`lceval.tokens.parse_length`) with K = 1,000,
so `1M` is 1,000,000 and `1.5K` 1,500."""

from __future__ import annotations

from typing import Any, Iterable

from lceval.errors import UserError
from lceval.tokens import parse_length

__all__ = ["length_of", "length_order", "lengths_of"]


def length_of(label: str, field: str = "--split") -> int:
    """A length as the authors name it: `32000`, `32K` or `32k` (K = 1,000, as the papers write
    4K, 128K for 4,000 and 128,000; `1M` is 1,000,000)."""
    try:
        return parse_length(str(label), field, kilo=1000)
    except UserError as exc:
        raise exc.but(message=f"{label!r} is not a length (e.g. 4000, 4K or 1M; here K = 1,000, as the "
                              "authors count)") from None


def lengths_of(ctx: Any, known: Iterable[str] | None = None) -> list[tuple[str, int]]:
    """(label, length) of each split to build: `--split`, else the spec's `splits`. A task with
    `known` lengths (the authors' own) refuses others."""
    labels = [part.strip() for label in (ctx.splits or ctx.spec.get("splits") or []) for part in str(label).split(",")
              if part.strip()]  # --split is repeatable; a comma list works too
    if not labels:
        raise UserError("name the lengths to build as the spec's splits (e.g. [4K, 8K]) or with --split",
                        field="splits")
    out = []
    for label in labels:
        n = length_of(label)
        if known is not None and str(label) not in known:
            raise UserError(f"{label!r} is none of this task's lengths ({', '.join(known)})", field="--split")
        out.append((str(label), n))
    if getattr(ctx, "context_length", None):
        raise UserError("this task's lengths are its splits, as its authors count them (not a budget of the "
                        "model's tokens): choose them with --split", field="--context-lengths",
                        hint="Run without --context-lengths, e.g. --split 4K,8K.")
    return out


def length_order(labels: Iterable[str]) -> list[str]:
    """Length labels shortest first."""
    def key(label: str) -> tuple[int, str]:
        try:
            return (length_of(label), label)
        except UserError:
            return (1 << 62, label)
    return sorted(set(labels), key=key)
