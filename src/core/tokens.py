"""Tokens for plugin authors (public API): budgets of documents, a check that a backend's
tokenizer keeps the promises the context policy relies on, and a Hugging Face model's tokens
for backends (`HFTokens`).

Budgets (used by retrieval-augmented task types, e.g. SummHay's "the first 15k worth of
document tokens", Laban et al., 2024, §5.1): a *task type* ranks documents with a retriever, then
`fill_budget` keeps them in rank order until the budget and cuts the document that crosses
it to the tokens still free (the SummHay authors' populate_summaries.get_docs_token_limit);
a retriever only ranks. The budget counts with a `Counter` named in each sample:
- `cl100k_base`: tiktoken, as the authors; needs `tiktoken` and its BPE file (downloaded once
  into tiktoken's cache; offline it must already be there).
- `words`: no dependency, for offline use. A document costs ceil(4/3 x whitespace words)
  tokens, the paper's own ratio (§3.2: "750 words ... roughly 1,000 tokens"); a cut document
  keeps that many words. An approximation, and labelled as one.
- `auto` (default): `cl100k_base` when tiktoken is installed and its cl100k_base file is
  already in tiktoken's cache (no network attempt, so an offline run never waits on one),
  else `words`.

Lengths as people write them (`parse_lengths`, `parse_length`, `tokens_label`): `--context-lengths`
and every length a plugin reads go through one parser. `128k`, `1m`, `2M`, `1.5m`, plain integers,
`full`, and ranges `8k..1m` (the start doubled up to the end). k = 1024 tokens and m = 1024 x 1024
(an "8k" window holds 8,192 tokens, "1m" 1,048,576), so `1.5m` is 1,572,864 tokens (named `1536k`); a
family whose authors count K = 1,000 passes `kilo=1000`. `tokens_label` names a count the way the
parser reads it back (1048576 -> "1m", 131072 -> "128k").

Hugging Face models: A third-party backend for an engine that loads Hugging Face weights (vLLM, SGLang, TGI in
process, ...) inherits `HFTokens`, names its folder or hub id in `_source()`, and gets the
tokenizer and chat template loaded lazily (nothing loads for `--help`, `identity()` or a rerun
served from the cache) and the token methods the context policy needs. The prompt is exactly
the chat template's token ids with the generation prompt, so a cut made by the context policy
is the cut the model sees; send those ids to the engine, not text. lceval's own `hf:` and
`vllm:` backends are built on it.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path
from typing import Any, Callable

from lceval.errors import UserError
from lceval.types import GenerationRequest, Message

__all__ = ["SAFETY_MARGIN", "SAMPLE_TEXTS", "TOKENIZERS", "WORDS_PER_TOKEN", "Counter", "HFTokens", "Kept",
           "chat_token_ids", "check_fits_window", "counter", "fill_budget", "opens_thinking", "parse_length",
           "parse_lengths", "read_chat_template", "loading_bars_off", "template_thinks",
           "thinking_kwargs", "tokenizer_problems", "tokens_label"]

TOKENIZERS = ("auto", "cl100k_base", "words")
#: Tokens a prompt's count may drift from the sum of its parts when cut text is joined again
#: (tokenizer boundary effects): the context policy keeps this many free, and
#: `tokenizer_problems` tolerates this much.
SAFETY_MARGIN = 8
WORDS_PER_TOKEN = 0.75  # §3.2: 750 words ~ 1,000 tokens


#: what a length may be, for errors
LENGTHS_ACCEPTED = "a token count such as 4096, 8k, 128K, 1m, 1.5m or 2M, a range 8k..1m (doubling), or full"
_LENGTH = re.compile(r"(\d+(?:\.\d+)?)([km]?)")


def parse_length(text: str, field: str = "--context-lengths", kilo: int = 1024) -> int:
    """One length: `4096`, `8k`, `128K`, `1m`, `1.5M` (k = `kilo` tokens, m = `kilo` squared);
    a fraction that is no whole number of tokens is refused, not rounded."""
    m = _LENGTH.fullmatch(str(text).strip().lower())
    if not m:
        raise UserError(f"'{text}' is not a length ({LENGTHS_ACCEPTED})", field=field)
    number, unit = m.groups()
    scale = {"": 1, "k": kilo, "m": kilo * kilo}[unit]
    whole, _, frac = number.partition(".")
    # exact arithmetic: 1.5m is 1572864 tokens, not a float that happens to round there
    numerator = int(whole + frac) * scale
    denominator = 10 ** len(frac)
    if not unit and frac:
        raise UserError(f"'{text}' is not a whole number of tokens ({LENGTHS_ACCEPTED})", field=field)
    if numerator % denominator:
        raise UserError(f"'{text}' is {f'{numerator / denominator:,.3f}'.rstrip('0')} tokens, not a whole "
                        f"number ({LENGTHS_ACCEPTED})",
                        field=field)
    value = numerator // denominator
    if value <= 0:
        raise UserError(f"'{text}' is no tokens: a length is at least 1 ({LENGTHS_ACCEPTED})", field=field)
    return value


def parse_lengths(text: str, field: str = "--context-lengths", kilo: int = 1024,
                  full: bool = True) -> list[int | None]:
    """`4k,8k..1m,12000,full`: lengths, shortest first, `full` (None: the uncut task, allowed
    with `full=True`) last. `a..b` is a, 2a, 4a ... b: b must be a times a power of two, as
    in the sweeps of RULER and HELMET; a length given twice is refused."""
    out: list[int | None] = []
    for part in (p.strip() for p in str(text).split(",")):
        if not part:
            continue
        if part.lower() == "full" and full:
            values: list[int | None] = [None]
        elif ".." in part:
            values = list(_doubling(part, field, kilo))
        else:
            values = [parse_length(part, field, kilo)]
        for value in values:
            if value in out:
                raise UserError(f"length '{part}' ({'full' if value is None else f'{value:,} tokens'}) "
                                "is given twice", field=field)
            out.append(value)
    if not out:
        raise UserError(f"no length given ({LENGTHS_ACCEPTED})", field=field)
    return sorted(out, key=lambda v: float("inf") if v is None else v)


def _doubling(part: str, field: str, kilo: int) -> list[int]:
    start_text, _, end_text = part.partition("..")
    if not start_text.strip() or not end_text.strip():
        raise UserError(f"range '{part}' needs a start and an end, e.g. 8k..1m ({LENGTHS_ACCEPTED})", field=field)
    start, end = parse_length(start_text, field, kilo), parse_length(end_text, field, kilo)
    if end < start:
        raise UserError(f"range '{part}' goes down: give the shorter length first ({LENGTHS_ACCEPTED})", field=field)
    values = [start]
    while values[-1] < end:
        values.append(values[-1] * 2)
    if values[-1] != end:
        raise UserError(f"range '{part}' doubles from {tokens_label(start)} past {tokens_label(end)} "
                        f"(..{tokens_label(values[-2])}, ..{tokens_label(values[-1])}): its end must be its start "
                        f"times a power of two ({LENGTHS_ACCEPTED})", field=field)
    return values


def tokens_label(n: int) -> str:
    """A token count as `parse_length` reads it back: 1048576 -> "1m", 4096 -> "4k", 1572864 ->
    "1536k"; counts that are not whole multiples of 1024 stay as they are ("12000")."""
    if n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)}m"
    return f"{n // 1024}k" if n % 1024 == 0 else str(n)


@dataclass
class Counter:
    name: str
    encode: Callable[[str], list[Any]]
    decode: Callable[[list[Any]], str]


def _words() -> Counter:
    def encode(text: str) -> list[Any]:
        words = text.split()
        # ceil(words / 0.75) pseudo-tokens: each word is one, every third word owns a second
        out: list[Any] = []
        for i, w in enumerate(words):
            out.append(w)
            if math.ceil((i + 1) / WORDS_PER_TOKEN) > len(out):
                out.append(None)
        return out

    def decode(tokens: list[Any]) -> str:
        return " ".join(t for t in tokens if t is not None)

    return Counter("words", encode, decode)


CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


def _cl100k_cached() -> bool:
    """Whether tiktoken would load cl100k_base from its cache (tiktoken/load.py read_file_cached)."""
    import hashlib
    import os
    import tempfile

    folder = os.environ.get("TIKTOKEN_CACHE_DIR", os.environ.get("DATA_GYM_CACHE_DIR",
                                                                  os.path.join(tempfile.gettempdir(), "data-gym-cache")))
    return bool(folder) and os.path.exists(os.path.join(folder, hashlib.sha1(CL100K_URL.encode()).hexdigest()))


@lru_cache(maxsize=None)
def _tiktoken() -> Counter | None:
    try:
        import tiktoken

        enc = tiktoken.get_encoding("cl100k_base")
    except Exception:  # not installed, or its BPE file cannot be fetched offline
        return None
    return Counter("cl100k_base", lambda t: enc.encode(t, disallowed_special=()), enc.decode)


def counter(name: str = "auto", field: str = "options.budget_tokenizer") -> Counter:
    """The budget counter `name` (one of TOKENIZERS); `field` is what an error names."""
    if name not in TOKENIZERS:
        raise UserError(f"unknown budget tokenizer '{name}' (known: {', '.join(TOKENIZERS)})",
                        field=field)
    if name == "words":
        return _words()
    found = _tiktoken() if name == "cl100k_base" or _cl100k_cached() else None
    if found is not None:
        return found
    if name == "cl100k_base":
        raise UserError("budget_tokenizer cl100k_base needs tiktoken and its cl100k_base file",
                        field=field,
                        hint="pip install tiktoken (online once), or use budget_tokenizer: words")
    return _words()


@dataclass
class Kept:
    index: int  # position in the haystack's document list
    text: str  # the document, or its head when it crossed the budget
    tokens: int
    cut: bool


def fill_budget(texts: list[str], ranking: list[int], budget: int | None, count: Counter,
                encoded: list[list[Any]] | None = None) -> list[Kept]:
    """Documents in `ranking` order until `budget` tokens, the last one cut to fit
    (get_docs_token_limit: `>=` the limit cuts, and the loop stops there). None = all.
    `encoded` may pass every text's tokens when many rankings share one haystack."""
    kept: list[Kept] = []
    total = 0
    for idx in ranking:
        toks = encoded[idx] if encoded is not None else count.encode(texts[idx])
        if budget is not None and total + len(toks) >= budget:
            free = budget - total
            if free > 0:
                kept.append(Kept(idx, count.decode(toks[:free]), free, free < len(toks)))
            break
        total += len(toks)
        kept.append(Kept(idx, texts[idx], len(toks), False))
    return kept


