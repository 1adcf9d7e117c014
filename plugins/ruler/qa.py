"""RULER's `qa_1` (SQuAD) and `qa_2` (HotpotQA): a real question over its gold documents hidden
among distractor documents, as many as the length holds (NVIDIA/RULER c3f5e3b4,
scripts/data/synthetic/qa.py; template, answer prefix and tokens_to_generate 32 in
scripts/data/synthetic/constants.py `qa`; metric string_match_part in
scripts/eval/synthetic/constants.py).

The documents and questions are read as qa.py's `read_squad` and `read_hotpotqa` read them:
every distinct SQuAD paragraph (sorted) is a document and every answerable question of the dev
set a sample, with the other paragraphs of its article as its first distractors; for HotpotQA
every distinct "title\\nsentences" paragraph is a document, a question's ten paragraphs (its two
gold ones and eight distractors) its own documents. Sample i is the dev set's question i, as in
RULER. `generate_input_output` fills the context: the question's documents, then its article's
other paragraphs (SQuAD), then documents drawn at random from the rest; when the length wants
more documents than the corpus holds, the whole corpus repeated in order. The documents are
shuffled with a generator seeded afresh (`random.Random(seed).shuffle`, as qa.py), numbered
"Document {i}:" and joined by blank lines.

How many documents: qa.py finds one count for all samples by a binary search on sample 0 and
takes ten fewer for a sample that comes out too long. Here each sample gets the largest count
whose prompt (chat template included) fits its length, found from the documents' token counts
and checked by counting the prompt: samples land closer to the length, never over it. Which
documents are added draws from the sample's own random stream, with the same law as qa.py's
`random.sample` but not its draws (qa.py's depend on its search).
"""

from __future__ import annotations

import bisect
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lceval.errors import DataMissing, UserError
from lceval.interfaces import Dataset, DatasetFile, TaskContext
from lceval.types import CONTEXT_SLOT, Conversation

from lceval_plugins.haystack.tokens import Tokens

from .common import Budget, SampleOut, conversation, rng_for, sample_plan, user_messages, with_prefix

__all__ = ["DATASETS", "QA_ANSWER_PREFIX", "QA_TEMPLATE", "Corpus", "documents_for", "load_qa", "read_hotpotqa",
           "read_squad"]

QA_TEMPLATE = ("Answer the question based on the given documents. Only give me the answer and do not output any other "
               "words.\n\nThe following are given documents.\n\n{context}\n\nAnswer the question based on the given "
               "documents. Only give me the answer and do not output any other words.\n\nQuestion: {query}")
QA_ANSWER_PREFIX = " Answer:"
DOCUMENT_PROMPT = "Document {i}:\n{document}"


def _install_one(name: str):
    def install(archives: dict[str, Path], dest: Path) -> None:
        (dest / name).write_bytes(archives[name].read_bytes())
    return install


#: RULER's download_qa_dataset.sh: SQuAD 2.0 dev and HotpotQA dev (distractor), at their URLs
DATASETS: dict[str, Dataset] = {
    "squad": Dataset(
        name="squad-v2-dev", description="SQuAD 2.0 dev set (Rajpurkar et al., 2018), for RULER's qa_1",
        files=[DatasetFile("dev-v2.0.json", "https://rajpurkar.github.io/SQuAD-explorer/dataset/dev-v2.0.json",
                           "80a5225e94905956a6446d296ca1093975c4d3b3260f1d6c8f68bc2ab77182d8")],
        install=_install_one("dev-v2.0.json"), license="CC BY-SA 4.0"),
    "hotpotqa": Dataset(
        name="hotpotqa-dev-distractor", description="HotpotQA dev set, distractor setting (Yang et al., 2018), "
                                                    "for RULER's qa_2",
        files=[DatasetFile("hotpot_dev_distractor_v1.json",
                           "http://curtis.ml.cmu.edu/datasets/hotpot/hotpot_dev_distractor_v1.json",
                           "4e9ecb5c8d3b719f624d66b60f8d56bf227f03914f5f0753d6fa1b359d7104ea")],
        install=_install_one("hotpot_dev_distractor_v1.json"), license="CC BY-SA 4.0"),
}

