"""The `mrcr` task type: a `documents` spec whose rows are whole chats (`fields.messages`), each
sample given its length bin as the dataset card bins results (Hugging Face `openai/mrcr`,
README.md, "Implementation details"): "Bins are determined by number of tokens used by prompt +
answer in the sample", in o200k_base tokens (the card's runner counts
`sum(len(enc.encode(m["content"])) for m in messages)`, message contents only), with the
boundaries [4096, 8192], (8192, 16384], ..., (524288, 1048576]. A bin is named by its upper
bound, as OpenAI quotes it ("2 needle 128k" is the bin (65536, 131072]).

Counting needs `tiktoken` and its o200k_base file (downloaded once into tiktoken's cache,
`TIKTOKEN_CACHE_DIR`). `options.bins` keeps only the rows of some bins, counted as they are
read, before any conversation is built: a 1M-token row is not held for a model that cannot take
it. `options.bin_encoding: null` gives no bins (no tiktoken needed).
"""

from __future__ import annotations

from typing import Any

from lceval.errors import UserError
from lceval.interfaces import TaskContext
from lceval.needs import Need
from lceval.types import Conversation, Message

from lceval_plugins.documents.needs import TiktokenEncoding, tiktoken_encoding
from lceval_plugins.documents.records import Question
from lceval_plugins.documents.schema import OPTIONS_SCHEMA
from lceval_plugins.documents.task import Builder, DocumentsTaskType

__all__ = ["BIN_EDGES", "BIN_LABELS", "MrcrTaskType", "bin_of", "encoding"]

#: the card's bin boundaries (tokens of prompt + answer); the first bin is [4096, 8192]
BIN_EDGES = (4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576)
#: each bin named by its upper bound; rows outside the card's range: "<4k", ">1M"
BIN_LABELS = ("8k", "16k", "32k", "64k", "128k", "256k", "512k", "1M")
LABELS = ("<4k",) + BIN_LABELS + (">1M",)

OPTIONS = {
    **OPTIONS_SCHEMA,
    "properties": {
        **OPTIONS_SCHEMA["properties"],
        "bin_encoding": {"type": ["string", "null"], "minLength": 1, "default": "o200k_base",
                         "description": "The tiktoken encoding a row's prompt + answer tokens are counted in for its "
                                        "length bin (the card's o200k_base); null: no bins."},
        "bins": {"type": ["array", "null"], "items": {"enum": list(LABELS)}, "uniqueItems": True, "minItems": 1,
                 "default": None,
                 "description": "Keep only the rows of these bins (named by their upper bound: 8k ... 128k ... 1M), "
                                "e.g. the bins a model's window holds (null: every row)."},
    },
}

_ENCODINGS: dict[str, Any] = {}


def encoding(name: str) -> Any:
    """The tiktoken encoding `name` (once per process), or a UserError saying how to get it."""
    if name in _ENCODINGS:
        return _ENCODINGS[name]
    enc = tiktoken_encoding(name, "options.bin_encoding", "--set options.bin_encoding=null --set report.length_bins= for no bins.")
    _ENCODINGS[name] = enc
    return enc


def bin_of(tokens: int) -> str:
    """The card's bin of a row with `tokens` tokens of prompt + answer: [4096, 8192] is "8k",
    then (lo, hi] named "16k" ... "1M"."""
    if tokens < BIN_EDGES[0]:
        return "<4k"
    for label, high in zip(BIN_LABELS, BIN_EDGES[1:]):
        if tokens <= high:
            return label
    return ">1M"


class MrcrBuilder(Builder):
    """The documents builder, each row's questions given `bin` and `bin_tokens` (or dropped when
    `options.bins` leaves their bin out)."""

    def __init__(self, ctx: TaskContext) -> None:
        super().__init__(ctx)
        if not self.fields["messages"]:
            raise UserError("an mrcr spec's rows are chats: name the field holding them in options.fields.messages",
                            field="options.fields.messages")
        name, self.keep = ctx.options.get("bin_encoding"), ctx.options.get("bins")
        if name is None and self.keep:
            raise UserError("options.bins chooses rows by their length bin, and options.bin_encoding is null (no bins)",
                            field="options.bins")
        self.enc = encoding(name) if name else None

    def _count(self, text: str) -> int:
        # special tokens' text counted as text (the card's encode() would raise on it)
        return len(self.enc.encode(text, disallowed_special=()))

    def annotate(self, row: dict[str, Any], messages: list[Message] | None, questions: list[Question]) -> bool:
        if self.enc is None or messages is None:
            return True
        prompt = sum(self._count(m.content) for m in messages)
        for q in questions:
            tokens = prompt + sum(self._count(a) for a in q.answers[:1])
            label = bin_of(tokens)
            if self.keep and label not in self.keep:
                return False
            q.metadata.update(bin=label, bin_tokens=tokens)
        return True


class MrcrTaskType(DocumentsTaskType):
    """OpenAI MRCR: each row's chat sent as its own messages, binned by its o200k tokens."""

    options_schema = OPTIONS
    description = ("OpenAI MRCR (openai/mrcr): a long synthetic chat, return the i-th of several identical asks; "
                   "rows binned by o200k tokens as the dataset card bins them")

    def load(self, ctx: TaskContext) -> list[Conversation]:
        builder = MrcrBuilder(ctx)
        return builder.conversations(builder.documents())

    def check(self, ctx: TaskContext) -> None:
        builder = MrcrBuilder(ctx)
        builder.conversations(builder.documents(max_rows=5))

    def needs(self, ctx: TaskContext) -> list[Need]:
        """Its Hub files, and the encoding its bins are counted in."""
        name = ctx.options.get("bin_encoding")
        return super().needs(ctx) + ([TiktokenEncoding(str(name))] if name else [])
