"""Needle in a haystack, RULER's `niah` task (NVIDIA/RULER scripts/data/synthetic/niah.py,
its template and answer prefix in scripts/data/synthetic/constants.py, the eight configs
niah_single_1..3, niah_multikey_1..3, niah_multivalue, niah_multiquery in
scripts/synthetic.yaml).

A needle is "One of the special magic {type_needle_v} for {key} is: {value}."; a haystack
holds `num_needle_k` keys with `num_needle_v` values each, and a question asks for all the
values of `num_needle_q` of its keys, scored by `string_match` in `all` mode (the share of the
values named in the answer). Keys and values are words (adjective-noun, from the wonderwords
lists RULER uses), 7-digit numbers or UUIDs.

Where the needles go: RULER draws every needle's depth at random among 40 depths. Here the
first needle a sample asks about is put at the sample's own depth, the requested depths
taken in turn in an order that spreads any first few over the range (0, 100, 50, 25, 75 for
RULER-style five depths: `haystack.depths.spread_order`), so each depth gets the same number of
samples and the score can be read by depth; every other needle (distractor keys, further
values, further queried keys) goes to a depth drawn from RULER's 40. The needle goes before the
haystack unit at `int(units * depth / 100)` (RULER's formula); the turn records the requested
`depth`, the `depth_achieved` (share of the haystack's tokens before the needle) and every
needle's depth.

Several questions about one haystack (`queries_per_haystack` > 1, e.g. the four keys of
niah_multikey_1 asked one at a time) share its context: one `context_id`, prefilled once.
RULER itself asks one question per haystack (the default).
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from typing import Any

from lceval.errors import UserError
from lceval.interfaces import TaskContext
from lceval.types import CONTEXT_SLOT, Conversation

from lceval_plugins.haystack.depths import depth_point, spread_order
from lceval_plugins.haystack.tokens import Tokens
from lceval_plugins.haystack.units import Calibration, EssaySource, LineSource, assemble, fit_to_length

from .common import DEPTHS, Budget, SampleOut, conversation, rng_for, sample_plan, short_of, user_messages, with_prefix
from .sources import haystack_source, too_short
from .wordlists import ADJECTIVES, NOUNS

__all__ = ["NEEDLE", "NIAH_ANSWER_PREFIX", "NIAH_TEMPLATE", "load_niah", "niah_template", "random_value"]

NIAH_TEMPLATE = ("Some special magic {type_needle_v} are hidden within the following text. Make sure to memorize it. "
                 "I will quiz you about the {type_needle_v} afterwards.\n{context}\nWhat are all the special magic "
                 "{type_needle_v} for {query} mentioned in the provided text?")
NIAH_ANSWER_PREFIX = " The special magic {type_needle_v} for {query} mentioned in the provided text are"
NEEDLE = "One of the special magic {type_needle_v} for {key} is: {value}."


def random_value(rng: random.Random, kind: str) -> str:
    """niah.py `generate_random`: a 7-digit number, an adjective-noun word, or a UUID4."""
    if kind == "numbers":
        return str(rng.randint(10 ** 6, 10 ** 7 - 1))
    if kind == "words":
        # niah.py draws from every f"{adj}-{noun}"; drawing each half uniformly is the same law
        return f"{rng.choice(ADJECTIVES)}-{rng.choice(NOUNS)}"
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def niah_template(type_needle_v: str, singular: bool, answer_prefix: str) -> tuple[str, str]:
    """(template, the noun it names) as niah.py makes them: the template with the answer
    prefix where `answer_prefix` puts it (prepare.py appends it after the chat template),
    made singular when the answer is one value."""
    template = with_prefix(NIAH_TEMPLATE, NIAH_ANSWER_PREFIX, answer_prefix)
    if singular:
        template = template.replace("Some", "A").replace("are all", "is").replace("are", "is")
        template = template.replace("answers", "answer")
        type_needle_v = type_needle_v[:-1]
    return template, type_needle_v


@dataclass
class _Needle:
    text: str
    depth: float  # requested depth, 0-100


@dataclass
class _Haystack:
    needles: list[_Needle]
    queries: list[dict[str, Any]] = field(default_factory=list)  # per sample: user, question, answers, depth


def _draw(rng: random.Random, o: dict[str, Any], sample_depths: list[float]) -> _Haystack:
    """Keys, values and needles of one haystack, and one query per entry of `sample_depths`
    (niah.py `generate_input_output`, with the placement described in the module)."""
    num_k = max(o["num_needle_k"], o["num_needle_q"])
    keys: list[str] = []
    while len(keys) < num_k:  # distinct keys: a question must name one needle's key
        key = random_value(rng, o["type_needle_k"])
        if key not in keys:
            keys.append(key)
    values = [[random_value(rng, o["type_needle_v"]) for _ in range(o["num_needle_v"])] for _ in keys]
    singular = o["num_needle_q"] * o["num_needle_v"] == 1
    template, noun = niah_template(o["type_needle_v"], singular, o["answer_prefix"])
    first_depth = {q: d for q, d in enumerate(sample_depths)}  # key q's first value goes to sample q's depth
    needles: list[_Needle] = []
    others = [(k, v) for k in range(num_k) for v in range(o["num_needle_v"]) if not (v == 0 and k in first_depth)]
    drawn = rng.sample(DEPTHS, len(others)) if len(others) <= len(DEPTHS) else [rng.choice(DEPTHS) for _ in others]
    other_depth = dict(zip(others, drawn))
    for k in range(num_k):
        for v in range(o["num_needle_v"]):
            depth = first_depth[k] if v == 0 and k in first_depth else other_depth[(k, v)]
            needles.append(_Needle(NEEDLE.format(type_needle_v=o["type_needle_v"], key=keys[k], value=values[k][v]),
                                   float(depth)))
    out = _Haystack(needles)
    for q, depth in enumerate(sample_depths):
        rest = [k for k in range(num_k) if k != q]
        asked = [q] + rng.sample(rest, o["num_needle_q"] - 1)
        names = [keys[k] for k in asked]
        query = ", ".join(names[:-1]) + ", and " + names[-1] if len(names) > 1 else names[0]
        user = template.format(type_needle_v=noun, context=CONTEXT_SLOT, query=query)
        out.queries.append({"user": user, "question": user.split(CONTEXT_SLOT, 1)[1].strip(),
                            "answers": [a for k in asked for a in values[k]], "depth": depth})
    return out


def load_niah(ctx: TaskContext, budget: Budget, tokens: Tokens) -> list[Conversation]:
    o = ctx.options
    per = int(o["queries_per_haystack"])
    num_k = max(o["num_needle_k"], o["num_needle_q"])
    if per > num_k:
        raise UserError(f"{per} questions per haystack need as many keys, and the haystack has {num_k}",
                        field="options.queries_per_haystack", hint="Raise options.num_needle_k or lower it.")
    depths = sorted(float(d) for d in o["depths"])  # spread by value, in whatever order they were listed
    order = spread_order(len(depths))
    kind = o["haystack"]
    source = None if kind == "needle" else haystack_source(ctx, tokens, kind)
    stacks: list[list[Conversation]] = []
    calibration = Calibration()
    for h, indexes in sample_plan(ctx, budget.label, per):
        rng = rng_for(ctx.seed, "niah", h)
        stack = _draw(rng, o, [depths[order[i % len(depths)]] for i in indexes])
        if kind == "needle":
            line_rng = rng_for(ctx.seed, "niah", h, "distractors")
            src = LineSource(tokens, lambda r=line_rng: NEEDLE.format(
                type_needle_v=o["type_needle_v"], key=random_value(r, o["type_needle_k"]),
                value=random_value(r, o["type_needle_v"])))
        else:
            src = source
        stacks.append(_build(ctx, budget, tokens, src, stack, h, indexes, kind, calibration))
    # ordered by depth: noise and essay haystacks of one length are the same text up to their first
    # needle, so two prompts in a row share everything above the shallower of their needles
    # (all of it between two samples at one depth), which a backend that keeps its last
    # prompt (llama.cpp) does not prefill again; sorted is the order that shares the most
    stacks.sort(key=lambda convs: -max(c.turns[0].metadata["depth"] for c in convs))
    return [conv for convs in stacks for conv in convs]


def _build(ctx: TaskContext, budget: Budget, tokens: Tokens, source: Any, stack: _Haystack, h: int,
           indexes: list[int], kind: str, calibration: Calibration) -> list[Conversation]:
    o = ctx.options
    joiner = source.joiner
    overheads = [tokens.prompt(user_messages(q["user"], "")) for q in stack.queries]
    longest = max(range(len(overheads)), key=lambda j: overheads[j])
    needle_tokens = sum(tokens.count(n.text) + source.joiner_tokens for n in stack.needles)
    first = budget.prompt_target - overheads[longest] - needle_tokens
    if first <= 0:
        n = len(stack.needles)
        option = "num_needle_v" if o["num_needle_v"] > o["num_needle_k"] else "num_needle_k"
        raise short_of(budget, f"the instructions and {n} needle(s) take {overheads[longest] + needle_tokens:,} "
                       f"tokens, leaving no room for a haystack", f"options.{option}", o[option])
    if source.available(first + budget.tolerance) < first:
        raise _too_short(ctx, budget, source, first)

    def make(hay_budget: int) -> tuple[Any, int]:
        units = source.take(hay_budget)
        inserts = [(n.text, depth_point(len(units), n.depth)) for n in stack.needles]
        placed = assemble(units, inserts, joiner)
        return (placed, len(units)), tokens.prompt(user_messages(stack.queries[longest]["user"], placed.context))

    fitted = fit_to_length(make, budget.prompt_target, first, budget.close, calibration=calibration)
    if fitted is None or budget.prompt_target - fitted.prompt_tokens > budget.tolerance:
        raise _too_short(ctx, budget, source, first)
    placed, units = fitted.value
    convs = []
    for j, (i, q) in enumerate(zip(indexes, stack.queries)):
        n = fitted.prompt_tokens if j == longest else tokens.prompt(user_messages(q["user"], placed.context))
        achieved = placed.achieved[j * o["num_needle_v"]]  # needles are laid out key by key
        meta = {"depth": _depth_value(q["depth"]), "depth_achieved": round(achieved, 2),
                "needle_depths": [_depth_value(nd.depth) for nd in stack.needles], "fit_rounds": fitted.rounds}
        if isinstance(source, EssaySource):  # 2 and more: the text was repeated to reach the length (niah.py)
            meta["essay_passes"] = source.passes(units)
        sample = SampleOut(i, q["user"], q["question"], q["answers"], n, meta)
        convs.append(conversation(budget, h, placed.context, sample, kind))
    return convs


def _depth_value(depth: float) -> int | float:
    return int(depth) if float(depth).is_integer() else depth


def _too_short(ctx: TaskContext, budget: Budget, source: Any, needed: int) -> UserError:
    if not isinstance(source, EssaySource) or source.repeat:  # noise, distractor lines, a repeated text: endless
        return UserError(f"could not build a sample within 1% of {budget.describe()}", field=budget.field)
    return too_short(budget, source, needed, ctx)
