"""`keyfacts`: the reference-based check of CREAM's ranking (Gong et al., 2024, Table 1 "Human Summary"
column and the gold rankings of Table 5), in FineSurE's two steps (ref. [10]):

(a) key fact extraction from the human minutes alone, at most K facts. The request depends on
    the minutes and the options only, so it is identical for every system's summary of a
    meeting: the request cache asks it once per meeting, and every system is scored against
    the very same facts;
(b) alignment of those facts to the numbered sentences of one system's summary: for each fact
    "Yes"/"No" and the supporting line numbers.

Judgment.score = completeness in [0, 1] (share of the minutes' key facts the summary
supports); details carry conciseness (share of the summary's sentences aligned to a
supported fact) and the alignment. Several annotators' minutes of one meeting arrive joined
by a "---" line; the extraction prompt says so and asks for each fact once.

Retries and failures as the `cream` judge: a step's unusable output is retried with a new
seed when the temperature is above 0, then the item is a parse_failure with the raw outputs
of both steps; a request the backend gave up on makes the item `missing`. A summary with no
sentence is not sent to step (b): it supports nothing and scores 0 on both (parse.py).
"""

from __future__ import annotations

from typing import Any, Callable

from lceval.errors import UserError
from lceval.interfaces import Judge, JudgeContext
from lceval.judging import Rounds, sha256_text
from lceval.types import GenerationParams, GenerationRequest, JudgeInput, Judgment

from .options import ModelJudgeSettings
from .parse import ParseError, Side, parse_alignment, parse_facts
from .prompts import ALIGNMENT_TEMPLATE, EXTRACTION_TEMPLATE, alignment_prompt, extraction_prompt
from .sentences import split_sentences

VERSION = 1


def reference_details(facts: list[str], side: Side, n_sentences: int) -> dict[str, Any]:
    """The details both reference judges report (same shape for `keyfacts-lexical`)."""
    return {
        "completeness": side.completeness(),
        "conciseness": side.conciseness(),
        "key_facts": [{"fact": f, "supported": ok, "lines": lines}
                      for f, ok, lines in zip(facts, side.supported, side.lines)],
        "aligned_lines": side.aligned_lines(),
        "n_key_facts": len(facts),
        "n_sentences": n_sentences,
        "invalid_lines": side.invalid_lines,
    }


class KeyFactsJudge(ModelJudgeSettings, Judge):
    name = "keyfacts"
    scale = (0.0, 1.0)
    uses_model = True

    def __init__(self, ctx: JudgeContext) -> None:
        self.configure(ctx)

    def _run(self, step: str, prompts: dict[Any, tuple[str, str]], parse: Callable[[Any, str], Any]) -> Rounds:
        """Ask every prompt ({key: (request_id, prompt)}), retrying unparseable answers; a
        key's result stays None unless an answer parsed."""

        def request(key: Any, params: GenerationParams, attempt: int) -> GenerationRequest:
            return GenerationRequest(request_id=prompts[key][0], messages=self.chat(prompts[key][1]), params=params,
                                     hints={"judge": self.name, "step": step, "item_id": prompts[key][0],
                                            "attempt": attempt})

        def parsed(key: Any, text: str) -> tuple[Any, str | None]:
            try:
                return parse(key, text), None
            except ParseError as exc:
                return None, str(exc)

        return self.ask(prompts, request, parsed)

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        for item in items:
            if not item.reference.strip():
                raise UserError(f"sample {item.item_id} has no reference minutes: judge 'keyfacts' checks a "
                                "summary against them", field="judge")
        # step (a): once per distinct reference text
        refs: dict[str, str] = {}
        for item in items:
            refs.setdefault(item.reference, item.item_id)
        extraction = self._run("extraction", {r: (f"{iid}#key-facts", extraction_prompt(r, self.max_key_facts))
                                              for r, iid in refs.items()},
                               lambda _r, text: parse_facts(text, self.max_key_facts))
        # step (b): every summary whose minutes gave facts and that has sentences
        sentences = {i: split_sentences(item.response) for i, item in enumerate(items)}
        facts = {ref: result[0] for ref, result in extraction.results.items() if result is not None}
        ask = {i: (item.item_id, alignment_prompt(facts[item.reference], sentences[i]))
               for i, item in enumerate(items) if item.reference in facts and sentences[i]}
        alignment = self._run("alignment", ask, lambda i, text: parse_alignment(
            text, len(facts[items[i].reference]), len(sentences[i])))
        return [self._judgment(i, item, sentences[i], extraction, alignment) for i, item in enumerate(items)]

    def _judgment(self, i: int, item: JudgeInput, sentences: list[str], ex: Rounds, al: Rounds) -> Judgment:
        ref = item.reference
        ex_raws, al_raws = ex.raws.get(ref, []), al.raws.get(i, [])
        details: dict[str, Any] = {
            "extraction_outputs": list(ex_raws),
            "extraction_seeds": self.attempt_seeds(len(ex_raws) + (ref in ex.errors)),
            "alignment_outputs": list(al_raws),
            "alignment_seeds": self.attempt_seeds(len(al_raws) + (i in al.errors)),
        }
        attempts = len(ex_raws) + len(al_raws)
        raw = al_raws[-1] if al_raws else ex_raws[-1] if ex_raws else ""

        def failed(status: str, **why: Any) -> Judgment:
            return Judgment(item_id=item.item_id, judge=self.name, score=None, parse_status=status, raw=raw,
                            attempts=max(1, attempts + (status == "missing")), details={**details, **why})

        if ref in ex.errors:
            return failed("missing", judge_error=ex.errors[ref], step="extraction")
        if ex.results.get(ref) is None:
            return failed("parse_failure", failure=ex.why.get(ref, "no output"), step="extraction")
        facts, ex_reasoning, over = ex.results[ref]
        details.update(facts_over_cap=over, extraction_reasoning=ex_reasoning)
        if i in al.errors:
            return failed("missing", judge_error=al.errors[i], step="alignment")
        if sentences and al.results.get(i) is None:
            return failed("parse_failure", failure=al.why.get(i, "no output"), step="alignment")
        if sentences:
            side, al_reasoning = al.results[i]
        else:  # nothing to align: no fact is supported
            side, al_reasoning = Side(0, [[] for _ in facts], [False] * len(facts)), ""
        details.update(reference_details(facts, side, len(sentences)), alignment_reasoning=al_reasoning)
        return Judgment(item_id=item.item_id, judge=self.name, score=side.completeness(), raw=raw,
                        attempts=attempts, details=details)

    def identity(self) -> dict[str, Any]:
        return self.settings_identity(VERSION, {"extraction": sha256_text(EXTRACTION_TEMPLATE),
                                                "alignment": sha256_text(ALIGNMENT_TEMPLATE)})


def make_keyfacts(ctx: JudgeContext) -> KeyFactsJudge:
    return KeyFactsJudge(ctx)
