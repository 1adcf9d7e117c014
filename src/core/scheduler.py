"""Orders requests so a long context is prefilled once, not once per question.

Conversations that share a context (a meeting's transcript) run back to back, their
questions in waves: wave k holds turn k of every conversation of the group. Single-turn
tasks thus send all questions of a meeting consecutively (one shared prefix); multi-turn
conversations stay strictly in order, each turn after the answer it depends on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from .types import ContextCut, Conversation


@dataclass
class ConversationState:
    conv: Conversation
    context: str | None  # after the context policy; None = skipped
    cut: ContextCut
    generations: list[Any] = field(default_factory=list)
    prompt_hashes: list[str] = field(default_factory=list)
    done: bool = False

    @property
    def next_turn(self) -> int:
        return len(self.generations)

    def history_answers(self) -> list[str]:
        """Assistant turns so far: the model's own answers, or the references with history=gold."""
        if self.conv.history == "gold":
            return [t.reference for t in self.conv.turns[: self.next_turn]]
        return [g.text for g in self.generations]

    def record(self, generation: Any, prompt_hash: str) -> None:
        self.generations.append(generation)
        self.prompt_hashes.append(prompt_hash)
        failed = getattr(generation, "finish_reason", "") == "error"
        if self.next_turn >= len(self.conv.turns) or (failed and self.conv.history == "model"):
            # with the model's own history, later turns would build on an answer that does
            # not exist: they are left unasked (skipped) rather than asked on a broken history
            self.done = True

    def finish_skipped(self) -> None:
        """Leave the remaining turns unanswered (recorded as skipped by the caller)."""
        self.done = True


def group_by_context(states: list[ConversationState]) -> list[list[ConversationState]]:
    groups: dict[str, list[ConversationState]] = {}
    for st in states:
        groups.setdefault(st.conv.context_id, []).append(st)
    return list(groups.values())


def schedule(states: list[ConversationState]) -> Iterator[list[ConversationState]]:
    """Yield waves of conversations whose next turn can be asked now. The caller records
    each answer (or finishes the conversation) before asking for the next wave."""
    for st in states:
        if not st.conv.turns:
            st.done = True
    for group in group_by_context(states):
        while True:
            wave = [st for st in group if not st.done]
            if not wave:
                break
            yield wave