# -- the tokenizer contract of ModelBackend ----------------------------------------------------

#: Texts `tokenizer_problems` tries by default: words, digits, punctuation, line breaks,
#: speaker tags as in ELITR transcripts, and non-ASCII letters.
SAMPLE_TEXTS = (
    "The quick brown fox jumps over the lazy dog.",
    "(PERSON4) So the budget is 1,250 euros, right?\n(PERSON7) Yes -- and the deadline is 3 May.",
    "Příliš žluťoučký kůň úpěl ďábelské ódy; naïve café, Zürich.",
)


def check_fits_window(request: Any, prompt_tokens: int, window: int, window_option: str) -> None:
    """Refuse a request whose prompt and the answer it may write do not fit the backend's
    window (no context policy could cut it): a backend never truncates silently. The error
    names the option a user changes (`n_ctx`, `max_model_len`)."""
    max_new = request.params.max_new_tokens
    if max_new < 1:
        raise UserError(f"max_new_tokens must be at least 1, got {max_new}", field="generation.max_new_tokens")
    if prompt_tokens + max_new > window:
        raise UserError(f"request '{request.request_id}' needs {prompt_tokens} prompt + {max_new} answer tokens "
                        f"but {window_option} is {window}", field=window_option,
                        hint=f"Use a context policy that cuts, or a larger {window_option}.")


