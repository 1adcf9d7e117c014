"""The `hf:` backend with a long-context method (`press=NAME,compression_ratio=R`): kvpress's
way of answering, around lceval's requests.

What changes with a press, and why:
- The context is prefilled into a transformers `DynamicCache` under the method
  (`ContextMethod.prefilling`): a kvpress press hooks every attention layer and compresses
  its keys and values as they are written. Then each question is prefilled on top of the
  compressed cache and its answer decoded token by token, and the cache is cut back to the
  compressed context for the next question. This is kvpress's own pipeline
  (`KVPressTextGenerationPipeline._forward`), so the same press gives the same greedy answer
  here and there (tests/kvpress checks it token for token).
- What is compressed is the context alone (the prompt up to the end of the `{context}` text,
  which the engine marks in `hints["context_end"]`), not the question: the cache is
  question-agnostic, as kvpress's benchmarks and KVzip (Kim et al., 2025) evaluate, and a
  context's questions all read the one compressed cache, prefilled once. With
  `press_query_aware=true` each prompt is compressed with its question in view (through the
  end of its last user message, as kvpress's `query_aware`): SnapKV's original setting, which
  favours question-guided presses and shares nothing between questions.
- Batched decoding is off: the cache is one sequence's (presses compress per sequence and
  kvpress decodes one question at a time), so requests are answered one by one
  (`max_in_flight` 1, a last-prompt cache the scheduler sends a transcript's questions to in
  order). The backend prints this once and records it in the run's `backend_stats`.
- The model runs transformers' own attention (sdpa, or eager for a method that reads the
  attention weights), which kvpress patches for its head-wise presses, not lceval's batched
  shared-prefix kernel.

Per answer, `Generation.extras` gets what a sweep's report draws (lceval.methods.EXTRAS):
the cache's positions and bytes when the answer ended, the bytes of the entries the press
kept, the context's positions after compression and the share of its key/value entries
kept, and the prefill and decoding seconds. A head-wise press (kvpress's AdaKV budget) keeps
every position and masks keys in attention (`ContextMethod.masked_entries` counts them): its
cache takes the uncompressed bytes, which `kv_cache_bytes` says, while `kv_kept_share` and
`kv_kept_bytes` say what it kept and the memory that would take, so neither is mistaken for
the other.
"""

from __future__ import annotations

import inspect
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from lceval.errors import UserError
from lceval.methods import METHOD_OPTION, QUERY_AWARE_OPTION, RATIO_OPTION, ContextMethod, method_options_of
from lceval.tokens import thinking_kwargs
from lceval.types import GenerationRequest

from .hf_batching import Job, common_prefix
from .hf_decoding import next_token

#: The separator put where the compressed part ends, to find it in the rendered chat template
#: (kvpress's preprocess splits its template the same way).
_SEPARATOR = "\u2063lceval-press-split\u2063"

WHY_NOT_BATCHED = ("a press compresses one sequence's cache, and kvpress answers one question at a time from it, "
                   "so requests are answered one by one")


@dataclass
class PressSetting:
    """The press a model string asks for: the method built once, and how it is applied."""

    method: ContextMethod
    compression_ratio: float | None
    query_aware: bool
    options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> "PressSetting | None":
        """None without `press=`; a ratio or press option without a press is refused."""
        name = options.get(METHOD_OPTION)
        own = method_options_of(options)
        if name is None:
            for key in (RATIO_OPTION, *(f"{METHOD_OPTION}.{k}" for k in own)):
                if key in options:
                    raise UserError(f"option {key}={options[key]} needs a press (press=NAME)", field=key,
                                    hint="`lceval plugins` lists the installed methods (kind: method).")
            if options.get(QUERY_AWARE_OPTION):
                raise UserError(f"option {QUERY_AWARE_OPTION}=true needs a press (press=NAME)",
                                field=QUERY_AWARE_OPTION)
            return None
        from lceval.engine import Plugins

        ratio = options.get(RATIO_OPTION)
        method = Plugins.current().open_method(str(name), own, ratio)
        return cls(method, ratio, bool(options.get(QUERY_AWARE_OPTION)), own)

    def identity(self) -> dict[str, Any]:
        return {**self.method.identity(), "query_aware": self.query_aware}

    def attention(self, requested: str) -> str:
        """transformers' own attention (kvpress patches it), eager where the method reads weights."""
        return "eager" if self.method.needs_attention_weights or requested == "eager" else "sdpa"


