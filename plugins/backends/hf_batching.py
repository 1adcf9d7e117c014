"""Continuous batching over shared prefixes for the `hf:` backend.

The engine's scheduler sends a transcript's questions together (`max_in_flight` > 1, one
request per `generate` call, from several threads). `BatchEngine` gathers them on one worker
thread that owns the model and runs one forward pass per step over every sequence in flight:
the transcript is prefilled once, each question's own tokens are prefilled beside it, and
the answers are decoded together; a finished answer leaves the batch at once and the next
waiting request joins at the next step (continuous batching). Long prompts are prefilled in
chunks of `STEP_TOKENS`, in the same passes as the other sequences' decoding steps.

What transformers gives and we use: the model's own forward (embeddings, RoPE from the
`position_ids` we pass, MLPs, `logits_to_keep` with the rows that sample), its attention
interface (`AttentionInterface.register`: our function replaces only the attention kernel
call, and ignores the mask the model builds), torch's
`scaled_dot_product_attention` for large query blocks, the tokenizer and chat template.

Why a loop of our own instead of `generate_batch` / `ContinuousBatchingManager` (transformers
5.x's continuous batching with a paged cache): it shares a prefix's *memory* (hashed blocks
of `page_size` tokens) but every request still reads the whole prefix in attention at every
decoding step, so B questions over a 12k-token transcript read 12k x B keys per step; here
the B questions' queries are stacked and read the transcript's keys once per step (one
matrix product per layer). Its match is by whole pages, so each question re-prefills up to
`page_size - 1` transcript tokens; ours matches to the token. It samples the whole batch from
one random generator, so a seeded answer would depend on its batch-mates; here every request
draws from its own generator, and the repeat penalty and stop strings are lceval's (the
same as the `llamacpp:` backend's). Measured on the 2-core CPU this project runs on
(SmolLM2-135M, a 6k-token transcript, 3 questions, 48 new tokens): `generate_batch` 87 s
against 53 s for the previous one-question-at-a-time loop.

Layout: an `Arena` holds one shared prefix (its *root*: the prompt of the request that
created it, stored at arena positions 0..n) and after it the own tokens of every sequence
reading it (its question, then its answer), all in one key/value buffer per layer. A
sequence sees the first `p` root tokens (its common prefix with the root) and its own
tokens; a boolean mask per step says so. Finished sequences' tokens are masked out and
compacted away. An idle arena is re-rooted by the next request sharing its prefix (its root
cropped to the shared part, then extended by the new prompt), which is the old loop's
"keep the last prompt" reuse, so conversations asked turn by turn prefill only the new turn.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lceval.errors import UserError
from lceval.types import GenerationParams

from .hf_decoding import next_token

if TYPE_CHECKING:
    import torch

#: The name our attention function is registered under in transformers' AttentionInterface.
ATTENTION_NAME = "lceval_shared_prefix"
#: Prompt tokens run per forward pass (decoding tokens of the batch included): bounds the
#: attention scratch memory of long prompts.
STEP_TOKENS = 1024
#: Prompt tokens a step prefills even when the batch's decoding tokens fill STEP_TOKENS.
MIN_PREFILL = 64
#: Query tokens up to which attention is a plain matrix product (CPU SDPA kernels are slow
#: on a handful of queries against many keys); above it, torch's SDPA.
SMALL_QUERY = 64
#: Rows the output layer computes at least when 2 or more sample, on the CPU: MKL's product
#: of 2 or 3 rows with the transposed [vocab, hidden] weight reads the weight once per row
#: (SmolLM2's 113 MB: 23 ms for 3 rows, 13 ms for 4, 7 ms for 1).
LOGIT_ROWS = 4
#: Owner marks in an arena: root tokens, and slots of finished sequences.
ROOT, DEAD, NOBODY = -1, -2, -3


def common_prefix(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def shares_enough(shared: int, prompt: int) -> bool:
    """A request joins an arena when the shared prefix is at least half of its prompt (a
    transcript); a few shared template tokens are not worth a sequence with a long tail."""
    return shared >= max(1, prompt // 2)


@dataclass
class Job:
    """One request handed in by a caller thread, and its answer once `done` is set."""

    ids: list[int]
    params: GenerationParams
    eos: frozenset[int]
    stop_hit: Callable[[list[int]], bool]
    #: tokens that may not come before `params.min_new_tokens` answer tokens (the end of text,
    #: a token that is a stop string): LongBench's `min_length` for samsum
    banned_early: frozenset[int] = frozenset()
    submitted: float = field(default_factory=time.perf_counter)
    done: threading.Event = field(default_factory=threading.Event)
    out: list[int] = field(default_factory=list)
    finish: str = "length"
    prefilled: int = 0
    seconds: float = 0.0
    error: BaseException | None = None


class Arena:
    """One shared prefix (the root, at positions 0..root_len) and the own tokens of the
    sequences reading it, in one key/value buffer per layer ([kv_heads, capacity, head_dim])."""

    def __init__(self, root_ids: list[int], device: Any) -> None:
        import torch

        self.root_ids = list(root_ids)  # the root once built (the builder's prompt)
        self.root_len = 0  # root tokens whose keys and values exist
        self.used = 0  # buffer positions written
        self.cap = 0
        self.device = device
        self.keys: dict[int, torch.Tensor] = {}
        self.values: dict[int, torch.Tensor] = {}
        self.owner = torch.empty(0, dtype=torch.long, device=device)  # ROOT, DEAD or a sequence id
        self.pos = torch.empty(0, dtype=torch.long, device=device)  # RoPE position of each token
        self.readers = 0  # sequences admitted on it (its builder included)
        self.building: Seq | None = None
        self.last_used = 0

    def reserve(self, n: int) -> None:
        """Room for `n` more tokens: the buffers grow by half, so appends are amortized."""
        import torch

        if self.used + n <= self.cap:
            return
        cap = max(self.used + n, self.cap * 3 // 2, 256)
        for store in (self.keys, self.values):
            for layer, old in store.items():
                new = old.new_empty(old.shape[0], cap, old.shape[2])
                new[:, :self.used] = old[:, :self.used]
                store[layer] = new
        owner = torch.full((cap,), DEAD, dtype=torch.long, device=self.device)
        pos = torch.zeros(cap, dtype=torch.long, device=self.device)
        owner[:self.used], pos[:self.used] = self.owner[:self.used], self.pos[:self.used]
        self.owner, self.pos, self.cap = owner, pos, cap

    def write(self, layer: int, index: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Store the new tokens' keys and values ([kv_heads, n, head_dim]) at `index`."""
        if layer not in self.keys:
            self.keys[layer] = keys.new_empty(keys.shape[0], self.cap, keys.shape[2])
            self.values[layer] = values.new_empty(values.shape[0], self.cap, values.shape[2])
        self.keys[layer].index_copy_(1, index, keys)
        self.values[layer].index_copy_(1, index, values)

    def forget(self, sid: int) -> None:
        """A finished sequence's own tokens leave every reader's view."""
        live = self.owner[:self.used]
        live[live == sid] = DEAD

    def crop(self, length: int) -> None:
        """Keep the first `length` root tokens and nothing else (only when nobody reads)."""
        self.root_len = self.used = min(length, self.root_len)

    def compact(self) -> None:
        """Drop finished sequences' tokens once they are most of the tail."""
        import torch

        tail = self.owner[self.root_len:self.used]
        dead = int((tail == DEAD).sum())
        if dead < 512 or dead * 2 < tail.numel():
            return
        keep = torch.cat([torch.arange(self.root_len, device=self.device),
                          self.root_len + torch.nonzero(tail != DEAD).flatten()])
        for store in (self.keys, self.values):
            for buf in store.values():
                buf[:, :keep.numel()] = buf.index_select(1, keep)
        self.owner[:keep.numel()] = self.owner.index_select(0, keep)
        self.pos[:keep.numel()] = self.pos.index_select(0, keep)
        self.used = keep.numel()


