"""What ELITR-Bench's question files say beyond each question: the questions its QA and Conv
sets word differently (Thonet et al., 2024a, App. C.3). Read by the `elitr` task type, which flags them
on each sample, and by the `replay:` backend's score reader, which flags recorded answers."""

from __future__ import annotations

from typing import Any


def _words(text: Any) -> str:
    return " ".join(str(text).split())


def _words(text: Any) -> str:
    return " ".join(str(text).split())


def differing_questions(qa: dict[str, Any], conv: dict[str, Any]) -> set[tuple[str, str]]:
    """(meeting id, question id) of the questions worded differently in the QA and Conv sets
    (Conv's pronouns and ellipses; whitespace does not count)."""
    def wording(data: Any) -> dict[tuple[str, str], str]:
        out: dict[tuple[str, str], str] = {}
        meetings = data.get("meetings") if isinstance(data, dict) else None
        for m in meetings if isinstance(meetings, list) else []:
            questions = m.get("questions") if isinstance(m, dict) else None
            for q in questions if isinstance(questions, list) else []:
                if isinstance(q, dict):
                    out[(str(m.get("id")), str(q.get("id")))] = _words(q.get("question", ""))
        return out

    a, b = wording(qa), wording(conv)
    return {key for key in a.keys() & b.keys() if a[key] != b[key]}
