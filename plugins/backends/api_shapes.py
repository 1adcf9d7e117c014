"""What each provider's chat API is sent and what its answer means, one class per provider:
the one place that knows a provider's request rules (the `litellm:` backend builds a neutral
body, `Shape.shape` puts it in the provider's terms) and its reasoning controls.

- OpenAI's reasoning models (o-series, GPT-5; also through the Responses API where litellm
  routes a model there): an effort (`reasoning_effort`), no budget, no temperature; the
  reasoning is hidden, only its tokens are reported, and it counts in `max_completion_tokens`
  (litellm's name for our `max_tokens` there), so the run leaves room for it (OpenAI's
  guidance: "reserve at least 25,000 tokens for reasoning and outputs").
- DeepSeek: thinking on by default, switched with `thinking: {type: enabled|disabled}`, an
  effort, no temperature while it thinks; `reasoning_content` apart.
- Anthropic's Messages: extended thinking off by default, on with `thinking: {type: enabled,
  budget_tokens}` counted inside `max_tokens` (so the answer's tokens are added), off with
  `{type: disabled}`; temperature may not be set while thinking, top_p only at 0.95 or more;
  the thinking blocks come apart, their tokens only inside `output_tokens`.
- Gemini: thinking on by default (dynamic), `thinkingConfig.thinkingBudget` caps it (0 turns it
  off on the models that allow it), `includeThoughts` returns thought parts; the thoughts count
  in `maxOutputTokens` and are reported as `thoughtsTokenCount`.
- A server of one's own (vLLM, SGLang; `hosted_vllm/` or `openai/` at an `api_base`): what the
  model string declares (`reasoning=separate|inline|none`), the chat template's switch in
  `chat_template_kwargs`, an effort passed through where the model is declared to think
  (`reasoning=separate|inline`, or `takes_effort=true`: gpt-oss).

Each shape also names its provider's prompt cache (`cache()`, rules in `api_caching`): where a
request about a context marks the part it shares with the others (Anthropic's breakpoints), or
what lets the provider find it (OpenAI's `prompt_cache_key`).
"""

from __future__ import annotations

from typing import Any

from lceval.errors import PackageMissing, UserError
from lceval.interfaces import ReasoningControls
from lceval.reasoning import FALLBACK_BUDGET, default_budget
from lceval.types import GenerationParams

from .api_caching import NoCache, ProviderCache, deepseek_cache, gemini_cache, marked_message, openai_cache

EFFORTS = ("low", "medium", "high")
#: OpenAI's reasoning guide: "reserve at least 25,000 tokens for reasoning and outputs"
OPENAI_ROOM = 25_000
#: DeepSeek's default max_tokens for its reasoner, the thinking included
DEEPSEEK_ROOM = 32_768
#: Gemini 2.5 Pro's largest thinking budget (Google's thinking guide): a dynamic thinking fits
GEMINI_ROOM = 32_768


class Shape:
    """A provider's chat API as litellm reaches it; the base is a provider lceval knows
    nothing particular about (its reasoning passed as it is, nothing refused)."""

    name = "chat"
    api = ""

    def __init__(self, model: str, options: dict[str, Any], litellm: Any) -> None:
        self.model = model
        self.options = options
        self.litellm = litellm

    # -- what the engine is told --------------------------------------------------------------
    def thinks(self) -> bool | None:
        """What litellm's model map says (True when it says so; it lags the providers, so a
        "no" is unknown)."""
        try:
            return True if self.litellm.supports_reasoning(model=self.model) else None
        except Exception:  # noqa: BLE001 - a model the map does not hold
            return None

    def controls(self) -> ReasoningControls:
        thinks = self.thinks()
        return ReasoningControls(thinks=thinks, room=_room(self.model) if thinks else None,
                                 room_source="its family's guidance", api=self.api)

    def check(self) -> None:
        """Raise UserError for what makes every request to this model fail (before any is sent),
        and for the prompt-cache options the provider cannot honour."""
        self.cache().check(self.api or f"model '{self.model}'")

    def cache(self) -> ProviderCache:
        """The provider's prompt cache (`api_caching`); the base has none."""
        return NoCache(self.model, self.options, self.litellm)

    # -- what is sent --------------------------------------------------------------------------
    def shape(self, params: GenerationParams, body: dict[str, Any]) -> None:
        """`body` (messages, max_tokens = the answer's tokens, temperature, seed, top_p, stop)
        in the provider's terms: its reasoning fields, its token limit with the thinking's
        allowance, the sampling fields it refuses removed."""
        body["max_tokens"] = params.max_new_tokens + params.thinking_allowance
        if params.reasoning_effort is not None:
            body["reasoning_effort"] = params.reasoning_effort

    def wire(self, body: dict[str, Any]) -> dict[str, Any]:
        """A shaped body as the provider's HTTP API takes it (a batch line): litellm's
        `extra_body` fields at the top level, litellm-only parameters dropped."""
        extra = body.pop("extra_body", None) or {}
        body.pop("thinking", None)  # litellm's parameter for other providers' APIs
        return {**body, **extra}

    # -- what comes back --------------------------------------------------------------------------
    def reported_reasoning_tokens(self, value: int | None) -> int | None:
        """The reasoning tokens of a response as the provider counted them (None: it did not)."""
        return value

    def cache_tokens(self, read: int | None, write: int | None) -> tuple[int | None, int | None]:
        """A response's prompt tokens read from and written into the provider's cache, as it
        reported them (None: it said nothing); a provider that reports reads and bills no
        writes (OpenAI, DeepSeek) wrote none."""
        return read, (write if write is not None else (0 if read is not None else None))


