"""The word lists RULER draws its needle keys and common words from: wonderwords 3.0.1's
`nounlist.txt`, `adjectivelist.txt` and `verblist.txt`, exactly as that package ships them
(NVIDIA/RULER scripts/data/synthetic/niah.py and common_words_extraction.py read them through
`wonderwords.random_word._get_words_from_text_file`). They ship as data files in `words/`
(with their MIT license, `words/LICENSE.wonderwords`), so the ruler tasks need no extra package;
RULER's second list, `json/english_words.json` (8.5 MB, used only for common-words lists longer
than these), is not shipped: pass `options.word_list` instead.

The order of each file is the package's: draws from a seeded generator index into it, so the
same seed gives RULER's words only with the same order.
"""

from __future__ import annotations

from importlib.resources import files

__all__ = ["ADJECTIVES", "NOUNS", "VERBS"]


def _words(name: str) -> tuple[str, ...]:
    text = files(__package__).joinpath("words", name).read_text(encoding="utf-8")
    return tuple(line for line in text.splitlines() if line)


NOUNS = _words("nounlist.txt")
ADJECTIVES = _words("adjectivelist.txt")
VERBS = _words("verblist.txt")