QA_OPTIONS_EXTRA: dict[str, Any] = {
    "dataset": {"enum": sorted(DATASETS), "default": "squad",
                "description": "RULER's --dataset: squad (qa_1) or hotpotqa (qa_2)."},
}


@dataclass
class Question:
    query: str
    outputs: list[str]
    context: list[int]  # its own documents (indexes into Corpus.docs)
    more: list[int]  # SQuAD: the other paragraphs of its article


@dataclass
class Corpus:
    questions: list[Question]
    docs: list[str]


def read_squad(data: dict[str, Any]) -> Corpus:
    """qa.py `read_squad`: distinct paragraphs sorted; answerable questions, each with its
    paragraph and the other paragraphs of its article."""
    docs = sorted({p["context"] for d in data["data"] for p in d["paragraphs"]})
    index = {c: i for i, c in enumerate(docs)}
    questions = []
    for d in data["data"]:
        more_docs = [index[p["context"]] for p in d["paragraphs"]]
        for p in d["paragraphs"]:
            for qas in p["qas"]:
                if not qas["is_impossible"]:
                    own = index[p["context"]]
                    questions.append(Question(qas["question"], [a["text"] for a in qas["answers"]], [own],
                                              [i for i in more_docs if i != own]))
    return Corpus(questions, docs)


def read_hotpotqa(data: list[Any]) -> Corpus:
    """qa.py `read_hotpotqa`: distinct "title\\nsentences" paragraphs sorted; each question with
    its ten paragraphs."""
    docs = sorted({f"{t}\n{''.join(p)}" for d in data for t, p in d["context"]})
    index = {c: i for i, c in enumerate(docs)}
    return Corpus([Question(d["question"], [d["answer"]], [index[f"{t}\n{''.join(p)}"] for t, p in d["context"]], [])
                   for d in data], docs)


_CORPORA: dict[tuple[str, int, int], Corpus] = {}


def _corpus(ctx: TaskContext) -> Corpus:
    """The dataset's documents and questions, read once per file (and its size and mtime)."""
    from lceval.io import read_json

    which = str(ctx.options["dataset"])
    dataset = DATASETS[which]
    path = ctx.data_home / dataset.name / dataset.files[0].name
    if not path.is_file():
        raise DataMissing(f"dataset '{dataset.name}' is not in the data home {ctx.data_home}",
                          field="options.dataset", command=f"lceval data fetch {dataset.name}",
                          hint=f"Run: lceval data fetch {dataset.name} [--from DIR]")
    ctx.record_file(path)
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _CORPORA:
        data = read_json(path, what=f"{dataset.name} file")
        try:
            _CORPORA[key] = read_squad(data) if which == "squad" else read_hotpotqa(data)
        except (KeyError, TypeError, ValueError) as exc:
            raise UserError(f"not a {which} dev file as RULER reads it (missing {exc})", file=path) from None
    return _CORPORA[key]


def documents_for(corpus: Corpus, question: Question, num_docs: int, order: list[int]) -> list[int]:
    """qa.py `generate_input_output`'s documents for `num_docs` (before the shuffle): the
    question's own, then its article's other paragraphs, then others; `order` is this sample's
    random order of the documents that are neither (its first ones are the drawn ones)."""
    own, more = question.context, question.more
    if num_docs >= len(corpus.docs):  # qa.py: "Repeat DOCS as many times as needed"
        return [i % len(corpus.docs) for i in range(num_docs)]
    if num_docs - len(own) > len(more):
        return own + more + order[: max(0, num_docs - len(own) - len(more))]
    return own + more[: num_docs - len(own)]


def _orders(rng: random.Random, corpus: Corpus, question: Question) -> tuple[list[int], list[int]]:
    """This sample's random order of its article's paragraphs, and of every other document
    (a prefix of each is a uniform draw, as qa.py's random.sample)."""
    taken = set(question.context) | set(question.more)
    more = list(question.more)
    rng.shuffle(more)
    rest = [i for i in range(len(corpus.docs)) if i not in taken]
    rng.shuffle(rest)
    return more, rest


def _context(corpus: Corpus, chosen: list[int], seed: int) -> str:
    docs = [corpus.docs[i] for i in chosen]
    random.Random(seed).shuffle(docs)  # qa.py: random.Random(args.random_seed).shuffle(all_docs)
    return "\n\n".join(DOCUMENT_PROMPT.format(i=i + 1, document=d) for i, d in enumerate(docs))


