"""Memory planned from the card, for the `hf:` backend: how many key/value tokens and how many
requests at once the memory holds, a window refused up front when one prompt cannot fit, and
a batch that runs out of memory anyway made smaller instead of losing the work.

Why plan at all: a long-context run fails late. A 128k-token window on a card that holds 40k
tokens of keys and values runs for hours on short prompts and dies on the first long one; a
batch sized for the average prompt dies when several long ones meet. So the plan is made
before the weights load, from what the card has free (`torch.cuda.mem_get_info`, or the
machine's available memory on a CPU) or from the `memory_gib` option, and it is said: in the
log (`lceval -v`) and in the run's manifest (`backend_stats.model.memory_plan`).

The arithmetic (`plan_memory`) is a pure function of the config and the figures it is given, so
it is tested on fixtures; `free_memory` is the one place that asks the device.
"""

from __future__ import annotations

import gc
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from lceval.errors import UserError

from .hf_batching import MIN_PREFILL, BatchEngine

log = logging.getLogger("lceval.hf")

#: Share of the free memory the model may take when `memory_gib` is not given: on a CPU the
#: machine is shared with everything else running; on a GPU the rest is the allocator's slack.
MEMORY_SHARE = {"cpu": 0.5, "cuda": 0.8}
#: Most requests in one batch when batch_size is not given.
MAX_DEFAULT_BATCH = 32
GiB = 1024 ** 3


def _text_config(config: Any) -> Any:
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def _heads(text: Any) -> tuple[int, int, int]:
    """(query heads, key/value heads, head size)."""
    heads = text.num_attention_heads
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    return heads, kv_heads, getattr(text, "head_dim", None) or text.hidden_size // heads


def kv_bytes_per_token(config: Any, width: int) -> int:
    """Bytes of one token's keys and values over all layers."""
    text = _text_config(config)
    _, kv_heads, head_dim = _heads(text)
    return 2 * text.num_hidden_layers * kv_heads * head_dim * width


def dtype_width(config: Any, dtype: str) -> int:
    """Bytes per weight the model will load with (`auto`: the config's own dtype)."""
    if dtype == "auto":
        dtype = str(getattr(config, "dtype", None) or getattr(config, "torch_dtype", None) or "float32")
    return {"float64": 8, "float32": 4, "bfloat16": 2, "float16": 2}.get(dtype.removeprefix("torch."), 4)


def weights_bytes(config: Any, width: int) -> int:
    """The weights' size as a decoder's config describes it (attention, gated MLP, experts,
    embeddings): an estimate, used only before the weights are loaded."""
    text = _text_config(config)
    hidden = text.hidden_size
    heads, kv_heads, head_dim = _heads(text)
    experts = getattr(text, "num_local_experts", None) or getattr(text, "num_experts", None) or 1
    attention = hidden * (2 * heads + 2 * kv_heads) * head_dim
    mlp = 3 * hidden * (getattr(text, "intermediate_size", None) or 4 * hidden) * experts
    embeddings = text.vocab_size * hidden * (1 if getattr(text, "tie_word_embeddings", False) else 2)
    return (text.num_hidden_layers * (attention + mlp) + embeddings) * width