def _drop(body: dict[str, Any], *names: str) -> None:
    for name in names:
        body.pop(name, None)


class OpenAIPlain(Shape):
    """An OpenAI model litellm's map knows and says does not reason (gpt-4o)."""

    name = "openai"
    api = "OpenAI"

    def controls(self) -> ReasoningControls:
        return ReasoningControls(thinks=False, switch=False, efforts=(), api=self.api)

    def cache(self) -> ProviderCache:
        return openai_cache(self.model, self.options, self.litellm)


class OpenAIReasoning(Shape):
    """o1, o3, o4-mini, GPT-5 (not gpt-5-chat): an effort, hidden reasoning, temperature 1."""

    name = "openai-reasoning"
    api = "OpenAI's reasoning models"

    def controls(self) -> ReasoningControls:
        return ReasoningControls(thinks=True, switch=False, budget=None, efforts=EFFORTS, room=OPENAI_ROOM,
                                 room_source="OpenAI's guidance to reserve 25,000 tokens for reasoning and outputs",
                                 api=self.api)

    def responses_route(self) -> bool:
        """litellm sends models its map marks `mode: responses` (o1-pro, gpt-5-pro) through
        OpenAI's Responses API instead of chat completions."""
        try:
            return self.litellm.get_model_info(self.model).get("mode") == "responses"
        except Exception:  # noqa: BLE001 - a model the map does not hold: chat completions
            return False

    def cache(self) -> ProviderCache:
        return openai_cache(self.model, self.options, self.litellm)

    def check(self) -> None:
        import importlib.util

        super().check()
        if self.responses_route() and importlib.util.find_spec("mcp") is None:
            raise PackageMissing(f"litellm sends model '{self.model}' through OpenAI's Responses API, and its bridge "
                                 "there imports the package mcp, which is not installed: every request would fail",
                                 field="--model", hint="pip install mcp")

    def shape(self, params: GenerationParams, body: dict[str, Any]) -> None:
        super().shape(params, body)  # litellm sends max_tokens as max_completion_tokens
        # only the default temperature (1) and top_p are accepted; GPT-5 takes no stop strings
        _drop(body, "temperature", "top_p", *(("stop",) if "gpt-5" in self.model else ()))

    def wire(self, body: dict[str, Any]) -> dict[str, Any]:
        out = super().wire(body)
        out["max_completion_tokens"] = out.pop("max_tokens")
        return out


class DeepSeek(Shape):
    name = "deepseek"
    api = "DeepSeek's API"
    _thinks: bool | None = None

    def cache(self) -> ProviderCache:
        return deepseek_cache(self.model, self.options, self.litellm)

    def _reasons(self) -> bool:
        """Whether the model thinks unless told not to (its reasoner), asked of the map once."""
        if self._thinks is None:
            self._thinks = bool(self.controls().thinks)
        return self._thinks

    def controls(self) -> ReasoningControls:
        reasoner = "reasoner" in self.model or self.thinks() is True
        return ReasoningControls(thinks=True if reasoner else None, switch=True, budget=None, efforts=EFFORTS,
                                 room=DEEPSEEK_ROOM,
                                 room_source="DeepSeek's default max_tokens for its reasoner, the thinking included",
                                 api=self.api)

    def shape(self, params: GenerationParams, body: dict[str, Any]) -> None:
        super().shape(params, body)
        if "reasoning_effort" in body:  # litellm would turn it into `thinking`; DeepSeek takes it as it is
            body.setdefault("extra_body", {})["reasoning_effort"] = body.pop("reasoning_effort")
        if params.thinking is not None:
            body["thinking"] = {"type": "enabled" if params.thinking else "disabled"}
        if params.thinking is not False and (params.thinking or self._reasons()):
            # "thinking mode does not support temperature ...: setting them has no effect"
            _drop(body, "temperature", "top_p")

    def wire(self, body: dict[str, Any]) -> dict[str, Any]:
        thinking = body.get("thinking")
        out = super().wire(body)
        if thinking is not None:
            out["thinking"] = thinking
        return out


