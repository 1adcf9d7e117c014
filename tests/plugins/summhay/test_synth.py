"""`lceval summhay synth --model`: haystack synthesis (paper 002 §3.2, A.1) with a canned
in-process generator - distinct subtopics, specific insights, documents verified for missing
and leaked insights with bounded retries, the official schema, and resumption from the cache."""

from __future__ import annotations

import json
import re

import pytest

from lceval.errors import UserError
from lceval.interfaces import ModelBackend
from lceval.types import Generation, GenerationRequest
from lceval_plugins.summhay.haystack import load_haystack
from lceval_plugins.summhay.synth import SynthConfig, is_duplicate, is_specific, parse_json, synthesize

from tests.conftest import plugins_with_model

SUBTOPICS = [
    {"subtopic": "students discussing study techniques", "query": "What study techniques do they discuss?"},
    {"subtopic": "students discussing the study techniques", "query": "Which techniques?"},  # near-duplicate
    {"subtopic": "students discussing how to manage stress", "query": "How do they manage stress?"},
]
MORE = [{"subtopic": "students planning the exam week schedule", "query": "How do they plan the exam week?"}]
INSIGHTS = {
    "study techniques": ["Alice uses the 25-5 Pomodoro technique.", "Ben reviews 40 Anki flashcards daily.",
                         "they talk about studying in general"],  # not specific: dropped
    "manage stress": ["Chloe meditates with the Calm app for 15 minutes.", "Ben runs 5 km every morning."],
    "exam week": ["The exam is on June 12 in room B204.", "Alice books the Grove library for Tuesday."],
}