@dataclass
class Seq:
    """A request in the batch: what it reads of its arena, what it still has to prefill."""

    sid: int
    job: Job
    arena: Arena
    p: int  # root tokens it reads (for the builder: grows as the root is built)
    todo: list[int]  # prompt tokens still to run
    pos: int  # position of the next token it runs
    builder: bool  # its prompt tokens are the arena's root
    generator: Any
    last: int | None = None  # sampled, not yet run

    def waiting(self) -> bool:
        """Reads a root that another sequence is still building."""
        return not self.builder and self.arena.building is not None


@dataclass
class Group:
    """The rows of one step that read one arena."""

    arena: Arena
    rows: list[int]  # row indices in the packed step
    index: torch.Tensor  # arena positions the rows' keys and values go to
    visible_root: torch.Tensor  # per row: root positions below this are seen
    sid: torch.Tensor  # per row: its own tokens are those of this owner
    at: torch.Tensor  # per row: its own arena position (own tokens up to it are seen)
    position: torch.Tensor  # per row: its RoPE position
    row_index: torch.Tensor | None = None  # None: the group is the whole step, in order
    kv_len: int = 0
    masks: dict[Any, torch.Tensor] = field(default_factory=dict)

    def mask(self, device: Any, window: int | None) -> "torch.Tensor":
        """[rows, kv_len] bool: the root prefix a row reads, its own earlier tokens, and
        (sliding-window layers) only keys less than `window` positions back. Built once per
        step and kept for every layer."""
        key = (str(device), window)
        if key not in self.masks:
            import torch

            a = self.arena
            keys = torch.arange(self.kv_len, device=a.device)
            owner = a.owner[:self.kv_len]
            mask = (keys[None] < self.visible_root[:, None]) | \
                ((owner[None] == self.sid[:, None]) & (keys[None] <= self.at[:, None]))
            if window:
                mask &= (self.position[:, None] - a.pos[None, :self.kv_len]) < window
            self.masks[key] = mask.to(device)
        return self.masks[key]

    def bias(self, device: Any, window: int | None, stack: int, dtype: Any) -> "torch.Tensor":
        """The mask as an additive bias (0 where seen, -inf elsewhere), [1, stack * rows,
        kv_len] (the rows repeated for each query head sharing a key head): added to the
        scores by the same matrix product that computes them, or SDPA's attn_mask."""
        key = (str(device), window, stack, str(dtype))
        if key not in self.masks:
            import torch

            base = self.mask(device, window)
            rows, n = base.shape
            bias = torch.zeros(rows, n, dtype=dtype, device=device).masked_fill_(~base, float("-inf"))
            self.masks[key] = bias.unsqueeze(0).expand(stack, rows, n).reshape(1, stack * rows, n)
        return self.masks[key]


