"""Options of the model-calling CREAM judges (`--judge cream,max_key_facts=30`), checked like
the `rubric` judge's: every value parsed and range-checked, unknown names refused.

Defaults, and why:
- max_key_facts 16: the paper's main setting (Sec. 4.1.2, "following precedent literature";
  Table 5 is at 16); 30 is its other one (the most GPT-4o used effectively, Table 2);
- temperature 0.0, top_p 1.0: the paper gives no sampling settings; greedy decoding makes the
  judge deterministic, so a rerun (or another seed) replays the same verdict from the cache,
  and a retry at temperature 0 would only replay the same text, hence one attempt (raise
  the temperature to get retries with new seeds);
- max_new_tokens 2048: reasoning over 16-30 facts plus the JSON answer;
- max_attempts 3, as the other LLM judges;
- system_prompt None: the paper prints no system message, so by default the prompt is the
  only (user) turn; pass one to test its effect.
"""

from __future__ import annotations

from typing import Any

from lceval.cache import RETRY_SEED_STRIDE, retry_seed, sha256_text
from lceval.errors import UserError
from lceval.interfaces import JudgeContext
from lceval.types import GenerationParams, Message
from lceval_plugins.judges.llm_judges import check_number

DEFAULTS: dict[str, Any] = {"max_key_facts": 16, "temperature": 0.0, "top_p": 1.0,
                            "max_new_tokens": 2048, "max_attempts": 3, "system_prompt": None}


def resolve_options(judge: str, given: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(given) - set(DEFAULTS))
    if unknown:
        raise UserError(f"unknown option(s) {', '.join(unknown)} for judge '{judge}' "
                        f"(known: {', '.join(DEFAULTS)})", field="judge.options")
    value = {**DEFAULTS, **given}
    out: dict[str, Any] = {
        "max_key_facts": check_number("max_key_facts", value["max_key_facts"], int, 1, None, judge),
        "temperature": check_number("temperature", value["temperature"], float, 0.0, None, judge),
        "top_p": check_number("top_p", value["top_p"], float, 0.0, 1.0, judge),
        "max_new_tokens": check_number("max_new_tokens", value["max_new_tokens"], int, 1, None, judge),
        "max_attempts": check_number("max_attempts", value["max_attempts"], int, 1, None, judge),
    }
    if out["top_p"] == 0:
        raise UserError(f"judge '{judge}' option 'top_p' must be above 0", field="judge.options.top_p")
    system = value["system_prompt"]
    if system is not None and not isinstance(system, str):
        raise UserError(f"judge '{judge}' option 'system_prompt' must be text or null, got {system!r}",
                        field="judge.options.system_prompt")
    out["system_prompt"] = system
    return out


def require_model(judge: str, ctx: JudgeContext) -> None:
    if ctx.model is None:
        raise UserError(f"judge '{judge}' asks a language model and none was given", field="--judge-model",
                        hint="Pass --judge-model SPEC (the paper uses GPT-4o: litellm:openai/gpt-4o-2024-05-13), "
                        "or use the offline reference judge keyfacts-lexical.")


def base_params(options: dict[str, Any], seed: int) -> GenerationParams:
    return GenerationParams(max_new_tokens=options["max_new_tokens"], temperature=options["temperature"],
                            top_p=options["top_p"], seed=seed)


def with_seed(params: GenerationParams, seed: int) -> GenerationParams:
    return GenerationParams(**{**params.as_dict(), "stop": tuple(params.stop), "seed": seed})


class ModelJudgeSettings:
    """What the two model-calling CREAM judges (`cream`, `keyfacts`) share: the judge model,
    the sampling, the retry rule and the identity fields; each adds its own templates."""

    name = "cream"

    def configure(self, ctx: JudgeContext, options: dict[str, Any]) -> None:
        require_model(self.name, ctx)
        self.model = ctx.model
        self.seed = int(ctx.seed)
        self.max_key_facts: int = options["max_key_facts"]
        self.max_attempts: int = options["max_attempts"]
        self.system_prompt: str | None = options["system_prompt"]
        self.params = base_params(options, self.seed)

    def attempts_allowed(self) -> int:
        # greedy decoding ignores the seed: a retry would replay the same text from the cache
        return 1 if self.params.temperature == 0 else self.max_attempts

    def attempt_params(self, attempt: int) -> GenerationParams:
        return with_seed(self.params, retry_seed(self.seed, attempt))

    def messages(self, prompt: str) -> list[Message]:
        head = [Message("system", self.system_prompt)] if self.system_prompt is not None else []
        return head + [Message("user", prompt)]

    def settings_identity(self, version: int, templates: Any) -> dict[str, Any]:
        system = self.system_prompt
        return {
            "judge": self.name,
            "version": version,
            "template_sha256": templates,
            "system_prompt_sha256": sha256_text(system) if system is not None else None,
            "max_key_facts": self.max_key_facts,
            "params": {k: v for k, v in self.params.as_dict().items() if k not in ("seed", "stop")},
            "seed": self.seed,
            "max_attempts": self.max_attempts,
            "retry_seed_stride": RETRY_SEED_STRIDE,
            "judge_model": self.model.identity,
        }