class Anthropic(Shape):
    name = "anthropic"
    api = "Anthropic's Messages API"

    def cache(self) -> ProviderCache:
        from .api_caching import Anthropic as Breakpoints

        return Breakpoints(self.model, self.options, self.litellm)

    def controls(self) -> ReasoningControls:
        # off unless switched on; a model the map knows and says does not reason (Claude 3.5)
        # cannot be, one it does not know yet (it lags Anthropic's releases) is let through
        switch = bool(self.thinks()) or not _in_map(self.litellm, self.model)
        return ReasoningControls(thinks=False, switch=switch, budget="api", efforts=(), api=self.api)

    def shape(self, params: GenerationParams, body: dict[str, Any]) -> None:
        body["max_tokens"] = params.max_new_tokens
        if params.thinking is False:
            body["thinking"] = {"type": "disabled"}
        elif params.reasoning_budget is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": params.reasoning_budget}
            body["max_tokens"] = params.max_new_tokens + params.reasoning_budget  # the budget counts inside
            # "thinking isn't compatible with temperature ... modifications"; top_p only from 0.95
            _drop(body, "temperature")
            if body.get("top_p", 1.0) < 0.95:
                _drop(body, "top_p")

    def messages_body(self, params: GenerationParams, messages: list[dict[str, str]],
                      mark: tuple[int, int, str | None] | None = None) -> dict[str, Any]:
        """A request in the Messages API's own terms (a batch line): the system messages apart,
        stop strings as `stop_sequences`, the thinking as `shape` puts it; with `mark` (message,
        characters, lifetime) a cache breakpoint where the shared part ends."""
        index, chars, lifetime = mark if mark is not None else (-1, 0, None)
        systems = [i for i, m in enumerate(messages) if m["role"] == "system"]
        chat = [dict(m) for m in messages if m["role"] != "system"]
        body: dict[str, Any] = {"messages": chat, "max_tokens": params.max_new_tokens,
                                "temperature": params.temperature}
        system = "\n\n".join(messages[i]["content"] for i in systems)
        if index in systems:  # the shared part ends in the system text, as joined
            before = sum(len(messages[i]["content"]) + 2 for i in systems if i < index)
            body["system"] = marked_message({"content": system}, before + chars, lifetime)["content"]
        elif system:
            body["system"] = system
        if index >= 0 and index not in systems:
            at = index - sum(1 for i in systems if i < index)
            chat[at] = marked_message(chat[at], chars, lifetime)
        if params.top_p != 1.0:
            body["top_p"] = params.top_p
        if params.stop:
            body["stop_sequences"] = list(params.stop)
        self.shape(params, body)
        return body

    def reported_reasoning_tokens(self, value: int | None) -> int | None:
        # the Messages API reports no thinking tokens apart (they are inside output_tokens):
        # litellm's number is its own count of the (summarised) thinking text, not the bill
        return None


class Gemini(Shape):
    name = "gemini"
    api = "Gemini's API"

    def cache(self) -> ProviderCache:
        return gemini_cache(self.model, self.options, self.litellm)

    def cache_tokens(self, read: int | None, write: int | None) -> tuple[int | None, int | None]:
        # Gemini's JSON leaves out fields at zero: no cachedContentTokenCount is no token read
        return (read or 0), (write or 0)

    def _version3(self) -> bool:
        return "gemini-3" in self.model or "gemini-4" in self.model

    def controls(self) -> ReasoningControls:
        thinks = self.thinks()
        can_stop = "flash" in self.model and not self._version3()  # 2.5 Pro thinks at least 128 tokens
        return ReasoningControls(thinks=thinks, switch=can_stop if thinks else None,
                                 budget=None if self._version3() else "api", efforts=EFFORTS,
                                 room=GEMINI_ROOM if thinks else None,
                                 room_source="Gemini 2.5 Pro's largest thinking budget", api=self.api)

    def shape(self, params: GenerationParams, body: dict[str, Any]) -> None:
        super().shape(params, body)  # the thoughts count in maxOutputTokens
        if params.thinking is False:
            body["thinking"] = {"type": "enabled", "budget_tokens": 0}  # thinkingBudget 0: off
        elif params.reasoning_budget is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": params.reasoning_budget}
        elif params.reasoning_effort is None:
            body["thinking"] = {"type": "enabled"}  # includeThoughts, the thinking as the API decides


