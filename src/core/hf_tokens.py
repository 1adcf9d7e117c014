"""Deprecated: `lceval.hf_tokens` is `lceval.tokens` since lceval 0.1 (one module for
everything about tokens). Kept so that `from lceval.tokens import HFTokens` written before
still works; new code imports `lceval.tokens`."""

from lceval.tokens import HFTokens, chat_token_ids, read_chat_template

__all__ = ["HFTokens", "chat_token_ids", "read_chat_template"]
