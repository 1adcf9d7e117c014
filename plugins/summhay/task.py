"""SummHay task type: summarize a haystack of documents for one subtopic's query, citing
documents as [i] (Laban et al., 2024, "Summary of a Haystack", §3.3 and §5).

One conversation per subtopic. The prompt is the authors' domain prompt (conversations /
news, prompts.py) with the document list where the authors put it ("Conversation 3:\\n...").
The number of bullets asked is the number of the subtopic's insights (§3.3; for news the
number of those present in some document, as populate_summaries.get_insights_discussed).

Settings (options):
- `retriever: full` sends every document (the Full columns of Table 2). Any other value is a
  registered retriever (`random`, `keywords`, `bm25`, `embedding`, `oracle`, a third party's)
  that ranks all documents for the query "<query> <subtopic>" (populate_retriever_scores);
  the top ones up to `budget_tokens` (default 15000, §5.1) are kept, the last one cut to fit
  (lceval.tokens says how tokens are counted). `stored:NAME` uses the scores the authors stored
  in the haystack file under `retriever.NAME` (e.g. `stored:vector`, `stored:rerank3`).
- `order` (§5.4, Table 3): `haystack` = the file's order (the paper's "Random": published
  haystacks are in one arbitrary order), `random` = shuffled with `seed`, `top` / `bottom` =
  documents sorted by how many of the subtopic's insights they hold, most relevant first /
  last (populate_summaries --full_summ_sorted / --full_summ_reverse_sorted), `rank` = the
  retriever's order (the authors' RAG order). Default `auto`: `rank` with a retriever,
  `haystack` for full context.
- `no_document: true`: the §5.5 baseline, no document shown (prompts.NO_DOCUMENT_*).
- `source: annotated`: no haystack; one sample per summary of the authors' human-annotated
  file (`annotations`, default the data home's summhay/eval_benchmark_data.json), to be
  replayed by `summhay-replay:annotated` and re-judged (annotated.py, Table 1).

Document numbers never change with the order or the retriever: the model cites the
number the document has in the file, which is what the scorer compares with.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from lceval import tokens as budgets
from lceval.io import sha256_text
from lceval.errors import UserError
from lceval.interfaces import Retriever, TaskContext, TaskType
from lceval.options import defaults
from lceval.types import CONTEXT_SLOT, Conversation, Turn

from .haystack import DOMAINS, Haystack, Subtopic, haystack_files, load_haystack
from .prompts import document_block, summarization_prompt

ORDERS = ("auto", "haystack", "random", "top", "bottom", "rank")
#: Orders that give every subtopic of a haystack the same document list (full context): its
#: subtopics then share one context, the haystack's `topic_id` (`--contexts`, shards, and
#: the scheduler's prefill-once grouping); otherwise each is `topic_id/subtopic_id`.
SHARED_ORDERS = ("haystack", "random")

OPTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "haystack": {"type": "string", "minLength": 1,
                     "description": "A haystack JSON file or a folder of them (default: the data home's summhay/)"},
        "domain": {"enum": ["auto", *DOMAINS], "default": "auto", "description": "Haystack domain (auto: from the file)."},
        "retriever": {"type": "string", "minLength": 1, "default": "full",
                      "description": "full (every document), stored:NAME (the authors' scores) or a retriever plugin",
                      # `full` and `stored:NAME` are ours; any other value must be a registered retriever
                      "x-lceval-plugin": {"kind": "retriever", "values": ["full"], "prefixes": ["stored:"]}},
        "retriever_options": {"type": "object", "default": {}, "description": "Options of the retriever plugin."},
        "budget_tokens": {"type": "integer", "minimum": 1, "default": 15000,
                          "description": "Document tokens kept after retrieval (Laban et al., 2024, §5.1: 15k)."},
        "budget_tokenizer": {"enum": list(budgets.TOKENIZERS), "default": "auto",
                             "description": "How the budget counts tokens (lceval.tokens)."},
        "order": {"enum": list(ORDERS), "default": "auto", "description": "Document order, §5.4: haystack, random, top, bottom, rank (auto: rank with a retriever, else haystack)."},
        "seed": {"type": ["integer", "null"], "default": None,
                 "description": "For the random retriever and order; default: the run's --seed"},
        "no_document": {"type": "boolean", "default": False, "description": "Ask without any document (a baseline)."},
        "source": {"enum": ["haystack", "annotated"], "default": "haystack",
                   "description": "haystack: write summaries; annotated: score the authors' human-annotated ones."},
        "annotations": {"type": "string", "minLength": 1,
                        "description": "For source: annotated (default: the data home's summhay/eval_benchmark_data.json)"},
    },
}

DEFAULT_OPTIONS: dict[str, Any] = defaults(OPTIONS_SCHEMA)


def query_string(subtopic: Subtopic) -> str:
    """What every retriever ranks against (populate_retriever_scores: query + " " + subtopic)."""
    return f"{subtopic.query} {subtopic.subtopic}"


def make_retriever(name: str, options: dict[str, Any], seed: int,
                   factories: dict[str, Any] | None = None) -> Retriever:
    """A registered retriever by name, its factory given the spec's retriever_options + seed.
    `factories`: the engine's TaskContext.retrievers; None loads the installed plugins."""
    if not factories:
        from lceval.engine import load_plugins

        factories = load_plugins().retrievers
    if name not in factories:
        raise UserError(f"unknown retriever '{name}' (known: full, stored:NAME, {', '.join(sorted(factories))})",
                        field="options.retriever")
    return factories[name]({"seed": seed, **(options or {})})


