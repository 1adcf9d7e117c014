"""Retrievers that need no model: `random`, `keywords`, `bm25`, `oracle`.

Every retriever ranks *all* documents (most relevant first, ties kept in document order,
as Python's stable sort in the authors' code); a task type then keeps the top ones up to its
token budget. Laban et al., 2024, §5.1 and the authors' populate_retriever_scores.py:

- `random` (Rand): a seeded uniform score per document (option `seed`, default 0).
- `keywords` (KWs): the share of the query's keywords (lower-cased word tokens minus English
  stop words, duplicates kept) that occur in the document (retrieve_from_keywords). NLTK's
  word_tokenize is approximated by a regex (words and punctuation apart).
- `bm25`: Okapi BM25, k1=1.5, b=0.75, idf = ln((N - n + 0.5) / (n + 0.5)) with negative idfs
  floored at 0.25 x mean idf: rank_bm25's BM25Okapi, reimplemented (no dependency), its index
  built once per haystack (benchmarks/bm25_index.py).
- `oracle` (Orac): the number of the subtopic's insights a document holds. A bare query cannot
  tell that, so the task type passes it: ``rank(query, documents, relevance=[count per doc])``
  (retrievers with ``wants_relevance = True`` get that keyword). Without it, it is an error.
"""

from __future__ import annotations

import math
import random as _random
import re
from abc import abstractmethod
from collections import Counter
from dataclasses import dataclass
from typing import Any

from lceval import hookimpl
from lceval.errors import UserError
from lceval.interfaces import Retriever
from lceval.options import NO_OPTIONS, check_options

#: NLTK's English stop-word list (nltk.corpus.stopwords.words('english')), as the authors use.
STOP_WORDS = frozenset("""i me my myself we our ours ourselves you you're you've you'll you'd your yours
yourself yourselves he him his himself she she's her hers herself it it's its itself they them their
theirs themselves what which who whom this that that'll these those am is are was were be been being
have has had having do does did doing a an the and but if or because as until while of at by for with
about against between into through during before after above below to from up down in out on off over
under again further then once here there when where why how all any both each few more most other some
such no nor not only own same so than too very s t can will just don don't should should've now d ll m
o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't haven
haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn shouldn't wasn
wasn't weren weren't won won't wouldn wouldn't""".split())
TOKEN = re.compile(r"\w+|[^\w\s]")
WORD = re.compile(r"\w+")


def keyword_tokens(text: str) -> list[str]:
    return [t for t in TOKEN.findall(text.lower()) if t not in STOP_WORDS]


def bm25_tokens(text: str) -> list[str]:
    return [t for t in WORD.findall(text.lower()) if t not in STOP_WORDS]


def order_by(scores: list[float]) -> list[int]:
    """Indices by descending score; equal scores keep document order (stable)."""
    return sorted(range(len(scores)), key=lambda i: -scores[i])


class ScoringRetriever(Retriever):
    """A retriever that scores every document; ranking by score is then the same for all."""

    @abstractmethod
    def scores(self, query: str, documents: list[str]) -> list[float]:
        """One score per document, higher = more relevant."""

    def rank(self, query: str, documents: list[str]) -> list[int]:
        return order_by(self.scores(query, documents))


class RandomRetriever(ScoringRetriever):
    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def scores(self, query: str, documents: list[str]) -> list[float]:
        rng = _random.Random(f"{self.seed}\x00{query}")  # per query, reproducible
        return [rng.random() for _ in documents]


class KeywordsRetriever(ScoringRetriever):
    name = "keywords"

    def scores(self, query: str, documents: list[str]) -> list[float]:
        kws = keyword_tokens(query)
        if not kws:
            return [0.0] * len(documents)
        out = []
        for doc in documents:
            vocab = set(keyword_tokens(doc))
            out.append(sum(1 for kw in kws if kw in vocab) / len(kws))
        return out