def scratch_bytes(config: Any, width: int, chunk: int, window: int) -> int:
    """What one forward pass of a `chunk`-token prompt chunk at the end of a full window takes
    besides the keys and values: the attention bias (one row per query head sharing a key
    head, over the window), its boolean mask, and the layer's activations (hidden states,
    gated MLP)."""
    text = _text_config(config)
    heads, kv_heads, _ = _heads(text)
    intermediate = getattr(text, "intermediate_size", None) or 4 * text.hidden_size
    attention = chunk * window * ((heads // kv_heads) * width + 1)
    activations = chunk * (4 * text.hidden_size + 3 * intermediate) * width
    return attention + activations


def free_memory(device: str) -> tuple[int, str]:
    """(bytes free now, where the figure comes from): on every visible GPU together, or the
    machine's available memory."""
    if device == "cuda":
        import torch

        count = torch.cuda.device_count()
        free = sum(torch.cuda.mem_get_info(i)[0] for i in range(count))
        return free, f"free on {count} GPU{'s' if count > 1 else ''} (torch.cuda.mem_get_info)"
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, "available (MemAvailable)"
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "available (sysconf)"


def _gib(n: float) -> str:
    """A size in GiB, or MiB or KiB when it is small."""
    for unit, size in (("GiB", GiB), ("MiB", 1024 ** 2)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n / 1024:.1f} KiB"


@dataclass(frozen=True)
class MemoryPlan:
    """What the backend chose, and from which figures: the model may take `budget_bytes`;
    the weights (unless the free figure was measured after they loaded) and one prompt
    chunk's scratch are set aside; the rest holds `kv_tokens` tokens of keys and values."""

    device: str
    budget_bytes: int
    budget_from: str  # "80% of 139.7 GiB free on 1 GPU (...)" or "memory_gib=40"
    weights_bytes: int  # set aside (0: the free figure was measured with the weights loaded)
    scratch_bytes: int
    kv_bytes_per_token: int
    window: int
    chunk: int  # prompt tokens per forward pass
    batch_size: int
    batch_from: str  # "memory" or "batch_size"

    @property
    def kv_tokens(self) -> int:
        left = self.budget_bytes - self.weights_bytes - self.scratch_bytes
        return max(0, left // self.kv_bytes_per_token)

    def describe(self) -> str:
        """One line: the figures and what they gave."""
        weights = f"{_gib(self.weights_bytes)} of weights" if self.weights_bytes else "the weights already loaded"
        return (f"{self.device}: {self.budget_from}, less {weights} and {_gib(self.scratch_bytes)} of scratch "
                f"(a {self.chunk:,}-token prompt chunk at the {self.window:,}-token window), holds "
                f"{self.kv_tokens:,} key/value tokens ({_gib(self.kv_bytes_per_token)} each) = "
                f"{self.kv_tokens / self.window:.2f} windows; batch {self.batch_size} ({self.batch_from})")

    def announce(self, model: str) -> None:
        """Say the plan (`lceval -v`), then refuse it if the window cannot fit."""
        log.info("hf: memory plan for %s: %s", model, self.describe())
        self.check_fits()

    def check_fits(self) -> None:
        """Refuse a window whose one prompt cannot fit: the run would die at its first long
        prompt, after hours of short ones."""
        if self.kv_tokens >= self.window:
            return
        need = self.window * self.kv_bytes_per_token
        left = self.budget_bytes - self.weights_bytes - self.scratch_bytes
        weights = f"{_gib(self.weights_bytes)} of weights and " if self.weights_bytes else ""
        raise UserError(
            f"n_ctx={self.window} cannot fit on {self.device}: one window-long prompt's keys and values take "
            f"{_gib(need)}, and {self.budget_from} less {weights}{_gib(self.scratch_bytes)} of scratch leaves "
            f"{_gib(max(0, left))} ({self.kv_tokens:,} tokens).", field="n_ctx",
            hint=(f"Pass n_ctx={self.kv_tokens} or less" if self.kv_tokens >= MIN_PREFILL else "Use a smaller model")
            + ", free the device, give memory_gib, or spread the model over GPUs with device_map=auto.")


def plan_memory(config: Any, *, device: str, width: int, window: int, chunk: int, free: tuple[int, str],
                weights_loaded: bool, memory_gib: float | None = None, batch_size: int | None = None) -> MemoryPlan:
    """The plan from figures given (`free`: bytes and where they come from, as `free_memory`
    gives them). `memory_gib` is the memory the model may take in all, weights included, used
    as given; otherwise a share of the free memory, less the weights when they are not loaded
    yet. The default batch holds as many window-long prompts as the keys and values do, since
    each request in flight may bring a transcript of its own."""
    if memory_gib is not None:
        budget, source = int(memory_gib * GiB), f"memory_gib={memory_gib:g}"
        weights = weights_bytes(config, width)
    else:
        share = MEMORY_SHARE[device]
        budget, source = int(free[0] * share), f"{share:.0%} of {_gib(free[0])} {free[1]}"
        weights = 0 if weights_loaded else weights_bytes(config, width)
    plan = MemoryPlan(device, budget, source, weights, scratch_bytes(config, width, min(chunk, window), window),
                      kv_bytes_per_token(config, width), window, chunk, 1, "memory")
    if batch_size is not None:
        return replace(plan, batch_size=batch_size, batch_from="batch_size")
    return replace(plan, batch_size=max(1, min(MAX_DEFAULT_BATCH, plan.kv_tokens // window)))


def reset_peaks() -> None:
    import torch

    for i in range(torch.cuda.device_count()):
        torch.cuda.reset_peak_memory_stats(i)


def peak_bytes() -> int:
    """The peak memory allocated since `reset_peaks`, on every visible GPU together (a
    device_map spreads the model)."""
    import torch

    return sum(torch.cuda.max_memory_allocated(i) for i in range(torch.cuda.device_count()))


def timed_load(device: str, load: Callable[[], Any]) -> tuple[Any, dict[str, Any]]:
    """The model `load()` gives, and the load's seconds and (on a GPU) peak memory."""
    if device == "cuda":
        reset_peaks()
    began = time.perf_counter()
    model = load()
    out: dict[str, Any] = {"seconds": round(time.perf_counter() - began, 3)}
    if device == "cuda":
        out["peak"] = {"load": peak_bytes()}
    return model, out


def is_out_of_memory(exc: BaseException) -> bool:
    import torch

    oom = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
    return isinstance(exc, oom)


class MemoryAwareEngine(BatchEngine):
    """The batching engine, plus what memory asks of it: a pass that runs out of memory puts
    the sequences in flight back in the queue (their answers start again; finished answers
    were handed back already and are in the run's cache) and the engine goes on with half the
    batch, then with half the prompt chunk; only at one request in chunks of MIN_PREFILL
    tokens is the run stopped, with a line naming the sizes. Each pass is timed and, on a GPU,
    its peak memory read, by kind: passes that prefill prompt tokens, passes that only decode."""

    def __init__(self, *args: Any, plan: MemoryPlan, loaded: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.plan = plan
        self.loaded = loaded  # the model's load (timed_load)
        self.cuda = str(self.device).startswith("cuda")
        self.oom_retries = 0
        self.prefill_seconds = self.decode_seconds = 0.0
        self.prompt_tokens_run = 0  # prompt tokens the passes ran (the samples' prefilled tokens)
        self.peaks: dict[str, int] = dict(loaded.get("peak", {}))

    def _step(self) -> None:
        todo = [(s, len(s.todo)) for s in self._seqs if s.todo and not s.waiting()]
        if self.cuda:
            reset_peaks()
        began = time.perf_counter()
        super()._step()  # ends with the logits copied to the CPU: the pass has finished
        seconds = time.perf_counter() - began
        kind = "prefill" if todo else "decode"
        if todo:
            self.prefill_seconds += seconds
            self.prompt_tokens_run += sum(n - len(s.todo) for s, n in todo)
        else:
            self.decode_seconds += seconds
        if self.cuda:
            self.peaks[kind] = max(self.peaks.get(kind, 0), peak_bytes())

    def _recover(self, exc: BaseException) -> bool:
        if not is_out_of_memory(exc):
            return False
        before = (self.batch_size, self.step_tokens)
        in_flight = len(self._seqs)
        if in_flight > 1:
            self.batch_size = max(1, min(self.batch_size, in_flight) // 2)
        elif self.step_tokens > MIN_PREFILL:
            self.step_tokens = max(MIN_PREFILL, self.step_tokens // 2)
        else:
            self._fail_all(UserError(
                f"out of memory on {self.device} with one request in prompt chunks of {self.step_tokens} tokens "
                f"(memory plan: {self.plan.describe()}).", field="n_ctx",
                hint="Pass a smaller n_ctx or memory_gib, free the device, or spread the model with device_map=auto. "
                     "The answers finished so far are in the cache: the same command goes on from them."))
            return True
        self.oom_retries += 1
        self._requeue()
        gc.collect()
        if self.cuda:
            import torch

            torch.cuda.empty_cache()
        log.warning("hf: out of memory on %s with %d requests in flight (batch %d, prompt chunks of %d tokens): "
                    "going on with batch %d and chunks of %d; the %d answers in flight start again",
                    self.device, in_flight, before[0], before[1], self.batch_size, self.step_tokens, in_flight)
        return True

    def _requeue(self) -> None:
        """Every sequence in flight back to the front of the queue, its answer begun again;
        every arena dropped (its buffers may be half-written)."""
        jobs = [s.job for s in self._seqs]
        for job in jobs:
            job.out.clear()
            job.finish, job.prefilled = "length", 0
        self._seqs, self._arenas = [], []
        with self._cond:
            self._waiting.extendleft(reversed(jobs))

    def stats(self) -> dict[str, Any]:
        """The manifest's `backend_stats`: forward passes, those that decoded and the tokens
        they decoded (their ratio is the mean batch); the memory plan; the seconds of the load,
        of the passes that prefilled and of those that only decoded; on a GPU each phase's peak."""
        out: dict[str, Any] = {"forward_passes": self.steps, "decoding_passes": self.decode_steps,
                               "decoded_tokens": self.decoded, "memory_plan": self.plan.describe(),
                               "load_seconds": self.loaded["seconds"],
                               "prefill_seconds": round(self.prefill_seconds, 3),
                               "decode_seconds": round(self.decode_seconds, 3),
                               "prompt_tokens_run": self.prompt_tokens_run, "oom_retries": self.oom_retries}
        if self.oom_retries:
            out["batch_size_after_oom"], out["prompt_chunk_after_oom"] = self.batch_size, self.step_tokens
        if self.peaks:
            out["peak_memory_bytes"] = dict(self.peaks)
        return out
