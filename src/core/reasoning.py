"""A reasoning model's thinking kept apart from its answer (public API: the engine and every
backend use it; a third-party backend may too).

Models that think before they answer write the thinking in the same text as the answer,
between markers their chat template knows: `<think>...</think>` (Qwen3, DeepSeek-R1 and its
distillations, QwQ, GLM-4.x), gpt-oss's harmony channels (`<|channel|>analysis<|message|>...<|end|>`
then `<|channel|>final<|message|>` the answer). Scoring that text as the answer scores the
deliberation, and an answer budget spent inside the thinking leaves a truncated monologue
that looks like a wrong answer. `split_reasoning` cuts the text at the markers:

- the thinking closed: the answer is what follows it, the reasoning what is inside;
- the thinking opened and never closed: there is no answer (`closed=False`), which the engine
  records as `finish_reason="unclosed_thinking"` and counts as no answer, never as a score;
- no marker opened: the text is the answer (a model that does not think is unchanged).

Markers are `ThinkingMarkers(open, close, answer="")`; `answer` is a marker before the answer
that some formats write after the close (gpt-oss's final channel). `KNOWN_MARKERS` are tried
in order unless model options name the model's own: `think_markers=OPEN|CLOSE`, or, for
markers that hold a `|` themselves (gpt-oss's harmony channels), `think_open=`, `think_close=`
and `think_answer=` one by one.

A thinking budget is enforced where the backend cannot (a local model): the engine asks for at
most `budget` tokens of thinking that stop at the closing marker, then, closed or not, adds
the closing marker (after `EARLY_STOP`, Qwen3's recommended words, when the budget ran out) as
the start of the assistant's message and asks for the answer alone, as the Qwen3 model card
recommends for budgets ("Thinking budget", Qwen Team, 2025).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lceval.errors import UserError

__all__ = ["DEFAULT_BUDGETS", "EARLY_STOP", "FALLBACK_BUDGET", "KNOWN_MARKERS", "MODEL_OPTIONS", "ReasoningOptions", "ReasoningSplit",
           "ThinkingMarkers", "default_budget", "parse_markers", "reasoning_options", "split_reasoning"]


@dataclass(frozen=True)
class ThinkingMarkers:
    open: str
    close: str
    #: written after `close`, before the answer (gpt-oss's final channel); "" for none
    answer: str = ""


KNOWN_MARKERS: tuple[ThinkingMarkers, ...] = (
    ThinkingMarkers("<think>", "</think>"),
    ThinkingMarkers("<|channel|>analysis<|message|>", "<|end|>", "<|start|>assistant<|channel|>final<|message|>"),
    ThinkingMarkers("<thinking>", "</thinking>"),
)

#: what Qwen3's model card adds when a thinking budget runs out, before closing the thinking
EARLY_STOP = "\n\nConsidering the limited time by the user, I have to give the solution based on the thinking directly now.\n"

#: Thinking budgets (tokens) by model family when a run sets none, from each family's own
#: guidance: Qwen3's card suggests 32,768 output tokens for most queries; DeepSeek-R1's card
#: a maximum generation length of 32,768; gpt-oss is steered by its reasoning effort instead
#: (its card's default "medium"), so it gets no budget. Any other thinking model: 8,192.
DEFAULT_BUDGETS: tuple[tuple[str, int | None], ...] = (
    ("qwen3", 32768), ("qwq", 32768), ("deepseek-r1", 32768), ("r1-distill", 32768), ("gpt-oss", None),
)
FALLBACK_BUDGET = 8192


def default_budget(model_name: str) -> int | None:
    """The thinking budget a run uses for `model_name` when it sets none (see DEFAULT_BUDGETS)."""
    name = model_name.lower()
    for family, budget in DEFAULT_BUDGETS:
        if family in name:
            return budget
    return FALLBACK_BUDGET


@dataclass(frozen=True)
class ReasoningSplit:
    answer: str
    reasoning: str | None  # None: the text opened no thinking
    closed: bool  # False: the thinking opened and never closed (no answer)
    markers: ThinkingMarkers | None = None


def parse_markers(text: str, field: str = "think_markers", model: str = "") -> ThinkingMarkers:
    """`OPEN|CLOSE` or `OPEN|CLOSE|ANSWER` (a model option) -> markers."""
    parts = str(text).split("|")
    of = f" of model '{model}'" if model else ""
    if len(parts) > 3:
        raise UserError(f"think_markers{of} takes OPEN|CLOSE, and '{text}' holds more than two '|': markers that "
                        "contain '|' themselves cannot be told apart there", field=field,
                        hint="Name each marker alone: think_open=OPEN,think_close=CLOSE (and think_answer=ANSWER).")
    if len(parts) not in (2, 3) or not parts[0] or not parts[1]:
        raise UserError(f"think_markers{of} takes OPEN|CLOSE (e.g. <think>|</think>), got '{text}'", field=field)
    return ThinkingMarkers(parts[0], parts[1], parts[2] if len(parts) == 3 else "")


def _opened(text: str, markers: ThinkingMarkers) -> int | None:
    """Where the thinking starts: after `open` when the text begins with it (whitespace and
    a template's leading special tokens aside), or at 0 when the text has the closing marker
    but not the opening one (a template that writes `<think>` itself in the generation prompt,
    as DeepSeek-R1's distillations do, so the model's text starts inside the thinking)."""
    stripped = text.lstrip()
    if stripped.startswith(markers.open):
        return len(text) - len(stripped) + len(markers.open)
    head = re.match(r"^(?:<\|[^|>]{1,40}\|>)*", stripped)  # e.g. <|start|>assistant before a channel
    if head and head.end() and stripped[head.end():].startswith(markers.open):
        return len(text) - len(stripped) + head.end() + len(markers.open)
    if markers.close in text and markers.open not in text:
        return 0
    return None


def split_reasoning(text: str, markers: ThinkingMarkers | list[ThinkingMarkers] | tuple[ThinkingMarkers, ...]
                    | None = None) -> ReasoningSplit:
    """`text` cut into answer and reasoning at the first markers (of `markers`, default
    `KNOWN_MARKERS`) whose thinking the text opens."""
    candidates = (markers,) if isinstance(markers, ThinkingMarkers) else tuple(markers or KNOWN_MARKERS)
    for m in candidates:
        start = _opened(text, m)
        if start is None:
            continue
        end = text.find(m.close, start)
        if end < 0:
            return ReasoningSplit(answer="", reasoning=text[start:].strip(), closed=False, markers=m)
        answer = text[end + len(m.close):]
        if m.answer and m.answer in answer:
            answer = answer[answer.index(m.answer) + len(m.answer):]
        for tail in ("<|return|>", "<|end|>"):
            answer = answer.removesuffix(tail) if m.answer else answer
        return ReasoningSplit(answer=answer.strip(), reasoning=text[start:end].strip(), closed=True, markers=m)
    return ReasoningSplit(answer=text, reasoning=None, closed=True)


#: Model options every backend takes (`--model SCHEME:MODEL,think_markers=...`): the engine
#: reads them before the backend's own options are checked, so a third-party backend needs
#: nothing to have its model's thinking split.
MODEL_OPTIONS = {
    "split_reasoning": {"type": "boolean", "default": True,
                        "description": "Keep a thinking model's reasoning apart from its answer (off: score the whole "
                                       "text, as a model that does not think)."},
    "think_markers": {"type": "string",
                      "description": "The model's thinking markers, OPEN|CLOSE (or OPEN|CLOSE|ANSWER), instead of the "
                                     "known ones (<think>|</think>, gpt-oss's analysis channel, <thinking>)."},
    "think_open": {"type": "string",
                   "description": "The marker that opens the model's thinking, alone (for markers that contain '|', "
                                  "e.g. <|channel|>analysis<|message|>); with think_close."},
    "think_close": {"type": "string", "description": "The marker that closes the model's thinking, alone; with think_open."},
    "think_answer": {"type": "string",
                     "description": "A marker the model writes after the closing one, before its answer (gpt-oss's "
                                    "final channel); with think_open and think_close."},
}


@dataclass(frozen=True)
class ReasoningOptions:
    """How the engine reads a model's thinking: split or not, at which markers."""

    split: bool = True
    markers: tuple[ThinkingMarkers, ...] = KNOWN_MARKERS

    @property
    def custom(self) -> bool:
        return self.markers != KNOWN_MARKERS


def reasoning_options(options: dict[str, str], field: str = "--model", model: str = "") -> ReasoningOptions:
    """The engine's model options (MODEL_OPTIONS) out of a model string's `key=value` options
    (`model`: the model they belong to, for messages)."""
    split = True
    if "split_reasoning" in options:
        word = str(options["split_reasoning"]).strip().lower()
        if word not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
            raise UserError(f"split_reasoning takes true or false, got '{options['split_reasoning']}'", field=field)
        split = word in ("1", "true", "yes", "on")
    markers = KNOWN_MARKERS
    alone = [k for k in ("think_open", "think_close", "think_answer") if options.get(k)]
    if options.get("think_markers") and alone:
        raise UserError(f"think_markers and {alone[0]} both name the markers", field=f"{field} think_markers",
                        hint="Give either think_markers=OPEN|CLOSE or think_open= and think_close=.")
    if options.get("think_markers"):
        markers = (parse_markers(options["think_markers"], field=f"{field} think_markers", model=model),)
    elif alone:
        if not options.get("think_open") or not options.get("think_close"):
            missing = "think_close" if options.get("think_open") else "think_open"
            raise UserError(f"{alone[0]} is given without {missing}", field=f"{field} {missing}",
                            hint="Name both: think_open=OPEN,think_close=CLOSE.")
        markers = (ThinkingMarkers(options["think_open"], options["think_close"], options.get("think_answer") or ""),)
    return ReasoningOptions(split=split, markers=markers)