def rank_documents(retriever: Retriever | str, haystack: Haystack, subtopic: Subtopic) -> list[int]:
    """Indices of the haystack's documents, most relevant first. `stored:NAME` reads the
    authors' stored scores; a retriever with `wants_relevance` also gets the gold counts."""
    texts = [d.text for d in haystack.documents]
    if isinstance(retriever, str):
        name = retriever.split(":", 1)[1]
        scores = subtopic.retriever_scores.get(name)
        if scores is None:
            raise UserError(f"haystack has no stored '{name}' scores for subtopic {subtopic.subtopic_id}",
                            file=haystack.path, field=f"subtopics.retriever.{name}")
        try:
            vals = [float(scores[d.document_id]) for d in haystack.documents]
        except (KeyError, TypeError, ValueError):
            raise UserError(f"stored '{name}' scores do not cover every document", file=haystack.path,
                            field=f"subtopics.retriever.{name}") from None
        return sorted(range(len(texts)), key=lambda i: -vals[i])
    if getattr(retriever, "wants_relevance", False):
        ranking = retriever.rank(query_string(subtopic), texts,  # type: ignore[call-arg]
                                 relevance=haystack.relevance(subtopic))
    else:
        ranking = retriever.rank(query_string(subtopic), texts)
    ranking = [int(i) for i in ranking]
    if sorted(ranking) != list(range(len(texts))):
        raise UserError(f"retriever '{getattr(retriever, 'name', retriever)}' must rank every document "
                        "exactly once", field="options.retriever")
    return ranking


def order_documents(indices: list[int], order: str, haystack: Haystack, subtopic: Subtopic,
                    seed: int) -> list[int]:
    """Put the kept documents in the §5.4 order (sorts are stable, as the authors')."""
    if order == "rank":
        return list(indices)
    if order == "haystack":
        return sorted(indices)
    if order == "random":
        shuffled = sorted(indices)
        random.Random(f"{seed}/{haystack.topic_id}").shuffle(shuffled)
        return shuffled
    rel = haystack.relevance(subtopic)
    return sorted(sorted(indices), key=lambda i: -rel[i] if order == "top" else rel[i])