def tokenizer_problems(backend: Any, texts: tuple[str, ...] | list[str] = SAMPLE_TEXTS) -> list[str]:
    """What in `backend`'s tokenizer breaks the context policy (empty list: nothing found).

    The policy (lceval.context) measures the long context once with `tokenize`, cuts the
    token ids and turns the kept ones back into text with `detokenize`, and sizes the whole
    chat-templated prompt with `count_tokens`. So, for every text x:
    - `tokenize(x)` returns a list of ints without added special tokens (no BOS), and
      `detokenize(tokenize(x)) == x` (the round trip);
    - `count_tokens` grows by len(tokenize(x)) (within `SAFETY_MARGIN` tokens) when x is put
      into a message, so the budget computed from the counts is the budget the model sees.
    A backend with no tokenizer (tokenize returns None) must not claim a `context_window`.
    Call it from your backend's tests: `assert tokenizer_problems(MyBackend(...)) == []`."""
    from lceval.types import Message

    problems: list[str] = []
    window = backend.context_window
    for text in texts:
        ids = backend.tokenize(text)
        if ids is None:
            if window is not None:
                problems.append(f"context_window is {window} but tokenize() returns None: the context "
                                "policy cannot measure or cut a context")
            return problems
        if not isinstance(ids, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in ids):
            problems.append(f"tokenize({text[:30]!r}...) returns {type(ids).__name__}, not a list of ints")
            continue
        back = backend.detokenize(ids)
        if back != text:
            at = next((i for i, (a, b) in enumerate(zip(back, text)) if a != b), min(len(back), len(text)))
            problems.append(f"detokenize(tokenize(x)) != x: differs at character {at} "
                            f"({text[at:at + 20]!r} became {back[at:at + 20]!r})")
        empty = backend.count_tokens([Message("user", "")])
        full = backend.count_tokens([Message("user", text)])
        if empty is None or full is None:
            problems.append("tokenize() works but count_tokens() returns None")
            continue
        if abs((full - empty) - len(ids)) > SAFETY_MARGIN:
            problems.append(f"count_tokens grows by {full - empty} tokens for a text tokenize() makes "
                            f"{len(ids)} tokens of (more than {SAFETY_MARGIN} apart): budgets will be wrong")
    return problems


