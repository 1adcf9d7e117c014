"""The haystack a spec's options name, tokenized once per model and kept for every length
and every task of the run (the sources hang on the model's `Tokens`)."""

from __future__ import annotations

from lceval.interfaces import TaskContext
from lceval.io import sha256_text

from lceval_plugins.haystack.texts import read_essay_texts, split_sentences
from lceval_plugins.haystack.tokens import Tokens
from lceval_plugins.haystack.units import EssaySource, NoiseSource

from .common import NOISE

__all__ = ["haystack_source"]


def haystack_source(ctx: TaskContext, tokens: Tokens, kind: str) -> NoiseSource | EssaySource:
    """`noise` (RULER's repeated block) or `essay` (options.essay, every file read recorded)."""
    if kind == "noise":
        key = ("noise",)
        if key not in tokens.sources:
            tokens.sources[key] = NoiseSource(tokens, NOISE)
        return tokens.sources[key]
    texts, name = read_essay_texts(str(ctx.options["essay"]), str(ctx.options["essay_field"]), ctx.data_home,
                                   ctx.record_file)
    joined = " ".join(texts)
    key = ("essay", sha256_text(joined))
    if key not in tokens.sources:
        tokens.sources[key] = EssaySource(tokens, split_sentences(joined), name)
    return tokens.sources[key]
