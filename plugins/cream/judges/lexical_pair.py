"""`cream-lexical`: CREAM's two steps with word overlap instead of a model (offline).

It follows the `cream` judge's procedure (Gong et al., 2024, Sec. 4.1.2) so that `lceval rank` can be
run, tested and compared without an API:

1. Key facts from the two summaries together: every sentence of either summary with at least
   two content words is a candidate; a candidate that shares at least `threshold` of its
   content words with an earlier fact, and vice versa, is the same fact (non-redundant). Facts
   that both summaries state come first (what two independent summaries agree on is the best
   proxy for "key" that word overlap has), then the rest alternately from A and B, so the cap
   K (`max_key_facts`, 16 by default, as the paper) does not favour the summary shown first.
2. Alignment: a summary sentence supports a fact when it holds at least `threshold` of the
   fact's content words (`keyfacts-lexical`'s rule).

Scores are the `cream` judge's: completeness = share of the K facts a summary supports,
conciseness = share of its sentences that support one of them.

What it cannot tell, said plainly: it has no notion of importance beyond agreement and order,
so a sentence of chit-chat is a fact like any other until the cap cuts it; conciseness then
mostly measures how much of a long summary falls beyond the cap. Paraphrase is missed. Use it
to smoke-test rankings and as a floor for the model judges, not as the paper's judge.
"""

from __future__ import annotations

from typing import Any

from lceval.interfaces import JudgeContext, PairwiseJudge
from lceval.types import PairInput, PairJudgment
from lceval.options import check_options

from .lexical_ref import THRESHOLD, align, fact_words
from .sentences import split_sentences

VERSION = 1


def _same(a: set[str], b: set[str], threshold: float) -> bool:
    common = len(a & b)
    return bool(a and b) and common / len(a) >= threshold and common / len(b) >= threshold


def pair_facts(sentences_a: list[str], sentences_b: list[str], threshold: float, cap: int) -> list[str]:
    """Step 1: the non-redundant candidate facts of both summaries, consensus first."""
    interleaved: list[tuple[str, str]] = []
    for i in range(max(len(sentences_a), len(sentences_b))):
        interleaved += [("a", sentences_a[i])] if i < len(sentences_a) else []
        interleaved += [("b", sentences_b[i])] if i < len(sentences_b) else []
    facts: list[tuple[str, set[str], set[str]]] = []  # text, words, sides stating it
    for side, sentence in interleaved:
        words = fact_words(sentence)
        if len(words) < 2:
            continue
        for _, known, sides in facts:
            if _same(words, known, threshold):
                sides.add(side)
                break
        else:
            facts.append((sentence, words, {side}))
    ranked = [f for f in facts if len(f[2]) == 2] + [f for f in facts if len(f[2]) == 1]
    return [text for text, _, _ in ranked[:cap]]


class CreamLexicalJudge(PairwiseJudge):
    name = "cream-lexical"
    criteria = ("completeness", "conciseness")
    uses_model = False

    def __init__(self, threshold: float, max_key_facts: int) -> None:
        self.threshold = threshold
        self.max_key_facts = max_key_facts

    def compare(self, pairs: list[PairInput]) -> list[PairJudgment]:
        out = []
        for p in pairs:
            sa, sb = split_sentences(p.text_a), split_sentences(p.text_b)
            facts = pair_facts(sa, sb, self.threshold, self.max_key_facts)
            if not facts:
                out.append(PairJudgment(unit_id=p.unit_id, judge=self.name, scores_a=None, scores_b=None,
                                        parse_status="parse_failure", raw="no sentence with two content words",
                                        details={"failure": "neither summary states a fact"}))
                continue
            a, b = align(facts, sa, self.threshold), align(facts, sb, self.threshold)
            details: dict[str, Any] = {
                "key_facts": [{"fact": f, "a_lines": la, "b_lines": lb} for f, la, lb in zip(facts, a.lines, b.lines)],
                "n_key_facts": len(facts), "n_sentences_a": len(sa), "n_sentences_b": len(sb)}
            out.append(PairJudgment(unit_id=p.unit_id, judge=self.name, scores_a=a.scores(), scores_b=b.scores(),
                                    raw=f"{len(facts)} facts", details=details))
        return out

    def identity(self) -> dict[str, Any]:
        return {"judge": self.name, "version": VERSION, "threshold": self.threshold,
                "max_key_facts": self.max_key_facts}


OPTIONS = {"type": "object", "additionalProperties": False, "properties": {
    "threshold": THRESHOLD,
    "max_key_facts": {"type": "integer", "minimum": 1, "default": 16, "description": "Most key facts per pair."}}}


def make_cream_lexical(ctx: JudgeContext) -> CreamLexicalJudge:
    options = check_options(OPTIONS, ctx.options, what="judge 'cream-lexical'", field_prefix="judge.options.")
    return CreamLexicalJudge(options["threshold"], options["max_key_facts"])