# -- a Hugging Face model's tokens (backends) ------------------------------------------------

_INSTALL_HINT = "Install it with: pip install 'lceval[hf]'"


def read_chat_template(value: str) -> str:
    """A `chat_template=` option: a jinja file, or the template itself inline."""
    path = Path(value).expanduser()
    if path.is_file():
        return path.read_text(encoding="utf-8")
    if "{{" in value or "{%" in value:
        return value
    raise UserError(f"chat_template file not found: {path}", field="chat_template")


def chat_token_ids(tokenizer: Any, messages: list[Message], name: str,
                   template_kwargs: dict[str, Any] | None = None) -> list[int]:
    """The prompt's tokens: the tokenizer's chat template with the generation prompt, special
    tokens as the template writes them (none added on top). A last message of the assistant
    is continued: the template renders the messages before it with the generation prompt and
    the assistant's text follows as it is (the answer's start, or a thinking the engine
    ended), whatever the template would do to an assistant turn it renders itself (a reasoning
    model's template drops earlier thinking). `template_kwargs` reach the template (e.g.
    Qwen3's `enable_thinking`)."""
    continued = messages[-1].content if messages and messages[-1].role == "assistant" else None
    shown = messages[:-1] if continued is not None else messages
    try:
        ids = tokenizer.apply_chat_template([{"role": m.role, "content": m.content} for m in shown],
                                            add_generation_prompt=True, tokenize=True, return_dict=False,
                                            **(template_kwargs or {}))
    except Exception as exc:  # no template, raise_exception() in it, undefined variables
        raise UserError(f"chat template of '{name}' fails on these messages: {exc}",
                        field="chat_template", hint="Pass chat_template=FILE.jinja.") from None
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):
        ids = ids["input_ids"]
    out = [int(t) for t in ids]
    if continued:
        out += [int(t) for t in tokenizer.encode(continued, add_special_tokens=False)]
    return out


def template_thinks(template: str | None) -> bool:
    """Whether a chat template belongs to a model that thinks: it writes a thinking marker or
    has a thinking switch (Qwen3's `enable_thinking`, gpt-oss's analysis channel)."""
    if not template:
        return False
    from lceval.reasoning import KNOWN_MARKERS

    return "enable_thinking" in template or any(m.open in template for m in KNOWN_MARKERS)


def opens_thinking(prompt_tail: str) -> bool:
    """Whether a prompt ends inside a thinking its template opened (DeepSeek-R1's
    distillations end the generation prompt with `<think>`): the model's text then starts
    inside the thinking, and a backend says so with `extras["opened_thinking"] = True`."""
    from lceval.reasoning import KNOWN_MARKERS

    tail = prompt_tail.rstrip()
    return any(tail.endswith(m.open) for m in KNOWN_MARKERS)