class SummhayTaskType(TaskType):
    options_schema = OPTIONS_SCHEMA
    dataset = "summhay"

    def load(self, ctx: TaskContext) -> list[Conversation]:
        opts = dict(ctx.options)  # a copy: the run seed fills in `seed` below
        if opts["seed"] is None:
            opts["seed"] = int(ctx.seed)
        spec_path = ctx.spec_path
        if opts["source"] == "annotated":
            return self._annotated(ctx, opts)
        location = Path(opts["haystack"]).expanduser() if opts.get("haystack") else \
            ctx.dataset_dir(self.dataset)
        if opts.get("haystack") and not location.is_absolute():
            location = Path.cwd() / location
        domains = ctx.splits or list(DOMAINS)
        for d in domains:
            if d not in DOMAINS:
                raise UserError(f"unknown split '{d}' (SummHay splits are its domains: {', '.join(DOMAINS)})",
                                field="--split")
        name = opts["retriever"]
        retriever: Retriever | str | None = None
        if name.startswith("stored:"):
            retriever = name
        elif name != "full":
            retriever = make_retriever(name, opts["retriever_options"], opts["seed"],
                                       ctx.retrievers)
        if opts["no_document"] and retriever is not None:
            raise UserError("no_document shows no document: leave retriever at 'full'", file=spec_path,
                            field="options.no_document")
        order = opts["order"]
        if order == "auto":
            order = "haystack" if retriever is None else "rank"
        if order == "rank" and retriever is None:
            raise UserError("order 'rank' needs a retriever", file=spec_path, field="options.order")
        count = budgets.counter(opts["budget_tokenizer"]) if retriever is not None else None
        conversations: list[Conversation] = []
        shared = opts["no_document"] or (retriever is None and order in SHARED_ORDERS)
        texts: dict[str, str] = {}  # context id -> sha256 of its text: one id never names two texts
        for path in haystack_files(location):
            ctx.record_file(path)
            hay = load_haystack(path, None if opts["domain"] == "auto" else opts["domain"])
            if hay.domain not in domains:
                continue
            for subtopic in hay.subtopics:
                cid = hay.topic_id if shared else f"{hay.topic_id}/{subtopic.subtopic_id}"
                if not ctx.select_context(cid):  # --contexts before --limit
                    continue
                if ctx.limit is not None and len(conversations) >= ctx.limit:
                    return conversations
                conv = self._conversation(hay, subtopic, retriever, order, count, opts, cid)
                if texts.setdefault(cid, sha256_text(conv.context)) != sha256_text(conv.context):
                    raise RuntimeError(f"SummHay context id '{cid}' names two different document lists")
                conversations.append(conv)
        if not conversations and not ctx.limit:
            raise UserError(f"no haystack of the selected domains ({', '.join(domains)})", file=location)
        return conversations

    def _annotated(self, ctx: TaskContext, opts: dict[str, Any]) -> list[Conversation]:
        from .annotated import ANNOTATIONS_FILE, annotated_conversations

        if ctx.splits:
            raise UserError("the annotated summaries have no splits", field="--split")
        path = Path(opts["annotations"]).expanduser() if opts.get("annotations") else \
            ctx.dataset_dir(self.dataset) / ANNOTATIONS_FILE
        if not path.is_absolute():
            path = Path.cwd() / path
        conversations = annotated_conversations(path, ctx.limit, ctx.select_context)
        ctx.record_file(path)
        return conversations

    @staticmethod
    def _conversation(hay: Haystack, subtopic: Subtopic, retriever: Retriever | str | None, order: str,
                      count: budgets.Counter | None, opts: dict[str, Any], context_id: str) -> Conversation:
        texts = [d.text for d in hay.documents]
        cut_doc: int | None = None
        if opts["no_document"]:
            kept_text: dict[int, str] = {}
            indices: list[int] = []
        elif retriever is None:
            indices = list(range(len(texts)))
            kept_text = dict(enumerate(texts))
        else:
            assert count is not None
            ranking = rank_documents(retriever, hay, subtopic)
            kept = budgets.fill_budget(texts, ranking, opts["budget_tokens"], count)
            indices = [k.index for k in kept]
            kept_text = {k.index: k.text for k in kept}
            cut_doc = next((hay.documents[k.index].number for k in kept if k.cut), None)
        indices = order_documents(indices, order, hay, subtopic, opts["seed"])
        context = "".join(document_block(hay.domain, hay.documents[i].number, kept_text[i]) for i in indices)
        asked = subtopic.insights if hay.domain == "conversation" else hay.insights_discussed(subtopic)
        n_docs = len(texts) if opts["no_document"] else len(indices)
        prompt = summarization_prompt(
            hay.domain, n_documents=n_docs, n_insights=len(asked), topic=hay.topic,
            participants=hay.participants, subtopic=subtopic.subtopic, query=subtopic.query,
            documents="" if opts["no_document"] else CONTEXT_SLOT, no_document=opts["no_document"])
        gold = hay.gold_cites()
        rel = hay.relevance(subtopic)
        item_id = f"{hay.topic_id}/{subtopic.subtopic_id}"
        numbers = [hay.documents[i].number for i in indices]
        metadata = {
            "topic_id": hay.topic_id,
            "subtopic_id": subtopic.subtopic_id,
            "domain": hay.domain,
            "retriever": "none" if opts["no_document"] else opts["retriever"],
            "order": "none" if opts["no_document"] else order,
            "seed": opts["seed"],
            "budget_tokens": opts["budget_tokens"] if retriever is not None else None,
            "budget_tokenizer": count.name if count is not None else None,
            "n_bullets_asked": len(asked),
            "documents_in_context": numbers,
            "document_cut_to_budget": cut_doc,
            "relevant_in_context": sum(1 for i in indices if rel[i] > 0),
            "relevant_in_haystack": sum(1 for r in rel if r > 0),
            # what the coverage judge scores against: every insight of the subtopic (§4.1)
            "insights": [{"insight_id": i.insight_id, "insight": i.text,
                          "gold": sorted(gold.get(i.insight_id, set()))} for i in subtopic.insights],
        }
        reference = "\n".join(f"- {i.text} {''.join(f'[{n}]' for n in sorted(gold.get(i.insight_id, set())))}"
                              for i in subtopic.insights)
        return Conversation(
            conv_id=item_id,
            context=context,
            context_id=context_id,
            turns=[Turn(item_id=item_id, user=prompt, reference=reference, question=subtopic.query,
                        metadata=metadata)],
            metadata={"topic_id": hay.topic_id, "domain": hay.domain},
        )