def compressed_span(tokenizer: Any, request: GenerationRequest, ids: list[int], query_aware: bool,
                    template: str | None) -> int:
    """How many of the prompt's `ids` the press compresses: through the end of the context
    (`hints["context_end"]` = [message index, character offset]), or with `query_aware`
    through the end of the last user message; 0 when the request has no context. Found as
    kvpress finds it, by rendering the chat template with a separator there, then kept to
    the prompt's own tokens (the longest run of them the rendered part tokenizes to)."""
    messages = list(request.messages)
    continued = messages[-1].role == "assistant"
    shown = messages[:-1] if continued else messages
    if query_aware:
        users = [i for i, m in enumerate(shown) if m.role == "user"]
        at = (users[-1], len(shown[users[-1]].content)) if users else None
    else:
        end = request.hints.get("context_end")
        at = (int(end[0]), int(end[1])) if isinstance(end, (list, tuple)) and len(end) == 2 else None
    if at is None or at[0] >= len(shown):
        return 0
    index, offset = at
    marked = [{"role": m.role, "content": m.content} for m in shown]
    marked[index]["content"] = marked[index]["content"][:offset] + _SEPARATOR + marked[index]["content"][offset:]
    text = tokenizer.apply_chat_template(marked, add_generation_prompt=True, tokenize=False,
                                         **thinking_kwargs(template, request.params.thinking))
    if _SEPARATOR not in text:
        raise UserError("the chat template changes the message text, so where the context ends cannot be found in "
                        "the prompt, and a press compresses up to there", field="chat_template",
                        hint="Pass chat_template=FILE.jinja with a template that writes the messages as they are.")
    head = text.split(_SEPARATOR)[0]
    return common_prefix(ids, list(tokenizer.encode(head, add_special_tokens=False)))


def cache_layers(cache: Any) -> list[tuple[int, int, int]]:
    """Per layer of the cache: (key/value heads, positions held, bytes of its keys and values)."""
    out = []
    for layer in cache.layers:
        keys, values = getattr(layer, "keys", None), getattr(layer, "values", None)
        if keys is None or not hasattr(keys, "shape") or keys.dim() < 3:
            out.append((0, 0, 0))
            continue
        heads = keys.numel() // (int(keys.shape[-2]) * int(keys.shape[-1])) if keys.numel() else 0
        out.append((heads, int(keys.shape[-2]),
                    keys.numel() * keys.element_size() + values.numel() * values.element_size()))
    return out


def kept_bytes(layers: list[tuple[int, int, int]], masked: list[int]) -> int:
    """The bytes the cache's entries would take without the `masked` ones (per layer): each
    layer's bytes times its share of entries not masked. Counts not given per layer are
    spread over the whole cache."""
    if len(masked) != len(layers):
        entries = sum(h * n for h, n, _ in layers)
        return round(sum(b for _, _, b in layers) * (1 - sum(masked) / entries)) if entries else 0
    return round(sum(b * (1 - m / (h * n)) for (h, n, b), m in zip(layers, masked) if h * n))


def cut_back(cache: Any, lengths: list[int]) -> None:
    """Each layer back to `lengths` positions (the compressed context): kvpress's
    `_remove_answer_from_cache`."""
    for layer, n in zip(cache.layers, lengths):
        layer.keys = layer.keys[:, :, :n]
        layer.values = layer.values[:, :, :n]