def thinking_kwargs(template: str | None, thinking: bool | None) -> dict[str, Any]:
    """The template keyword that switches a model's thinking on or off (Qwen3's
    `enable_thinking`), when the run sets it and the template has the switch."""
    if thinking is None or not template or "enable_thinking" not in template:
        return {}
    return {"enable_thinking": bool(thinking)}


_quiet = 0  # runs in progress that asked for no progress bars (loading_bars_off)
_quiet_lock = threading.Lock()


@contextmanager
def loading_bars_off(off: bool = True) -> Iterator[None]:
    """While in effect (and `off`), a Hugging Face load through `HFTokens` (tokenizer, config,
    weights, a GGUF file dequantized) draws no progress bars: the engine turns them off for a
    run under `--no-progress`, where transformers' "Loading weights" bar alone wrote ~80 KB of
    redraws per model load into a log. Process-wide (a model loads on whichever worker thread
    asks first), counted, so runs in one process nest."""
    global _quiet
    if not off:
        yield
        return
    with _quiet_lock:
        _quiet += 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet -= 1


@contextmanager
def _bars_silenced() -> Iterator[None]:
    """transformers' and the hub's bars off (their own switch), and the GGUF converter's, which
    calls tqdm directly, disabled, for one load; restored after. Nothing while no run asked."""
    if not _quiet:
        yield
        return
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        import transformers.modeling_gguf_pytorch_utils as gguf_utils
    except ImportError:  # another transformers: its switch above is all there is
        gguf_utils = None
    bar = getattr(gguf_utils, "tqdm", None)
    if bar is not None:
        gguf_utils.tqdm = partial(bar, disable=True)
    try:
        yield
    finally:
        if bar is not None:
            gguf_utils.tqdm = bar
        if shown:
            hf_logging.enable_progress_bar()


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
        """`transformers.<auto_class>.from_pretrained`, its failures turned into UserErrors;
        without its progress bars while `loading_bars_off` is in effect."""
        try:
            import transformers
        except ImportError as exc:
            raise UserError(f"loading '{self.name}' needs transformers, which cannot be imported ({exc})",
                            field="--model", hint=self.install_hint) from None
        src, kwargs = self._source()
        try:
            with _bars_silenced():
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

    def chat_template_text(self) -> str | None:
        """The chat template the prompts are made with, as text (the default one of several)."""
        template = self._get_tokenizer().chat_template
        if isinstance(template, dict):
            template = template.get("default") or next(iter(template.values()), None)
        return template if isinstance(template, str) else None

    def thinks(self) -> bool | None:
        """A reasoning model's template writes thinking markers or has a thinking switch."""
        return template_thinks(self.chat_template_text())

    def prompt_tokens(self, messages: list[Message], thinking: bool | None = False) -> list[int]:
        """The exact tokens `generate` runs: the chat template with the generation prompt, a
        last assistant message continued. Without the run's thinking switch (the context
        policy's counts) the template renders with thinking off, its longer form where it
        has a switch (Qwen3 writes an empty thinking block), so a count never falls short."""
        kwargs = thinking_kwargs(self.chat_template_text(), thinking)
        return chat_token_ids(self._get_tokenizer(), messages, self.name, kwargs)

    def checked_prompt_tokens(self, request: GenerationRequest, window: int, window_option: str) -> list[int]:
        """The request's prompt tokens, refused when they and the answer do not fit `window`."""
        ids = self.prompt_tokens(request.messages, request.params.thinking)
        check_fits_window(request, len(ids), window, window_option)
        return ids

    def count_tokens(self, messages: list[Message]) -> int:
        return len(self.prompt_tokens(messages))

    def opens_thinking(self, ids: list[int]) -> bool:
        """The prompt `ids` end inside a thinking the template opened (`opens_thinking`)."""
        if not self.thinks():
            return False
        return opens_thinking(self._get_tokenizer().decode(ids[-16:], skip_special_tokens=False))

    def tokenize(self, text: str) -> list[int]:
        return list(self._get_tokenizer().encode(text, add_special_tokens=False))

    def detokenize(self, tokens: list[int]) -> str:
        return self._get_tokenizer().decode(tokens, clean_up_tokenization_spaces=False)