class _Counts:
    """Token counts of documents (each counted once, as formatted in the context)."""

    def __init__(self, tokens: Tokens, corpus: Corpus) -> None:
        self.tokens, self.corpus = tokens, corpus
        self.known: dict[int, int] = {}
        self.sep = max(1, tokens.count("\n\n"))

    def of(self, i: int) -> int:
        if i not in self.known:
            self.known[i] = self.tokens.count(DOCUMENT_PROMPT.format(i=1, document=self.corpus.docs[i])) + self.sep
        return self.known[i]


def _fit(ctx: TaskContext, budget: Budget, tokens: Tokens, counts: _Counts, corpus: Corpus, question: Question,
         user: str, orders: tuple[list[int], list[int]], overhead: int) -> tuple[str, int, int]:
    """The largest number of documents whose prompt fits the budget: (context, prompt tokens,
    documents). Found from the documents' own counts, corrected by the measured gap between
    their sum and the counted prompt (where documents meet, their numbers), a few rounds."""
    more, rest = orders
    q = Question(question.query, question.outputs, question.context, more)
    least = len(q.context)

    def estimate(k: int) -> int:
        return sum(counts.of(i) for i in documents_for(corpus, q, k, rest))

    def largest(room: int) -> int:
        lo, hi = least, least
        while estimate(hi) <= room and hi < 64 * len(corpus.docs):  # grow, then bisect
            lo, hi = hi, hi * 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if estimate(mid) <= room else (lo, mid)
        return lo

    best: tuple[str, int, int] | None = None
    tried: set[int] = set()
    k, n = largest(budget.prompt_target - overhead), 0
    for _ in range(8):
        tried.add(k)
        context = _context(corpus, documents_for(corpus, q, k, rest), ctx.seed)
        n = tokens.prompt(user_messages(user, context))
        gap = n - overhead - estimate(k)
        if n <= budget.prompt_target:
            best = (context, n, k) if best is None or k > best[2] else best
            nxt = largest(budget.prompt_target - overhead - gap)
            if nxt <= k:
                nxt = k + 1 if k + 1 not in tried and budget.prompt_target - n > budget.tolerance else k
        else:
            nxt = min(k - 1, largest(budget.prompt_target - overhead - gap))
        if nxt in tried or nxt < least:
            break
        k = nxt
    if best is None:
        raise UserError(f"at {budget.describe()} the question and its {least} document(s) take {n:,} tokens, more "
                        "than the length holds", field=budget.field, hint="Give a longer length.")
    return best


def load_qa(ctx: TaskContext, budget: Budget, tokens: Tokens) -> list[Conversation]:
    o = ctx.options
    corpus = _corpus(ctx)
    plan = sample_plan(ctx, budget.label, 1)
    if plan and plan[-1][1][0] >= len(corpus.questions):  # sample i is question i
        raise UserError(f"sample {plan[-1][1][0] + 1:,} asked and the {o['dataset']} dev set has "
                        f"{len(corpus.questions):,} answerable questions", field="options.num_samples",
                        hint="Lower options.num_samples or --limit.")
    template = with_prefix(QA_TEMPLATE, QA_ANSWER_PREFIX, o["answer_prefix"])
    counts = _Counts(tokens, corpus)
    out: list[Conversation] = []
    for h, (index,) in plan:
        question = corpus.questions[index]
        user = template.format(context=CONTEXT_SLOT, query=question.query)
        overhead = tokens.prompt(user_messages(user, ""))
        orders = _orders(rng_for(ctx.seed, "qa", index, str(o["dataset"])), corpus, question)
        context, n, k = _fit(ctx, budget, tokens, counts, corpus, question, user, orders, overhead)
        meta = {"dataset": o["dataset"], "num_docs": k, "gold_docs": len(question.context),
                "corpus_passes": max(1, -(-k // len(corpus.docs)))}
        sample = SampleOut(index, user, user.split(CONTEXT_SLOT, 1)[1].strip(), question.outputs, n, meta)
        out.append(conversation(budget, h, context, sample, "documents"))
    return out