@dataclass
class Plan:
    """What one forward pass's attention layers need: the groups and the kernel choice."""

    groups: list[Group]
    eager: bool


def shared_prefix_attention(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                            attention_mask: Any, scaling: float | None = None, dropout: float = 0.0,
                            **kwargs: Any) -> tuple[torch.Tensor, None]:
    """transformers' attention-function signature. `query` [1, heads, rows, dim] holds every
    sequence's new tokens packed in one row dimension; `key`/`value` are those tokens' own
    keys and values, which go into their arena before each group's rows attend to it."""
    plan: Plan | None = kwargs.get("lceval_plan")
    if plan is None:  # the model called outside the engine (e.g. model.generate): SDPA, or the
        # model's own eager attention for what SDPA cannot do (soft-capped scores)
        import sys

        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        own = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)
        forward = own if kwargs.get("softcap") is not None and own is not None else sdpa_attention_forward
        return forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
    if kwargs.get("s_aux") is not None or getattr(module, "sinks", None) is not None:
        raise UserError("this model's attention uses sink tokens, which the hf backend's batched "
                        "attention does not compute", field="--model")
    window = kwargs.get("sliding_window") or getattr(module, "sliding_window", None)
    softcap = kwargs.get("softcap")
    layer = module.layer_idx
    heads, rows = query.shape[1], query.shape[2]
    whole = len(plan.groups) == 1 and plan.groups[0].row_index is None
    out = None if whole else query.new_empty(heads, rows, value.shape[3])
    result = None
    for g in plan.groups:
        if whole:
            q, k, v = query[0], key[0], value[0]
        else:
            q, k, v = (t[0].index_select(1, g.row_index) for t in (query, key, value))
        g.arena.write(layer, g.index.to(key.device), k, v)
        keys = g.arena.keys[layer][:, :g.kv_len]
        values = g.arena.values[layer][:, :g.kv_len]
        result = _attend(q, keys, values, g, window, scaling, softcap, plan.eager)
        if out is not None:
            out.index_copy_(1, g.row_index, result)
    final = result if out is None else out
    assert final is not None
    return final.transpose(0, 1).unsqueeze(0).contiguous(), None


