"""Loading a shipped HELMET spec over our rows (tests/data/helmet/home, HELMET's file layout)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from lceval.engine import check_spec, load_catalog, load_plugins
from lceval.interfaces import TaskContext
from lceval.types import CONTEXT_SLOT, Conversation

from tests.paths import TEST_DATA

PLUGINS = load_plugins()
CATALOG = load_catalog(PLUGINS)
HOME = TEST_DATA / "helmet" / "home"


def load(name: str, splits: list[str] | None = None, home: Path = HOME, model: Any = None, limit: int | None = None,
         **options: Any) -> list[Conversation]:
    """The conversations of spec `name` (its options updated), read from `home`."""
    spec = CATALOG.spec(name)
    task_type = check_spec(spec, PLUGINS)
    data = {**spec.data, "options": {**spec.data["options"], **options}}
    ctx = TaskContext(spec=data, spec_path=spec.path, data_home=home, splits=splits, limit=limit,
                      record_file=lambda p: None, model_tokenizer=lambda: model)
    return task_type.load(ctx)


def prompt(conv: Conversation) -> str:
    """The user message as sent (the context in its place)."""
    return conv.turns[0].user.replace(CONTEXT_SLOT, conv.context, 1)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# -- long documents: a word-level tokenizer standing in for Llama-2's, and rows over it ------------

WORDS = [f"w{i}" for i in range(50)] + ["the", "story", "ends", "."]


def make_tokenizer(folder: Path) -> Path:
    """A fast word-level tokenizer with a BOS token, saved as a transformers folder (offsets and all):
    the documents are measured and cut with it where HELMET uses Llama-2's."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{w: i + 3 for i, w in enumerate(WORDS + ["...", "[the", "rest", "of",
                                                                                           "text", "is", "omitted]"])}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    fast.save_pretrained(str(folder))
    return folder


def long_text(seed: int, words: int) -> str:
    import random

    r = random.Random(seed)
    return " ".join(r.choice(WORDS) for _ in range(words))


def infbench_rows() -> list[dict[str, Any]]:
    """InfiniteBench longbook_qa_eng rows (id, context, input, answer, options): two books long enough
    for HELMET (65,536 tokens or more), one too short, questions sharing books."""
    books = [long_text(1, 66_000), long_text(2, 1_000), long_text(3, 70_000)]
    return [{"id": i, "context": books[b], "input": f"Who is w{i} in the story?", "answer": [f"w{i + 10}"],
             "options": []} for i, b in enumerate([0, 0, 1, 2, 2])]


def narrativeqa_rows(n_docs: int, per_doc: int, words: int, seed: int = 10) -> list[dict[str, Any]]:
    """Rows of the Hub dataset narrativeqa (document, question, answers), `per_doc` questions per story."""
    rows = []
    for d in range(n_docs):
        document = {"id": f"doc{d}", "kind": "gutenberg", "url": "", "file_size": 0, "word_count": words,
                    "start": "", "end": "", "summary": {"text": "", "tokens": [], "url": "", "title": f"Book {d}"},
                    "text": long_text(seed + d, words)}
        for q in range(per_doc):
            rows.append({"document": document, "question": {"text": f"What does w{q} do in book {d}?", "tokens": []},
                         "answers": [{"text": f"w{q + 1}", "tokens": []}, {"text": f"it is w{q + 1}", "tokens": []}]})
    return rows


def multi_lexsum_rows() -> list[dict[str, Any]]:
    """Rows of HELMET's multi_lexsum_val.jsonl (id, sources, summary/long, summary/short, key points):
    two cases long enough, one too short, one without a short summary."""
    out = []
    for i, (words, short) in enumerate([(70_000, "Short summary A."), (2_000, "Short B."), (70_000, None),
                                        (68_000, "Short summary D.")]):
        out.append({"id": f"case-{i}", "sources": [long_text(30 + i, words // 2), long_text(40 + i, words // 2)],
                    "summary/long": f"Long summary {i}.", "summary/short": short, "summary/tiny": None,
                    "summary/short_keypoints": [f"point {i}.1", f"point {i}.2"]})
    return out
