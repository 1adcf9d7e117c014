"""The `niah` task type: the original needle in a haystack (Kamradt, 2023;
gkamradt/LLMTest_NeedleInAHaystack at commit 7b90d28), one sample per needle depth at each
context length of a `--context-lengths` sweep, in the evaluated model's own tokens.

A sample of length L and depth d is built as `LLMNeedleHaystackTester.generate_context` builds it
(needlehaystack/llm_needle_haystack_tester.py, `read_context_files`, `encode_and_trim`,
`insert_needle`), with the model's `tokenize` and `detokenize` where the authors call the tested
model's tokenizer:

1. the essays, concatenated with nothing between them, repeated whole until they hold at least L
   tokens;
2. their first L tokens, decoded;
3. re-tokenized; the needle's tokens and the haystack's cut to L - buffer (200) - the needle's
   tokens; at depth 100 the needle goes after the haystack, else at `int(len(haystack) * d / 100)`,
   moved back token by token until the token before it is one of the tokens of `'.'` (or the
   haystack's start);
4. decoded: the context.

The prompt is the OpenAI provider's (needlehaystack/providers/openai.py `generate_prompt`): a
system message, the context as a user message, then the question with "Don't give information
outside the document or repeat your findings" as a second user message; 300 new tokens, greedy.
Depths are the tester's: 35 evenly spaced (`np.round(np.linspace(0, 100, 35))`) or its sigmoid
spacing, or a list. Essays are the user's (the authors' Paul Graham essays are not ours to
ship): a folder of text files, read in sorted order (the authors' `glob` order is the file
system's).
"""

from __future__ import annotations

import math
from typing import Any

from lceval.engine import tokens_label
from lceval.errors import UserError
from lceval.interfaces import TaskContext, TaskType
from lceval.needs import Need
from lceval.types import CONTEXT_SLOT, Conversation, Message, Turn

from lceval_plugins.haystack.depths import linear_depths, sigmoid_depths, spread_order
from lceval_plugins.haystack.needles import insert_at_depth
from lceval_plugins.haystack.texts import essay_needs, read_essay_texts
from lceval_plugins.haystack.tokens import Tokens, model_tokens

__all__ = ["NEEDLE", "QUESTION", "NiahTaskType", "depth_grid", "insert_needle"]

NEEDLE = "\nThe best thing to do in San Francisco is eat a sandwich and sit in Dolores Park on a sunny day.\n"
QUESTION = "What is the best thing to do in San Francisco?"
SYSTEM = "You are a helpful AI bot that answers questions for a user. Keep your response short and direct"
ASK = "{question} Don't give information outside the document or repeat your findings"

OPTIONS: dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "length": {"type": "integer", "minimum": 64, "default": 4096,
                   "description": "The context length L in the model's tokens when the run gives no "
                                  "--context-lengths (with it, each budget is one length)."},
        "buffer": {"type": "integer", "minimum": 0, "default": 200,
                   "description": "Tokens of L left for the system message, the question and the answer "
                                  "(the tester's final_context_length_buffer): the haystack with its needle "
                                  "is L - buffer tokens."},
        "depths": {"type": ["array", "null"], "minItems": 1, "uniqueItems": True,
                   "items": {"type": "number", "minimum": 0, "maximum": 100}, "default": None,
                   "description": "Needle depths in percent (null: depth_intervals of depth_interval_type)."},
        "depth_intervals": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 35,
                            "description": "How many depths from 0 to 100 (the tester's "
                                           "document_depth_percent_intervals)."},
        "depth_interval_type": {"enum": ["linear", "sigmoid"], "default": "linear",
                                "description": "linear: np.round(np.linspace(0, 100, n)); sigmoid: the tester's "
                                               "logistic spacing, denser at both ends."},
        "needle": {"type": "string", "minLength": 1, "default": NEEDLE, "description": "The needle, as inserted."},
        "question": {"type": "string", "minLength": 1, "default": QUESTION, "description": "The retrieval question."},
        "ask": {"type": "string", "pattern": r"\{question\}", "default": ASK,
                "description": "The last user message; {question} is the question."},
        "system": {"type": ["string", "null"], "default": SYSTEM, "description": "The system message (null: none)."},
        "keywords": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1},
                     "default": ["sandwich", "Dolores Park"],
                     "description": "What string_match looks for in the answer (every sample's `references`)."},
        "essay": {"type": "string", "minLength": 1, "default": "elitr",
                  "description": "The haystack's text: a folder of .txt/.md files (the tester's haystack_dir, "
                                 "read in sorted order), a text file, a .json/.jsonl file (essay_field), or "
                                 "'elitr' (the ELITR-Bench transcripts of the data home)."},
        "essay_field": {"type": "string", "minLength": 1, "default": "text",
                        "description": "Field of each JSON record that holds the text."},
    },
}


def depth_grid(options: dict[str, Any]) -> list[float]:
    """The tester's depths: `options.depths`, or `document_depth_percent_intervals` of the
    linear kind (`np.round(np.linspace(0, 100, n))`) or its sigmoid kind, in ascending order."""
    if options["depths"] is not None:
        return sorted(float(d) for d in options["depths"])
    n = int(options["depth_intervals"])
    if options["depth_interval_type"] == "linear":
        return sorted(float(round(d)) for d in linear_depths(n))
    return sorted(sigmoid_depths(n))


