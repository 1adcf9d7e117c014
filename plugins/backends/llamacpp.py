"""`llamacpp:` backend: a local GGUF model run through llama-cpp-python.

`llama_cpp` is imported only inside the backend, so that loading this plugin (which every
`lceval` command does) stays instant and works where llama-cpp-python is not installed.

Two llama.cpp objects are loaded lazily: a vocab-only one (tokenizer and metadata: enough
for `identity`, `count_tokens` and the context policy's cutting) and, on the first
`generate`, the full model. A rerun whose answers are all cached never loads the weights.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from lceval import hookimpl
from lceval.errors import UserError
from lceval.interfaces import ModelBackend, requires
from lceval.options import check_options
from lceval.tokens import check_fits_window, opens_thinking, template_thinks, thinking_kwargs
from lceval.types import Generation, GenerationRequest, Message

from . import local_files
from .local_files import file_sha256

if TYPE_CHECKING:
    from llama_cpp import Llama

SCHEME = "llamacpp"
_INSTALL_HINT = "Install it with: pip install 'lceval[llamacpp]'"
_ROPE_SCALING = {"none": 0, "linear": 1, "yarn": 2}  # llama.cpp's LLAMA_ROPE_SCALING_TYPE_*

#: Typed options (`llamacpp:MODEL,n_ctx=8192`); the engine checks them before the factory runs.
OPTIONS = {"type": "object", "additionalProperties": False, "properties": {
    "n_ctx": {"type": "integer", "minimum": 1,
              "description": "Context window in tokens (default: the model's trained context length)."},
    "n_threads": {"type": "integer", "minimum": 1, "description": "CPU threads for prefill and decoding (default: every CPU this process may use)."},
    "n_batch": {"type": "integer", "minimum": 1, "default": 512, "description": "Prompt tokens per forward pass."},
    "rope_freq_base": {"type": "number", "exclusiveMinimum": 0, "description": "RoPE base frequency."},
    "rope_freq_scale": {"type": "number", "exclusiveMinimum": 0, "description": "RoPE frequency scale."},
    "rope_scaling_type": {"enum": list(_ROPE_SCALING), "description": "RoPE scaling method."},
    "chat_template": {"type": "string", "minLength": 1,
                      "description": "A Jinja chat template file (or the template text) instead of the GGUF's own."},
    "verbose": {"type": "boolean", "default": False, "description": "Show llama.cpp's own log."},
    "cpu_repack": {"type": "boolean",
                   "description": "Let llama.cpp repack the weights for its CPU kernels (its 'extra buffer types': "
                                  "AMX, AVX and NEON repacking). Default: off on CPUs with Intel AMX, whose llama.cpp "
                                  "kernel crashes (ggml-org/llama.cpp#20824), on elsewhere."},
}}


def cpu_has_amx() -> bool:
    """Whether this CPU has Intel AMX (Linux reports `amx_int8` among its flags)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            return any(line.startswith("flags") and "amx_int8" in line.split() for line in fh)
    except OSError:
        return False


@contextlib.contextmanager
def cpu_repack(enabled: bool | None) -> Iterator[None]:
    """Models loaded inside the block repack their weights for the CPU's kernels or not
    (`enabled`; None: not on an AMX CPU). llama.cpp's AMX matrix multiply segfaults on the
    first prompt of more than a few tokens on some Sapphire Rapids machines (seen here with
    llama-cpp-python 0.3.36 and SmolLM2's Q4_1 weights; ggml-org/llama.cpp#20824, closed
    unfixed); llama-cpp-python exposes the switch (`use_extra_bufts`) only through the
    default model parameters its `Llama` starts from, so those are wrapped for the block."""
    import llama_cpp.llama_cpp as low

    if enabled is None:
        enabled = not cpu_has_amx()
    if enabled:
        yield
        return
    original = low.llama_model_default_params

    def without_repacking() -> Any:
        params = original()
        params.use_extra_bufts = False
        return params

    low.llama_model_default_params = without_repacking
    try:
        yield
    finally:
        low.llama_model_default_params = original