def _attend(q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor", g: Group, window: int | None,
            scaling: float | None, softcap: float | None, eager: bool) -> "torch.Tensor":
    """q [heads, rows, dim] against k/v [kv_heads, n, dim] under the group's mask. The query
    heads sharing a key head are stacked as rows (grouped-query attention without copying
    the keys): a few rows are one matrix product with the mask as a bias, a softmax and a
    second product (three kernels per layer: on a shared CPU every parallel region costs);
    a prompt chunk goes to torch's SDPA."""
    import torch

    heads, rows, dim = q.shape
    kv_heads = k.shape[0]
    group = heads // kv_heads
    scale = scaling if scaling is not None else dim ** -0.5
    q = q.reshape(kv_heads, group * rows, dim)
    if softcap:
        scores = torch.tanh(torch.matmul(q, k.transpose(1, 2)) * (scale / softcap)) * softcap
        scores = scores.view(kv_heads, group, rows, -1).masked_fill_(~g.mask(q.device, window), float("-inf"))
        probs = torch.softmax(scores.view(kv_heads, group * rows, -1), dim=-1, dtype=torch.float32)
        out = torch.matmul(probs.to(v.dtype), v)
    elif eager or rows <= SMALL_QUERY:
        scores = torch.baddbmm(g.bias(q.device, window, group, q.dtype), q, k.transpose(1, 2), alpha=scale)
        out = torch.bmm(torch.softmax(scores, dim=-1, dtype=torch.float32).to(v.dtype), v)
    else:
        # the additive bias, not the boolean mask: SDPA would turn a boolean mask into this
        # same bias (0 / -inf) in every layer, a pass over [stack * rows, kv_len] each time
        out = torch.nn.functional.scaled_dot_product_attention(
            q[None], k[None], v[None], attn_mask=g.bias(q.device, window, group, q.dtype)[None], scale=scale)[0]
    return out.reshape(heads, rows, v.shape[2])


