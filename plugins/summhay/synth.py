"""Haystack synthesis with a generator model (Laban et al., 2024, §3.2, Appendix A.1):
`lceval summhay synth OUT.json --model SPEC --topic "..."`.

Steps, each an LLM call that must answer JSON (our prompts: the authors published none of
their generation prompts, only the summarization and evaluation ones):
1. subtopics of the topic, each with the query a user would ask about it; near-duplicates
   are dropped and more asked for until there are enough distinct ones (§3.2 requirement 1,
   A.1.1: the authors regenerate until every subtopic is unique);
2. insights, one subtopic at a time, shown every other subtopic and insight to avoid
   (A.1.2, conversation domain); an insight must be specific - a number, a date or a named
   entity (§3.2) - and distinct from every insight so far, else more are asked for;
3. documents, one at a time (§3.2, Figure 1 center): a set of insights chosen across
   subtopics (seeded; the least used first, so every insight lands in some document) and a
   document asked to carry exactly those;
4. verification of each document (A.1.3): one call asks which of the chosen insights the
   document states, another which of all the other insights it states (a leak). A missing
   or leaked insight regenerates the document with that feedback, up to `max_retries`
   times; after that the document is kept with the mapping the verifier reported, and the
   count of such documents is in the output's `synthesis` record.

Every call goes through lceval's request cache (CachedModel, the default cache path or
--cache): the seeded choices make a second run ask the very same requests, so an interrupted
synthesis resumes where it stopped and a finished one is rebuilt without any generation.
The output is the official schema (haystack.py checks it before writing).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lceval.judging import retry_seed
from lceval.errors import UserError
from lceval.types import GenerationParams, GenerationRequest, Message

from .haystack import DOMAINS, parse_haystack

#: word-set Jaccard at or above which two subtopics / insights count as the same one
DUPLICATE_JACCARD = 0.6
SPECIFIC = re.compile(r"\d|(?<![.!?]\s)(?<!^)\b[A-Z][a-zA-Z]+")
WORD = re.compile(r"[a-z0-9]+")
STOP = frozenset("a an the of to in on for and or with is are was were be by at from that this it as their "
                 "his her its about".split())

SUBTOPICS_PROMPT = """[SUBTOPICS] Topic: {topic}

List {n} distinct subtopics that documents about this topic could discuss. Subtopics are generic
(for example "students discussing how to manage stress"), no two may overlap thematically, and each
must be expandable into at least {k} distinct, specific insights.{avoid}
For each subtopic also write the question a user would ask to get a summary of it.

Answer with JSON only: {{"subtopics": [{{"subtopic": "...", "query": "..."}}]}}"""

INSIGHTS_PROMPT = """[INSIGHTS] Topic: {topic}
Subtopic: {subtopic}

Write {n} insights for this subtopic: statements of specific information that a document about the
topic could contain. Each insight must mention a number, a date or a named entity, be independent of
the others, and belong to this subtopic only.
Other subtopics (their insights must not fit yours):
{others}
Insights that already exist (do not repeat or paraphrase them):
{existing}

Answer with JSON only: {{"insights": ["...", "..."]}}"""

DOCUMENT_PROMPT = {
    "conversation": """[DOCUMENT] Write a conversation of about {words} words between {participants} about:
{topic}
The conversation must include each of these insights, stated clearly:
{insights}
It must not mention anything else specific (no other numbers, dates or named entities).{feedback}
Write one speaker turn per line as "Name: text". Answer with the conversation only.""",
    "news": """[DOCUMENT] Write a news article of about {words} words about:
{topic}
The article must include each of these insights, stated clearly:
{insights}
It must not mention anything else specific (no other numbers, dates or named entities).{feedback}
Answer with the article only.""",
}

PRESENT_PROMPT = """[CHECK_PRESENT] Document:
{document}

For each numbered insight below, is it stated in the document?
{insights}

Answer with JSON only: {{"present": [numbers of the insights that are stated]}}"""

LEAK_PROMPT = """[CHECK_LEAK] Document:
{document}

Which of the numbered insights below are stated in the document, fully or in part?
{insights}

