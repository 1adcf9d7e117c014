"""`lceval run --dry-run`: the exact messages each selected item would send, with the
context policy applied, and no answer generated.

A user should be able to read what a task asks a model before paying for it (an API) or
waiting for it (a long CPU run). The dry run builds the same conversations as a run and fits
them with the same `context_policy.fit_all`. It builds the backend but never asks it to generate:
every built-in backend loads lazily, so only what tokenizing needs is read (llama.cpp's
vocabulary, a Hugging Face tokenizer and config, the tokenizer an API model was lent). When
no tokenizer can be had, the output says so and shows the contexts uncut, as they would be
sent. Later turns of a multi-turn conversation show a placeholder where the model's own
answers would be (or the reference answers with `history: gold`).
"""

from __future__ import annotations

from pathlib import Path

from lceval.engine import _context_policy as context_policy
from lceval.engine._model_handle import ModelHandle
from lceval.engine._plan import RunPlan, ensure_datasets, load_work
from lceval.engine._plugin_host import Plugins
from lceval.engine._spec import TaskSpec
from lceval.errors import UserError
from lceval.interfaces import ModelBackend
from lceval.types import ContextCut, Conversation


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
    fitted = context_policy.fit_all(conversations, backend, policy, params.max_new_tokens,
                               spec.context.reserve(params.max_new_tokens), max_tokens=spec.context.max_tokens)
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
            if cut.original_tokens is not None:
                lines.append(f"prompt: {backend.count_tokens(messages):,} tokens after the chat template")
            for m in messages:
                lines.append(f"--- {m.role}\n{m.content}")
    return "\n".join(lines)


def dry_run(plan: RunPlan, handle: ModelHandle, plugins: Plugins, data_home: Path) -> str:
    """The prompts of every selected item of every task of the plan, for one of its models
    (`handle`, which the caller closes)."""
    ensure_datasets(plan, plugins, data_home, lambda text: None)
    loaded = load_work(plan, plugins, data_home, handle).loaded
    backend = handle.backend()
    blocks = [_task_prompts(spec, conversations, backend) for spec, conversations in loaded]
    return "\n\n".join(blocks) + "\n"
