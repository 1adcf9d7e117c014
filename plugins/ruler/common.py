"""What every ruler task type shares: the length a sample is built to, the options that set
it, the random stream of each sample, and the conversation a sample becomes.

Lengths follow RULER's definition (NVIDIA/RULER scripts/data/synthetic/niah.py,
`--max_seq_length`: "max sequence length including all input tokens and generated
tokens"): a sample of length L is a prompt of L - tokens_to_generate tokens (the task's
`generation.max_new_tokens`, RULER's `tokens_to_generate`), counted here with the evaluated
model's tokenizer *and chat template*, so that the prompt and its answer fill L tokens of
the model's window. RULER counts the bare text (its templates of model tokens are text too);
a chat model here sees exactly what was counted.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from lceval.engine import tokens_label
from lceval.errors import UserError
from lceval.interfaces import TaskContext
from lceval.tokens import SAFETY_MARGIN
from lceval.types import CONTEXT_SLOT, Conversation, Message, Turn

from lceval_plugins.haystack.tokens import Tokens

__all__ = ["COMMON_OPTIONS", "DEPTHS", "NOISE", "Budget", "SampleOut", "budget_of", "conversation", "rng_for",
           "sample_plan", "split_prefix", "user_messages", "with_prefix"]

#: The share of the length a built sample may fall short of it.
TOLERANCE = 0.01
#: RULER's noise haystack (niah.py, variable_tracking.py)
NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
#: RULER's 40 needle depths, np.round(np.linspace(0, 100, num=40)).astype(int) (niah.py
#: `DEPTHS`); Python's round() rounds half to even like numpy's
DEPTHS = [round(k * 100 / 39) for k in range(40)]

COMMON_OPTIONS: dict[str, Any] = {
    "length": {"type": "integer", "minimum": 64, "default": 4096,
               "description": "Tokens per sample (prompt with chat template + tokens to generate) when the run "
                              "gives no --context-lengths; with it, each budget is one length."},
    "num_samples": {"type": "integer", "minimum": 1, "default": 100,
                    "description": "Samples per length (RULER's num_samples; --limit takes the first ones)."},
    "answer_prefix": {"enum": ["assistant", "user", "none"], "default": "assistant",
                      "description": "Where RULER's answer prefix goes (e.g. 'The special magic number for X mentioned "
                                     "in the provided text is'): `assistant`, as RULER puts it after the chat "
                                     "template's assistant header, for the model to continue (a backend that cannot "
                                     "continue an assistant message gets it at the end of the question, and the "
                                     "samples say so); `user`, at the end of the question; `none`, left out."},
}


@dataclass(frozen=True)
class Budget:
    """The length one variant builds to."""

    length: int  # L: prompt (chat template included) + tokens to generate
    label: str  # "8k"
    tokens_to_generate: int
    prompt_target: int  # the prompt's tokens: L - tokens_to_generate, kept inside the window
    window: int | None
    field: str  # the option or flag that set the length, for errors

    @property
    def tolerance(self) -> int:
        """How far below the length a sample may end (1%)."""
        return max(1, int(self.length * TOLERANCE))

    @property
    def close(self) -> int:
        """Fitting stops once a prompt is this close below its target (a quarter of the
        tolerance: each further round costs a count of the whole prompt)."""
        return max(1, self.tolerance // 4)

    def describe(self) -> str:
        flag = f"--context-lengths {self.label}" if self.field == "--context-lengths" else f"options.length={self.length}"
        return f"{flag} ({self.length:,} tokens)"


def budget_of(ctx: TaskContext, tokens: Tokens) -> Budget:
    """The length of this variant (`--context-lengths`, else `options.length`), refused when
    it is past the model's window."""
    field = "--context-lengths" if ctx.context_length else "options.length"
    length = int(ctx.context_length or ctx.options["length"])
    label = tokens_label(length)
    generate = int((ctx.spec.get("generation") or {}).get("max_new_tokens") or 0)
    window = tokens.backend.context_window
    if window and length > window:
        raise UserError(f"length {label} ({length:,} tokens) is past the model's window of {window:,} tokens",
                        field=field, hint=("Give --context-lengths up to the window" if ctx.context_length else
                                           f"Give --context-lengths up to {tokens_label(window)}, or "
                                           f"--set options.length=N") + ", or a model (or n_ctx) with a larger window.")
    target = length - generate
    if window:
        # the context policy keeps SAFETY_MARGIN tokens free beside the answer; twice that
        # absorbs how the prompt's count and the context's own count differ where they meet
        target = min(target, window - generate - 2 * SAFETY_MARGIN)
    if target <= 0:
        raise UserError(f"length {label} ({length:,} tokens) leaves no room for a prompt beside the "
                        f"{generate} tokens to generate", field=field)
    return Budget(length, label, generate, target, window, field)