Answer with JSON only: {{"found": [numbers of the insights that are stated]}}"""


@dataclass
class SynthConfig:
    topic: str
    domain: str = "conversation"
    participants: list[str] = field(default_factory=lambda: ["Alice", "Ben", "Chloe"])
    n_subtopics: int = 3
    insights_per_subtopic: int = 3
    n_documents: int = 12
    insights_per_document: int = 3
    words_per_document: int = 750  # §3.2: about 750 words (1,000 tokens) per document
    max_retries: int = 5  # A.1.3: up to 5 iterations
    temperature: float = 0.7  # retries and "ask for more" need sampling: greedy would repeat
    max_new_tokens: int = 1500
    seed: int = 0


@dataclass
class SynthStats:
    calls: int = 0
    parse_retries: int = 0
    dropped_subtopics: int = 0
    dropped_insights: int = 0
    document_regenerations: int = 0
    missing_rejections: int = 0
    leak_rejections: int = 0
    unverified_documents: int = 0


def words(text: str) -> set[str]:
    return {w for w in WORD.findall(text.lower()) if w not in STOP}


def is_duplicate(text: str, others: list[str]) -> bool:
    a = words(text)
    for o in others:
        b = words(o)
        if a and b and len(a & b) / len(a | b) >= DUPLICATE_JACCARD:
            return True
    return False


def is_specific(text: str) -> bool:
    """§3.2: an insight mentions a number, a date or an entity (a capitalised word that does
    not start a sentence)."""
    return bool(SPECIFIC.search(text.strip()))


def parse_json(text: str) -> Any:
    """The first JSON object in the answer (bare, fenced or with text around it), else None."""
    start = text.find("{")
    while start != -1:
        depth = 0
        for end in range(start, len(text)):
            if text[end] == "{":
                depth += 1
            elif text[end] == "}":
                depth -= 1
                if depth == 0:
                    try:
                        return json.loads(text[start:end + 1])
                    except json.JSONDecodeError:
                        break
        start = text.find("{", start + 1)
    return None


def _numbered(texts: list[str]) -> str:
    return "\n".join(f"{i}. {t}" for i, t in enumerate(texts, 1))


def _numbers(value: Any, n: int) -> set[int] | None:
    if not isinstance(value, list):
        return None
    out = set()
    for v in value:
        try:
            k = int(v)
        except (TypeError, ValueError):
            return None
        if 1 <= k <= n:
            out.add(k)
    return out


class Synthesizer:
    def __init__(self, model: Any, cfg: SynthConfig) -> None:
        if cfg.domain not in DOMAINS:
            raise UserError(f"unknown domain '{cfg.domain}' (known: {', '.join(DOMAINS)})", field="--domain")
        for name in ("n_subtopics", "insights_per_subtopic", "n_documents", "insights_per_document",
                     "max_retries", "max_new_tokens"):
            if getattr(cfg, name) < 1:
                raise UserError(f"{name} must be at least 1", field=f"--{name.replace('_', '-')}")
        self.model = model  # a CachedModel: every call cached and counted
        self.cfg = cfg
        self.stats = SynthStats()

    # -- one call ------------------------------------------------------------------------
    def _generate(self, prompt: str, attempt: int, stage: str) -> str:
        temp = 0.0 if attempt == 0 else self.cfg.temperature
        params = GenerationParams(max_new_tokens=self.cfg.max_new_tokens, temperature=temp,
                                  seed=retry_seed(self.cfg.seed, attempt))
        req = GenerationRequest(request_id=f"synth/{stage}/{attempt}", messages=[Message("user", prompt)],
                                params=params, hints={"stage": stage, "attempt": attempt})
        (gen,) = self.model.generate([req])
        self.stats.calls += 1
        if gen.finish_reason == "error":
            raise UserError(f"the generator failed at {stage}: {gen.text[:200]}", field="--model",
                            hint="Run the same command again: what was generated is cached.")
        return gen.text

    def _ask_json(self, prompt: str, key: str, stage: str, first_attempt: int = 0) -> tuple[Any, int]:
        """(value of `key` in the answer's JSON, attempt used); a malformed answer is asked again
        with the next seed, up to max_retries times."""
        for attempt in range(first_attempt, first_attempt + self.cfg.max_retries + 1):
            obj = parse_json(self._generate(prompt, attempt, stage))
            if isinstance(obj, dict) and key in obj:
                return obj[key], attempt
            self.stats.parse_retries += 1
        raise UserError(f"the generator gave no JSON with '{key}' at {stage} after {self.cfg.max_retries} retries",
                        field="--model", hint="Try a stronger generator model, or another --seed.")

    # -- steps ---------------------------------------------------------------------------
    def subtopics(self) -> list[dict[str, str]]:
        cfg, kept, attempt = self.cfg, [], 0
        while len(kept) < cfg.n_subtopics:
            if attempt > cfg.max_retries:
                raise UserError(f"only {len(kept)} distinct subtopics after {cfg.max_retries} retries "
                                f"(asked {cfg.n_subtopics})", field="--subtopics")
            avoid = ("\nThese exist already; propose different ones:\n" + _numbered([s["subtopic"] for s in kept])
                     if kept else "")
            prompt = SUBTOPICS_PROMPT.format(topic=cfg.topic, n=cfg.n_subtopics - len(kept),
                                             k=cfg.insights_per_subtopic, avoid=avoid)
            items, used = self._ask_json(prompt, "subtopics", "subtopics", attempt)
            attempt = used + 1
            for it in items if isinstance(items, list) else []:
                if not isinstance(it, dict) or not str(it.get("subtopic", "")).strip() or not str(it.get("query", "")).strip():
                    self.stats.dropped_subtopics += 1
                    continue
                text = " ".join(str(it["subtopic"]).split())
                if is_duplicate(text, [s["subtopic"] for s in kept]) or len(kept) >= cfg.n_subtopics:
                    self.stats.dropped_subtopics += 1
                    continue
                kept.append({"subtopic": text, "query": " ".join(str(it["query"]).split())})
        return kept

    def insights(self, subtopics: list[dict[str, str]]) -> list[list[str]]:
        cfg = self.cfg
        out: list[list[str]] = []
        for si, st in enumerate(subtopics):
            earlier = [i for group in out for i in group]  # insights of the subtopics done so far
            others = [s["subtopic"] for j, s in enumerate(subtopics) if j != si]
            kept: list[str] = []
            attempt = 0
            while len(kept) < cfg.insights_per_subtopic:
                if attempt > cfg.max_retries:
                    raise UserError(f"only {len(kept)} specific, distinct insights for subtopic "
                                    f"'{st['subtopic']}' after {cfg.max_retries} retries", field="--insights")
                existing = earlier + kept
                prompt = INSIGHTS_PROMPT.format(topic=cfg.topic, subtopic=st["subtopic"],
                                                n=cfg.insights_per_subtopic - len(kept),
                                                others=_numbered(others) or "(none)",
                                                existing=_numbered(existing) or "(none)")
                items, used = self._ask_json(prompt, "insights", f"insights/{si}", attempt)
                attempt = used + 1
                for it in items if isinstance(items, list) else []:
                    text = " ".join(str(it).split())
                    if (len(kept) >= cfg.insights_per_subtopic or not is_specific(text)
                            or is_duplicate(text, earlier + kept)):
                        self.stats.dropped_insights += 1
                        continue
                    kept.append(text)
            out.append(kept)
        return out

    def choose(self, all_ids: list[str], rng: random.Random, used: dict[str, int]) -> list[str]:
        """The least used insights first (ties broken by the seeded rng), so that every
        insight is in some document as soon as there are enough documents."""
        k = min(self.cfg.insights_per_document, len(all_ids))
        order = sorted(all_ids, key=lambda i: (used[i], rng.random()))
        picked = order[:k]
        for i in picked:
            used[i] += 1
        return sorted(picked, key=all_ids.index)

    def document(self, n: int, chosen: list[str], texts: dict[str, str]) -> tuple[str, list[str]]:
        """Generate, verify, regenerate with feedback; the insights the document holds."""
        cfg = self.cfg
        others = [i for i in texts if i not in chosen]
        feedback = ""
        included = list(chosen)
        for attempt in range(cfg.max_retries + 1):
            prompt = DOCUMENT_PROMPT[cfg.domain].format(
                words=cfg.words_per_document, participants=", ".join(cfg.participants), topic=cfg.topic,
                insights="\n".join(f"- {texts[i]}" for i in chosen), feedback=feedback)
            doc = self._generate(prompt, attempt, f"document/{n}").strip()
            present, _ = self._ask_json(PRESENT_PROMPT.format(document=doc, insights=_numbered([texts[i] for i in chosen])),
                                        "present", f"check_present/{n}")
            found: Any = []
            if others:
                found, _ = self._ask_json(LEAK_PROMPT.format(document=doc, insights=_numbered([texts[i] for i in others])),
                                          "found", f"check_leak/{n}")
            p = _numbers(present, len(chosen))
            f = _numbers(found, len(others))
            if p is None or f is None:  # a verdict that names no insight number: trust nothing, retry
                p, f = set(), set()
            missing = [chosen[k - 1] for k in range(1, len(chosen) + 1) if k not in p]
            leaked = [others[k - 1] for k in sorted(f)]
            included = sorted([i for i in chosen if i not in missing] + leaked, key=list(texts).index)
            if not missing and not leaked:
                return doc, included
            self.stats.missing_rejections += bool(missing)
            self.stats.leak_rejections += bool(leaked)
            if attempt == cfg.max_retries:
                break
            self.stats.document_regenerations += 1
            feedback = ""
            if missing:
                feedback += "\nThe previous attempt left out these insights; state them clearly:\n" + \
                    "\n".join(f"- {texts[i]}" for i in missing)
            if leaked:
                feedback += "\nThe previous attempt also stated these, which must NOT appear:\n" + \
                    "\n".join(f"- {texts[i]}" for i in leaked)
        self.stats.unverified_documents += 1
        return doc, included

    def haystack(self) -> dict[str, Any]:
        cfg = self.cfg
        subtopics = self.subtopics()
        insights = self.insights(subtopics)
        out_subtopics, texts = [], {}
        for si, (st, group) in enumerate(zip(subtopics, insights), 1):
            ins = []
            for ii, text in enumerate(group, 1):
                iid = f"st{si}_ins{ii}"
                texts[iid] = text
                ins.append({"insight_id": iid, "insight": text})
            out_subtopics.append({"subtopic_id": f"st{si}", "subtopic": st["subtopic"], "query": st["query"],
                                  "insights": ins})
        rng = random.Random(f"summhay-synth/{cfg.seed}")
        used = {i: 0 for i in texts}
        documents = []
        for n in range(1, cfg.n_documents + 1):
            chosen = self.choose(list(texts), rng, used)
            text, included = self.document(n, chosen, texts)
            documents.append({"document_id": f"doc{n:03d}", "document_text": text, "insights_included": included})
        data: dict[str, Any] = {
            "topic_id": f"synth_{cfg.domain}_{cfg.seed}", "topic": cfg.topic, "domain": cfg.domain,
            "topic_metadata": {"participants": list(cfg.participants)} if cfg.domain == "conversation" else {},
            "subtopics": out_subtopics, "documents": documents,
        }
        parse_haystack(data)  # the official schema, or an error before anything is written
        return data


def synthesize(out: Path, cfg: SynthConfig, model_spec: str, *, plugins: Any = None,
               cache_path: Path | None = None) -> tuple[Path, dict[str, Any]]:
    """Build the generator from `model_spec` through the cache, synthesize, write `out`.
    Returns the path and the synthesis record (model, seed, counts, cache usage)."""
    from lceval.engine import open_model

    with open_model(model_spec, cache_path=cache_path, plugins=plugins) as model:
        synth = Synthesizer(model, cfg)
        data = synth.haystack()
        record = {"model": model.spec, "seed": cfg.seed, **synth.stats.__dict__,
                  "generated": model.usage.generated, "cache_hits": model.usage.cache_hits}
    data["synthesis"] = {k: v for k, v in record.items() if k not in ("generated", "cache_hits")}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return out, record
