"""The part of a context's requests that they all begin with, byte for byte (`SharedPrefix`):
the system message, the instructions, the context and whatever follows it that every question
of the context repeats (an instruction after the transcript), up to where the questions differ.

An API provider bills a prompt it has cached at a fraction of its input price (Anthropic reads a
marked prefix at 0.1x, OpenAI's and Gemini's automatic caches discount a prefix they saw
recently), so a context asked about ten times costs about one context, not ten, as long as
every request repeats the same bytes first and the provider is told, where it must be, where
they end. The engine knows which requests are about one context (the scheduler's groups) and
where the context sits in their messages (`CONTEXT_SLOT`); the backend knows its provider's
mechanism. So the engine computes the shared part once per context, from the first turn of
each of its conversations, and hands it to every request about that context; a backend with a
provider cache marks it (`ModelBackend.prompt_caching`), the others ignore it.

The part is the longest common prefix of the first turns of the context's conversations, up to
where their first question starts (also when one conversation asks all its questions in turn). This is where Anthropic's
docs put a cache breakpoint ("Prompt caching": at the end of the content every request
repeats): an instruction that follows the transcript (~40 tokens in ELITR-Bench's template)
is read from the cache with it, not billed in full with every question; a template that asks
its question first shares only what precedes it. A context asked once shares nothing with
anything (no part). `reuse_within_s` is the longest
the engine may leave a context's cache entry unused: the scheduler sends a context's questions
next to each other, each once the one before has primed the cache, so the gap between two
uses is one request's prefill and answer at a slow provider's pace; a batch API processes its
requests in any order within its window.
"""

from __future__ import annotations

from lceval.engine._context_policy import fill_context, full_transcript
from lceval.types import ContextCut, Conversation, GenerationParams, Message, SharedPrefix

#: a slow provider's pace, tokens per second, while it writes an answer and while it reads a
#: prompt (so a request's duration is not under-estimated: a cache entry must outlive it)
SLOW_OUTPUT_TOKENS_PER_S = 20.0
SLOW_PREFILL_TOKENS_PER_S = 2000.0
#: the window in which a provider's batch API processes a batch (OpenAI's and Anthropic's: 24 h)
BATCH_WINDOW_S = 24 * 3600.0

Position = tuple[int, int]  # (message index, characters of that message)


def _first_turn(conv: Conversation, context: str) -> list[Message]:
    """What the conversation's first request begins with: its first turn, the context filled in."""
    return fill_context(full_transcript(conv, [], upto=0), context)


def _question_start(conv: Conversation, messages: list[Message]) -> Position:
    """Where the first question starts in its turn's last user message (the bare question's last
    occurrence there; the message's end when the template rewrote it): the shared part stops
    there, so two questions that begin alike ("What ...") do not pull a breakpoint into a word,
    and an answer's start after the question (which a backend that cannot continue an assistant
    message moves into the question, `prefix_in_user`) is never part of it."""
    last = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    if last < 0:
        return 0, 0
    text, question = messages[last].content, conv.turns[0].question
    at = text.rfind(question) if question else -1
    return last, at if at >= 0 else len(text)


def _common(a: list[Message], b: list[Message]) -> Position:
    """The longest prefix the two message lists share, role and text."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x.role != y.role:
            return i, 0
        if x.content != y.content:
            return i, _common_chars(x.content, y.content)
    n = min(len(a), len(b))
    return n, 0


def _common_chars(a: str, b: str) -> int:
    """Length of the common prefix of two texts: bisection on slice comparisons, which run at C
    speed (a transcript is compared with each of its questions' prompts)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _normal(position: Position, messages: list[Message]) -> Position | None:
    """`position` as (message, characters) inside a message, or None when nothing is shared."""
    i, chars = position
    while chars == 0 and i > 0:
        i -= 1
        chars = len(messages[i].content)
    return (i, chars) if chars > 0 else None


def reuse_within(context_tokens: int, params: GenerationParams, batching: bool) -> float:
    """Seconds the engine may take between two requests about one context (see the module)."""
    if batching:
        return BATCH_WINDOW_S
    answer = params.max_new_tokens + params.thinking_allowance
    return context_tokens / SLOW_PREFILL_TOKENS_PER_S + answer / SLOW_OUTPUT_TOKENS_PER_S


def shared_prefixes(fitted: list[tuple[Conversation, str | None, ContextCut]], params: GenerationParams,
                    batching: bool, context_tokens: dict[str, int]) -> dict[str, SharedPrefix]:
    """Per context id, the part its requests share, for the contexts asked more than once
    (`fitted`: the conversations after the context policy, a skipped one's context None;
    `context_tokens`: each context's size as the scheduler counts it)."""
    firsts: dict[str, list[Message]] = {}
    ends: dict[str, Position] = {}
    requests: dict[str, int] = {}
    for conv, context, _cut in fitted:
        if context is None or not conv.turns:
            continue
        key = conv.context_id
        messages = _first_turn(conv, context)
        requests[key] = requests.get(key, 0) + len(conv.turns)
        if key not in firsts:
            firsts[key] = messages
            ends[key] = (len(messages), 0)
        else:
            ends[key] = min(ends[key], _common(firsts[key], messages))
        ends[key] = min(ends[key], _question_start(conv, messages))
    out: dict[str, SharedPrefix] = {}
    for key, messages in firsts.items():
        position = _normal(ends[key], messages) if requests[key] > 1 else None
        if position is not None:
            out[key] = SharedPrefix(group=key, message=position[0], chars=position[1], requests=requests[key],
                                    reuse_within_s=reuse_within(context_tokens.get(key, 0), params, batching))
    return out
