"""Context policy: make a conversation fit the model, cutting only the long context.

The budget is measured with the model's own tokenizer on the chat-templated prompt, so what
is computed is what is sent. Instructions and questions are never cut; room is left for
every answer of the conversation. A context made of elements (documents, speaker turns: a
task type hands their spans as `Conversation.context_elements`) is cut at element
boundaries, whole elements removed, never half a turn. What was done is recorded per sample.

How a cut is made (`CutStyle`, the spec's `context:` section): in the context's middle with a
visible marker (lceval's default), or, as the authors of LongBench and InfiniteBench cut, in
the middle of the prompt's text with no marker (`cut: prompt`, `marker: ""`), to their length
(`max_prompt_tokens`) even when the window holds more: the context then keeps `half - a`
tokens at its start and `half - b` at its end, `a` and `b` the prompt's tokens before and after
it, and `half` half the prompt's budget (LongBench's pred.py keeps `tokens[:half]` and
`tokens[-half:]` of the prompt; the authors cut at tokens, so elements are not kept whole).
"""

from __future__ import annotations

from dataclasses import dataclass

from lceval.errors import UserError
from lceval.interfaces import ModelBackend
from lceval.tokens import SAFETY_MARGIN
from lceval.types import CONTEXT_SLOT, ContextCut, Conversation, Message

POLICIES = ("error", "skip", "truncate-middle", "truncate-left", "truncate-right")
#: Marks the place where text was removed, so the model (and a reader) can tell.
CUT_MARK = "\n[...]\n"


@dataclass(frozen=True)
class CutStyle:
    """How a too-long context is cut (the spec's `context.cut`, `marker`, `max_prompt_tokens`)."""

    #: put where text was removed ("" for none, as LongBench's and InfiniteBench's authors)
    marker: str = CUT_MARK
    #: centre a truncate-middle cut on the prompt's text (the authors' rule), not the context
    prompt: bool = False
    #: the prompt's text holds at most this many tokens, even when the window holds more
    max_prompt_tokens: int | None = None


def fill_context(messages: list[Message], context: str) -> list[Message]:
    """Put `context` into the one message holding CONTEXT_SLOT (first occurrence only)."""
    out, done = [], False
    for m in messages:
        if not done and CONTEXT_SLOT in m.content:
            out.append(Message(m.role, m.content.replace(CONTEXT_SLOT, context, 1)))
            done = True
        else:
            out.append(m)
    return out


def context_end(messages: list[Message], context: str) -> list[int] | None:
    """Where `context` ends once `fill_context` put it in `messages` ([message index, character
    offset]), or None without a slot: what a backend that treats the context apart needs (a
    KV-cache press compresses the prompt up to there; `GenerationRequest.hints["context_end"]`)."""
    for i, m in enumerate(messages):
        if CONTEXT_SLOT in m.content:
            return [i, m.content.index(CONTEXT_SLOT) + len(context)]
    return None


def full_transcript(conv: Conversation, answers: list[str], upto: int | None = None) -> list[Message]:
    """The conversation's messages with `answers` as the assistant turns: every turn (to size
    the whole conversation), or only up to and including turn `upto` (to ask that turn)."""
    msgs = list(conv.preamble)
    turns = conv.turns if upto is None else conv.turns[: upto + 1]
    for i, turn in enumerate(turns):
        msgs.append(Message("user", turn.user))
        if i < len(answers):
            msgs.append(Message("assistant", turn.assistant_prefix + answers[i]))
        elif turn.assistant_prefix and i == len(turns) - 1:  # the asked turn: the answer's start, continued
            msgs.append(Message("assistant", turn.assistant_prefix))
    return msgs


def prefix_in_user(messages: list[Message]) -> list[Message]:
    """For a backend that cannot continue an assistant message: a last assistant message (an
    answer's start) put at the end of the user message before it, as RULER does for API models."""
    if len(messages) < 2 or messages[-1].role != "assistant" or messages[-2].role != "user":
        return messages
    return [*messages[:-2], Message("user", messages[-2].content + messages[-1].content)]


