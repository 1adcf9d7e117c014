"""`lceval.hf_tokens` is the public base a third-party Hugging Face backend builds on: the
prompt is the chat template's token ids, loaded lazily, failures are UserErrors."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from lceval.errors import UserError
from lceval.hf_tokens import HFTokens, chat_token_ids, read_chat_template
from lceval.types import Message


class CharTokenizer:
    """One token per character; the template wraps each message in <role>...</role>."""

    chat_template = "<{{role}}>{{content}}</{{role}}>"

    def apply_chat_template(self, messages: list[dict[str, str]], add_generation_prompt: bool,
                            tokenize: bool, return_dict: bool) -> Any:
        if any(m["role"] == "tool" for m in messages):
            raise ValueError("roles must alternate")
        text = "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in messages)
        text += "<assistant>" if add_generation_prompt else ""
        return {"input_ids": [ord(c) for c in text]}

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: list[int], clean_up_tokenization_spaces: bool = False) -> str:
        return "".join(chr(i) for i in ids)


class ThirdPartyBackend(HFTokens):
    name = "engine:my-model"

    def __init__(self) -> None:
        self.loaded = 0

    def _source(self) -> tuple[str, dict[str, Any]]:
        return "my-model", {}

    def _load(self, what: str, auto_class: str, **extra: Any) -> Any:
        self.loaded += 1
        return CharTokenizer()


def test_prompt_is_the_chat_templates_tokens_and_loads_once():
    backend = ThirdPartyBackend()
    messages = [Message("user", "hi")]
    assert backend.loaded == 0  # nothing loads before it is needed
    ids = backend.prompt_tokens(messages)
    assert backend.detokenize(ids) == "<user>hi</user><assistant>"
    assert backend.count_tokens(messages) == len(ids) == 26
    assert backend.detokenize(backend.tokenize("a transcript")) == "a transcript"
    assert backend.loaded == 1


def test_a_template_override_replaces_the_models():
    backend = ThirdPartyBackend()
    backend.template_override = "{{ messages }}"
    assert backend._get_tokenizer().chat_template == "{{ messages }}"


def test_a_template_that_fails_is_a_user_error_naming_the_model():
    with pytest.raises(UserError) as err:
        chat_token_ids(CharTokenizer(), [Message("tool", "x")], "engine:my-model")
    assert err.value.field == "chat_template" and "engine:my-model" in str(err.value)
    assert "roles must alternate" in str(err.value)


def test_chat_template_option_is_a_file_or_inline_text(tmp_path):
    path = tmp_path / "t.jinja"
    path.write_text("{{ bos_token }}", encoding="utf-8")
    assert read_chat_template(str(path)) == "{{ bos_token }}"
    assert read_chat_template("{% for m in messages %}{% endfor %}").startswith("{%")
    with pytest.raises(UserError, match="chat_template file not found"):
        read_chat_template(str(tmp_path / "missing.jinja"))


def test_the_builtin_hf_and_vllm_backends_are_built_on_it():
    from lceval_plugins.backends.hf import HFBackend
    from lceval_plugins.backends.vllm_backend import VLLMBackend
    assert issubclass(HFBackend, HFTokens) and issubclass(VLLMBackend, HFTokens)


def test_importing_it_loads_no_heavy_library():
    code = ("import sys, lceval.hf_tokens\n"
            "print(','.join(m for m in ('torch', 'transformers', 'vllm') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "", proc.stdout + proc.stderr
