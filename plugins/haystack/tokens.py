"""Lengths in tokens: the evaluated model's (`Tokens`, `model_tokens`), or GPT-4's cl100k_base
where the authors count every model's lengths in it (`Encoder`, `encoder_for`). One `Tokens` per
backend, so every length and task of a run shares what was tokenized."""

from __future__ import annotations

import weakref
from typing import Any, Callable

from lceval.errors import UserError
from lceval.interfaces import ModelBackend, TaskContext
from lceval.types import Message

__all__ = ["Encoder", "Tokens", "encoder_for", "model_tokens"]

_TOKENS: "weakref.WeakKeyDictionary[Any, Tokens]" = weakref.WeakKeyDictionary()


class Tokens:
    """The evaluated model's tokenizer, with short texts' counts remembered (needles, noise
    blocks and word lists repeat across samples)."""

    def __init__(self, backend: ModelBackend) -> None:
        self.backend = backend
        self._counts: dict[str, int] = {}
        #: haystack sources already tokenized, by what they are made of (sources.py)
        self.sources: dict[tuple[str, ...], Any] = {}
        self.tokenize_calls = 0
        self.prompt_counts = 0

    def ids(self, text: str) -> list[int]:
        self.tokenize_calls += 1
        ids = self.backend.tokenize(text)
        if ids is None:
            raise UserError(f"model {type(self.backend).__name__} lends no tokenizer", field="--model")
        return ids

    def count(self, text: str) -> int:
        n = self._counts.get(text)
        if n is None:
            n = len(self.ids(text))
            if len(text) <= 256:
                self._counts[text] = n
        return n

    def cut(self, text: str, tokens: int) -> str:
        """The first `tokens` tokens of `text` as text, without trailing whitespace."""
        if tokens <= 0:
            return ""
        ids = self.ids(text)
        if tokens >= len(ids):
            return text
        return self.backend.detokenize(ids[:tokens]).rstrip()

    def prompt(self, messages: list[Message]) -> int:
        """Tokens of the prompt after the chat template, as `generate` will send it."""
        self.prompt_counts += 1
        n = self.backend.count_tokens(messages)
        if n is None:
            raise UserError(f"model {type(self.backend).__name__} cannot count the tokens of a prompt",
                            field="--model")
        return n


def model_tokens(ctx: TaskContext) -> Tokens:
    """The evaluated model's tokenizer, or a UserError: a sample's length is counted in it.
    One `Tokens` per backend, so every length and task of a run shares what was tokenized."""
    backend = ctx.model_tokenizer()
    if backend is not None and backend.tokenize("a") is None:
        backend = None
    if backend is None:
        raise UserError("this task builds every sample to a length in the evaluated model's own tokens, and "
                        "this model lends no tokenizer", field="--model",
                        hint="Use a local model (llamacpp:, hf:, vllm:) or give an API model its tokenizer "
                             "(e.g. litellm:openai/gpt-4o,tokenizer=...).")
    try:
        tokens = _TOKENS.get(backend)
        if tokens is None:
            tokens = _TOKENS[backend] = Tokens(backend)
    except TypeError:  # a backend that cannot be a weak key: nothing kept between tasks
        tokens = Tokens(backend)
    return tokens


class Encoder:
    """Token ids and text: cl100k_base (tiktoken) or the evaluated model's tokenizer."""

    def __init__(self, encode: Callable[[str], list[int]], decode: Callable[[list[int]], str], name: str) -> None:
        self.encode, self.decode, self.name = encode, decode, name
        self._cache: dict[str, list[int]] = {}

    def ids(self, text: str) -> list[int]:
        if text not in self._cache:
            self._cache[text] = self.encode(text)
        return self._cache[text]


def encoder_for(ctx: TaskContext, tokenizer: str) -> Encoder:
    """`model`: the evaluated model's tokenizer; `gpt-4`: cl100k_base (tiktoken), in which
    some authors count every model's lengths (NeedleBench's configs: tokenizer_model 'gpt-4')."""
    if tokenizer == "model":
        tokens = model_tokens(ctx)
        return Encoder(tokens.ids, tokens.backend.detokenize, "model")
    from lceval_plugins.documents.needs import tiktoken_encoding

    # tiktoken.encoding_for_model("gpt-4") is cl100k_base
    enc = tiktoken_encoding("cl100k_base", "options.tokenizer",
                            "--set options.tokenizer=model to count in the model's tokens.")
    return Encoder(lambda t: enc.encode(t, disallowed_special=()), enc.decode, "gpt-4")
