"""Helpers for judges that ask a language model (public API: plugin authors import it; the
built-in `rubric`, `prometheus`, `cream`, `keyfacts` and `summhay-coverage` judges use it too).

What every model-calling judge needs, written once:

- `ask_in_rounds`: ask every prompt, parse each answer, and ask again (with the next
  attempt's parameters) only those whose answer could not be used, up to a number of rounds.
  One `generate` call per round, so a batched or concurrent backend answers them together.
  A request the backend gave up on (`finish_reason == "error"`) is not retried here and not
  parsed: it is kept apart in `Rounds.errors`, to be recorded as `parse_status="missing"`;
  it is not cached either, so running the same command again asks it again.
- `SampledJudge`: the sampling parameters, the optional system prompt and the seeds of the
  retries (attempt k uses seed + k * RETRY_SEED_STRIDE, so every retry is a new, cached,
  reproducible request), plus the identity fields that put all of them into cache keys.
- `sampling_options`: the typed options (`--judge NAME,temperature=0.6,...`) of such a
  judge, as a JSON Schema to pass to `register(..., options_schema=...)`.
- `require_model`: the `--judge-model` a judge needs, or a clear error when none was given.

Never turn an unusable answer into a score: after the last round, record it as
`parse_status="parse_failure"` with the raw text (`lceval.types.Judgment`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterable

from lceval.errors import UserError
from lceval.interfaces import JudgeContext, JudgeModel
from lceval.io import sha256_text
from lceval.options import OptionsSchema
from lceval.types import GenerationParams, GenerationRequest, Message

#: A sampled call retried because its output was unusable (an unparseable judge verdict, a
#: malformed synthesized document) uses seed + attempt x this stride: a new cache key, the
#: same attempts replayed from the cache on a rerun, and - a large prime rather than +1 -
#: never the first attempt of a neighbouring run seed (2023, 2024, 2025 in ELITR's App. C.1).
RETRY_SEED_STRIDE = 1_000_003


def retry_seed(seed: int, attempt: int) -> int:
    """The seed of retry `attempt` (0 = the first ask) of a call seeded with `seed`."""
    return seed + attempt * RETRY_SEED_STRIDE


__all__ = ["RETRY_SEED_STRIDE", "Rounds", "SampledJudge", "ask_in_rounds", "require_model", "retry_seed",
           "sampling_options", "sha256_text"]


@dataclass
class Rounds:
    """What asking in rounds left, per key: every output, the parse of the last one (whatever
    the parse returned, also for an unusable output), why the last one was unusable (absent
    once one parsed) and the error of a request the backend gave up on."""

    raws: dict[Hashable, list[str]]
    results: dict[Hashable, Any] = field(default_factory=dict)
    why: dict[Hashable, str] = field(default_factory=dict)
    errors: dict[Hashable, Any] = field(default_factory=dict)


def ask_in_rounds(model: JudgeModel, keys: Iterable[Hashable], attempts: int,
                  params: Callable[[int], GenerationParams],
                  request: Callable[[Hashable, GenerationParams, int], GenerationRequest],
                  parse: Callable[[Hashable, str], tuple[Any, str | None]]) -> Rounds:
    """Ask every key's prompt, then again, with attempt k's params, those whose output
    `parse` called unusable (it returns (result, None) or (result, why)), `attempts` rounds
    at most. `request(key, params, attempt)` builds the key's request (give each a distinct
    `request_id` and put the attempt in `hints`). One generate call per round.

    A request the backend gave up on (finish_reason "error", after its own retries) is no
    output to parse: it goes to `errors` and is not asked again here; it is not cached, so the
    same command run again asks it again."""
    rounds = Rounds(raws={key: [] for key in keys})
    pending = list(rounds.raws)
    for attempt in range(attempts):
        if not pending:
            break
        round_params = params(attempt)
        outputs = model.generate([request(key, round_params, attempt) for key in pending])
        still = []
        for key, gen in zip(pending, outputs):
            if gen.finish_reason == "error":
                rounds.errors[key] = gen.extras.get("error") or "judge model returned no answer"
                continue
            rounds.raws[key].append(gen.text)
            rounds.results[key], why = parse(key, gen.text)
            if why is None:
                rounds.why.pop(key, None)
            else:
                rounds.why[key] = why
                still.append(key)
        pending = still
    return rounds


def require_model(ctx: JudgeContext, judge: str, hint: str) -> JudgeModel:
    """`ctx.model`, or the error a user gets when a judge that asks a model was given none."""
    if ctx.model is None:
        raise UserError(f"judge '{judge}' asks a language model and none was given", field="--judge-model",
                        hint=hint)
    return ctx.model


def sampling_options(*, temperature: float, top_p: float, max_new_tokens: int, max_attempts: int,
                     system_prompt: str | None = None, repeat_penalty: float | None = None,
                     extra: OptionsSchema | None = None) -> OptionsSchema:
    """The options schema of a judge that samples from a model, with the judge's defaults.
    `repeat_penalty` is offered only when a default is given; `extra` adds the judge's own
    options (JSON Schema properties), listed first."""
    props: dict[str, Any] = dict(extra or {})
    props.update({
        "temperature": {"type": "number", "minimum": 0, "default": float(temperature),
                        "description": "Sampling temperature; at 0 (greedy) a retry would repeat the "
                                       "same text, so only one attempt is made."},
        "top_p": {"type": "number", "exclusiveMinimum": 0, "maximum": 1, "default": float(top_p),
                  "description": "Nucleus sampling mass."},
        "max_new_tokens": {"type": "integer", "minimum": 1, "default": int(max_new_tokens),
                           "description": "Longest judge answer, in tokens."},
    })
    if repeat_penalty is not None:
        props["repeat_penalty"] = {"type": "number", "minimum": 0, "default": float(repeat_penalty),
                                   "description": "Repetition penalty (1.0 = none)."}
    props["max_attempts"] = {"type": "integer", "minimum": 1, "default": int(max_attempts),
                             "description": "Asks per item while the answer cannot be parsed (each retry "
                                            "with a new seed)."}
    props["system_prompt"] = {"type": ["string", "null"], "default": system_prompt,
                              "description": "System message before the prompt (null: none)."}
    return {"type": "object", "additionalProperties": False, "properties": props}


class SampledJudge:
    """The judge model, sampling, optional system prompt and seeded retries of a judge whose
    options follow `sampling_options`. Call `configure_sampling` from the constructor (or set
    the attributes below yourself), then `ask` in rounds and put `sampling_identity()` at the
    end of your `identity()`."""

    name: str
    model: JudgeModel
    seed: int
    max_attempts: int
    system_prompt: str | None
    params: GenerationParams

    def configure_sampling(self, model: JudgeModel, seed: int, options: dict[str, Any]) -> None:
        """Set model, seed and sampling from options checked against `sampling_options`."""
        self.model = model
        self.seed = int(seed)
        self.max_attempts = options["max_attempts"]
        self.system_prompt = options["system_prompt"]
        self.params = GenerationParams(max_new_tokens=options["max_new_tokens"], temperature=options["temperature"],
                                       top_p=options["top_p"], repeat_penalty=options.get("repeat_penalty", 1.0),
                                       seed=self.seed)

    def attempts_allowed(self) -> int:
        # greedy decoding ignores the seed: a retry would replay the same text from the cache
        return 1 if self.params.temperature == 0 else self.max_attempts

    def attempt_params(self, attempt: int) -> GenerationParams:
        return GenerationParams(**{**self.params.as_dict(), "stop": tuple(self.params.stop),
                                   "seed": retry_seed(self.seed, attempt)})

    def attempt_seeds(self, n: int) -> list[int]:
        return [retry_seed(self.seed, k) for k in range(n)]

    def chat(self, prompt: str) -> list[Message]:
        head = [Message("system", self.system_prompt)] if self.system_prompt is not None else []
        return head + [Message("user", prompt)]

    def ask(self, keys: Iterable[Hashable], request: Callable[[Hashable, GenerationParams, int], GenerationRequest],
            parse: Callable[[Hashable, str], tuple[Any, str | None]]) -> Rounds:
        return ask_in_rounds(self.model, keys, self.attempts_allowed(), self.attempt_params, request, parse)

    def system_prompt_identity(self) -> str | None:
        return sha256_text(self.system_prompt) if self.system_prompt is not None else None

    def sampling_identity(self) -> dict[str, Any]:
        """The identity fields after the judge's own ones (their order is part of the cache key)."""
        return {
            "params": {k: v for k, v in self.params.as_dict().items() if k not in ("seed", "stop")},
            "seed": self.seed,
            "max_attempts": self.max_attempts,
            "retry_seed_stride": RETRY_SEED_STRIDE,
            "judge_model": self.model.identity,
        }
