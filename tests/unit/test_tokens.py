"""`lceval.tokens.tokenizer_problems`: the rules the context policy relies on, checked the way a
plugin author checks a backend (and on the real backends in the slow tests)."""

from __future__ import annotations

import pytest

from lceval.errors import UserError
from lceval.interfaces import ModelBackend
from lceval.tokens import check_fits_window, tokenizer_problems
from lceval.types import GenerationParams, GenerationRequest, Message

from ..conftest import ScriptedModel


class CharTokenizer(ModelBackend):
    """One token per character, 3 tokens of template per message: follows every rule."""

    context_window = 1000

    def identity(self) -> dict:
        return {}

    def generate(self, requests):
        raise AssertionError

    def tokenize(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def detokenize(self, tokens: list[int]) -> str:
        return "".join(chr(t) for t in tokens)

    def count_tokens(self, messages: list[Message]) -> int:
        return sum(len(m.content) + 3 for m in messages)


class AddsBos(CharTokenizer):
    def tokenize(self, text: str) -> list[int]:
        return [0x2402] + super().tokenize(text)  # a BOS the policy would count and cut with the text


class CountsWords(CharTokenizer):
    def count_tokens(self, messages: list[Message]) -> int:
        return sum(len(m.content.split()) + 3 for m in messages)


class NoTokenizer(CharTokenizer):
    def tokenize(self, text: str) -> None:
        return None


def test_a_tokenizer_that_keeps_the_rules_passes():
    assert tokenizer_problems(CharTokenizer()) == []
    unbounded = NoTokenizer()
    unbounded.context_window = None
    assert tokenizer_problems(unbounded) == []  # no window, no tokenizer: nothing is cut, nothing to check


def test_each_broken_rule_is_named():
    (bos, *_) = tokenizer_problems(AddsBos())
    assert "detokenize(tokenize(x)) != x: differs at character 0" in bos
    assert any("count_tokens grows by" in p for p in tokenizer_problems(CountsWords()))
    assert tokenizer_problems(NoTokenizer()) == [
        "context_window is 1000 but tokenize() returns None: the context policy cannot measure or cut a context"]
    # a whitespace tokenizer loses line breaks: the cut transcript would not be the transcript
    assert any("'\\n(PERSON7)" in p for p in tokenizer_problems(ScriptedModel(window=100)))


def test_a_prompt_over_the_window_is_refused_naming_the_backends_option():

    request = GenerationRequest("q1", [Message("user", "x")], GenerationParams(max_new_tokens=100))
    check_fits_window(request, 924, 1024, "n_ctx")  # fits exactly
    with pytest.raises(UserError, match="'q1' needs 925 prompt \\+ 100 answer tokens but max_model_len is 1024") as err:
        check_fits_window(request, 925, 1024, "max_model_len")
    assert err.value.field == "max_model_len" and "larger max_model_len" in err.value.hint
    silent = GenerationRequest("q2", [Message("user", "x")], GenerationParams(max_new_tokens=0))
    with pytest.raises(UserError, match="max_new_tokens must be at least 1"):
        check_fits_window(silent, 1, 1024, "n_ctx")