class OwnServer(Shape):
    """An OpenAI-compatible server of one's own (vLLM, SGLang): what the model string says."""

    name = "server"
    api = "an OpenAI-compatible server"

    def __init__(self, model: str, options: dict[str, Any], litellm: Any, local_thinks: Any = None) -> None:
        super().__init__(model, options, litellm)
        self._local_thinks = local_thinks

    def cache(self) -> ProviderCache:
        return NoCache(self.model, self.options, self.litellm, "a server of one's own bills no cache; its prefix "
                       "cache orders the requests (prefix_cache=shared)")

    @property
    def declared(self) -> str:
        return str(self.options.get("reasoning") or "auto")

    @property
    def switch_key(self) -> str | None:
        key = str(self.options.get("thinking_switch") or "enable_thinking")
        return None if key == "none" else key

    def thinks(self) -> bool | None:
        if self.declared == "none":
            return False
        if self.declared in ("separate", "inline"):
            return True
        return self._local_thinks() if self._local_thinks is not None else None

    def controls(self) -> ReasoningControls:
        thinks = self.thinks()
        declared = self.declared in ("separate", "inline")
        # vLLM and SGLang pass `reasoning_effort` to the models that use it (gpt-oss): a model declared
        # to think takes it; one declared not to takes none; of another nothing is known (a chat
        # template without thinking markers, gpt-oss's, may still take an effort)
        efforts = EFFORTS if self.options.get("takes_effort") or declared else (
            () if self.declared == "none" else None)
        switch = (self.switch_key is not None) if declared else (False if thinks is False else None)
        room = _room(self.model) if thinks else None
        return ReasoningControls(thinks=thinks, switch=switch, budget=None, efforts=efforts, room=room,
                                 room_source="its family's guidance", declared=declared, api=self.api)

    def shape(self, params: GenerationParams, body: dict[str, Any]) -> None:
        super().shape(params, body)
        if params.thinking is not None and self.switch_key is not None:
            body.setdefault("extra_body", {})["chat_template_kwargs"] = {self.switch_key: bool(params.thinking)}


def shape_of(model: str, options: dict[str, Any], self_hosted: bool, litellm: Any, local_thinks: Any = None) -> Shape:
    """The provider shape of `model` (PROVIDER/NAME, as litellm names it)."""
    provider, _, name = model.partition("/")
    known = _in_map(litellm, model)
    if provider == "hosted_vllm" or (provider == "openai" and self_hosted
                                     and (not known or options.get("reasoning", "auto") != "auto")):
        return OwnServer(model, options, litellm, local_thinks)
    if provider == "openai" and known:
        reasoning = _reasons(litellm, model) and "gpt-5-chat" not in name
        return (OpenAIReasoning if reasoning else OpenAIPlain)(model, options, litellm)
    if provider == "deepseek":
        return DeepSeek(model, options, litellm)
    if provider == "anthropic" or (provider == "bedrock" and ("claude" in name or "anthropic" in name)):
        return Anthropic(model, options, litellm)
    if provider in ("gemini", "vertex_ai") and "gemini" in name:
        return Gemini(model, options, litellm)
    return Shape(model, options, litellm)


def _room(model: str) -> int:
    """Tokens to leave for a thinking the API cannot cap: the family's budget (lceval.reasoning),
    the fallback for a family steered by its effort (gpt-oss), whose thinking still counts."""
    return default_budget(model) or FALLBACK_BUDGET


def _in_map(litellm: Any, model: str) -> bool:
    try:
        return bool(litellm.get_model_info(model))
    except Exception:  # noqa: BLE001 - litellm raises for a model its map does not hold
        return False


def _reasons(litellm: Any, model: str) -> bool:
    try:
        return bool(litellm.supports_reasoning(model=model))
    except Exception:  # noqa: BLE001
        return False