def rng_for(seed: int, task_kind: str, index: int, purpose: str = "") -> random.Random:
    """A sample's own random stream: the same sample index draws the same needles at every
    length (only the haystack grows), and nothing depends on which samples were selected."""
    return random.Random(f"ruler/{task_kind}/{seed}/{index}/{purpose}")


def sample_plan(ctx: TaskContext, label: str, per_haystack: int) -> list[tuple[int, list[int]]]:
    """(haystack index, the sample indexes it serves) for the selected haystacks, with
    `--limit` (samples) and `--limit-per-context` (samples of one haystack) applied."""
    n = int(ctx.options["num_samples"])
    per = per_haystack if ctx.limit_per_context is None else min(per_haystack, ctx.limit_per_context)
    # every haystack id is offered to --contexts before --limit counts
    selected = [h for h in range((n + per_haystack - 1) // per_haystack) if ctx.select_context(haystack_id(label, h))]
    plan: list[tuple[int, list[int]]] = []
    left = ctx.limit if ctx.limit is not None else n
    for h in selected:
        indexes = list(range(h * per_haystack, min(n, (h + 1) * per_haystack)))[: min(per, left)]
        if not indexes:
            break
        plan.append((h, indexes))
        left -= len(indexes)
    return plan


def haystack_id(label: str, h: int) -> str:
    return f"{label}/h{h:04d}"


#: marks, in a sample's prompt text, where RULER's answer prefix begins when it is the start of
#: the assistant's answer (`answer_prefix: assistant`)
PREFIX_SPLIT = "\x1f"


def with_prefix(template: str, prefix: str, place: str) -> str:
    """RULER's template with its answer prefix where the option puts it."""
    if place == "none":
        return template
    return template + (PREFIX_SPLIT if place == "assistant" else "") + prefix


def split_prefix(user: str) -> tuple[str, str]:
    """(the question's text, the answer's start for the assistant to continue)."""
    head, _, prefix = user.partition(PREFIX_SPLIT)
    return head, prefix


def user_messages(user: str, context: str) -> list[Message]:
    """The messages a sample's prompt is: the question, and the answer's start as the
    assistant's message when RULER's prefix goes there (counted as the model will see it)."""
    head, prefix = split_prefix(user.replace(CONTEXT_SLOT, context, 1))
    return [Message("user", head)] + ([Message("assistant", prefix)] if prefix else [])


@dataclass
class SampleOut:
    """One sample of a haystack: its prompt (with the context slot), answers and facts."""

    index: int
    user: str
    question: str
    answers: list[str]
    prompt_tokens: int
    metadata: dict[str, Any]


def conversation(budget: Budget, h: int, context: str, sample: SampleOut, haystack: str) -> Conversation:
    item_id = f"{budget.label}/{sample.index:04d}"
    metadata = {"haystack_id": haystack_id(budget.label, h), "haystack": haystack, "references": sample.answers,
                "context_length": budget.length, "prompt_tokens_built": sample.prompt_tokens,
                "tokens_to_generate": budget.tokens_to_generate,
                "length_built": sample.prompt_tokens + budget.tokens_to_generate, **sample.metadata}
    user, prefix = split_prefix(sample.user)
    turn = Turn(item_id=item_id, user=user, reference=", ".join(sample.answers), question=sample.question,
                metadata=metadata, assistant_prefix=prefix)
    return Conversation(conv_id=item_id, context=context, context_id=haystack_id(budget.label, h), turns=[turn])


def check_splits(ctx: TaskContext) -> None:
    if ctx.splits:
        raise UserError(f"ruler tasks are generated and have no splits (got {', '.join(ctx.splits)})", field="--split")


def short_of(budget: Budget, what: str, option: str, value: Any) -> UserError:
    return UserError(f"at {budget.describe()} {what}", field=option,
                     hint=f"Lower {option} (now {value!r}) or give a longer length.")
