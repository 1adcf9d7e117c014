"""What indexing a haystack once saves the `bm25` retriever.

SummHay ranks the same ~100 documents once per subtopic query. The retriever used to
tokenize and count every document again for each query; it now keeps the last haystack's
index. This script ranks QUERIES queries over DOCUMENTS documents of WORDS words (seeded
random text with a Zipf-like vocabulary, like prose) three ways and reports counts first
(index builds, documents tokenized: stable everywhere), then wall seconds:

- per query: a fresh index for every query (what the retriever did before);
- indexed once: one retriever for all queries (what it does now);
- rank_bm25: BM25Okapi built once, get_scores per query, when the package is installed
  (`pip install rank_bm25`), and whether its scores equal ours (they should, to float
  rounding: the same formula).

    python benchmarks/bm25_index.py [--documents 100] [--queries 50] [--words 750]
"""

from __future__ import annotations

import argparse
import random
import time

from lceval_plugins.retrievers import lexical


def corpus(n_docs: int, n_queries: int, words: int, seed: int = 0) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(20000)]
    weights = [1.0 / (i + 1) for i in range(len(vocab))]
    docs = [" ".join(rng.choices(vocab, weights, k=words)) for _ in range(n_docs)]
    queries = [" ".join(rng.choices(vocab[:5000], k=12)) for _ in range(n_queries)]
    return docs, queries


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--documents", type=int, default=100)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--words", type=int, default=750)
    args = ap.parse_args()
    docs, queries = corpus(args.documents, args.queries, args.words)

    start = time.perf_counter()
    builds = 0
    per_query = []
    for q in queries:
        fresh = lexical.BM25Retriever()
        per_query.append(fresh.scores(q, list(docs)))
        builds += fresh.index_builds
    t_per_query = time.perf_counter() - start

    start = time.perf_counter()
    once = lexical.BM25Retriever()
    indexed = [once.scores(q, docs) for q in queries]
    t_once = time.perf_counter() - start
    assert indexed == per_query, "indexing once changed a score"

    print(f"{args.queries} queries over {args.documents} documents of {args.words} words")
    print("| way | index builds | documents tokenized | seconds |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| per query (before) | {builds} | {builds * args.documents} | {t_per_query:.2f} |")
    print(f"| indexed once (now) | {once.index_builds} | {once.index_builds * args.documents} | {t_once:.2f} |")
    try:
        from rank_bm25 import BM25Okapi
    except ImportError:
        print("(rank_bm25 not installed: no comparison)")
        return
    start = time.perf_counter()
    bm25 = BM25Okapi([lexical.bm25_tokens(d) for d in docs], k1=1.5, b=0.75, epsilon=0.25)
    theirs = [bm25.get_scores(lexical.bm25_tokens(q)) for q in queries]
    t_theirs = time.perf_counter() - start
    worst = max(abs(a - b) for ours, ref in zip(indexed, theirs) for a, b in zip(ours, ref))
    same_order = all(lexical.order_by(ours) == lexical.order_by(list(ref)) for ours, ref in zip(indexed, theirs))
    print(f"| rank_bm25 BM25Okapi | 1 | {args.documents} | {t_theirs:.2f} |")
    print(f"\nlargest score difference from rank_bm25: {worst:.1e}; same rankings: {same_order}")


if __name__ == "__main__":
    main()
