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

from lceval.errors import UserError
from lceval.interfaces import JudgeContext
from lceval.types import GenerationParams
from lceval_plugins.judges.llm_judges import SampledJudge, resolve_sampling

DEFAULTS: dict[str, Any] = {"max_key_facts": 16, "temperature": 0.0, "top_p": 1.0,
                            "max_new_tokens": 2048, "max_attempts": 3, "system_prompt": None}
RANGES: dict[str, tuple[type, float, float | None]] = {
    "max_key_facts": (int, 1, None), "temperature": (float, 0.0, None), "top_p": (float, 0.0, 1.0),
    "max_new_tokens": (int, 1, None), "max_attempts": (int, 1, None)}


def resolve_options(judge: str, given: dict[str, Any]) -> dict[str, Any]:
    return resolve_sampling(judge, given, DEFAULTS, RANGES)


def require_model(judge: str, ctx: JudgeContext) -> None:
    if ctx.model is None:
        raise UserError(f"judge '{judge}' asks a language model and none was given", field="--judge-model",
                        hint="Pass --judge-model SPEC (the paper uses GPT-4o: litellm:openai/gpt-4o-2024-05-13), "
                        "or use the offline reference judge keyfacts-lexical.")


class ModelJudgeSettings(SampledJudge):
    """What the two model-calling CREAM judges (`cream`, `keyfacts`) share beyond the
    `rubric` judge's sampling and retries: the key-fact cap and the identity fields; each
    adds its own templates."""

    name = "cream"

    def configure(self, ctx: JudgeContext, options: dict[str, Any]) -> None:
        require_model(self.name, ctx)
        self.model = ctx.model
        self.seed = int(ctx.seed)
        self.max_key_facts: int = options["max_key_facts"]
        self.max_attempts = options["max_attempts"]
        self.system_prompt = options["system_prompt"]
        self.params = GenerationParams(max_new_tokens=options["max_new_tokens"], temperature=options["temperature"],
                                       top_p=options["top_p"], seed=self.seed)

    def settings_identity(self, version: int, templates: Any) -> dict[str, Any]:
        return {
            "judge": self.name,
            "version": version,
            "template_sha256": templates,
            "system_prompt_sha256": self.system_prompt_identity(),
            "max_key_facts": self.max_key_facts,
            **self.sampling_identity(),
        }
