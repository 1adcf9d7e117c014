"""`lexical` judge: an offline judge that needs no model.

Score = 1 + 9 x recall, where recall is the share of the reference answer's distinct content
words that appear in the response. Content words are lower-cased alphanumeric tokens minus
English stop words; number words up to twenty become digits ("three" == "3"); de-identified
placeholders keep their identity ("[PERSON3]" and "PERSON3" are both "person3"); a trailing
plural "s" is dropped. The result is continuous on the ELITR 1-10 scale: 1 = nothing of the
reference, 10 = every content word of it.

It is a sanity check and a CI-friendly default, not a substitute for an LLM judge: it cannot
tell a correct paraphrase from a wrong answer that reuses the words, and it does not
penalise verbosity the way the paper's rubric (Fig. 6) does.
"""

from __future__ import annotations

import re

from lceval import hookimpl
from lceval.interfaces import Judge, JudgeContext
from lceval.options import NO_OPTIONS, check_options
from lceval.types import JudgeInput, Judgment

STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves also will shall may might must
    meeting""".split()
)
NUMBER_WORDS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty".split())}
TOKEN = re.compile(r"[a-z0-9]+")


def content_words(text: str) -> set[str]:
    words = set()
    for tok in TOKEN.findall(text.lower()):
        tok = NUMBER_WORDS.get(tok, tok)
        if tok in STOP_WORDS:
            continue
        if len(tok) > 3 and tok.endswith("s") and not tok.endswith("ss"):
            tok = tok[:-1]
        words.add(tok)
    return words


def lexical_score(response: str, reference: str) -> tuple[float, float]:
    """(score on 1-10, recall)."""
    ref = content_words(reference)
    if not ref:
        hit = reference.strip().lower() in response.lower()
        recall = 1.0 if hit else 0.0
    else:
        recall = len(ref & content_words(response)) / len(ref)
    return 1.0 + 9.0 * recall, recall


class LexicalJudge(Judge):
    name = "lexical"
    scale = (1.0, 10.0)

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        out = []
        for item in items:
            score, recall = lexical_score(item.response, item.reference)
            out.append(Judgment(item_id=item.item_id, judge=self.name, score=score,
                                raw=f"recall={recall:.4f}", details={"recall": recall}))
        return out

    def identity(self) -> dict:
        return {"judge": "lexical", "version": 1}


def make_lexical(ctx: JudgeContext) -> LexicalJudge:
    check_options(NO_OPTIONS, ctx.options, what="judge 'lexical'", field_prefix="judge.options.")
    return LexicalJudge()


@hookimpl
def register_judges(register):
    register("lexical", make_lexical, options_schema=NO_OPTIONS)