def resolve_model_path(model: str) -> Path:
    if model.startswith("pkg:"):
        return local_files.resolve_package_file(model)
    path = Path(model).expanduser()
    if not path.is_file():
        raise UserError(f"GGUF model file not found: {path}", field="--model")
    return path


@contextlib.contextmanager
def _quiet(enabled: bool) -> Iterator[None]:
    """llama.cpp writes to fd 2 from C, past Python's sys.stderr; silence it at the fd level."""
    if not enabled:
        yield
        return
    sys.stderr.flush()
    saved, saved_stream = os.dup(2), sys.stderr
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            sys.stderr = null  # llama-cpp-python's log callback prints through sys.stderr
            yield
    finally:
        sys.stderr = saved_stream
        os.dup2(saved, 2)
        os.close(saved)


def _import_llama_cpp() -> Any:
    try:
        import llama_cpp
        import llama_cpp.llama_chat_format  # noqa: F401  (the jinja formatter we mirror)
    except Exception as exc:  # noqa: BLE001 - a missing or broken build (OSError of its shared library) too
        raise UserError(f"the llamacpp backend needs llama-cpp-python, which cannot be imported "
                        f"({type(exc).__name__}: {exc})", field="--model", hint=_INSTALL_HINT) from None
    return llama_cpp