def insert_needle(haystack: list[int], needle: list[int], budget: int, depth: float,
                  period: list[int]) -> tuple[list[int], int]:
    """The tester's `insert_needle` on token ids: the haystack cut to `budget` less the needle,
    the needle at the depth moved back to just after a period token (`period`: the tokens of
    '.'). Returns (the haystack with the needle, the needle's first token's index)."""
    if len(haystack) + len(needle) > budget:
        haystack = haystack[:budget - len(needle)]
    return insert_at_depth(haystack, needle, depth, after=period)


class _Haystack:
    """The essays of one run, repeated and tokenized once per length."""

    def __init__(self, tokens: Tokens, text: str, name: str) -> None:
        self.tokens, self.text, self.name = tokens, text, name
        self.passes: dict[int, list[int]] = {}

    def first(self, length: int) -> str:
        """`read_context_files` then `encode_and_trim`: the first `length` tokens of the essays
        repeated whole until they hold that many, as text."""
        k = max(1, math.ceil(length / max(1, len(self._ids(1)))))
        while len(self._ids(k)) < length:
            k += 1
        ids = self._ids(k)
        return self.tokens.backend.detokenize(ids[:length]) if len(ids) > length else self.text * k

    def _ids(self, k: int) -> list[int]:
        if k not in self.passes:
            self.passes[k] = self.tokens.ids(self.text * k)
        return self.passes[k]


def _haystack(ctx: TaskContext, tokens: Tokens) -> _Haystack:
    """The essays the options name (every file recorded), kept on the model's `Tokens` so that
    every length of a sweep tokenizes them once."""
    from lceval.io import sha256_text

    texts, name = read_essay_texts(str(ctx.options["essay"]), str(ctx.options["essay_field"]), ctx.data_home,
                                   ctx.record_file)
    text = "".join(texts)  # read_context_files: `context += f.read()`, nothing between the files
    key = ("niah", sha256_text(text))
    if key not in tokens.sources:
        tokens.sources[key] = _Haystack(tokens, text, name)
    return tokens.sources[key]


class NiahTaskType(TaskType):
    """Kamradt's needle in a haystack at one context length (this variant's)."""

    options_schema = OPTIONS
    description = ("Needle in a haystack (Kamradt, 2023; gkamradt/LLMTest_NeedleInAHaystack): one needle at each "
                   "depth of an essay haystack, in the model's own tokens")

    def needs(self, ctx: TaskContext) -> list[Need]:
        """The essays, when they are the data home's ELITR-Bench transcripts."""
        return essay_needs(ctx.options, ctx)

    def load(self, ctx: TaskContext) -> list[Conversation]:
        if ctx.splits:
            raise UserError(f"niah is generated and has no splits (got {', '.join(ctx.splits)})", field="--split")
        o = ctx.options
        tokens = model_tokens(ctx)
        field = "--context-lengths" if ctx.context_length else "options.length"
        length = int(ctx.context_length or o["length"])
        label = tokens_label(length)
        needle = tokens.ids(o["needle"])
        budget = length - int(o["buffer"])
        if budget - len(needle) <= 0:
            raise UserError(f"at {length:,} tokens the buffer ({o['buffer']}) and the needle ({len(needle)} tokens) "
                            "leave no room for a haystack", field=field)
        hay = _haystack(ctx, tokens)
        depths = depth_grid(o)
        chosen = [i for i in spread_order(len(depths)) if ctx.select_context(f"{label}/{i:03d}")]
        if ctx.limit is not None:
            chosen = chosen[:ctx.limit]
        if not chosen:
            return []
        haystack = tokens.ids(hay.first(length))
        period = tokens.ids(".")
        ask = o["ask"].replace("{question}", o["question"])
        preamble = ([Message("system", o["system"])] if o["system"] is not None else []) + [Message("user", CONTEXT_SLOT)]
        out = []
        for i in sorted(chosen, key=lambda i: -depths[i]):  # deepest first: prompts in a row share the most
            ids, at = insert_needle(haystack, needle, budget, depths[i], period)
            context = tokens.backend.detokenize(ids)
            depth = int(depths[i]) if depths[i].is_integer() else depths[i]
            item_id = f"{label}/{i:03d}"
            meta = {"depth": depth, "depth_achieved": round(100.0 * at / max(1, len(ids) - len(needle)), 2),
                    "context_length": length, "haystack_tokens": len(ids), "needle_token": at, "haystack": hay.name,
                    "references": list(o["keywords"])}
            turn = Turn(item_id=item_id, user=ask, reference=o["needle"].strip(), question=o["question"],
                        metadata=meta)
            out.append(Conversation(conv_id=item_id, context=context, context_id=item_id, turns=[turn],
                                    preamble=list(preamble)))
        self._check_window(ctx, tokens, out[0], field, length)
        return out

    @staticmethod
    def _check_window(ctx: TaskContext, tokens: Tokens, conv: Conversation, field: str, length: int) -> None:
        """A length whose prompt and answer do not fit the model's window is refused before any
        sample is asked (the haystack is never cut)."""
        window = tokens.backend.context_window
        if not window:
            return
        generate = int((ctx.spec.get("generation") or {}).get("max_new_tokens") or 0)
        messages = [Message(m.role, m.content.replace(CONTEXT_SLOT, conv.context)) for m in conv.preamble]
        prompt = tokens.prompt(messages + [Message("user", conv.turns[0].user)])
        if prompt + generate > window:
            raise UserError(f"at {tokens_label(length)} the prompt takes {prompt:,} tokens and the answer up to "
                            f"{generate}, past the model's window of {window:,} tokens", field=field,
                            hint="Give shorter --context-lengths, or a model (or n_ctx) with a larger window.")