class Canned(ModelBackend):
    """Answers by the prompt's stage marker, a pure function of the request (so a resumed run
    would get the same answers). Document 2's first draft leaks an insight it was not given,
    document 3's first draft leaves one out; the verifier is a truthful substring check. The
    first insights answer is not JSON (asked again)."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.calls: list[str] = []
        self.fail_after = fail_after
        self.all_insights = [i for group in INSIGHTS.values() for i in group if is_specific(i)]

    def identity(self) -> dict:
        return {"scheme": "canned", "version": 1}

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        out = []
        for r in requests:
            if self.fail_after is not None and len(self.calls) >= self.fail_after:
                raise KeyboardInterrupt
            prompt = r.messages[0].content
            self.calls.append(prompt)
            out.append(Generation(request_id=r.request_id, text=self.answer(prompt, r.hints["stage"],
                                                                            r.hints["attempt"])))
        return out

    def answer(self, prompt: str, stage: str, attempt: int) -> str:
        if prompt.startswith("[SUBTOPICS]"):
            return json.dumps({"subtopics": MORE if "exist already" in prompt else SUBTOPICS})
        if prompt.startswith("[INSIGHTS]"):
            if (stage, attempt) == ("insights/0", 0):
                return "Sure! Here are some insights about studying."
            key = next(k for k in INSIGHTS if k in prompt.split("\n")[1])
            return "```json\n" + json.dumps({"insights": INSIGHTS[key]}) + "\n```"
        if prompt.startswith("[DOCUMENT]"):
            given = re.findall(r"^- (.+)$", prompt.split("It must not")[0], re.M)
            lines = [f"Alice: {g}" for g in given]
            if (stage, attempt) == ("document/2", 0):
                lines.append(f"Ben: {next(i for i in self.all_insights if i not in given)}")
            if (stage, attempt) == ("document/3", 0):
                lines = lines[1:]
            return "\n".join(lines)
        doc = prompt.split("Document:\n", 1)[1].split("\n\n", 1)[0]
        numbered = re.findall(r"^(\d+)\. (.+)$", prompt.split("\n\n", 1)[1], re.M)
        hits = [int(n) for n, text in numbered if text in doc]
        return json.dumps({"present" if prompt.startswith("[CHECK_PRESENT]") else "found": hits})


def config(**kw) -> SynthConfig:
    base = dict(topic="Three students prepare for a statistics exam.", n_subtopics=3, insights_per_subtopic=2,
                n_documents=5, insights_per_document=2, seed=7)
    return SynthConfig(**{**base, **kw})


def test_synthesis_verifies_documents_and_writes_the_official_schema(tmp_path):
    model = Canned()
    path, rec = synthesize(tmp_path / "h.json", config(), "scripted:x", plugins=plugins_with_model(model),
                           cache_path=tmp_path / "cache.sqlite")
    hay = load_haystack(path)  # the schema reader accepts it
    assert [s.subtopic for s in hay.subtopics] == ["students discussing study techniques",
                                                   "students discussing how to manage stress",
                                                   "students planning the exam week schedule"]
    assert rec["dropped_subtopics"] == 1 and rec["dropped_insights"] == 1 and rec["parse_retries"] == 1
    assert all(is_specific(i.text) for s in hay.subtopics for i in s.insights)
    # documents 2 (leak) and 3 (missing insight) were each rejected once and regenerated
    assert (rec["leak_rejections"], rec["missing_rejections"], rec["document_regenerations"]) == (1, 1, 2)
    assert rec["unverified_documents"] == 0
    texts = {i.insight_id: i.text for s in hay.subtopics for i in s.insights}
    for doc in hay.documents:
        assert len(doc.insights_included) == 2
        for iid, text in texts.items():  # exactly the insights it holds, no other
            assert (text in doc.text) == (iid in doc.insights_included)
    # the least used insights first: 5 documents x 2 slots cover all 6 insights
    assert set(texts) == {i for d in hay.documents for i in d.insights_included}
    assert json.loads(path.read_text())["synthesis"]["model"] == "scripted:x"


def test_an_unfixable_leak_is_recorded_not_hidden(tmp_path):
    class Leaky(Canned):
        def answer(self, prompt, stage, attempt):
            text = super().answer(prompt, stage, attempt)
            if prompt.startswith("[DOCUMENT]"):
                text += "\nBen: " + self.all_insights[-1]  # every draft leaks the last insight
            return text

    path, rec = synthesize(tmp_path / "h.json", config(max_retries=2, n_documents=2), "scripted:x",
                           plugins=plugins_with_model(Leaky()), cache_path=tmp_path / "c.sqlite")
    hay = load_haystack(path)
    last = hay.subtopics[-1].insights[-1].insight_id
    assert rec["unverified_documents"] >= 1
    # the verifier's mapping is kept: the leaked insight is listed where it occurs
    assert all(last in d.insights_included for d in hay.documents)


def test_second_run_generates_nothing_and_an_interrupted_one_resumes(tmp_path):
    cache = tmp_path / "cache.sqlite"
    first = Canned()
    path, _ = synthesize(tmp_path / "a.json", config(), "scripted:x", plugins=plugins_with_model(first), cache_path=cache)
    again = Canned()
    path2, rec = synthesize(tmp_path / "b.json", config(), "scripted:x", plugins=plugins_with_model(again),
                            cache_path=cache)
    assert again.calls == [] and rec["generated"] == 0 and rec["cache_hits"] == len(first.calls)
    assert path.read_bytes() == path2.read_bytes()
    # interrupted after 10 generations: the rerun asks only what was missing
    other = tmp_path / "other.sqlite"
    with pytest.raises(KeyboardInterrupt):
        synthesize(tmp_path / "c.json", config(), "scripted:x", plugins=plugins_with_model(Canned(fail_after=10)),
                   cache_path=other)
    resumed = Canned()
    path3, rec3 = synthesize(tmp_path / "c.json", config(), "scripted:x", plugins=plugins_with_model(resumed),
                             cache_path=other)
    assert rec3["cache_hits"] == 10 and rec3["generated"] == len(first.calls) - 10
    assert path3.read_bytes() == path.read_bytes()


def test_another_seed_picks_other_document_sets(tmp_path):
    a, _ = synthesize(tmp_path / "a.json", config(seed=1), "scripted:x", plugins=plugins_with_model(Canned()),
                      cache_path=tmp_path / "c.sqlite")
    b, _ = synthesize(tmp_path / "b.json", config(seed=2), "scripted:x", plugins=plugins_with_model(Canned()),
                      cache_path=tmp_path / "c.sqlite")
    docs = [[d.insights_included for d in load_haystack(p).documents] for p in (a, b)]
    assert docs[0] != docs[1]


def test_helpers_and_errors(tmp_path):
    assert parse_json('text {"a": {"b": 1}} tail') == {"a": {"b": 1}}
    assert parse_json("no json") is None
    assert is_duplicate("students discussing the study techniques", ["students discussing study techniques"])
    assert not is_duplicate("students planning exam week", ["students discussing study techniques"])
    assert is_specific("The exam is on June 12.") and not is_specific("They talk about studying.")
    with pytest.raises(UserError, match="domain"):
        synthesize(tmp_path / "x.json", config(domain="poetry"), "scripted:x", plugins=plugins_with_model(Canned()),
                   cache_path=tmp_path / "c.sqlite")


def test_cli_needs_template_or_model_and_a_topic():
    import argparse

    from lceval_plugins.summhay.commands import SummhayCommand

    cmd = SummhayCommand()
    parser = argparse.ArgumentParser()
    cmd.add_arguments(parser)
    with pytest.raises(UserError, match="either"):
        cmd.run(parser.parse_args(["synth", "out.json"]))
    with pytest.raises(UserError, match="topic"):
        cmd.run(parser.parse_args(["synth", "out.json", "--model", "scripted:x"]))
