"""Variable tracking, RULER's `variable_tracking` task (NVIDIA/RULER
scripts/data/synthetic/variable_tracking.py, template and answer prefix in
scripts/data/synthetic/constants.py, config `vt` in scripts/synthetic.yaml: noise haystack,
1 chain, 4 hops).

A chain is "VAR ABCDE = 12345" then "VAR FGHIJ = VAR ABCDE " ... (`num_hops` assignments);
`num_chains` chains are hidden in the haystack and the question asks for every variable that
holds the first chain's value; `string_match` in `all` mode scores the share named. As in
RULER, one worked example comes first: a short variable-tracking prompt of at most 500 tokens
with three-letter variables and its answer, made once per run and given fresh variable names
and value for every sample (`randomize_icl`).
"""

from __future__ import annotations

import heapq
import random
import string
from typing import Any

from lceval.errors import UserError
from lceval.interfaces import TaskContext
from lceval.types import CONTEXT_SLOT, Conversation

from lceval_plugins.haystack.depths import depth_point
from lceval_plugins.haystack.tokens import Tokens
from lceval_plugins.haystack.units import Calibration, Unit, fit_to_length

from .common import DEPTHS, Budget, SampleOut, conversation, rng_for, sample_plan, short_of, user_messages, with_prefix
from .sources import haystack_source, too_short

__all__ = ["VT_ANSWER_PREFIX", "VT_TEMPLATE", "generate_chains", "load_vt"]

VT_TEMPLATE = ("Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n{context}\n"
               "Question: Find all variables that are assigned the value {query} in the text above.")
VT_ANSWER_PREFIX = (" Answer: According to the chain(s) of variable assignment in the text above, {num_v} variables "
                    "are assigned the value {query}, they are: ")
ICL_TOKENS = 500  # variable_tracking.py main(): the example is made with max_seq_length=500


def generate_chains(rng: random.Random, num_chains: int, num_hops: int, is_icl: bool = False
                    ) -> tuple[list[list[str]], list[list[str]]]:
    """variable_tracking.py `generate_chains`: (variables, assignment lines) per chain; the
    variables are distinct (RULER's loop can keep a repeated name) and never "VAR", which
    `randomize_icl` would otherwise replace in every line of the example."""
    k = 3 if is_icl else 5
    hops = min(10, num_hops) if is_icl else num_hops
    names: list[str] = []
    while len(names) < (hops + 1) * num_chains:
        name = "".join(rng.choices(string.ascii_uppercase, k=k))
        if name not in names and name != "VAR":
            names.append(name)
    variables, chains = [], []
    for i in range(0, len(names), hops + 1):
        these = names[i:i + hops + 1]
        variables.append(these)
        chain = [f"VAR {these[0]} = {12345 if is_icl else rng.randint(10000, 99998)}"]
        chain += [f"VAR {these[j + 1]} = VAR {these[j]} " for j in range(hops)]
        chains.append(chain)
    return variables, chains


def _shuffle_sublists_heap(lists: list[list[str]], rng: random.Random) -> list[str]:
    """variable_tracking.py `shuffle_sublists_heap`: interleave the chains at random, each in order."""
    heap = [(rng.random(), i, 0) for i in range(len(lists))]
    heapq.heapify(heap)
    out = []
    while heap:
        _, i, j = heapq.heappop(heap)
        out.append(lists[i][j])
        if j + 1 < len(lists[i]):
            heapq.heappush(heap, (rng.random(), i, j + 1))
    return out


def _hide(units: list[Unit], chains: list[list[str]], kind: str, rng: random.Random) -> str:
    """The haystack with the chains in it (variable_tracking.py `generate_input_output`)."""
    if kind == "noise":
        sentences = [u.text for u in units]
        for chain in chains:
            positions = sorted(rng.sample(range(len(sentences)), len(chain)))
            for j, at in enumerate(positions):
                sentences.insert(at + j, chain[j])
        context = "\n".join(sentences)
    else:
        flat = _shuffle_sublists_heap(chains, rng)
        depths = rng.sample(DEPTHS, len(flat)) if len(flat) <= len(DEPTHS) else [rng.choice(DEPTHS) for _ in flat]
        cuts = [0] + sorted(depth_point(len(units), d) for d in depths) + [len(units)]
        parts = []
        for i in range(1, len(cuts)):
            parts.append(" ".join(u.text for u in units[cuts[i - 1]:cuts[i]]))
            if i - 1 < len(flat):
                parts.append(flat[i - 1].strip() + ".")
        context = " ".join(p for p in parts if p)
    return context.replace(". \n", ".\n")


