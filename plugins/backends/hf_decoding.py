"""What every `hf:` decoding loop does with a step's logits, in one place: the batching engine
(hf_batching) and the press engine (hf_press) pick each token and end each answer by the same
rules, so the same request gets the same answer from either."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

#: Tokens the repeat penalty looks back over, llama.cpp's default `repeat_last_n`, so the same
#: `repeat_penalty` means the same thing on both local backends.
REPEAT_LAST_N = 64


def next_token(job: Any, logits: "torch.Tensor", pick: Callable[..., int],
               generator: Any) -> tuple[int | None, str | None]:
    """The next token of `job` (an hf_batching.Job; appended to `job.out`) and why the answer
    ends ("stop", "length", None): penalty, early bans, end tokens, stop strings."""
    params = job.params
    if len(job.out) >= params.max_new_tokens:
        return None, "length"
    early = len(job.out) < params.min_new_tokens
    if early and job.banned_early:
        logits = logits.clone()
        logits[list(job.banned_early)] = float("-inf")
    token = pick(logits, params, (job.ids + job.out)[-REPEAT_LAST_N:], generator)
    if token in job.eos and not early:
        return None, "stop"
    job.out.append(token)
    if params.stop and not early and job.stop_hit(job.out):
        return token, "stop"
    if len(job.out) >= params.max_new_tokens:
        return token, "length"
    return token, None