@dataclass
class BM25Index:
    """A haystack's BM25 statistics: postings (term -> [(document, term frequency)]), idf and
    each document's length normalisation. Built once per haystack; a query then touches only
    the postings of its own terms."""

    postings: dict[str, list[tuple[int, int]]]
    idf: dict[str, float]
    norm: list[float]
    n_docs: int

    @classmethod
    def build(cls, documents: list[str], k1: float, b: float, epsilon: float) -> "BM25Index":
        docs = [bm25_tokens(d) for d in documents]
        n_docs = len(docs)
        avgdl = (sum(len(d) for d in docs) / n_docs or 1.0) if n_docs else 1.0
        postings: dict[str, list[tuple[int, int]]] = {}
        for i, d in enumerate(docs):
            for term, tf in Counter(d).items():
                postings.setdefault(term, []).append((i, tf))
        idf = {w: math.log(n_docs - len(p) + 0.5) - math.log(len(p) + 0.5) for w, p in postings.items()}
        floor = epsilon * (sum(idf.values()) / len(idf)) if idf else 0.0
        idf = {w: (v if v >= 0 else floor) for w, v in idf.items()}
        norm = [k1 * (1 - b + b * len(d) / avgdl) for d in docs]
        return cls(postings=postings, idf=idf, norm=norm, n_docs=n_docs)


class BM25Retriever(ScoringRetriever):
    """Okapi BM25 (see the module docstring). The index of the last haystack is kept: SummHay
    asks one query per subtopic of the same ~100 documents, so the documents are tokenized
    and counted once per haystack, not once per query (`index_builds` counts them)."""

    name = "bm25"

    def __init__(self, k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25) -> None:
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self._index: tuple[tuple[str, ...], BM25Index] | None = None
        self.index_builds = 0

    def index(self, documents: list[str]) -> BM25Index:
        key = tuple(documents)  # equal strings compare by identity first: cheap for the same haystack
        if self._index is None or self._index[0] != key:
            self._index = (key, BM25Index.build(documents, self.k1, self.b, self.epsilon))
            self.index_builds += 1
        return self._index[1]

    def scores(self, query: str, documents: list[str]) -> list[float]:
        index = self.index(documents)
        out = [0.0] * index.n_docs
        # term by term in query order (repeats count, as rank_bm25's get_scores): each
        # document's sum takes its terms in the same order as a per-document loop would
        for term in bm25_tokens(query):
            for i, tf in index.postings.get(term, ()):
                out[i] += index.idf[term] * tf * (self.k1 + 1) / (tf + index.norm[i])
        return out


class OracleRetriever(Retriever):
    name = "oracle"
    wants_relevance = True

    def rank(self, query: str, documents: list[str], relevance: list[float] | None = None) -> list[int]:
        if relevance is None or len(relevance) != len(documents):
            raise UserError("the oracle retriever needs the gold relevance of every document "
                            "(rank(query, documents, relevance=...)); this task type gives none",
                            field="retriever")
        return order_by([float(r) for r in relevance])


SEED = {"type": "integer", "description": "Seed of the random scores (default: the run's --seed)."}
#: The lexical retrievers' typed options (`retriever_options` in a spec). `seed` is the engine's
#: (the run's seed) and needs no declaring, except where the retriever uses it.
OPTIONS: dict[str, dict[str, Any]] = {
    "random": {"type": "object", "additionalProperties": False, "properties": {"seed": SEED}},
    "keywords": NO_OPTIONS,
    "bm25": {"type": "object", "additionalProperties": False, "properties": {
        "k1": {"type": "number", "default": 1.5, "description": "Term-frequency saturation."},
        "b": {"type": "number", "default": 0.75, "description": "Document-length normalization."},
        "epsilon": {"type": "number", "default": 0.25,
                    "description": "Floor of negative idfs, as a share of the mean idf."}}},
    "oracle": NO_OPTIONS,
}


def _checked(name: str, options: dict[str, Any]) -> dict[str, Any]:
    """The options checked as the registry checks them (so a direct call gets the same errors)."""
    schema = OPTIONS[name]
    given = {k: v for k, v in options.items() if k != "seed" or "seed" in schema["properties"]}
    return check_options(schema, given, what=f"retriever '{name}'", field_prefix="retriever_options.")


def make_random(options: dict[str, Any]) -> Retriever:
    return RandomRetriever(seed=_checked("random", options).get("seed", 0))


def make_keywords(options: dict[str, Any]) -> Retriever:
    _checked("keywords", options)
    return KeywordsRetriever()


def make_bm25(options: dict[str, Any]) -> Retriever:
    opts = _checked("bm25", options)
    return BM25Retriever(k1=opts["k1"], b=opts["b"], epsilon=opts["epsilon"])


def make_oracle(options: dict[str, Any]) -> Retriever:
    _checked("oracle", options)
    return OracleRetriever()


@hookimpl
def register_retrievers(register):
    for name, factory in (("random", make_random), ("keywords", make_keywords), ("bm25", make_bm25),
                          ("oracle", make_oracle)):
        register(name, factory, options_schema=OPTIONS[name])
