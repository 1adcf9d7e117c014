"""`lceval run --dry-run`: the exact messages each selected item would send, with the
context policy applied, and no answer generated.

A user should be able to read what a task asks a model before paying for it (an API) or
waiting for it (a long CPU run). The dry run builds the same conversations as a run and fits
them with the same `context_policy.fit_all`. It builds the backend but never asks it to generate:
every built-in backend loads lazily, so only what tokenizing needs is read (llama.cpp's
vocabulary, a Hugging Face tokenizer and config, the tokenizer an API model was lent). When
no tokenizer can be had, the output says so and shows the contexts uncut, as they would be
sent. Later turns of a multi-turn conversation show a placeholder where the model's own
answers would be (or the reference answers with `history: gold`). It ends with what the run
would cost (`estimate_cost`): the prompts' tokens and every answer token they may take, at
the model's price and its batch price, for the model and the judge.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lceval.engine import _context_policy as context_policy
from lceval.engine._cached_model import backend_identity
from lceval.engine._model_handle import ModelHandle
from lceval.engine._model_spec import ModelSpec
from lceval.engine._plan import RunPlan, ensure_datasets, load_work, make_judge, skipped_lines
from lceval.engine._plugin_host import Plugins
from lceval.engine._spec import TaskSpec
from lceval.engine._scheduler import ConversationState, make_groups
from lceval.engine._shared_prefix import shared_prefixes
from lceval.engine._spending import CHARS_PER_TOKEN, estimate
from lceval.engine._thinking import controls_of, thinking_settings
from lceval.errors import UserError
from lceval.io import format_rate, format_usd
from lceval.interfaces import ModelBackend, PrefixCache, Price
from lceval.types import (ContextCut, Conversation, Generation, GenerationRequest, JudgeInput, is_scored)


def _answer_placeholder(turn_index: int) -> str:
    return f"[the model's answer to question {turn_index + 1}: not generated in a dry run]"


def _describe(cut: ContextCut, skipped: bool) -> str:
    if skipped:
        return f"skipped by the context policy ({cut.policy}): {cut.original_tokens:,} context tokens do not fit"
    if cut.original_tokens is None:
        return "context not measured (no tokenizer)"
    if cut.action == "truncated":
        where = (f", at element boundaries: {cut.elements_kept} of {cut.elements_total} elements kept"
                 if cut.elements_total is not None else "")
        return f"context cut ({cut.policy}) from {cut.original_tokens:,} to {cut.kept_tokens:,} tokens{where}"
    return f"context uncut ({cut.original_tokens:,} tokens)"


def _fit(spec: TaskSpec, conversations: list[Conversation], backend: ModelBackend,
         ) -> tuple[list[tuple[Conversation, str | None, ContextCut]], str]:
    """Fitted conversations and a line saying whether and how contexts could be measured."""
    policy = spec.context.policy
    params = spec.generation_params(0)
    uncut = [(c, c.context, ContextCut(policy, None, None)) for c in conversations]
    try:
        window = backend.context_window
    except UserError as exc:
        return uncut, f"could NOT cut: the tokenizer cannot be loaded ({exc.message}); contexts shown uncut"
    if not window:
        return uncut, ("could NOT cut: the backend gives no context window or tokenizer (an API model needs "
                       "tokenizer=... and context_window=...); contexts shown uncut, as they would be sent")
    thinking = params.thinking_allowance  # the window holds the thinking too, as in a run
    fitted = context_policy.fit_all(conversations, backend, policy, params.max_new_tokens + thinking,
                                    spec.context.reserve(params.max_new_tokens) + thinking,
                                    max_tokens=spec.context.max_tokens, style=spec.context.style)
    return fitted, f"context policy {policy}, window {window:,} tokens, the model's own tokenizer and chat template"


def _task_prompts(spec: TaskSpec, conversations: list[Conversation], backend: ModelBackend) -> str:
    fitted, how = _fit(spec, conversations, backend)
    n = sum(len(c.turns) for c in conversations)
    lines = [f"# {spec.name}: {n} prompt(s) in {len(conversations)} conversation(s); {how}"]
    for conv, text, cut in fitted:
        for i, turn in enumerate(conv.turns):
            lines.append(f"\n## {turn.item_id} (turn {i + 1} of {len(conv.turns)}; {_describe(cut, text is None)})")
            if text is None:
                continue
            answers = [t.reference for t in conv.turns[:i]] if conv.history == "gold" else \
                [_answer_placeholder(k) for k in range(i)]
            messages = context_policy.fill_context(context_policy.full_transcript(conv, answers, upto=i), text)
            if turn.assistant_prefix and not backend.continues_assistant:
                messages = context_policy.prefix_in_user(messages)
                lines.append("(the answer's start goes at the end of the question: this backend cannot continue "
                             "an assistant message)")
            elif turn.assistant_prefix:
                lines.append("(the last, assistant message is the answer's start: the model continues it)")
            if cut.original_tokens is not None:
                lines.append(f"prompt: {backend.count_tokens(messages):,} tokens after the chat template")
            for m in messages:
                lines.append(f"--- {m.role}\n{m.content}")
    return "\n".join(lines)


def dry_run(plan: RunPlan, handle: ModelHandle, plugins: Plugins, data_home: Path,
            judge: tuple[ModelSpec, ModelBackend] | None = None) -> str:
    """The prompts of every selected item of every task of the plan, for one of its models
    (`handle`, which the caller closes), then what the run would cost (with `judge`: the
    judge model's spec and backend)."""
    ensure_datasets(plan, plugins, data_home, lambda text: None)
    work = load_work(plan, plugins, data_home, handle)
    loaded = work.loaded
    backend = handle.backend()
    # the defaults a run fills in (a thinking budget, room for the thinking): the prompts are
    # fitted and the cost counted with them, as the run will
    said: list[str] = []
    controls = controls_of(backend)
    try:
        window = backend.context_window
    except UserError:
        window = None
    loaded = [(thinking_settings(spec, controls, window, handle.spec, said.append), conversations)
              for spec, conversations in loaded]
    blocks = ([f"# reasoning\n" + "\n".join(said)] if said else [])
    blocks += (["# lengths\n" + "\n".join(skipped_lines(work.skipped))] if work.skipped else [])
    blocks += [_task_prompts(spec, conversations, backend) for spec, conversations in loaded]
    blocks.append(estimate_cost(plan, loaded, backend, handle.spec, plugins, judge))
    return "\n\n".join(blocks)


# -- what the run would cost ------------------------------------------------------------------

@dataclass
class _Tally:
    """Requests' estimates added up: directly, without the provider's prompt cache, and through
    the batch API (None: a price is unknown, or there is no batch API)."""

    requests: int = 0
    prompt: int = 0
    answer: int = 0
    counted: bool = True  # every prompt counted by the model's own tokenizer
    cache_read: int = 0
    cache_write: int = 0
    direct: float | None = 0.0
    uncached: float | None = 0.0
    batched: float | None = 0.0

    def add(self, backend: ModelBackend, request: GenerationRequest, prices: tuple[Price | None, Price | None],
            primed: bool, batching: bool) -> None:
        """`primed`: sent directly, an earlier request about its context would have come back
        before it (`_model_requests`); through a batch none has."""
        # the estimate a cost limit reserves, so `--max-cost` set to this "at most" holds
        direct, batch = prices
        sent = estimate(backend, request, batch if batching else direct, batching, primed and not batching)
        self.counted &= sent.counted
        self.requests += 1
        self.prompt += sent.prompt
        self.answer += sent.answer
        self.cache_read += sent.cache_read
        self.cache_write += sent.cache_write
        alone = estimate(backend, request, direct, False, primed) if batching else sent
        together = sent if batching else (estimate(backend, request, batch, True, False) if batch is not None else None)
        self.direct = _plus(self.direct, alone.usd)
        self.batched = _plus(self.batched, together.usd if together is not None else None)
        self.uncached = _plus(self.uncached, direct.cost(sent.prompt, sent.answer) if direct is not None else None)


def _plus(total: float | None, amount: float | None) -> float | None:
    return None if total is None or amount is None else total + amount


class _Recorder:
    """A judge model that answers nothing and notes what it is asked (the first ask of each
    item: retries depend on answers a dry run does not have)."""

    def __init__(self, backend: ModelBackend) -> None:
        self.identity = backend_identity(backend)  # as CachedModel's, which a real run's judge is handed
        self.asked: list[GenerationRequest] = []

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        self.asked += [r for r in requests if not r.hints.get("attempt")]
        return [Generation(request_id=r.request_id, text="") for r in requests]


def _model_requests(spec: TaskSpec, conversations: list[Conversation], backend: ModelBackend,
                    seeds: list[int], batching: bool) -> list[tuple[GenerationRequest, bool]]:
    """The requests of a task's selected turns (later turns with placeholder answers), once
    per seed unless greedy decoding makes the seeds share their answers, each with the part its
    context's requests share and whether an earlier one about its context primed the
    provider's cache before it were sent directly (as the scheduler orders them: a context's
    first request alone, then the others; not without a prefix cache to plan for)."""
    fitted, _ = _fit(spec, conversations, backend)
    sizes = {g.key: g.tokens for g in make_groups([ConversationState(c, t, cut) for c, t, cut in fitted])}
    orderly = getattr(backend, "prefix_cache", PrefixCache()).kind != "none"
    out = []
    for seed in (seeds if spec.generation_params(0).temperature > 0 else seeds[:1]):
        params = spec.generation_params(seed)
        shared = shared_prefixes(fitted, params, batching, sizes)
        asked: set[str] = set()
        for conv, text, cut in fitted:
            for i, turn in enumerate(conv.turns if text is not None else []):
                answers = [t.reference for t in conv.turns[:i]] if conv.history == "gold" else \
                    [_answer_placeholder(k) for k in range(i)]
                messages = context_policy.fill_context(context_policy.full_transcript(conv, answers, upto=i), text)
                out.append((GenerationRequest(request_id=turn.item_id, messages=messages, params=params,
                                              shared=shared.get(conv.context_id)),
                            orderly and conv.context_id in asked))
                asked.add(conv.context_id)
    return out


#: characters a token of the answer the dry run puts in the judge's prompt in place of the
#: model's: more than a provider's tokenizer averages on text (about four), so the judge's prompt
#: around the real answer, of at most `max_new_tokens` tokens, is not longer than the one priced
ANSWER_CHARS_PER_TOKEN = 6


def _longest_answer(spec: TaskSpec) -> str:
    """A stand-in for the model's answer as long as it may write (`max_new_tokens`)."""
    chars = int(spec.generation_params(0).max_new_tokens * ANSWER_CHARS_PER_TOKEN)
    return ("the model's answer " * (chars // 19 + 1))[:chars]


def _judge_requests(spec: TaskSpec, conversations: list[Conversation], plan: RunPlan, plugins: Plugins,
                    backend: ModelBackend, seeds: list[int]) -> list[GenerationRequest]:
    """What the judge would ask first about each scored answer, the answer the longest the
    model may write (a judge's prompt is its template around the question, the reference and
    the answer): the judge's "at most", which the reservations of a cost limit, made around the
    real answers, do not pass."""
    answer = _longest_answer(spec)
    inputs = [JudgeInput(item_id=t.item_id, question=t.question, response=answer, reference=t.reference,
                         metadata={**c.metadata, **t.metadata})
              for c in conversations for t in c.turns if is_scored(t.metadata)]
    asked: list[GenerationRequest] = []
    for seed in seeds:
        recorder = _Recorder(backend)
        judge = make_judge(spec, plan.judge, plugins, recorder, seed)
        if not judge.uses_model or not inputs:
            return []
        judge.judge(inputs)
        asked += recorder.asked
    return asked


def _prices(backend: ModelBackend) -> tuple[Price | None, Price | None]:
    """The model's price directly and (where it has a batch API) through it."""
    return backend.price(batch=False), (backend.price(batch=True) if backend.batch_api() is not None else None)


def _priced(tally: _Tally, backend: ModelBackend, batching: bool) -> tuple[str, float | None, float | None]:
    """The tally in words with its cost, and its cost directly and (where there is one)
    through the batch API (None: unknown)."""
    how = "counted by the model's tokenizer" if tally.counted else \
        f"over-estimated at {CHARS_PER_TOKEN:g} characters a token without a tokenizer, as --max-cost reserves"
    cache = (f"; {tally.cache_read:,} of them read from the provider's prompt cache, {tally.cache_write:,} written "
             "into it" if tally.cache_read or tally.cache_write else "")
    line = (f"{tally.requests:,} requests, {tally.prompt:,} prompt tokens ({how}{cache}), at most {tally.answer:,} "
            "answer tokens")
    direct = backend.price(batch=False)
    if direct is None or tally.direct is None:
        return line + ": price unknown (give input_cost_per_mtok= and output_cost_per_mtok=)", None, None
    rates = f"{format_rate(direct.input_per_mtok)}/{format_rate(direct.output_per_mtok)}"
    line += f": {usd(tally.direct)} at {rates} per million tokens"
    if (tally.cache_read or tally.cache_write) and tally.uncached is not None:
        line += f" ({usd(tally.uncached)} without the prompt cache)"
    batch_cost = tally.batched if backend.batch_api() is not None else None
    if batch_cost is not None:
        line += f"; through its batch API{' (as this run asks)' if batching else ''}: {usd(batch_cost)}"
    return line, tally.direct, batch_cost


def estimate_cost(plan: RunPlan, loaded: list[tuple[TaskSpec, list[Conversation]]], backend: ModelBackend,
                  model: ModelSpec, plugins: Plugins, judge: tuple[ModelSpec, ModelBackend] | None) -> str:
    """What the run of `model` would cost at most, before anything is sent: its requests'
    prompt tokens (counted, or estimated and said so) and every answer token they may take,
    at the model's price and, where it has one, its batch price; the same for the judge's
    first asks. A cache that already holds answers makes the run cheaper than this."""
    seeds = list(plan.config.seeds)
    gen, judged = _Tally(), _Tally()
    batching = _batching(model, backend, plan)
    prices = _prices(backend)
    for spec, conversations in loaded:
        for request, primed in _model_requests(spec, conversations, backend, seeds, batching):
            gen.add(backend, request, prices, primed, batching)
        if judge is not None:
            judge_prices, judge_batching = _prices(judge[1]), _batching(judge[0], judge[1], plan)
            for request in _judge_requests(spec, conversations, plan, plugins, judge[1], seeds):
                judged.add(judge[1], request, judge_prices, False, judge_batching)
    parts = [("generation", *_priced(gen, backend, batching))]
    if judge is not None and judged.requests:
        parts.append((f"judging ({judge[0].text}; first asks, retries of unusable verdicts come on top)",
                      *_priced(judged, judge[1], _batching(judge[0], judge[1], plan))))
    lines = [f"# estimated cost of {model.text} (at most; nothing sent; answers already in the cache cost nothing)"]
    lines += [f"{name}: {line}" for name, line, _, _ in parts]
    if all(direct is not None for _, _, direct, _ in parts):
        total = sum(direct for _, _, direct, _ in parts)  # type: ignore[misc]
        batched = sum(b if b is not None else d for _, _, d, b in parts)  # type: ignore[misc]
        lines.append(f"total: {usd(total)}" + (f"; {usd(batched)} through the batch APIs (--batch)"
                                               if batched < total else ""))
    else:
        lines.append("total: unknown (a price is unknown)")
    return "\n".join(lines) + "\n"


def _batching(model: ModelSpec, backend: ModelBackend, plan: RunPlan) -> bool:
    wanted = (model.spending or {}).get("batch")
    return (wanted if wanted is not None else plan.config.batch) and backend.batch_api() is not None


def usd(amount: float) -> str:
    """An "at most" in dollars, rounded up at the digits shown: `--max-cost` set to the figure
    shown holds everything it counts."""
    return format_usd(amount, up=True)
