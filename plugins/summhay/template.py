"""A deterministic template haystack: the official schema, no model needed, an exact
insight -> document map. For tests, demos and CI, not for measuring models.

The paper synthesizes haystacks with an LLM (§3.2); this builds the same structure from
fixed sentences: a topic (a study group preparing an exam), subtopics with a query and
specific insights (each with a number, date or entity, as §3.2 asks), and documents that
each hold a few insights across subtopics plus filler talk. Every insight is placed in
`copies` documents (§3.2: insights repeat across documents), and some documents hold none
(distractors). Same arguments, same bytes.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

from lceval.errors import UserError

from .haystack import DOMAINS

TOPIC = "Three students meet to prepare together for their final exam in statistics."
PARTICIPANTS = ["Alice", "Ben", "Chloe"]

#: (subtopic, query, [insights])
SUBTOPICS: list[tuple[str, str, list[str]]] = [
    ("students discussing study techniques", "What study techniques do the students discuss?", [
        "A student explains the 25-5 Pomodoro technique: 25 minutes of study followed by a 5-minute break.",
        "A student recommends spaced repetition with the Anki app, reviewing 40 flashcards every day.",
        "A student suggests the Feynman technique of teaching a chapter to a friend to find gaps.",
        "A student plans to solve the 12 past exam papers from 2013 to 2024 under timed conditions.",
        "A student colour-codes notes with 4 highlighter colours, one per type of formula.",
    ]),
    ("students discussing how to manage exam stress", "How do the students manage exam stress?", [
        "A student does 10 minutes of guided breathing with the Headspace app before each session.",
        "A student goes running for 30 minutes every evening at 6 pm to calm down.",
        "A student insists on sleeping at least 8 hours during the week before the exam.",
        "A student booked the university counselling service, which offers 3 free sessions.",
        "A student writes worries in a journal for 5 minutes before going to bed.",
    ]),
    ("students discussing the exam logistics", "What logistics of the exam do the students mention?", [
        "The exam takes place on June 14 at 9 am in room B-204 of the science building.",
        "The exam lasts 3 hours and has 6 questions, of which students must answer 4.",
        "Students may bring one A4 sheet of handwritten notes into the exam room.",
        "Only the approved Casio fx-991 calculator model is allowed during the exam.",
        "Results will be published on the course portal on July 2.",
    ]),
    ("students organising their study group", "How do the students organise their study group?", [
        "The group meets every Tuesday and Thursday at 4 pm in room 3 of the main library.",
        "They split the 8 course chapters so each student summarises 2 or 3 chapters.",
        "They share their summaries in a Google Drive folder named Final Prep.",
        "They quiz each other with 20 questions at the end of every session.",
        "They invite the teaching assistant Marco to a review session on June 10.",
    ]),
    ("students discussing food and energy while studying",
     "What do the students say about food and energy while studying?", [
        "A student limits coffee to 2 cups a day and none after 3 pm.",
        "A student eats oatmeal with blueberries for breakfast on exam days.",
        "A student keeps a 1-litre water bottle on the desk while studying.",
        "A student snacks on almonds instead of energy drinks.",
        "A student cooks a batch of lentil soup on Sundays to save time during the week.",
    ]),
]

FILLER = [
    "Did anyone see the email from the department this morning?",
    "I think the weather is supposed to be nice this weekend.",
    "My laptop battery is almost dead, is there a socket near you?",
    "Sorry I am a bit late, the bus was crowded.",
    "Let's not forget to book the room for next month.",
    "Has anyone started the project for the other course yet?",
    "I still need to return two books to the library.",
    "Can we open a window, it is getting warm in here?",
    "I like this café, we should meet here more often.",
    "My phone keeps buzzing, let me put it on silent.",
]


def _oid(*parts: Any) -> str:
    """A stable 24-hex id, shaped like the official ObjectIds."""
    return hashlib.sha1("\x00".join(map(str, parts)).encode()).hexdigest()[:24]


def template_haystack(n_subtopics: int = 3, insights_per_subtopic: int = 3, n_documents: int = 12,
                      copies: int = 3, filler_lines: int = 4, seed: int = 0,
                      domain: str = "conversation") -> dict[str, Any]:
    """The haystack as a JSON-ready dict in the official schema."""
    if not 1 <= n_subtopics <= len(SUBTOPICS):
        raise UserError(f"n_subtopics must be 1..{len(SUBTOPICS)}, got {n_subtopics}", field="n_subtopics")
    if not 1 <= insights_per_subtopic <= 5:
        raise UserError(f"insights_per_subtopic must be 1..5, got {insights_per_subtopic}",
                        field="insights_per_subtopic")
    if not 1 <= copies <= n_documents:
        raise UserError(f"copies must be 1..n_documents ({n_documents}), got {copies}", field="copies")
    if domain not in DOMAINS:
        raise UserError(f"domain must be conversation or news, got {domain!r}", field="domain")
    rng = random.Random(seed)
    topic_id = _oid("topic", seed, domain)
    subtopics = []
    placed: dict[int, list[tuple[str, str]]] = {i: [] for i in range(n_documents)}
    for s, (name, query, texts) in enumerate(SUBTOPICS[:n_subtopics]):
        insights = []
        for k, text in enumerate(texts[:insights_per_subtopic]):
            iid = _oid(topic_id, s, k)
            insights.append({"insight_id": iid, "insight_name": f"insight {s + 1}.{k + 1}", "insight": text})
            # the least-loaded documents first (ties at random): spreads insights evenly
            order = sorted(range(n_documents), key=lambda d: (len(placed[d]), rng.random()))
            for d in order[:copies]:
                placed[d].append((iid, text))
        subtopics.append({"subtopic_id": _oid(topic_id, "subtopic", s), "subtopic_name": name,
                          "subtopic": name, "query": query, "insights": insights})
    documents = []
    for d in range(n_documents):
        lines = [rng.choice(FILLER) for _ in range(filler_lines)]
        for _, text in placed[d]:
            lines.insert(rng.randrange(len(lines) + 1), text)
        if domain == "conversation":
            body = "\n".join(f"{PARTICIPANTS[i % len(PARTICIPANTS)]}: {line}" for i, line in enumerate(lines))
        else:
            body = " ".join(lines)
        documents.append({"document_id": _oid(topic_id, "document", d), "document_text": body,
                          "document_metadata": {"template": True},
                          "insights_included": [iid for iid, _ in placed[d]]})
    meta: dict[str, Any] = {"participants": list(PARTICIPANTS)} if domain == "conversation" else {"articles": []}
    return {"topic_id": topic_id, "topic": TOPIC, "domain": domain, "topic_metadata": meta,
            "subtopics": subtopics, "documents": documents}


def write_template(path: Path, **kwargs: Any) -> Path:
    """Write `template_haystack(**kwargs)` as JSON (indent 2, as the authors write theirs)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(template_haystack(**kwargs), indent=2) + "\n", encoding="utf-8")
    return path
