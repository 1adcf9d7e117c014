"""Orders requests by what the backend's cache can keep, so a long context is prefilled once,
not once per question, and streams them: a finished request frees its slot at once.

Conversations that share a context (a meeting's transcript) form a *group*. How groups and
their requests go out follows the backend's declared `PrefixCache` and `max_in_flight`:

- ``last-prompt`` (llama.cpp, the transformers loop): one group at a time, its requests in
  order, so each one finds the transcript the previous one left in the KV cache.
- ``shared`` (vLLM, SGLang, their servers, API providers): as many groups in flight as the
  cache holds. A group is *primed* by one request before its other requests fan out, so no
  two concurrent requests prefill the same transcript (a cache that shares a prefix while it
  is being prefilled, as vLLM V1's does, needs no primer: they go out together); a new group
  is admitted only when the admitted ones have nothing left to send and its transcript fits
  beside theirs (a group whose questions are pending is never pushed out of the cache); its
  requests then take the free slots, the group with the fewest in flight first.
- ``none``: nothing is kept; every slot is filled, in order.

A multi-turn conversation never has more than one request in flight: turn k+1 is built
from the answer to turn k. Requests already in the request cache are answered on the spot
and take no slot. The plan is a pure function of what has finished (`Planner`); the loop
in `run` feeds it. Samples come out in the conversations' own order whatever the order in
which answers arrived.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from lceval.engine._dispatch import Dispatcher
from lceval.interfaces import PrefixCache
from lceval.types import ContextCut, Conversation, Generation, GenerationRequest

if TYPE_CHECKING:
    from lceval.engine._cached_model import CachedModel

#: Characters per token when the backend has no tokenizer: only sizes the cache's occupancy
#: (a transcript's tokens come from the context policy whenever it could count them).
CHARS_PER_TOKEN = 4.0


@dataclass
class ConversationState:
    conv: Conversation
    context: str | None  # after the context policy; None = skipped
    cut: ContextCut
    generations: list[Any] = field(default_factory=list)
    prompt_hashes: list[str] = field(default_factory=list)
    done: bool = False
    in_flight: bool = False

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


@dataclass
class Group:
    """The conversations sharing one context: what a prefix cache keeps once for all."""

    key: str
    states: list[ConversationState]
    tokens: int  # the context's size in the cache (counted by the context policy, else estimated)
    admitted: bool = False
    primed: bool = False
    in_flight: int = 0
    #: states before this index are done (a conversation never becomes undone): the scans
    #: below start here, so a run's bookkeeping stays linear in its conversations
    first_open: int = 0

    def _open_states(self) -> list[ConversationState]:
        while self.first_open < len(self.states) and self.states[self.first_open].done:
            self.first_open += 1
        return self.states[self.first_open:]

    def next_ready(self) -> ConversationState | None:
        """The first conversation with a turn to ask and nothing in flight."""
        for st in self._open_states():
            if not st.done and not st.in_flight:
                return st
        return None

    @property
    def finished(self) -> bool:
        return self.in_flight == 0 and all(st.done for st in self._open_states())


def context_tokens(state: ConversationState) -> int:
    """Tokens of the state's context: the context policy's count when it had a tokenizer."""
    if state.context is None:
        return 0
    if state.cut.kept_tokens is not None:
        return state.cut.kept_tokens
    return math.ceil(len(state.context) / CHARS_PER_TOKEN)


def make_groups(states: list[ConversationState]) -> list[Group]:
    """Groups by context, in order of first appearance (a task's own order)."""
    groups: dict[str, Group] = {}
    for st in states:
        if not st.conv.turns:
            st.done = True
        group = groups.get(st.conv.context_id)
        if group is None:
            groups[st.conv.context_id] = Group(st.conv.context_id, [st], context_tokens(st))
        else:
            group.states.append(st)
            group.tokens = max(group.tokens, context_tokens(st))
    return list(groups.values())


class Planner:
    """Which conversation asks next. Pure bookkeeping (no model, no threads): `pick` proposes,
    `fits` checks the cache's capacity, `start` and `finish` record what went out and came
    back. `requests` is how many requests may be in flight at once (slots x batch size)."""

    def __init__(self, groups: list[Group], cache: PrefixCache, requests: int,
                 per_prefix: int | None = None) -> None:
        self.kind = cache.kind
        self.capacity = cache.capacity_tokens if cache.kind == "shared" else None
        #: a cache that shares a prefix while it is prefilled needs no primer
        self.prime = not (cache.kind == "shared" and cache.shares_in_flight)
        self.requests = max(1, requests)
        self.per_prefix = max(1, min(per_prefix or self.requests, self.requests))
        self.open = [g for g in groups if not g.finished]
        self.in_flight = 0
        #: tokens the cache must hold now: admitted contexts + own parts of requests in flight
        self.held = 0
        self.peak_held = 0
        self.peak_groups = 0

    def pick(self) -> tuple[Group, ConversationState] | None:
        self.settle()
        if self.in_flight >= self.requests:
            return None
        if self.kind == "none":
            for g in self.open:
                st = g.next_ready() if g.in_flight < self.per_prefix else None
                if st is not None:
                    return g, st
            return None
        if self.kind == "last-prompt":
            return self._from_group(self.open[0]) if self.open else None
        best: tuple[Group, ConversationState] | None = None
        for g in self.open:
            if not g.admitted:
                continue
            if not g.primed:
                # its primer came from the request cache or failed: the next one primes it
                picked = self._from_group(g)
                if picked is not None:
                    return picked
                continue
            st = g.next_ready() if g.in_flight < self.per_prefix else None
            if st is not None and (best is None or g.in_flight < best[0].in_flight):
                best = (g, st)
        if best is not None:
            return best
        newcomer = next((g for g in self.open if not g.admitted), None)
        return self._from_group(newcomer) if newcomer is not None else None

    def _from_group(self, g: Group) -> tuple[Group, ConversationState] | None:
        if not g.primed and g.in_flight > 0:
            return None  # the primer is out: the others wait for the prefix it leaves
        if g.in_flight >= self.per_prefix:
            return None
        st = g.next_ready()
        return (g, st) if st is not None else None

    def fits(self, g: Group, cost: int) -> bool:
        """Whether a request of `g` whose own part (and answer) is `cost` tokens fits in the
        cache beside everything held. Always true when nothing is in flight (a context larger
        than the cache still has to be asked)."""
        if self.capacity is None or self.in_flight == 0:
            return True
        return self.held + cost + (0 if g.admitted else g.tokens) <= self.capacity

    def start(self, g: Group, st: ConversationState, cost: int) -> None:
        if not g.admitted:
            g.admitted = True
            g.primed = not self.prime
            self.held += g.tokens
        g.in_flight += 1
        st.in_flight = True
        self.in_flight += 1
        self.held += cost
        self.peak_held = max(self.peak_held, self.held)
        self.peak_groups = max(self.peak_groups, sum(1 for x in self.open if x.admitted and not x.finished))

    def finish(self, g: Group, st: ConversationState, cost: int, answered: bool) -> None:
        """`answered`: the backend really answered (so the context is now in its cache)."""
        g.in_flight -= 1
        st.in_flight = False
        self.in_flight -= 1
        self.held -= cost
        if answered:
            g.primed = True

    def settle(self) -> None:
        """Drop finished groups; their contexts may leave the cache."""
        still = []
        for g in self.open:
            if g.finished:
                if g.admitted:
                    self.held -= g.tokens
            else:
                still.append(g)
        self.open = still


def request_cost(request: GenerationRequest, group: Group, state: ConversationState) -> int:
    """Tokens one request adds to the cache beside its group's context: its own part of the
    prompt (instructions, question, history) and its answer."""
    chars = sum(len(m.content) for m in request.messages) - len(state.context or "")
    per_char = (group.tokens / len(state.context)) if state.context and group.tokens else 1 / CHARS_PER_TOKEN
    return max(0, math.ceil(chars * per_char)) + request.params.max_new_tokens


@dataclass
class _Out:
    group: Group
    state: ConversationState
    request: GenerationRequest
    cost: int


def run(states: list[ConversationState], model: "CachedModel",
        build: Callable[[ConversationState], GenerationRequest | None],
        on_answer: Callable[[ConversationState, GenerationRequest, Generation], None],
        on_skip: Callable[[ConversationState], None] = lambda st: None,
        on_start: Callable[[ConversationState, GenerationRequest], None] = lambda st, request: None) -> Planner:
    """Ask every turn of `states`. `build(state)` makes the request of the state's next turn
    (None: leave the rest unasked); `on_answer` records an answer (called in this thread, in
    the order answers arrive; each is in the request cache already); `on_start` hears of each
    request sent to the backend. Returns the planner (its peaks are what the tests and
    benchmarks look at)."""
    slots = model.slots
    batch = model.call_size
    planner = Planner(make_groups(states), model.prefix_cache, slots * batch, model.per_prefix)
    pool: Dispatcher[list[_Out]] = Dispatcher(model.call, slots)
    while True:
        chunk: list[_Out] = []
        while pool.free() > 0 and len(chunk) < batch:
            picked = planner.pick()
            if picked is None:
                break
            group, st = picked
            request = build(st)
            if request is None:
                st.finish_skipped()
                on_skip(st)
                continue
            request.hints.setdefault("prefix_group", group.key)
            cost = request_cost(request, group, st)
            if not planner.fits(group, cost):
                break  # asked again (and looked up) once something finished
            hit = model.lookup(request)
            if hit is not None:
                on_answer(st, request, hit)
                continue
            planner.start(group, st, cost)
            on_start(st, request)
            chunk.append(_Out(group, st, request, cost))
        if chunk:
            pool.submit(chunk, [out.request for out in chunk])
            continue
        if pool.in_flight == 0:
            planner.settle()
            return planner
        outs, gens = pool.next()
        for out, gen in zip(outs, gens):
            planner.finish(out.group, out.state, out.cost, answered=gen.finish_reason != "error")
            on_answer(out.state, out.request, gen)
