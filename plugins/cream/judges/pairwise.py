"""`cream`: the pairwise judge of CREAM (Gong et al., 2024, Sec. 4 and 4.1.2).

One chain-of-thought prompt per ordered pair: the judge model reads both summaries (each with
numbered sentences), extracts at most K non-redundant key facts from them together, and
aligns every fact to the supporting sentences of each summary. From the alignment (parse.py):
completeness and conciseness of each side, the raw pairwise scores of Tables 3-4, which
`lceval rank` turns into Elo ratings (Sec. 4.1.1). The engine asks each pair in both orders,
so position bias averages out there, not here.

Retries: an unusable output is asked again with seed + k x RETRY_SEED_STRIDE when the
temperature is above 0 (greedy decoding would only replay it from the cache), then recorded
as parse_failure with every raw output. A request the backend gave up on (finish_reason
"error") is `missing`: not retried here, not cached, asked again by the next run.
"""

from __future__ import annotations

from typing import Any

from lceval.interfaces import JudgeContext, PairwiseJudge
from lceval.judging import sha256_text
from lceval.types import GenerationParams, GenerationRequest, Message, PairInput, PairJudgment

from .options import ModelJudgeSettings
from .parse import PairParse, ParseError, parse_pair
from .prompts import CREAM_TEMPLATE, cream_prompt
from .sentences import split_sentences

#: Bump when the parsing or scoring changes what a verdict means (the template has its hash).
VERSION = 1


class CreamJudge(ModelJudgeSettings, PairwiseJudge):
    name = "cream"
    criteria = ("completeness", "conciseness")
    uses_model = True

    def __init__(self, ctx: JudgeContext) -> None:
        self.configure(ctx)

    def pair_messages(self, sentences_a: list[str], sentences_b: list[str]) -> list[Message]:
        return self.chat(cream_prompt(sentences_a, sentences_b, self.max_key_facts))

    def compare(self, pairs: list[PairInput]) -> list[PairJudgment]:
        sentences = [(split_sentences(p.text_a), split_sentences(p.text_b)) for p in pairs]
        messages = [self.pair_messages(a, b) for a, b in sentences]

        def request(i: Any, params: GenerationParams, attempt: int) -> GenerationRequest:
            return GenerationRequest(request_id=pairs[i].unit_id, messages=messages[i], params=params,
                                     hints={"judge": self.name, "unit_id": pairs[i].unit_id,
                                            "system_a": pairs[i].system_a, "system_b": pairs[i].system_b,
                                            "attempt": attempt})

        def parse(i: Any, text: str) -> tuple[PairParse | None, str | None]:
            try:
                return parse_pair(text, len(sentences[i][0]), len(sentences[i][1]), self.max_key_facts), None
            except ParseError as exc:
                return None, str(exc)

        rounds = self.ask(range(len(pairs)), request, parse)
        return [self._judgment(p, sentences[i], rounds.results.get(i), rounds.raws[i], rounds.why.get(i),
                               rounds.errors.get(i)) for i, p in enumerate(pairs)]

    def _judgment(self, pair: PairInput, sentences: tuple[list[str], list[str]], result: PairParse | None,
                  raws: list[str], why: str | None, error: Any) -> PairJudgment:
        base = {"n_sentences_a": len(sentences[0]), "n_sentences_b": len(sentences[1]),
                "attempt_outputs": list(raws)}
        if error is not None:
            return PairJudgment(unit_id=pair.unit_id, judge=self.name, scores_a=None, scores_b=None,
                                parse_status="missing", raw=raws[-1] if raws else "", attempts=len(raws) + 1,
                                details={**base, "judge_error": error,
                                         "attempt_seeds": self.attempt_seeds(len(raws) + 1)})
        base["attempt_seeds"] = self.attempt_seeds(len(raws))
        if result is None:
            return PairJudgment(unit_id=pair.unit_id, judge=self.name, scores_a=None, scores_b=None,
                                parse_status="parse_failure", raw=raws[-1] if raws else "", attempts=len(raws),
                                details={**base, "failure": why or "no output"})
        details = {
            **base,
            "key_facts": [{"fact": f, "a_lines": la, "b_lines": lb}
                          for f, la, lb in zip(result.facts, result.a.lines, result.b.lines)],
            "n_key_facts": len(result.facts),
            "facts_over_cap": result.facts_over_cap,
            "invalid_lines": {"a": result.a.invalid_lines, "b": result.b.invalid_lines},
            "reasoning": result.reasoning,
        }
        return PairJudgment(unit_id=pair.unit_id, judge=self.name, scores_a=result.a.scores(),
                            scores_b=result.b.scores(), raw=raws[-1], attempts=len(raws), details=details)

    def identity(self) -> dict[str, Any]:
        return self.settings_identity(VERSION, sha256_text(CREAM_TEMPLATE))


def make_cream(ctx: JudgeContext) -> CreamJudge:
    return CreamJudge(ctx)
