"""An lceval plugin outside the lceval distribution: a model scheme, a judge, a pairwise judge and
a long-context method."""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Any, Iterator

from lceval import hookimpl
from lceval.errors import UserError
from lceval.interfaces import Judge, JudgeContext, ModelBackend, PairwiseJudge, PrefixCache
from lceval.methods import ContextMethod
from lceval.options import NO_OPTIONS
from lceval.types import (Generation, GenerationRequest, JudgeInput, Judgment, Message, PairInput,
                          PairJudgment)

WORD = re.compile(r"[A-Za-z0-9]+")
STOP = frozenset("a an and are as at be by did do does for from how in is it of on or the to was "
                 "were what when where which who whom why will with this that meeting".split())


def _words(text: str) -> set[str]:
    return {w.lower() for w in WORD.findall(text)} - STOP


class KeywordBaseline(ModelBackend):
    """Answers with the context lines that share most words with the last question."""

    batch_size = 32
    prefix_cache = PrefixCache("none")  # no KV cache: the order of requests does not matter

    def __init__(self, lines: int, window: int | None) -> None:
        self.lines = lines
        self.context_window = window

    def identity(self) -> dict:
        return {"scheme": "keyword", "lines": self.lines, "window": self.context_window}

    # a whitespace "tokenizer", enough for lceval's context policy to cut long contexts
    def tokenize(self, text: str) -> list[int] | None:
        self._vocab = getattr(self, "_vocab", {})
        self._rev = getattr(self, "_rev", [])
        ids = []
        for tok in text.split(" "):
            if tok not in self._vocab:
                self._vocab[tok] = len(self._rev)
                self._rev.append(tok)
            ids.append(self._vocab[tok])
        return ids

    def detokenize(self, tokens: list[int]) -> str:
        return " ".join(self._rev[t] for t in tokens)

    def count_tokens(self, messages: list[Message]) -> int | None:
        return sum(len(m.content.split(" ")) + 4 for m in messages)

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        return [self._answer(r) for r in requests]

    def _answer(self, request: GenerationRequest) -> Generation:
        user_turns = [m.content for m in request.messages if m.role == "user"]
        question = request.hints.get("question") or user_turns[-1]
        source = user_turns[0]
        wanted = _words(question)
        ranked = sorted(
            (line for line in source.splitlines() if line.strip()),
            key=lambda line: -len(wanted & _words(line)),
        )
        text = " ".join(ranked[: self.lines])
        return Generation(request_id=request.request_id, text=text,
                          prompt_tokens=self.count_tokens(request.messages) or 0,
                          prefilled_tokens=0,  # no model: nothing is prefilled
                          completion_tokens=len(text.split()))


#: The backend's options, declared once: lceval converts `keyword:baseline,lines=3` to an int,
#: refuses `lins=3` (did you mean 'lines'?) and `lines=0`, fills the default and lists them in
#: `lceval plugins keyword`. The factory receives the checked values.
KEYWORD_OPTIONS = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "lines": {"type": "integer", "minimum": 1, "default": 2, "description": "Context lines in each answer."},
        "window": {"type": "integer", "minimum": 1,
                   "description": "Context window in words (default: unbounded), so lceval's context policy cuts."},
    },
}


def make_keyword(model: str, options: dict) -> KeywordBaseline:
    return KeywordBaseline(options["lines"], options.get("window"))


class ContainsJudge(Judge):
    name = "contains"

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        out = []
        for item in items:
            ref = _words(item.reference)
            hit = bool(ref) and ref <= _words(item.response)
            out.append(Judgment(item_id=item.item_id, judge=self.name, score=10.0 if hit else 1.0,
                                raw="contains" if hit else "missing words"))
        return out


def make_contains(ctx: JudgeContext) -> ContainsJudge:
    return ContainsJudge()


class WordShareJudge(PairwiseJudge):
    """Compares two texts by the share of their pooled content words each one holds: a toy
    stand-in for CREAM's key facts, enough for `lceval rank` to rank with it."""

    name = "word-share"
    criteria = ("coverage",)

    def compare(self, pairs: list[PairInput]) -> list[PairJudgment]:
        out = []
        for p in pairs:
            a, b = _words(p.text_a), _words(p.text_b)
            pool = a | b
            if not pool:
                out.append(PairJudgment(unit_id=p.unit_id, judge=self.name, scores_a=None, scores_b=None,
                                        parse_status="parse_failure", raw="no content words"))
                continue
            out.append(PairJudgment(unit_id=p.unit_id, judge=self.name,
                                    scores_a={"coverage": len(a) / len(pool)},
                                    scores_b={"coverage": len(b) / len(pool)}))
        return out


def make_word_share(ctx: JudgeContext) -> WordShareJudge:
    return WordShareJudge()


@hookimpl
def register_pairwise_judges(register):
    register("word-share", make_word_share, options_schema=NO_OPTIONS)


@hookimpl
def register_models(register):
    register("keyword", make_keyword, options_schema=KEYWORD_OPTIONS)


@hookimpl
def register_judges(register):
    register("contains", make_contains, options_schema=NO_OPTIONS)


class KeepEnds(ContextMethod):
    """A KV-cache press kvpress does not have: once the context is prefilled, each layer keeps
    its first `sink` positions and its most recent ones, `compression_ratio` of the context
    removed from the middle. The backend prefills, answers and measures; the method only cuts
    the cache (torch is the backend's, imported when the method runs)."""

    def __init__(self, ratio: float, sink: int) -> None:
        self.ratio, self.sink = ratio, sink

    def identity(self) -> dict:
        return {"method": "ends", "version": 1, "compression_ratio": self.ratio, "sink": self.sink}

    @contextmanager
    def prefilling(self, model: Any, cache: Any) -> Iterator[None]:
        yield  # the backend prefills the context into `cache` here
        import torch

        for layer in cache.layers:
            n = layer.keys.shape[-2]
            kept = max(1, int(n * (1 - self.ratio)))  # kvpress's rule for the positions kept
            if kept >= n:
                continue
            head = min(self.sink, kept)
            index = torch.cat([torch.arange(head), torch.arange(n - (kept - head), n)]).to(layer.keys.device)
            layer.keys = layer.keys.index_select(2, index)
            layer.values = layer.values.index_select(2, index)


ENDS_OPTIONS = {"type": "object", "additionalProperties": False, "properties": {
    "sink": {"type": "integer", "minimum": 0, "default": 4, "description": "First positions always kept."}}}


def make_ends(options: dict) -> KeepEnds:
    """`hf:MODEL,press=ends,compression_ratio=0.5,press.sink=8`: the ratio comes from the backend."""
    if options.get("compression_ratio") is None:
        raise UserError("press 'ends' needs compression_ratio=R", field="compression_ratio")
    return KeepEnds(options["compression_ratio"], options["sink"])


@hookimpl
def register_methods(register):
    register("ends", make_ends, options_schema=ENDS_OPTIONS)