def register_attention() -> None:
    """Make ATTENTION_NAME a valid `attn_implementation` (idempotent). Its mask function is
    SDPA's, so the model called outside the engine (`model.generate`) gets the masks SDPA
    would; inside the engine that mask is ignored (each step brings its own)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    if ATTENTION_NAME not in AttentionInterface._global_mapping:
        AttentionInterface.register(ATTENTION_NAME, shared_prefix_attention)
    if ATTENTION_NAME not in AttentionMaskInterface._global_mapping:
        AttentionMaskInterface.register(ATTENTION_NAME, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])


class BatchEngine:
    """Runs the requests of several caller threads on one worker thread, batched.

    `submit` queues a request and returns its Job; `wait` blocks until it is answered (or
    re-raises what went wrong). At most `batch_size` sequences are in the batch; idle arenas
    are kept, oldest dropped first, while their buffers exceed `capacity_tokens`."""

    def __init__(self, model: Any, device: Any, batch_size: int, capacity_tokens: int,
                 eager: bool, pick: Callable[..., int]) -> None:
        self.model = model
        self.device = device
        self.batch_size = max(1, batch_size)
        self.capacity_tokens = capacity_tokens
        self.eager = eager
        self.pick = pick
        self.step_tokens = STEP_TOKENS  # prompt tokens per pass (a subclass may shrink it: hf_memory)
        self._cond = threading.Condition()
        self._waiting: deque[Job] = deque()
        self._seqs: list[Seq] = []
        self._arenas: list[Arena] = []
        self._ids = itertools.count()
        self._clock = itertools.count()
        self._closed = False
        self._reset = False
        self._thread: threading.Thread | None = None
        # what the tests and the run's manifest count (additive, so shards' counts add up)
        self.steps = 0  # forward passes run
        self.decode_steps = 0  # passes that decoded at least one token
        self.decoded = 0  # tokens those passes decoded (decoded / decode_steps = the mean batch)
        self.peak_batch = 0  # most sequences in one pass

    # -- caller side -------------------------------------------------------------------
    def submit(self, job: Job) -> Job:
        with self._cond:
            if self._closed:
                raise RuntimeError("the hf backend was closed")
            self._waiting.append(job)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True, name="lceval-hf-batch")
                self._thread.start()
            self._cond.notify()
        return job

    @staticmethod
    def wait(job: Job) -> Job:
        while not job.done.wait(0.2):  # a timeout, so Ctrl-C reaches a waiting main thread
            pass
        if job.error is not None:
            raise job.error
        return job

    def reset(self) -> None:
        """Forget every idle arena (before the next request is placed)."""
        with self._cond:
            self._reset = True
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    # -- worker side ---------------------------------------------------------------------
    def _run(self) -> None:
        import torch

        with torch.inference_mode():
            while True:
                with self._cond:
                    while not (self._closed or self._reset or self._waiting or self._seqs):
                        self._cond.wait()
                    if self._closed:
                        self._fail_all(RuntimeError("the hf backend was closed"))
                        self.model = None
                        return
                    if self._reset:
                        self._arenas = [a for a in self._arenas if a.readers]
                        self._reset = False
                    admitted = []
                    while self._waiting and len(self._seqs) + len(admitted) < self.batch_size:
                        admitted.append(self._waiting.popleft())
                try:
                    while admitted:
                        self._place(admitted[0])
                        admitted.pop(0)
                    if self._seqs:
                        self._step()
                except BaseException as exc:  # noqa: BLE001  (handed to the callers)
                    with self._cond:  # not placed yet: back to the front of the queue
                        self._waiting.extendleft(reversed(admitted))
                    if not self._recover(exc):
                        self._fail_all(exc)

    def _recover(self, exc: BaseException) -> bool:  # whether to go on (hf_memory's does after an OOM)
        return False

    def _fail_all(self, exc: BaseException) -> None:
        jobs = [s.job for s in self._seqs]
        with self._cond:
            jobs += list(self._waiting)
            self._waiting.clear()
        self._seqs, self._arenas = [], []  # their buffers may be half-written
        for job in jobs:
            job.error = exc
            job.done.set()

    def _place(self, job: Job) -> None:
        """Put a request on the arena it shares most with, re-root an idle one, or open one."""
        import torch

        ids = job.ids
        best, shared = None, 0
        for arena in self._arenas:
            n = common_prefix(arena.root_ids, ids[:-1])  # the last token always runs: fresh logits
            if n > shared:
                best, shared = arena, n
        if best is None or not shares_enough(shared, len(ids)):
            best, shared = Arena(ids, self.device), 0
            self._arenas.append(best)
        builder = best.readers == 0
        if builder:  # nobody reads it: its root becomes this prompt
            best.crop(shared)
            best.root_ids = list(ids)
        generator = torch.Generator().manual_seed(job.params.seed)
        seq = Seq(next(self._ids), job, best, shared, list(ids[shared:]), shared, builder, generator)
        job.prefilled = len(seq.todo)
        best.readers += 1
        best.last_used = next(self._clock)
        if builder:
            best.building = seq
            best.reserve(len(seq.todo) + 256)  # the whole root at once: no regrowth while it is built
        self._seqs.append(seq)
        self._evict()

    def _evict(self) -> None:
        """Drop idle arenas, oldest first, while the buffers exceed the capacity."""
        held = sum(a.cap for a in self._arenas)
        for arena in sorted((a for a in self._arenas if not a.readers), key=lambda a: a.last_used):
            if held <= self.capacity_tokens:
                break
            held -= arena.cap
            self._arenas.remove(arena)

    def _step(self) -> None:
        """One forward pass: every decoding sequence's last token, then prompt chunks."""
        import torch

        ready = [s for s in self._seqs if not s.waiting()]
        decoding = [s for s in ready if not s.todo]
        budget = max(self.step_tokens - len(decoding), MIN_PREFILL)
        runs: list[tuple[Seq, list[int]]] = [(s, [s.last]) for s in decoding if s.last is not None]
        for s in ready:
            if s.todo and budget > 0:
                runs.append((s, s.todo[:budget]))
                budget -= len(runs[-1][1])
        if not runs:  # every sequence waits for a root nobody builds: a bug, not a state to spin in
            raise RuntimeError("hf batching: sequences in flight but none can run")
        tokens: list[int] = []
        positions: list[int] = []
        keep: list[int] = []  # rows whose logits are sampled
        samplers: list[Seq] = []
        by_arena: dict[int, list[tuple[Seq, int, int]]] = {}  # arena -> (seq, first row, count)
        for s, chunk in runs:
            first = len(tokens)
            tokens += chunk
            positions += range(s.pos, s.pos + len(chunk))
            by_arena.setdefault(id(s.arena), []).append((s, first, len(chunk)))
            if len(chunk) == len(s.todo) or not s.todo:  # its prompt ends here, or it decodes
                keep.append(len(tokens) - 1)
                samplers.append(s)
        groups = [self._group(entries, len(tokens)) for entries in by_arena.values()]
        plan = Plan(groups, self.eager)
        dev = self.device
        if str(dev) == "cpu" and 1 < len(keep) < LOGIT_ROWS:  # the extra rows' logits go unread
            keep += [keep[-1]] * (LOGIT_ROWS - len(keep))
        out = self.model(input_ids=torch.tensor([tokens], device=dev),
                         position_ids=torch.tensor([positions], device=dev), use_cache=False,
                         logits_to_keep=torch.tensor(keep, dtype=torch.long, device=dev), lceval_plan=plan)
        logits = out.logits[0].float().cpu()  # one transfer for the batch; sampling runs on the CPU
        self.steps += 1
        decoded = sum(1 for s, _ in runs if not s.todo)
        self.decode_steps += decoded > 0
        self.decoded += decoded
        self.peak_batch = max(self.peak_batch, len(runs))
        for s, chunk in runs:  # the tokens ran: advance
            s.pos += len(chunk)
            if s.todo:
                s.todo = s.todo[len(chunk):]
                if s.builder and not s.todo:
                    s.builder, s.arena.building, s.p = False, None, s.arena.root_len
        for row, s in enumerate(samplers):
            self._sample(s, logits[row])
        for arena in {id(g.arena): g.arena for g in groups}.values():
            arena.compact()

    def _group(self, entries: list[tuple[Seq, int, int]], total: int) -> Group:
        """Arena positions and mask rows of one arena's share of the step."""
        import torch

        arena = entries[0][0].arena
        arena.reserve(sum(n for _, _, n in entries))
        rows, index, visible, sid, at, position = [], [], [], [], [], []
        for s, first, n in entries:
            start = arena.used
            idx = range(start, start + n)
            if s.builder:  # root tokens: positions equal arena positions
                assert start == arena.root_len == s.pos, "a root is built before any tail"
                arena.owner[start:start + n] = ROOT
                arena.root_len += n
                visible += [i + 1 for i in idx]
                sid += [NOBODY] * n
            else:
                arena.owner[start:start + n] = s.sid
                visible += [s.p] * n
                sid += [s.sid] * n
            arena.pos[start:start + n] = torch.arange(s.pos, s.pos + n, device=arena.device)
            arena.used += n
            rows += range(first, first + n)
            index += idx
            at += idx
            position += range(s.pos, s.pos + n)
        dev = arena.device
        as_tensor = lambda xs: torch.tensor(xs, dtype=torch.long, device=dev)
        in_order = rows == list(range(total))
        return Group(arena, rows, as_tensor(index), as_tensor(visible), as_tensor(sid), as_tensor(at),
                     as_tensor(position), None if in_order else as_tensor(rows), arena.used)

    def _sample(self, s: Seq, logits: torch.Tensor) -> None:
        token, finish = next_token(s.job, logits, self.pick, s.generator)
        if finish is not None:
            return self._finish(s, finish)
        s.last = token

    def _finish(self, s: Seq, reason: str) -> None:
        job = s.job
        job.finish = reason
        job.seconds = time.perf_counter() - job.submitted
        self._seqs.remove(s)
        arena = s.arena
        arena.readers -= 1
        arena.forget(s.sid)
        if arena.building is s:  # (a prompt that ends without sampling: max_new_tokens 0)
            arena.building = None
        if not arena.readers:
            arena.crop(arena.root_len)  # an idle arena keeps its root only
        arena.last_used = next(self._clock)
        job.done.set()
