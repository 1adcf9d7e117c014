"""Token access for backends that run a Hugging Face transformers model (public API).

A third-party backend for an engine that loads Hugging Face weights (vLLM, SGLang, TGI in
process, ...) inherits `HFTokens`, names its folder or hub id in `_source()`, and gets the
tokenizer and chat template loaded lazily (nothing loads for `--help`, `identity()` or a rerun
served from the cache) and the token methods the context policy needs. The prompt is exactly
the chat template's token ids with the generation prompt, so a cut made by the context policy
is the cut the model sees; send those ids to the engine, not text. lceval's own `hf:` and
`vllm:` backends are built on it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lceval.errors import UserError
from lceval.tokens import check_fits_window
from lceval.types import GenerationRequest, Message

__all__ = ["HFTokens", "chat_token_ids", "read_chat_template"]

_INSTALL_HINT = "Install it with: pip install 'lceval[hf]'"


def read_chat_template(value: str) -> str:
    """A `chat_template=` option: a jinja file, or the template itself inline."""
    path = Path(value).expanduser()
    if path.is_file():
        return path.read_text(encoding="utf-8")
    if "{{" in value or "{%" in value:
        return value
    raise UserError(f"chat_template file not found: {path}", field="chat_template")


def chat_token_ids(tokenizer: Any, messages: list[Message], name: str) -> list[int]:
    """The prompt's tokens: the tokenizer's chat template with the generation prompt, special
    tokens as the template writes them (none added on top)."""
    try:
        ids = tokenizer.apply_chat_template([{"role": m.role, "content": m.content} for m in messages],
                                            add_generation_prompt=True, tokenize=True, return_dict=False)
    except Exception as exc:  # no template, raise_exception() in it, undefined variables
        raise UserError(f"chat template of '{name}' fails on these messages: {exc}",
                        field="chat_template", hint="Pass chat_template=FILE.jinja.") from None
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):
        ids = ids["input_ids"]
    return [int(t) for t in ids]


class HFTokens:
    """Config and tokenizer of a transformers model (found by `_source()`), loaded lazily,
    and the token access the context policy needs: the prompt is exactly the chat template's
    tokens. Shared by the backends that run Hugging Face models (hf, vllm)."""

    name: str
    install_hint: str = _INSTALL_HINT
    template_override: str | None = None
    _tokenizer: Any = None

    def _source(self) -> tuple[str, dict[str, Any]]:
        """What from_pretrained gets: a folder or hub id, plus keyword arguments."""
        raise NotImplementedError

    def _load(self, what: str, auto_class: str, **extra: Any) -> Any:
        """`transformers.<auto_class>.from_pretrained`, its failures turned into UserErrors."""
        try:
            import transformers
        except ImportError as exc:
            raise UserError(f"loading '{self.name}' needs transformers, which cannot be imported ({exc})",
                            field="--model", hint=self.install_hint) from None
        src, kwargs = self._source()
        try:
            return getattr(transformers, auto_class).from_pretrained(src, **kwargs, **extra)
        except ImportError as exc:  # e.g. `gguf` missing for a .gguf file
            raise UserError(f"loading the {what} of '{self.name}' needs a missing package: {exc}",
                            field="--model", hint=self.install_hint) from None
        except (OSError, ValueError, KeyError) as exc:
            raise UserError(f"transformers cannot load the {what} of '{self.name}': {exc}",
                            field="--model", hint="Hub models must be in the local Hugging Face "
                            "cache when offline; check the id, revision, or trust_remote_code."
                            ) from None

    def _get_tokenizer(self) -> Any:
        if self._tokenizer is None:
            tok = self._load("tokenizer", "AutoTokenizer")
            if self.template_override is not None:
                tok.chat_template = self.template_override
            self._tokenizer = tok
        return self._tokenizer

    def prompt_tokens(self, messages: list[Message]) -> list[int]:
        """The exact tokens `generate` runs: the chat template with the generation prompt."""
        return chat_token_ids(self._get_tokenizer(), messages, self.name)

    def checked_prompt_tokens(self, request: GenerationRequest, window: int, window_option: str) -> list[int]:
        """The request's prompt tokens, refused when they and the answer do not fit `window`."""
        ids = self.prompt_tokens(request.messages)
        check_fits_window(request, len(ids), window, window_option)
        return ids

    def count_tokens(self, messages: list[Message]) -> int:
        return len(self.prompt_tokens(messages))

    def tokenize(self, text: str) -> list[int]:
        return list(self._get_tokenizer().encode(text, add_special_tokens=False))

    def detokenize(self, tokens: list[int]) -> str:
        return self._get_tokenizer().decode(tokens, clean_up_tokenization_spaces=False)
