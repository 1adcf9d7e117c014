"""Plain data that crosses module boundaries: task types build it, the engine moves it,
backends and judges consume it. Nothing here imports a backend or a benchmark."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping, Protocol

__all__ = ["CONTEXT_SLOT", "ContextCut", "Conversation", "Generation", "GenerationParams",
           "GenerationRequest", "JudgeInput", "Judgment", "LongContextSettings", "Message", "PairInput", "PairJudgment", "Role",
           "RopeScaling", "RunView", "Sample", "ScoreSource", "ScoredItem", "SharedPrefix", "Turn", "is_scored"]

#: The one place in a conversation where the long context (a transcript, a haystack) goes.
#: Task types put it in exactly one message; the context policy fills it after cutting the
#: context to the model's budget, so instructions and questions are never cut.
CONTEXT_SLOT = "{context}"

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class Message:
    role: Role
    content: str


def is_scored(metadata: Mapping[str, Any]) -> bool:
    """Whether a turn (or its sample) is a result: only `"scored": False` says no, so the
    engine that judges and the scoring that counts read one rule."""
    return metadata.get("scored", True) is not False


@dataclass
class Turn:
    """One question of a conversation, scored on its own, unless its metadata says
    `"scored": False`: a step the model must take whose answer is not a result (the reasoning
    before a chain-of-thought answer). Such a turn is asked and kept in the conversation and
    in samples.jsonl, but never judged and never counted in results."""

    item_id: str
    user: str  # the user message text (may hold CONTEXT_SLOT in the first turn)
    reference: str  # ground-truth answer, given to the judge and to `history: gold`
    question: str  # the bare question, for judges (without prompt or markers)
    metadata: dict[str, Any] = field(default_factory=dict)
    #: the start of the assistant's answer, written for the model to continue (RULER's answer
    #: prefix, which its authors put after the chat template's assistant header). A backend
    #: that cannot continue an assistant message gets it at the end of the user message
    #: instead, and the sample's metadata says so (`answer_prefix_in`).
    assistant_prefix: str = ""


@dataclass
class Conversation:
    """A unit the model sees in one chat: single-turn tasks make one per question,
    multi-turn tasks one per meeting with the questions in order."""

    conv_id: str
    context: str  # the long field, the only text a context policy may cut
    context_id: str  # identifies `context` (e.g. meeting id): requests sharing it run back to back
    turns: list[Turn]
    preamble: list[Message] = field(default_factory=list)  # e.g. a system message
    history: Literal["model", "gold"] = "model"
    metadata: dict[str, Any] = field(default_factory=dict)  # e.g. split, meeting id
    #: the context's elements (documents, speaker turns) as [start, end) character spans of
    #: `context`, when it is made of them: a context policy that cuts then removes whole
    #: elements, never part of one (None: plain text, cut at any token)
    context_elements: list[tuple[int, int]] | None = None


@dataclass(frozen=True)
class GenerationParams:
    max_new_tokens: int = 512  # the answer's tokens (a thinking model's reasoning has its own budget)
    temperature: float = 0.0
    top_p: float = 1.0
    repeat_penalty: float = 1.0
    seed: int = 0
    stop: tuple[str, ...] = ()
    #: a reasoning model's thinking switched on or off where its chat template or API has a
    #: switch (Qwen3's `enable_thinking`, Anthropic's extended thinking); None: the model's default
    thinking: bool | None = None
    #: tokens the model may think before it must answer (None: no limit of the run's own)
    reasoning_budget: int | None = None
    #: an API's reasoning effort ("low", "medium", "high"), for models that take one
    reasoning_effort: str | None = None
    #: tokens the request's limit leaves for thinking beside the answer's, where an API counts
    #: the thinking in its token limit and takes no budget to cap it (OpenAI's reasoning
    #: models, a vLLM or SGLang server): the backend sends max_new_tokens + reasoning_room
    reasoning_room: int | None = None
    #: tokens the answer must have before the model may end it (LongBench's `min_length` for
    #: samsum: no end of text and no stop string as the first token); 0: none
    min_new_tokens: int = 0

    @property
    def thinking_allowance(self) -> int:
        """Tokens the request may spend thinking beside the answer's `max_new_tokens`: its
        budget, or the room its token limit leaves (what the window, a cost limit and the
        dry run's "at most" count beside the answer)."""
        return int(self.reasoning_budget or 0) + int(self.reasoning_room or 0)

    def as_dict(self) -> dict[str, Any]:
        """The parameters as they key the request cache: the thinking and answer-length
        settings only when they are set, so the keys of a model that does not think are the
        keys lceval always had."""
        out: dict[str, Any] = {
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "repeat_penalty": self.repeat_penalty,
            "seed": self.seed,
            "stop": list(self.stop),
        }
        for name in ("thinking", "reasoning_budget", "reasoning_effort", "reasoning_room"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.min_new_tokens:
            out["min_new_tokens"] = self.min_new_tokens
        return out


@dataclass(frozen=True)
class RopeScaling:
    """How a model's rotary position embeddings are stretched past the window it was trained
    on, as its config ended up holding them (`rope_type` linear, dynamic, yarn, or a family's
    own such as llama3): the positions are divided `factor` times, starting from the trained
    window `original_window` (None where the config does not say)."""

    type: str
    factor: float
    original_window: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, "factor": self.factor, "original_window": self.original_window}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RopeScaling":
        window = data.get("original_window")
        return cls(str(data["type"]), float(data["factor"]), None if window is None else int(window))


@dataclass(frozen=True)
class LongContextSettings:
    """How a backend stretched its model to its window: what it applied, read back from the
    model's config and the engine's arguments (not what the user asked for). Two runs of one
    model that differ here give different answers, so the engine puts these settings in every
    cache key (`"long_context"` in the model's identity), the run records them in its
    manifest and the report's run table shows them. None in a field: the backend cannot say."""

    #: prompt + answer tokens the backend accepts (hf's n_ctx, vLLM's max_model_len)
    window: int | None = None
    #: `max_position_embeddings` in the config the model was built from
    position_embeddings: int | None = None
    #: None: the positions are not stretched
    rope: RopeScaling | None = None
    #: whether a long prompt is prefilled in pieces, and at most how many tokens a piece holds
    #: (not named "..._tokens": the engine keeps words like "token" out of cache keys as secrets)
    chunked_prefill: bool | None = None
    prefill_chunk: int | None = None
    #: whether a prompt's keys and values are kept for a later prompt that shares its start
    prefix_caching: bool | None = None

    def as_dict(self) -> dict[str, Any]:
        """The manifest's and the cache key's form: every field, always, so a key spells a
        setting one way."""
        return {"window": self.window, "position_embeddings": self.position_embeddings,
                "rope": self.rope.as_dict() if self.rope is not None else None,
                "chunked_prefill": self.chunked_prefill, "prefill_chunk": self.prefill_chunk,
                "prefix_caching": self.prefix_caching}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "LongContextSettings":
        rope = data.get("rope")
        ints = {k: None if data.get(k) is None else int(data[k])
                for k in ("window", "position_embeddings", "prefill_chunk")}
        bools = {k: None if data.get(k) is None else bool(data[k]) for k in ("chunked_prefill", "prefix_caching")}
        return cls(rope=RopeScaling.from_dict(rope) if rope else None, **ints, **bools)

    def summary(self) -> str:
        """One line for a table: `window 131,072; yarn x4 of 32,768; chunked prefill 8,192; prefix cache on`."""
        parts = [f"window {self.window:,}"] if self.window is not None else []
        if self.rope is not None:
            of = f" of {self.rope.original_window:,}" if self.rope.original_window else ""
            parts.append(f"{self.rope.type} x{self.rope.factor:g}{of}")
        if self.chunked_prefill is not None:
            size = f" {self.prefill_chunk:,}" if self.chunked_prefill and self.prefill_chunk else ""
            parts.append(f"chunked prefill{size}" if self.chunked_prefill else "no chunked prefill")
        if self.prefix_caching is not None:
            parts.append(f"prefix cache {'on' if self.prefix_caching else 'off'}")
        return "; ".join(parts)


@dataclass(frozen=True)
class SharedPrefix:
    """The part of a request that every request about the same context begins with, byte for
    byte (the system message, the instructions and the context itself, before the question):
    `messages[:message]` whole, then the first `chars` characters of `messages[message]`. The
    engine sets it on each request of a context it asks more than once, so an API provider's
    prompt cache can hold that part for the others (Anthropic's cache breakpoints, OpenAI's
    automatic cache); a backend without such a cache ignores it. Never part of the cache key."""

    #: the context's key: the requests with the same `group` share the part
    group: str
    message: int
    chars: int
    #: how many requests of the run are about this context (at least 2)
    requests: int
    #: the longest the engine may take between two requests of this context, in seconds (one
    #: request's prefill and answer; the batch API's processing window when batching): what
    #: a provider's cache entry must outlive unused
    reuse_within_s: float

    def head(self, messages: list[Message]) -> list[Message]:
        """The shared part of `messages`, as messages (the last one cut at `chars`)."""
        if self.message >= len(messages):
            return list(messages)
        cut = messages[self.message]
        return [*messages[:self.message], Message(cut.role, cut.content[:self.chars])]


@dataclass
class GenerationRequest:
    request_id: str  # the item id it answers; backends echo it back
    messages: list[Message]
    params: GenerationParams
    #: Free-form hints from the engine to the backend (e.g. {"item_id": ..., "model_name": ...}
    #: for the replay backend). Never part of the cache key.
    hints: dict[str, Any] = field(default_factory=dict)
    #: the part the other requests about its context share (None: asked once, or nothing shared)
    shared: SharedPrefix | None = None


@dataclass
class Generation:
    """What a backend answered. `text` is the answer alone: a reasoning model's thinking is
    kept apart in `reasoning` (the backend's own split, an API's reasoning content, or the
    engine's split of the text at the model's thinking markers; None where the model gave
    none), so no metric or judge ever scores a deliberation as the answer."""

    request_id: str
    text: str
    prompt_tokens: int = 0  # tokens of the full prompt sent
    #: Tokens the backend actually had to prefill (the rest came from a reused KV or prompt
    #: cache), or None when the backend cannot tell (a server that reports no cached tokens):
    #: never the full prompt by default, which would claim work nobody measured.
    prefilled_tokens: int | None = None
    completion_tokens: int = 0
    finish_reason: str = "stop"
    seconds: float = 0.0
    #: Backend-specific facts kept in samples.jsonl (e.g. recorded judge scores of a replay).
    extras: dict[str, Any] = field(default_factory=dict)
    cached: bool = False  # set by the engine when served from the cache
    #: the model's thinking before its answer (None: it gave none), and its tokens (None: unknown)
    reasoning: str | None = None
    reasoning_tokens: int | None = None
    #: the answer as the model wrote it, when it differs from `text` (which the engine strips of
    #: surrounding whitespace, as every judge and most metrics want it); None: the same
    raw_text: str | None = None
    #: of `prompt_tokens`, those an API provider read from its prompt cache and those it wrote
    #: into it (billed at its cache-read and cache-write prices; the rest at the input price);
    #: None: the provider said nothing about its cache
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None


@dataclass
class JudgeInput:
    item_id: str
    question: str
    response: str  # the answer alone, never the model's thinking
    reference: str
    metadata: dict[str, Any] = field(default_factory=dict)
    generation_extras: dict[str, Any] = field(default_factory=dict)
    #: a reasoning model's thinking before the answer, for a judge that asks to see it
    reasoning: str | None = None
    #: the answer as the model wrote it (leading indentation, newlines), when it differs from
    #: `response`: for a metric whose benchmark scores the raw text (LongBench's code similarity
    #: and first-line rule); None: the same as `response`
    raw_response: str | None = None


@dataclass
class Judgment:
    item_id: str
    judge: str
    #: None only with parse_status "parse_failure" or "missing": never a placeholder score.
    #: "censored": the model's thinking was cut (by its budget or the window) before any answer;
    #: `score` is then the bottom of the judge's scale, what the score over all items counts it
    #: as, while the score over the uncensored items leaves it out
    score: float | None
    parse_status: Literal["ok", "parse_failure", "missing", "censored"] = "ok"
    raw: str = ""
    attempts: int = 1
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class ContextCut:
    """What the context policy did to one conversation, recorded on each of its samples."""

    policy: str
    original_tokens: int | None
    kept_tokens: int | None
    action: Literal["none", "truncated", "skipped"] = "none"
    #: of the kept tokens, those at the context's start, when the cut was not in the context's
    #: middle (the authors' rule cuts the whole prompt's middle: LongBench's pred.py); None: half
    head_tokens: int | None = None
    #: a context made of elements (`Conversation.context_elements`) cut at their boundaries:
    #: how many of them were kept, of how many (None: not cut there, or not made of elements)
    elements_kept: int | None = None
    elements_total: int | None = None


@dataclass
class Sample:
    """One scored item, as written to samples.jsonl."""

    task: str
    item_id: str
    conv_id: str
    turn_index: int
    seed: int
    metadata: dict[str, Any]
    prompt_hash: str
    response: str | None
    reference: str
    judgments: list[Judgment]
    context_cut: ContextCut
    prompt_tokens: int = 0
    prefilled_tokens: int | None = 0  # None: the backend could not tell (see Generation)
    completion_tokens: int = 0
    seconds: float = 0.0
    cached: bool = False
    generation_extras: dict[str, Any] = field(default_factory=dict)
    question: str = ""  # the bare question, so `lceval score` can re-judge without the dataset
    #: a reasoning model's thinking (never scored) and its tokens; samples.jsonl has them only
    #: when the model thought
    reasoning: str | None = None
    reasoning_tokens: int | None = None
    #: the answer as the model wrote it, when it differs from `response` (stripped)
    raw_response: str | None = None
    #: prompt tokens the provider read from its prompt cache and wrote into it (see
    #: Generation); samples.jsonl has them only where the provider reported its cache
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None


class RunView(Protocol):
    """What a report panel, a comparison or a ranking reads of a finished run: its folder,
    results.json, its samples and the resolved spec each task ran with. Runs are
    `lceval.results.FinishedRun`s, whose manifest the engine types (`RunRecord`, above this
    contract: hence a view here)."""

    path: Path
    results: dict[str, Any]
    samples: list[Sample]

    @property
    def run_id(self) -> str: ...

    @property
    def model(self) -> str: ...

    def task_samples(self, task: str) -> list[Sample]: ...

    def task_spec(self, task: str) -> dict[str, Any]: ...


@dataclass
class ScoredItem:
    """One score a scorer (judge, annotator group) gave, for `lceval judge-agreement`.

    Items of two sources are matched on (item_id, response text) when both carry the
    response (so a judge's run and a recorded file line up whatever each calls the model),
    else on (item_id, system). `label` is a categorical verdict beside the score, e.g. which
    summary bullet a SummHay judge linked an insight to; agreement on it is reported too.
    """

    item_id: str
    system: str  # the model (or model+prompt) that produced the judged text
    score: float | None  # None = the scorer gave no usable score (excluded, counted)
    cluster: str = ""  # e.g. meeting id: bootstrap resamples clusters
    response: str | None = None
    label: str | None = None
    #: what a run's sample of this item would carry (split, question type ...): lets
    #: `lceval report` group, break down and test recorded scores like a run's
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class ScoreSource:
    name: str  # e.g. "gpt-4-eval", "rubric"
    items: list[ScoredItem]
    origin: str = ""  # the file or run directory it came from
    note: str = ""  # e.g. "recorded x2 (1-5 scale doubled)"
    #: the task whose items these are (a registered spec name), when the file says so:
    #: `lceval report` then scores them with that spec's `report` section, like a run
    task: str | None = None


@dataclass
class PairInput:
    """Two responses to the same unit (two summaries of one meeting), in the order a pairwise
    judge is shown them: `text_a` first. The engine asks each pair in both orders."""

    unit_id: str  # what both texts answer, e.g. "test2/meeting_en_test2_001"
    system_a: str
    system_b: str
    text_a: str
    text_b: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class PairJudgment:
    """A pairwise judge's verdict on one ordered pair: a score per criterion for each side
    (higher is better), or none at all when the output could not be parsed."""

    unit_id: str
    judge: str
    scores_a: dict[str, float] | None  # criterion -> score of the text shown first
    scores_b: dict[str, float] | None  # criterion -> score of the text shown second
    parse_status: Literal["ok", "parse_failure", "missing"] = "ok"
    raw: str = ""
    attempts: int = 1
    details: dict[str, Any] = field(default_factory=dict)  # e.g. key facts and their alignment
