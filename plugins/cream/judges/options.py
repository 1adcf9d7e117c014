"""Options of the model-calling CREAM judges (`--judge cream,max_key_facts=30`), declared like
the `rubric` judge's (lceval.judging.sampling_options): typed, range-checked, unknown names refused.

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

from lceval.interfaces import JudgeContext
from lceval.judging import SampledJudge, require_model, sampling_options
from lceval.options import check_options

#: Typed options of `cream` and `keyfacts` (defaults and why: the module docstring).
OPTIONS = sampling_options(
    temperature=0.0, top_p=1.0, max_new_tokens=2048, max_attempts=3, system_prompt=None,
    extra={"max_key_facts": {"type": "integer", "minimum": 1, "default": 16,
                             "description": "Most key facts extracted (Gong et al., 2024: 16, or 30 in Table 2)."}})


class ModelJudgeSettings(SampledJudge):
    """What the two model-calling CREAM judges (`cream`, `keyfacts`) share beyond the
    `rubric` judge's sampling and retries: the key-fact cap and the identity fields; each
    adds its own templates."""

    name = "cream"

    def configure(self, ctx: JudgeContext) -> None:
        options = check_options(OPTIONS, ctx.options, what=f"judge '{self.name}'", field_prefix="judge.options.")
        model = require_model(ctx, self.name, "Pass --judge-model SPEC (the paper uses GPT-4o: "
                              "litellm:openai/gpt-4o-2024-05-13), or use the offline reference judge keyfacts-lexical.")
        self.configure_sampling(model, ctx.seed, options)
        self.max_key_facts: int = options["max_key_facts"]

    def settings_identity(self, version: int, templates: Any) -> dict[str, Any]:
        return {
            "judge": self.name,
            "version": version,
            "template_sha256": templates,
            "system_prompt_sha256": self.system_prompt_identity(),
            "max_key_facts": self.max_key_facts,
            **self.sampling_identity(),
        }
