"""Word-level Levenshtein alignment of a reference with an ASR hypothesis.

A minimum-edit alignment (substitutions, deletions, insertions all cost 1) is what WER counts,
so rules learnt from it describe the errors a WER measures. Many alignments share the
minimum; among them we take the one whose substituted words are spelled most alike
(character edit distance), so that "earlier"/"early" is paired rather than "earlier"/"the"
when both paths cost the same (the role of the similarity-weighted alignment in the ASR error
simulator App. A of Thonet et al., 2024b adapted). The edit count is never traded for similarity.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Edit:
    """One aligned position: a match or substitution (both set), a deletion (`hyp` None) or
    an insertion (`ref` None)."""

    ref: str | None
    hyp: str | None

    @property
    def kind(self) -> str:
        if self.ref is None:
            return "insertion"
        if self.hyp is None:
            return "deletion"
        return "match" if self.ref == self.hyp else "substitution"


@lru_cache(maxsize=65536)
def char_distance(a: str, b: str) -> float:
    """Normalised character edit distance in [0, 1] (0 = same spelling)."""
    if a == b:
        return 0.0
    if not a or not b:
        return 1.0
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1] / max(len(a), len(b))


def align(ref: list[str], hyp: list[str]) -> list[Edit]:
    """Minimum-edit alignment of two word lists, ties broken toward similar spellings."""
    # common prefix and suffix are matches in some minimum alignment: only the middle needs
    # the quadratic table (most ASR utterances differ in a few places)
    head = 0
    while head < len(ref) and head < len(hyp) and ref[head] == hyp[head]:
        head += 1
    tail = 0
    while (tail < len(ref) - head and tail < len(hyp) - head
           and ref[len(ref) - 1 - tail] == hyp[len(hyp) - 1 - tail]):
        tail += 1
    r, h = ref[head:len(ref) - tail], hyp[head:len(hyp) - tail]
    middle = _align_middle(r, h)
    return ([Edit(w, w) for w in ref[:head]] + middle
            + [Edit(w, w) for w in ref[len(ref) - tail:]])


def _align_middle(r: list[str], h: list[str]) -> list[Edit]:
    n, m = len(r), len(h)
    # cost = edits * big + dissimilarity: lexicographic (edits first) in one float
    big = float(n + m + 1)
    cost = [[0.0] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        cost[i][0] = i * (big + 1.0)
    for j in range(1, m + 1):
        cost[0][j] = j * (big + 1.0)
    for i in range(1, n + 1):
        ri, row, up = r[i - 1], cost[i], cost[i - 1]
        for j in range(1, m + 1):
            hj = h[j - 1]
            diag = up[j - 1] + (0.0 if ri == hj else big + char_distance(ri, hj))
            row[j] = min(diag, up[j] + big + 1.0, row[j - 1] + big + 1.0)
    out: list[Edit] = []
    i, j = n, m
    while i > 0 or j > 0:
        if i > 0 and j > 0:
            step = 0.0 if r[i - 1] == h[j - 1] else big + char_distance(r[i - 1], h[j - 1])
            if cost[i][j] == cost[i - 1][j - 1] + step:
                out.append(Edit(r[i - 1], h[j - 1]))
                i, j = i - 1, j - 1
                continue
        if i > 0 and cost[i][j] == cost[i - 1][j] + big + 1.0:
            out.append(Edit(r[i - 1], None))
            i -= 1
        else:
            out.append(Edit(None, h[j - 1]))
            j -= 1
    out.reverse()
    return out


def edit_counts(edits: list[Edit]) -> dict[str, int]:
    counts = {"match": 0, "substitution": 0, "deletion": 0, "insertion": 0}
    for e in edits:
        counts[e.kind] += 1
    return counts