def _template(answer_prefix: str) -> str:
    return with_prefix(VT_TEMPLATE, VT_ANSWER_PREFIX, answer_prefix)


def _icl_example(ctx: TaskContext, tokens: Tokens, source: Any) -> tuple[str, int]:
    """The worked example (variable_tracking.py main(): one sample at 500 tokens, text only,
    with its answer appended) and its number of hops."""
    o = ctx.options
    rng = rng_for(ctx.seed, "vt", -1, "icl")
    variables, chains = generate_chains(rng, o["num_chains"], o["num_hops"], is_icl=True)
    value = chains[0][0].split("=")[-1].strip()
    hops = min(10, o["num_hops"])
    template = VT_TEMPLATE + VT_ANSWER_PREFIX  # the example always shows RULER's full template

    def make(budget: int) -> tuple[str, int]:
        context = _hide(source.take(budget), chains, o["haystack"], rng_for(ctx.seed, "vt", -1, f"icl/{budget}"))
        text = template.format(context=context, query=value, num_v=hops + 1)
        return text, len(tokens.ids(text))

    shell = tokens.count(template.format(context="", query=value, num_v=hops + 1))
    lines = sum(tokens.count(line) for chain in chains for line in chain)
    fitted = fit_to_length(make, ICL_TOKENS, ICL_TOKENS - shell - lines, 8)
    if fitted is None:
        raise UserError(f"{o['num_chains']} chain(s) of {hops} hops do not fit RULER's 500-token worked example",
                        field="options.num_hops")
    return fitted.value + " " + " ".join(variables[0]) + "\n", hops


def _randomize_icl(example: str, hops: int, rng: random.Random) -> str:
    """variable_tracking.py `randomize_icl`: new names for the answer's variables, a new value."""
    for item in example.strip().split()[-hops - 1:]:
        example = example.replace(item, "".join(rng.choices(string.ascii_uppercase, k=len(item))))
    return example.replace("12345", str(rng.randint(10000, 99998)))


def load_vt(ctx: TaskContext, budget: Budget, tokens: Tokens) -> list[Conversation]:
    o = ctx.options
    kind = o["haystack"]
    source = haystack_source(ctx, tokens, kind)
    icl, icl_hops = _icl_example(ctx, tokens, source)
    out: list[Conversation] = []
    calibration = Calibration()
    for h, (index,) in sample_plan(ctx, budget.label, 1):
        rng = rng_for(ctx.seed, "vt", index)
        variables, chains = generate_chains(rng, o["num_chains"], o["num_hops"])
        value = chains[0][0].split("=")[-1].strip()
        body = _template(o["answer_prefix"]).format(context=CONTEXT_SLOT, query=value, num_v=o["num_hops"] + 1)
        user = _randomize_icl(icl, icl_hops, rng) + "\n" + body
        overhead = tokens.prompt(user_messages(user, ""))
        lines = sum(tokens.count(line) + source.joiner_tokens for chain in chains for line in chain)
        first = budget.prompt_target - overhead - lines
        if first <= 0:
            raise short_of(budget, f"the worked example, instructions and chains take {overhead + lines:,} tokens, "
                           "leaving no room for a haystack", "options.num_chains", o["num_chains"])
        if source.available(first + budget.tolerance) < first:
            raise too_short(budget, source, first, ctx)

        def make(hay_budget: int, index: int = index, chains: list[list[str]] = chains, user: str = user
                 ) -> tuple[str, int]:
            units = source.take(hay_budget)
            if kind == "noise" and len(units) < max(len(c) for c in chains):
                raise short_of(budget, f"a chain of {len(chains[0])} assignments needs as many haystack lines, "
                               f"and the haystack has {len(units)}", "options.num_hops", o["num_hops"])
            context = _hide(units, chains, kind, rng_for(ctx.seed, "vt", index, f"positions/{hay_budget}"))
            return context, tokens.prompt(user_messages(user, context))

        fitted = fit_to_length(make, budget.prompt_target, first, budget.close, calibration=calibration)
        if fitted is None or budget.prompt_target - fitted.prompt_tokens > budget.tolerance:
            raise UserError(f"could not build a sample within 1% of {budget.describe()}", field=budget.field)
        question = body.split(CONTEXT_SLOT, 1)[1].strip()
        sample = SampleOut(index, user, question, variables[0], fitted.prompt_tokens,
                           {"num_chains": o["num_chains"], "num_hops": o["num_hops"], "fit_rounds": fitted.rounds})
        out.append(conversation(budget, h, fitted.value, sample, kind))
    return out
