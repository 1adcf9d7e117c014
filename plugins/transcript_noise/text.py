"""Words as ASR scoring sees them, and the transcript tokens noise must never touch.

One normalisation serves the whole noise pipeline: aligning a reference with an ASR hypothesis
(rules), choosing which transcript words may be replaced, and measuring the effective WER with
jiwer. It is the usual WER normalisation (lower case, every Unicode punctuation character
removed, as jiwer's `RemovePunctuation`): a rule then holds exactly the errors a WER counts, so
no substitution can come out as a no-op that the measurement forgives ("earlier." for
"earlier" is one rule entry in the paper's App. A example; here both spell `earlier`).
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

#: De-identification placeholders and speaker tags of the ELITR transcripts: `(PERSON3)`,
#: `[ORGANIZATION11]`, `[PROJECT2]'s`, and annotations such as `<laugh/>`, `<unintelligible/>`.
#: A whitespace token that holds one is protected whole (glued text such as `IW[PROJECT2]`
#: included), so noise never invents or erases who spoke or which entity was meant.
PROTECTED = re.compile(r"[(\[][A-Z][A-Z_]*\d*[)\]]|<[^<>]*>")


@lru_cache(maxsize=4096)
def _is_punct(ch: str) -> bool:
    return unicodedata.category(ch).startswith("P")


def normalize(token: str) -> str:
    """A token as WER scoring sees it: lower case, punctuation removed ('' = not a word)."""
    return "".join(ch for ch in token.lower() if not _is_punct(ch))


def words(text: str) -> list[str]:
    """The normalised words of a text (tokens that normalise to '' are not words)."""
    return [w for w in (normalize(t) for t in text.split()) if w]


def is_protected(token: str) -> bool:
    return PROTECTED.search(token) is not None


def split_token(token: str) -> tuple[str, str, str]:
    """(leading punctuation, core, trailing punctuation) of a whitespace token, so a
    replacement keeps the comma or full stop around the word it replaces."""
    start, end = 0, len(token)
    while start < end and _is_punct(token[start]):
        start += 1
    while end > start and _is_punct(token[end - 1]):
        end -= 1
    return token[:start], token[start:end], token[end:]