class LlamaCppBackend(ModelBackend):
    """One GGUF model; requests run one at a time so the KV cache of the previous request
    (a long transcript) is reused by the next one that shares its prefix."""

    batch_size = 1
    #: a last assistant message is continued (prompt_tokens)
    continues_assistant = True

    def __init__(self, model: str, options: dict[str, str]) -> None:
        self.options = check_options(OPTIONS, options, what=f"backend '{SCHEME}'")
        self.path = resolve_model_path(model)
        self.verbose: bool = self.options.get("verbose", False)
        self._vocab: Llama | None = None
        self._llama: Llama | None = None
        self._formatter: Any = None
        self._switched: dict[Any, Any] = {}
        self._template: str | None = None
        self._n_ctx: int | None = self.options.get("n_ctx")

    # -- lazy loading --------------------------------------------------------------------
    def _load(self, **kwargs: Any) -> "Llama":
        with self.path.open("rb") as f:
            if f.read(4) != b"GGUF":  # llama.cpp's own failure leaves a noisy __del__ traceback
                raise UserError(f"not a GGUF file: {self.path}", field="--model")
        llama_cpp = _import_llama_cpp()
        try:
            with _quiet(not self.verbose), cpu_repack(self.options.get("cpu_repack")):
                return llama_cpp.Llama(model_path=str(self.path), verbose=self.verbose, **kwargs)
        except (ValueError, RuntimeError) as exc:
            raise UserError(f"llama.cpp cannot load {self.path}: {exc}", field="--model",
                            hint="Is it a GGUF file of an architecture this llama-cpp-python supports?"
                            ) from None

    def _tokenizer(self) -> "Llama":
        """Vocab-only model: metadata and tokenizer without reading the weights."""
        if self._vocab is None:
            self._vocab = self._load(vocab_only=True)
            meta = self._vocab.metadata
            if self._n_ctx is None:
                arch = meta.get("general.architecture", "")
                trained = meta.get(f"{arch}.context_length")
                if trained is None:
                    raise UserError(f"{self.path.name} does not record its trained context length",
                                    field="n_ctx", hint="Pass n_ctx=N in the model spec.")
                self._n_ctx = int(trained)
            self._formatter = self._make_formatter(self._vocab)
        return self._vocab

    def _make_formatter(self, vocab: "Llama", template: str | None = None) -> Any:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        override = self.options.get("chat_template")
        if template is not None:
            pass  # the model's own, with a switch set (_formatter_for)
        elif override is not None:
            path = Path(override).expanduser()
            if path.is_file():
                template = path.read_text(encoding="utf-8")
            elif "{{" in override or "{%" in override:
                template = override
            else:
                raise UserError(f"chat_template file not found: {path}", field="chat_template")
            self._template = template
        else:
            template = vocab.metadata.get("tokenizer.chat_template")
            if not template:
                raise UserError(f"{self.path.name} has no chat template in its metadata",
                                field="chat_template", hint="Pass chat_template=FILE.jinja.")
            self._template = template
        model = vocab._model

        def text(token: int) -> str:
            return model.token_get_text(token) if token != -1 else ""

        try:
            return Jinja2ChatFormatter(template=template, eos_token=text(vocab.token_eos()),
                                       bos_token=text(vocab.token_bos()), add_generation_prompt=True)
        except Exception as exc:  # jinja2.TemplateSyntaxError and friends
            raise UserError(f"chat template does not compile: {exc}", field="chat_template") from None

    def _model(self) -> "Llama":
        if self._llama is None:
            self._tokenizer()
            kwargs: dict[str, Any] = {"n_ctx": self._n_ctx, "n_batch": self.options["n_batch"]}
            # llama-cpp-python decodes with half the CPUs by default (one thread on a 2-core
            # machine); both prefill and decode get every CPU this process may use
            kwargs["n_threads"] = kwargs["n_threads_batch"] = self.options.get("n_threads", usable_cpus())
            for key in ("rope_freq_base", "rope_freq_scale"):
                if key in self.options:
                    kwargs[key] = self.options[key]
            if "rope_scaling_type" in self.options:
                kwargs["rope_scaling_type"] = _ROPE_SCALING[self.options["rope_scaling_type"]]
            self._llama = self._load(**kwargs)
        return self._llama

    # -- ModelBackend ----------------------------------------------------------------------
    @property  # type: ignore[override]  # the base's class attribute; here it may need metadata
    def context_window(self) -> int:
        self._tokenizer()
        assert self._n_ctx is not None
        return self._n_ctx

    def identity(self) -> dict[str, Any]:
        self._tokenizer()
        assert self._template is not None
        return {
            "scheme": SCHEME,
            "model_sha256": file_sha256(self.path),
            "file": self.path.name,
            "n_ctx": self._n_ctx,
            "rope_freq_base": self.options.get("rope_freq_base"),
            "rope_freq_scale": self.options.get("rope_freq_scale"),
            "rope_scaling_type": self.options.get("rope_scaling_type"),
            "chat_template_sha256": hashlib.sha256(self._template.encode("utf-8")).hexdigest(),
        }

    def thinks(self) -> bool:
        """A reasoning model's template writes thinking markers or has a thinking switch."""
        self._tokenizer()
        return template_thinks(self._template)

    def _formatter_for(self, thinking: bool | None) -> Any:
        """The chat formatter, with the template's thinking switch set when the run sets it
        (llama-cpp-python's formatter takes no template keywords: the switch is set at the top
        of the template, where `enable_thinking is defined` sees it)."""
        kwargs = thinking_kwargs(self._template, thinking)
        if not kwargs:
            return self._formatter
        key = ("thinking", kwargs["enable_thinking"])
        if key not in self._switched:
            switch = "{%- set enable_thinking = " + ("true" if kwargs["enable_thinking"] else "false") + " -%}"
            self._switched[key] = self._make_formatter(self._tokenizer(), switch + (self._template or ""))
        return self._switched[key]

    def prompt_tokens(self, messages: list[Message], thinking: bool | None = False) -> list[int]:
        """The exact tokens `generate` sends: template rendered as llama-cpp-python's chat
        handler does, special tokens parsed, BOS added only if the model wants one and the
        template did not already write it. A last assistant message is continued: the messages
        before it with the generation prompt, then its text. Without the run's thinking switch
        (the context policy's counts), a template with the switch renders with thinking off,
        its longer form."""
        vocab = self._tokenizer()
        continued = messages[-1].content if messages and messages[-1].role == "assistant" else ""
        shown = messages[:-1] if continued else messages
        try:
            prompt = self._formatter_for(thinking)(messages=[{"role": m.role, "content": m.content}
                                                            for m in shown]).prompt
        except Exception as exc:  # raise_exception() in the template, undefined variables
            raise UserError(f"chat template rejects these messages: {exc}", field="chat_template") from None
        tokens = vocab.tokenize((prompt + continued).encode("utf-8"), add_bos=False, special=True)
        bos = vocab.token_bos()
        if vocab._model.add_bos_token() and bos != -1 and tokens[:1] != [bos]:
            tokens.insert(0, bos)
        return tokens

    def count_tokens(self, messages: list[Message]) -> int:
        return len(self.prompt_tokens(messages))

    def tokenize(self, text: str) -> list[int]:
        return self._tokenizer().tokenize(text.encode("utf-8"), add_bos=False, special=False)

    def detokenize(self, tokens: list[int]) -> str:
        return self._tokenizer().detokenize(tokens).decode("utf-8", errors="replace")

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        return [self._generate_one(r) for r in requests]

    def _generate_one(self, request: GenerationRequest) -> Generation:
        start = time.perf_counter()
        params = request.params
        tokens = self.prompt_tokens(request.messages, params.thinking)
        check_fits_window(request, len(tokens), self.context_window, "n_ctx")
        llama = self._model()
        reused = reusable_prefix(llama, tokens)
        with _quiet(not self.verbose):
            out: Any = llama.create_completion(
                prompt=tokens, max_tokens=params.max_new_tokens, temperature=params.temperature,
                top_p=params.top_p, top_k=0, min_p=0.0, repeat_penalty=params.repeat_penalty,
                seed=params.seed, stop=list(params.stop) or None,
                logits_processor=self._minimum(params, len(tokens)))
        choice = out["choices"][0]
        opened = self.thinks() and opens_thinking(self._tokenizer().detokenize(tokens[-16:]).decode("utf-8", "replace"))
        return Generation(
            request_id=request.request_id,
            text=choice["text"],
            extras={"opened_thinking": True} if opened else {},
            prompt_tokens=len(tokens),
            prefilled_tokens=len(tokens) - reused,
            completion_tokens=int(out["usage"]["completion_tokens"]),
            finish_reason="length" if choice["finish_reason"] == "length" else "stop",
            seconds=time.perf_counter() - start,
        )

    def _minimum(self, params: Any, prompt_len: int) -> Any:
        """LongBench's `min_length`: before `min_new_tokens` answer tokens, neither the end of
        text nor a token that is a stop string may be drawn (a processor of llama-cpp-python's)."""
        if not params.min_new_tokens:
            return None
        from llama_cpp import LogitsProcessorList

        vocab = self._tokenizer()
        banned = {vocab.token_eos()} | {ids[0] for stop in params.stop if stop
                                        for ids in [self.tokenize(stop)] if len(ids) == 1}

        def hold(input_ids: Any, scores: Any) -> Any:
            if len(input_ids) - prompt_len < params.min_new_tokens:
                scores[list(banned)] = -float("inf")
            return scores

        return LogitsProcessorList([hold])

    def close(self) -> None:
        for llama in (self._llama, self._vocab):
            if llama is not None:
                llama.close()
        self._llama = self._vocab = None


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask, which containers and `taskset` set),
    not every CPU of the machine."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no sched_getaffinity (macOS, Windows)
        return max(1, os.cpu_count() or 1)


def reusable_prefix(llama: "Llama", tokens: list[int]) -> int:
    """Tokens of `tokens` already in the KV cache, as `Llama.generate` decides it: the longest
    common prefix with the evaluated ids, compared against all but the last prompt token
    (that one is always re-evaluated to get fresh logits)."""
    import numpy as np

    if llama.n_tokens <= 0 or len(tokens) < 2:
        return 0
    cached = np.asarray(llama._input_ids)
    new = np.asarray(tokens[:-1], dtype=cached.dtype)
    n = min(len(cached), len(new))
    differ = np.flatnonzero(cached[:n] != new[:n])
    return int(differ[0]) if len(differ) else n


@requires("llama_cpp", install="pip install 'lceval[llamacpp]'")
def make_llamacpp(model: str, options: dict[str, str]) -> LlamaCppBackend:
    return LlamaCppBackend(model, options)


@hookimpl
def register_models(register: Callable[[str, Any], None]) -> None:
    register(SCHEME, make_llamacpp, options_schema=OPTIONS)
