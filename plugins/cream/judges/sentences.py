"""Splitting a summary into the numbered sentences the CREAM judges align key facts to.

Why a splitter of our own: FineSurE (ref. [10] of Gong et al., 2024, whose scoring CREAM reuses, Sec.
3.1 "Metrics") shows the summary as numbered sentences split with nltk; we have no nltk, and
meeting summaries are mostly bullet lists, which nltk's punkt would glue together anyway
(it does not split on line breaks). So a summary is split into lines first, then each line
into sentences:

- a line's leading list marker ("- ", "* ", "• ", "-- ", "1. ", "2) ", "(3) ", "a) ") is
  removed: it is layout, not part of the sentence the judge should quote;
- blank lines are dropped;
- headings are dropped: markdown "#" lines, lines that are only emphasis ("**Decisions**"),
  and short lines (at most 8 words) that end with ":" ("Action items:"). They state no fact,
  so keeping them would lower a well-structured summary's conciseness (aligned sentences /
  sentences) for its formatting alone; a long line ending with ":" is a sentence and stays;
- inside a line, a sentence ends at ".", "!" or "?" (optionally followed by a closing quote
  or bracket) followed by white space and an upper-case letter, a digit, a quote or an
  opening bracket. It does not end after a known abbreviation ("e.g.", "i.e.", "Dr.", "Mr.",
  "vs." ...) or an initial that opens the sentence or follows another ("J. Smith", "J. R.
  Smith"; "plan B. Next" does split); decimals ("3.5") never split, as no space follows.
"""

from __future__ import annotations

import re

#: Lower-cased words (without their final ".") after which a "." does not end a sentence.
ABBREVIATIONS = frozenset(
    "e.g i.e dr mr mrs ms prof vs al cf approx fig st jr sr inc ltd corp dept "
    "jan feb mar apr jun jul aug sep sept oct nov dec ca resp".split()
)

_MARKER = re.compile(r"^(?:[-*•–—+>]+|\(?\d{1,3}[.)]|\(?[a-zA-Z][)]|\(\d{1,3}\))\s+")
_HEADING_HASH = re.compile(r"^#{1,6}\s")
_EMPHASIS_ONLY = re.compile(r"^(\*\*|__)[^*_]+(\*\*|__):?$")
_BOUNDARY = re.compile(r"[.!?]+[\"')\]’”]*\s+(?=[A-Z0-9\"'(\[“‘])")


def _strip_marker(line: str) -> str:
    previous = None
    while previous != line:  # "- 1. text" loses both markers
        previous = line
        line = _MARKER.sub("", line, count=1).strip()
    return line


def _is_heading(line: str) -> bool:
    if _HEADING_HASH.match(line) or _EMPHASIS_ONLY.match(line):
        return True
    bare = line.strip("*_ ").rstrip("*_ ")
    return bare.endswith(":") and len(bare.split()) <= 8


def _ends_with_abbreviation(text: str) -> bool:
    """True when the "." closing `text` belongs to an abbreviation or an initial."""
    words = text.split()
    if not words:
        return False
    word = words[-1].lstrip("([\"'“‘")
    if not word.endswith("."):
        return False
    stem = word[:-1]
    if len(stem) == 1 and stem.isalpha() and stem.isupper():
        # an initial opens the sentence or follows another ("J. Smith", "J. R. Smith");
        # after a word it ends one ("We chose plan B. Next ...")
        return len(words) == 1 or re.fullmatch(r"[A-Z]\.", words[-2]) is not None
    return stem.lower() in ABBREVIATIONS


def split_line(line: str) -> list[str]:
    """Sentences of one line (no list marker, no line break)."""
    sentences: list[str] = []
    start = 0
    for match in _BOUNDARY.finditer(line):
        end = match.end()
        piece_end = len(line[:end].rstrip())
        if line[match.start()] == "." and _ends_with_abbreviation(line[start:match.start() + 1]):
            continue
        sentences.append(line[start:piece_end].strip())
        start = end
    tail = line[start:].strip()
    if tail:
        sentences.append(tail)
    return [s for s in sentences if s]


def split_sentences(text: str) -> list[str]:
    """The summary's sentences in order, as the judges number them ([1], [2] ...)."""
    out: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or _is_heading(line):
            continue
        line = _strip_marker(line)
        if not line or _is_heading(line):
            continue
        out.extend(split_line(line))
    return out


def number_sentences(sentences: list[str]) -> str:
    """"[1] first\\n[2] second": the layout FineSurE shows its judge. An empty summary is
    shown as "(no sentences)" so the prompt never has an empty slot the judge might skip."""
    if not sentences:
        return "(no sentences)"
    return "\n".join(f"[{i}] {s}" for i, s in enumerate(sentences, 1))