def fit(conv: Conversation, model: ModelBackend, policy: str, max_new_tokens: int,
        answer_reserve: int, context_ids: list[int] | None = None,
        max_tokens: int | None = None, style: CutStyle = CutStyle(),
        elements: "Elements | None" = None) -> tuple[str | None, ContextCut]:
    """Return the context to send (None = skip the conversation) and what was done.
    `context_ids` may pass the context's tokens when several conversations share it.
    `max_tokens` (the spec's `context.max_tokens`, one budget of `--context-lengths`) cuts the
    context to that many tokens even when the window holds more: the user asked for that
    cut, so it is made whatever the policy (from the middle; the left with truncate-left, the
    right with truncate-right)
    and recorded as such; a window smaller than the budget is still the policy's business.
    `elements` (the context's elements with their tokens, `element_tokens`) cuts at their
    boundaries."""
    if policy not in POLICIES:
        raise UserError(f"unknown context policy '{policy}' (known: {', '.join(POLICIES)})",
                        field="context.policy")
    window = model.context_window
    if (window or max_tokens or style.max_prompt_tokens) and context_ids is None:
        context_ids = model.tokenize(conv.context)
    if max_tokens is None and style.max_prompt_tokens is not None and context_ids is None:
        raise UserError(f"context.max_prompt_tokens ({style.max_prompt_tokens}) needs the model's tokenizer, and "
                        f"{type(model).__name__} lends none", field="context.max_prompt_tokens",
                        hint="Cut prompts with a local model, or an API model given tokenizer=...")
    if max_tokens is not None and context_ids is None:
        raise UserError(f"context.max_tokens ({max_tokens}) needs the model's tokenizer, and "
                        f"{type(model).__name__} lends none", field="context.max_tokens",
                        hint="Cut contexts with a local model, or an API model given tokenizer=... "
                        "(a replayed answer cannot be cut).")
    if context_ids is None:
        return conv.context, ContextCut(policy=policy, original_tokens=None, kept_tokens=None)

    n = len(conv.turns)
    if conv.history == "gold":
        earlier = [t.reference for t in conv.turns[:-1]]
        reserve = max_new_tokens
    else:
        earlier = [""] * (n - 1)
        reserve = answer_reserve * (n - 1) + max_new_tokens
    original = len(context_ids)
    overhead = 0
    budget = original if window is None else window
    if window:
        skeleton = fill_context(full_transcript(conv, earlier), "")
        overhead = _count(model, skeleton)
        budget = window - overhead - reserve - SAFETY_MARGIN
    around = _around(conv, earlier, model) if (style.prompt or style.max_prompt_tokens) else (0, 0)
    # the authors' length, even under a larger window; cut in the prompt's middle it keeps two
    # halves of it (LongBench: an odd length loses a token)
    authors = style.max_prompt_tokens
    if authors is not None and style.prompt:
        authors = 2 * (authors // 2)
    if authors is not None and authors - sum(around) < budget:
        budget = authors - sum(around)
        if original > budget and policy in ("error", "skip"):
            policy = "truncate-middle"  # the authors' cut, asked for by the spec: made under every policy
    if max_tokens is not None and max_tokens < budget:
        if original <= max_tokens:
            return conv.context, ContextCut(policy, original, original, "none")
        # the requested cut, not the window's: made under every policy
        policy = policy if policy in ("truncate-left", "truncate-right") else "truncate-middle"
        budget = max_tokens
        if window is None:
            return _truncated(model, context_ids, budget, policy, conv.context, elements, original, style)
    if original <= budget:
        return conv.context, ContextCut(policy, original, original, "none")
    if policy == "error":
        raise UserError(
            f"conversation '{conv.conv_id}' needs {original + overhead + reserve} tokens "
            f"(context {original}, instructions and questions {overhead}, answers {reserve}) "
            f"but the model's window is {window}",
            field="context.policy",
            hint="Use --context-policy truncate-middle|truncate-left|truncate-right|skip, or a larger n_ctx.",
        )
    if policy == "skip" or budget <= 0:
        return None, ContextCut(policy, original, 0, "skipped")

    keep = budget
    for _ in range(6):  # re-tokenizing joined text can differ by a few tokens: shrink until it fits
        text, cut = _truncated(model, context_ids, keep, policy, conv.context, elements, original, style,
                               _head(keep, around, policy, style))
        if window is None:
            return text, cut
        used = _count(model, fill_context(full_transcript(conv, earlier), text))
        excess = used + reserve - window
        if excess <= 0:
            # kept = tokens of the original context still there (the cut mark not counted),
            # so kept < original always holds for a truncated context
            return text, cut
        keep -= excess + SAFETY_MARGIN
        if keep <= 0:
            break
    return None, ContextCut(policy, original, 0, "skipped")


def _around(conv: Conversation, earlier: list[str], model: ModelBackend) -> tuple[int, int]:
    """Tokens of the prompt's text before and after the context, in the message that holds it
    (what LongBench's pred.py tokenizes and cuts: the prompt before the chat template)."""
    for message in full_transcript(conv, earlier):
        if CONTEXT_SLOT in message.content:
            before, _, after = message.content.partition(CONTEXT_SLOT)
            return len(model.tokenize(before) or []), len(model.tokenize(after) or [])
    return 0, 0


def _head(keep: int, around: tuple[int, int], policy: str, style: CutStyle) -> int | None:
    """Context tokens kept at its start: with `style.prompt`, the prompt's first half less
    what precedes the context (LongBench's `tokens[:half]`); None: half of `keep` (the
    context's middle), also when the prompt's middle would fall outside the context."""
    if not style.prompt or policy != "truncate-middle":
        return None
    before, after = around
    half = (before + keep + after) // 2
    head = half - before
    if head < 0 or keep - head < 0 or (before + keep + after) - half - after < 0:
        return None  # a cut that would reach the instructions: the context's middle instead
    return head


def share_cuts(fitted: list[tuple[Conversation, str | None, ContextCut]], model: ModelBackend,
               context_ids: dict[str, list[int] | None],
               style: CutStyle = CutStyle(),
               elements: "dict[str, Elements | None] | None" = None) -> list[tuple[str | None, ContextCut]]:
    """Give every truncated conversation of one context the same cut: the smallest any of
    them needed. Each conversation's own budget differs by its question's length, so each
    would otherwise get a slightly different transcript, and a backend's KV cache could reuse
    only the part before the first difference (half the transcript, with truncate-middle).
    With one cut, the questions of a meeting share the whole truncated transcript as their
    prefix, and see the same text. Conversations that fit uncut are left as they are."""
    smallest: dict[str, ContextCut] = {}
    for conv, _, cut in fitted:
        if cut.action == "truncated" and cut.kept_tokens is not None:
            if conv.context_id not in smallest or cut.kept_tokens < (smallest[conv.context_id].kept_tokens or 0):
                smallest[conv.context_id] = cut
    out: list[tuple[str | None, ContextCut]] = []
    for conv, text, cut in fitted:
        least = smallest.get(conv.context_id)
        ids = context_ids.get(conv.context_id)
        parts = (elements or {}).get(conv.context_id)
        # an element cut chosen for a larger budget may keep other elements than one for
        # `keep`: every conversation of the context is cut again, so all get the same text
        if cut.action != "truncated" or least is None or ids is None or (least == cut and parts is None):
            out.append((text, cut))
            continue
        out.append(_truncated(model, ids, least.kept_tokens or 0, cut.policy, conv.context, parts,
                              cut.original_tokens, style, least.head_tokens))
    return out


def fit_all(conversations: list[Conversation], model: ModelBackend, policy: str, max_new_tokens: int,
            answer_reserve: int, max_tokens: int | None = None, style: CutStyle = CutStyle(),
            count: bool = False) -> list[tuple[Conversation, str | None, ContextCut]]:
    """`fit` for every conversation, each context tokenized once, with `share_cuts` applied:
    what every conversation's context will be when it is asked (a run and `--dry-run` both
    fit through here). `count`: measure each context even when nothing asks for a cut (a spec
    that bins its samples by their counted length: `report.length_bins.field: tokens`)."""
    tokens: dict[str, list[int] | None] = {}  # a meeting's questions share one tokenization
    parts: dict[str, Elements | None] = {}
    fitted = []
    for conv in conversations:
        if (count or model.context_window or max_tokens or style.max_prompt_tokens) and conv.context_id not in tokens:
            tokens[conv.context_id] = model.tokenize(conv.context)
            parts[conv.context_id] = element_tokens(model, conv) if tokens[conv.context_id] is not None else None
        text, cut = fit(conv, model, policy, max_new_tokens, answer_reserve, context_ids=tokens.get(conv.context_id),
                        max_tokens=max_tokens, style=style, elements=parts.get(conv.context_id))
        fitted.append((conv, text, cut))
    shared = share_cuts(fitted, model, tokens, style, parts)
    return [(conv, text, cut) for (conv, _, _), (text, cut) in zip(fitted, shared)]


def removed_span(policy: str, original: int, keep: int, head: int | None = None) -> tuple[int, int]:
    """The tokens [start, end) of an `original`-token context that a truncation keeping
    `keep` removes (`head` of them at its start; None: half): the reports show readers where
    a transcript was cut."""
    if policy == "truncate-left":
        return 0, original - keep
    if policy == "truncate-right":
        return keep, original
    head = keep // 2 if head is None else head
    return head, original - (keep - head)


#: [start, end) characters of each element of a context and its tokens
Elements = list[tuple[int, int, int]]


def element_tokens(model: ModelBackend, conv: Conversation) -> Elements | None:
    """The context's elements (`Conversation.context_elements`) with their tokens, each
    tokenized on its own (their sum is within a few tokens of the whole context's: the fit
    loop measures the real prompt and shrinks until it fits); None: a plain-text context."""
    spans = conv.context_elements
    if not spans:
        return None
    out: Elements = []
    for start, end in spans:
        ids = model.tokenize(conv.context[start:end])
        if ids is None:
            return None
        out.append((int(start), int(end), len(ids)))
    return out


def _element_cut(context: str, elements: Elements, keep: int, policy: str,
                  marker: str = CUT_MARK) -> tuple[str, int, int] | None:
    """The context cut at element boundaries to at most `keep` tokens: whole elements from
    the start and the end (truncate-middle: up to half the budget from the start, the rest
    from the end; truncate-left: from the end only; truncate-right: from the start only) and
    the cut mark between. Returns (text,
    tokens kept, elements kept), or None when the elements are too long for the budget to
    keep half of it in whole elements (the caller then cuts at tokens)."""
    n = len(elements)
    head = 0
    used = 0
    if policy != "truncate-left":
        share = keep if policy == "truncate-right" else keep // 2
        while head < n and used + elements[head][2] <= share:
            used += elements[head][2]
            head += 1
    tail = n
    while policy != "truncate-right" and tail > head and used + elements[tail - 1][2] <= keep:
        used += elements[tail - 1][2]
        tail -= 1
    if used * 2 < keep or (head == 0 and tail == n):
        return None
    if tail == head:  # everything fits: nothing to remove
        return context, used, n
    if head == 0:
        return marker.lstrip("\n") + context[elements[tail][0]:], used, n - tail
    if tail == n:  # truncate-right: the start kept, the end removed
        return context[:elements[head - 1][1]] + marker.rstrip("\n"), used, head
    tail_text = context[elements[tail][0]:] if tail < n else ""
    return context[:elements[head - 1][1]] + marker + tail_text, used, head + (n - tail)


def _truncated(model: ModelBackend, ids: list[int], keep: int, policy: str, context: str,
               elements: Elements | None, original: int | None, style: CutStyle = CutStyle(),
               head: int | None = None) -> tuple[str, ContextCut]:
    """The context cut to `keep` tokens and its record: at element boundaries when it has
    elements that allow it and the cut is lceval's own (the authors' cut in the prompt's
    middle, `style.prompt`, is made at tokens as theirs), else at token positions."""
    if elements and not style.prompt and head is None:
        done = _element_cut(context, elements, keep, policy, style.marker)
        if done is not None:
            text, kept, count = done
            return text, ContextCut(policy, original, min(kept, keep), "truncated", elements_kept=count,
                                    elements_total=len(elements))
    return (_cut(model, ids, keep, policy, style.marker, head),
            ContextCut(policy, original, keep, "truncated", head))


def _cut(model: ModelBackend, ids: list[int], keep: int, policy: str, marker: str = CUT_MARK,
         head: int | None = None) -> str:
    start, end = removed_span(policy, len(ids), keep, head)
    if policy == "truncate-left":
        return marker.lstrip("\n") + model.detokenize(ids[end:])
    if policy == "truncate-right":
        return model.detokenize(ids[:start]) + marker.rstrip("\n")
    return model.detokenize(ids[:start]) + marker + model.detokenize(ids[end:])


def _count(model: ModelBackend, messages: list[Message]) -> int:
    n = model.count_tokens(messages)
    if n is None:
        raise UserError(f"model {type(model).__name__} reports a context window but cannot count tokens")
    return n
