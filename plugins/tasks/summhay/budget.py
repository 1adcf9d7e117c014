"""Token budgets for retrieval-augmented SummHay: which documents fit in N tokens.

The paper keeps "the first 15k worth of document tokens" (§5.1). The authors count them
with tiktoken's `cl100k_base` and cut the document that crosses the limit to the tokens
still free (populate_summaries.get_docs_token_limit); we do the same.

Counting is stated in every sample (`budget_tokenizer`):
- `cl100k_base`: tiktoken, as the authors; needs `tiktoken` and its BPE file (downloaded once
  into tiktoken's cache; offline it must already be there).
- `words`: no dependency, for offline use. A document costs ceil(4/3 x whitespace words)
  tokens, the paper's own ratio (§3.2: "750 words ... roughly 1,000 tokens"); a cut document
  keeps that many words. An approximation, and labelled as one.
- `auto` (default): `cl100k_base` when tiktoken is installed and its cl100k_base file is
  already in tiktoken's cache (no network attempt, so an offline run never waits on one),
  else `words`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

from lceval.errors import UserError

TOKENIZERS = ("auto", "cl100k_base", "words")
WORDS_PER_TOKEN = 0.75  # §3.2: 750 words ~ 1,000 tokens


@dataclass
class Counter:
    name: str
    encode: Callable[[str], list[Any]]
    decode: Callable[[list[Any]], str]


def _words() -> Counter:
    def encode(text: str) -> list[Any]:
        words = text.split()
        # ceil(words / 0.75) pseudo-tokens: each word is one, every third word owns a second
        out: list[Any] = []
        for i, w in enumerate(words):
            out.append(w)
            if math.ceil((i + 1) / WORDS_PER_TOKEN) > len(out):
                out.append(None)
        return out

    def decode(tokens: list[Any]) -> str:
        return " ".join(t for t in tokens if t is not None)

    return Counter("words", encode, decode)


CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


def _cl100k_cached() -> bool:
    """Whether tiktoken would load cl100k_base from its cache (tiktoken/load.py read_file_cached)."""
    import hashlib
    import os
    import tempfile

    folder = os.environ.get("TIKTOKEN_CACHE_DIR", os.environ.get("DATA_GYM_CACHE_DIR",
                                                                  os.path.join(tempfile.gettempdir(), "data-gym-cache")))
    return bool(folder) and os.path.exists(os.path.join(folder, hashlib.sha1(CL100K_URL.encode()).hexdigest()))


@lru_cache(maxsize=None)
def _tiktoken() -> Counter | None:
    try:
        import tiktoken

        enc = tiktoken.get_encoding("cl100k_base")
    except Exception:  # not installed, or its BPE file cannot be fetched offline
        return None
    return Counter("cl100k_base", lambda t: enc.encode(t, disallowed_special=()), enc.decode)


def counter(name: str = "auto") -> Counter:
    if name not in TOKENIZERS:
        raise UserError(f"unknown budget tokenizer '{name}' (known: {', '.join(TOKENIZERS)})",
                        field="options.budget_tokenizer")
    if name == "words":
        return _words()
    found = _tiktoken() if name == "cl100k_base" or _cl100k_cached() else None
    if found is not None:
        return found
    if name == "cl100k_base":
        raise UserError("budget_tokenizer cl100k_base needs tiktoken and its cl100k_base file",
                        field="options.budget_tokenizer",
                        hint="pip install tiktoken (online once), or use budget_tokenizer: words")
    return _words()


@dataclass
class Kept:
    index: int  # position in the haystack's document list
    text: str  # the document, or its head when it crossed the budget
    tokens: int
    cut: bool


def fill_budget(texts: list[str], ranking: list[int], budget: int | None, count: Counter,
                encoded: list[list[Any]] | None = None) -> list[Kept]:
    """Documents in `ranking` order until `budget` tokens, the last one cut to fit
    (get_docs_token_limit: `>=` the limit cuts, and the loop stops there). None = all.
    `encoded` may pass every text's tokens when many rankings share one haystack."""
    kept: list[Kept] = []
    total = 0
    for idx in ranking:
        toks = encoded[idx] if encoded is not None else count.encode(texts[idx])
        if budget is not None and total + len(toks) >= budget:
            free = budget - total
            if free > 0:
                kept.append(Kept(idx, count.decode(toks[:free]), free, free < len(toks)))
            break
        total += len(toks)
        kept.append(Kept(idx, texts[idx], len(toks), False))
    return kept
