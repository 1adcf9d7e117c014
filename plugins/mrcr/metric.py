"""OpenAI MRCR's grader, as the dataset card's "how to run" code defines it (Hugging Face
`openai/mrcr`, README.md; stanford-crfm/helm's `openai_mrcr_metrics.py`, NVIDIA nemo-skills and
groq/openbench copy the same `grade`):

    if not response.startswith(random_string_to_prepend): return 0
    response = response.removeprefix(random_string_to_prepend)
    answer = answer.removeprefix(random_string_to_prepend)
    return float(SequenceMatcher(None, response, answer).ratio())

The gate is case-sensitive and nothing is stripped first: a leading space, a quote or a code
fence before the random string scores 0. The ratio is difflib's, character by character, with
its default `autojunk` (the answers are longer than 200 characters, so characters that make up
more than 1% of the answer count as junk, as in the card's runs). The answer is taken as the
model wrote it (`JudgeInput.raw_response`, after a reasoning model's thinking was set apart),
as the card grades the API's message content.
"""

from __future__ import annotations

from difflib import SequenceMatcher
from typing import Any

from lceval.errors import UserError
from lceval.types import JudgeInput, Judgment

from lceval_plugins.judges.metric_base import MetricJudge


def grade(response: str, answer: str, random_string_to_prepend: str) -> float:
    """The card's `grade`: 0 without the random string at the very start, else difflib's ratio
    of the rest against the gold answer's rest."""
    if not response.startswith(random_string_to_prepend):
        return 0.0
    response = response.removeprefix(random_string_to_prepend)
    answer = answer.removeprefix(random_string_to_prepend)
    return float(SequenceMatcher(None, response, answer).ratio())


class MrcrJudge(MetricJudge):
    """The card's grade x 100: the random prefix from the sample's metadata (`prefix_field`),
    the gold answer from its reference (the row's `answer`, which starts with the prefix)."""

    name = "mrcr"
    OPTIONS = {"type": "object", "additionalProperties": False, "properties": {
        "prefix_field": {"type": "string", "minLength": 1, "default": "random_string_to_prepend",
                         "description": "The metadata field holding the random string the answer must start with "
                                        "(documents: fields.metadata)."},
    }}

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        field = self.options["prefix_field"]
        out = []
        for item in items:
            prefix = item.metadata.get(field)
            if not isinstance(prefix, str) or not prefix:
                raise UserError(f"item {item.item_id} has no random string in its metadata field {field!r}",
                                field="judge.options.prefix_field",
                                hint="Copy the row's random_string_to_prepend into the metadata (fields.metadata).")
            refs = item.metadata.get("references")
            answer = str(refs[0]) if isinstance(refs, (list, tuple)) and refs else item.reference
            response = item.raw_response if item.raw_response is not None else item.response
            value = grade(response, answer, prefix)
            details: dict[str, Any] = {"prefixed": response.startswith(prefix)}
            out.append(Judgment(item_id=item.item_id, judge=self.name, score=100.0 * value,
                                raw=f"ratio {value:.4f}" if details["prefixed"] else "no random prefix: 0",
                                details=details))
        return out