class PressEngine:
    """Answers requests one at a time (thread-safe) from a cache the method built; keeps the
    last compressed context, so the next question about it prefills only its own tokens."""

    def __init__(self, model: Any, setting: PressSetting, pick: Callable[..., int]) -> None:
        self.model = model
        self.setting = setting
        self.pick = pick
        self.device = model.get_input_embeddings().weight.device
        # transformers renamed `past_key_values` `cache` (5.2x; the old name goes in 5.40)
        self._cache_word = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        self._lock = threading.Lock()
        self._context: list[int] | None = None  # the prompt tokens the kept cache was built from
        self._cache: Any = None
        self._kept: list[int] = []  # each layer's positions after compression
        self._masked: list[int] = []  # each layer's context entries the method masks (masked_entries)
        self._kept_share: float | None = None  # of the last context's key/value entries
        # what the manifest's backend_stats records (additive across shards)
        self.contexts_compressed = 0
        self.context_tokens = 0  # tokens of the contexts before compression (per layer)
        self.kept_tokens = 0  # their positions after compression, mean over layers
        self.context_entries = 0  # key/value entries (heads x positions, all layers) of the contexts
        self.kept_entries = 0  # of those, the entries kept: held and not masked
        self.masked = 0  # entries held in the cache but masked out of attention
        self.answers = 0
        self._said = False

    def stats(self) -> dict[str, Any]:
        """`kept_share`: the share of the contexts' key/value entries the press kept (masked
        ones counted as dropped); `held_share`: the share of their positions the cache still
        holds, the memory it takes (1.0 for a press that only masks)."""
        held = self.kept_tokens / self.context_tokens if self.context_tokens else None
        kept = self.kept_entries / self.context_entries if self.context_entries else None
        return {"press": self.setting.method.name, "compression_ratio": self.setting.compression_ratio,
                "query_aware": self.setting.query_aware, "batched_decoding": False,
                "batched_decoding_off_because": WHY_NOT_BATCHED,
                "prefix_reuse": not self.setting.query_aware, "contexts_compressed": self.contexts_compressed,
                "context_tokens": self.context_tokens, "kept_share": kept, "held_share": held,
                "masked_entries": self.masked, "answers": self.answers}

    def reset(self) -> None:
        with self._lock:
            self._context, self._cache, self._kept, self._masked, self._kept_share = None, None, [], [], None

    def answer(self, job: Job, span: int) -> dict[str, Any]:
        """Answer `job` (its prompt's first `span` tokens compressed): the job gets its answer
        and counts; returns the answer's `extras` (lceval.methods.EXTRAS)."""
        import torch

        with self._lock, torch.inference_mode():
            if not self._said:
                self._said = True
                print(f"lceval: hf: press '{self.setting.method.name}': batched decoding is off ({WHY_NOT_BATCHED})"
                      + ("; query-aware: each prompt is compressed with its question, no cache is shared"
                         if self.setting.query_aware else
                         "; each context is prefilled and compressed once, its questions read that cache"),
                      file=sys.stderr)
            start = time.perf_counter()
            context, rest = job.ids[:span], job.ids[span:]
            if not rest:  # the last prompt token always runs: fresh logits to answer from
                context, rest = context[:-1], context[-1:]
            reused = bool(context) and self._cache is not None and self._context == context
            if not reused:  # (a prompt without a context, a judge's: nothing compressed, nothing kept)
                self._prefill(context)
            prefilled = len(rest) + (0 if reused else len(context))
            job.prefilled = prefilled
            position = self.setting.method.next_position(len(context), self._cache)
            with self.setting.method.decoding(self.model, self._cache):
                logits = self._forward(rest, position)
                prefill_done = time.perf_counter()
                position += len(rest)
                generator = torch.Generator().manual_seed(job.params.seed)
                while True:
                    token, finish = next_token(job, logits, self.pick, generator)
                    if finish is not None:
                        job.finish = finish
                        break
                    assert token is not None
                    logits = self._forward([token], position)
                    position += 1
            layers = cache_layers(self._cache)
            if context:
                cut_back(self._cache, self._kept)
            else:
                self._cache = self._context = None
            end = time.perf_counter()
            self.answers += 1
            job.seconds = end - job.submitted
            return {"kv_cache_tokens": round(sum(n for _, n, _ in layers) / max(1, len(layers)), 1),
                    "kv_cache_bytes": sum(b for _, _, b in layers),
                    "kv_kept_bytes": kept_bytes(layers, self._masked),
                    "kv_context_tokens": round(sum(self._kept) / max(1, len(self._kept)), 1),
                    "kv_kept_share": None if self._kept_share is None else round(self._kept_share, 6),
                    "context_tokens": len(context),
                    "prefill_seconds": round(prefill_done - start, 6),
                    "decode_seconds": round(end - prefill_done, 6)}

    def _prefill(self, context: list[int]) -> None:
        """The context into a fresh cache under the method (kvpress: the model without its head)."""
        import torch
        from transformers import DynamicCache

        cache = DynamicCache()
        self._cache, self._context, self._kept, self._masked, self._kept_share = cache, list(context), [], [], None
        if not context:
            return
        with self.setting.method.prefilling(self.model, cache):
            self.model.model(input_ids=torch.tensor([context], device=self.device), **{self._cache_word: cache})
        layers = cache_layers(cache)
        self._kept = [n for _, n, _ in layers]
        self._masked = [int(m) for m in self.setting.method.masked_entries(self.model) or []]
        entries = sum(h for h, _, _ in layers) * len(context)
        kept = sum(h * n for h, n, _ in layers) - sum(self._masked)
        self._kept_share = kept / entries if entries else None
        self.contexts_compressed += 1
        self.context_tokens += len(context)
        self.kept_tokens += sum(self._kept) / max(1, len(self._kept))
        self.context_entries += entries
        self.kept_entries += kept
        self.masked += sum(self._masked)

    def _forward(self, tokens: list[int], position: int) -> Any:
        import torch

        positions = torch.arange(position, position + len(tokens), device=self.device).unsqueeze(0)
        out = self.model(input_ids=torch.tensor([tokens], device=self.device), **{self._cache_word: self._cache},
                         position_ids=positions, logits_to_keep=1)
        return out.logits[0, -1].float().cpu()


