"""The real SmolLM2 model (llama.cpp, 2k window) on BAMBOO meetingqa rows in the real schema, three
questions over each of two transcripts (as the authors' files repeat a transcript for up to five
questions): each transcript is prefilled once, so the tokens prefilled stay within 1.1 x the floor
(each transcript once, plus each question's own tokens)."""

from __future__ import annotations

import json

import pytest

from tests import cli as commands
from tests.cli import lceval

pytestmark = pytest.mark.slow

TRANSCRIPTS = [
    "John Griffiths AM: We'll move on to item 2, the farm support scheme.\n\nMark Thomas: Our concern is that the "
    "scheme is not practical for small farms, which cannot fill in the forms in time.\n\nJohn Griffiths AM: Thank you. "
    "Llyr, your question.\n\nLlyr Gruffydd AM: When will the guidance be published?\n\nMark Thomas: In the spring.\n\n",
    "Janet Finch-Saunders AM: Good morning and welcome to the committee on housing.\n\nHeledd Fychan: The waiting "
    "lists have grown by a third since last year, and the councils have no money to build.\n\nJanet Finch-Saunders AM: "
    "Which council has the longest list?\n\nHeledd Fychan: Cardiff, by far.\n\n",
]
QUESTIONS = [("what does Mark Thomas think of the scheme?", ["A. practical", "B. impractical", "C. generous", "D. late"], "B"),
             ("when will the guidance be published?", ["A. in winter", "B. in summer", "C. in the spring", "D. never"], "C"),
             ("who asks about the guidance?", ["A. Llyr Gruffydd AM", "B. Mark Thomas", "C. nobody", "D. the chair"], "A")]


def test_questions_over_one_transcript_prefill_it_once(tmp_path, monkeypatch):
    pytest.importorskip("llama_cpp")
    source = tmp_path / "BAMBOO" / "datasets"
    source.mkdir(parents=True)
    rows = [{"question": q, "evidence": "", "options": o, "answer": a, "content": t}
            for t in TRANSCRIPTS for q, o, a in QUESTIONS]
    (source / "meetingqa_4k.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setenv("LCEVAL_DATA", str(tmp_path / "home"))
    lceval("data", "fetch", "bamboo", "--from", tmp_path / "BAMBOO")
    ((run_dir, _),) = commands.run(tasks="bamboo_meetingqa", models=["smollm2,n_ctx=2048"], splits=["4k"],
                                   overrides={"generation.max_new_tokens": 4}, output=tmp_path / "runs",
                                   data_home=tmp_path / "home", progress=False)
    results = json.loads((run_dir / "results.json").read_text())
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 6 and len({s["metadata"]["document_id"] for s in samples}) == 2
    documents = {s["metadata"]["document_id"]: s["context_cut"]["kept_tokens"] for s in samples}
    own = sum(s["prompt_tokens"] - s["context_cut"]["kept_tokens"] for s in samples)
    prefilled = results["tasks"]["bamboo_meetingqa"]["accounting"]["tokens"]["prefilled"]
    floor = sum(documents.values()) + own
    print(f"prefilled {prefilled}, floor {floor} ({sum(documents.values())} + {own}), "
          f"prompts {sum(s['prompt_tokens'] for s in samples)}")
    assert prefilled <= 1.1 * floor, (prefilled, floor)
