"""Answers are kept as the model wrote them: every judge sees them stripped of surrounding
whitespace (as before), and a metric whose benchmark scores the raw text (LongBench's code
similarity keeps leading indentation; its first-line rule reads past leading newlines) reads
`raw_response`. A backend never strips; the engine does, once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lceval import hookimpl
from lceval.interfaces import Judge, ModelBackend
from lceval.types import Generation, GenerationRequest, JudgeInput, Judgment

from tests.conftest import execute_config


class Indented(ModelBackend):
    def identity(self) -> dict[str, Any]:
        return {"scheme": "indented"}

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        return [Generation(request_id=r.request_id, text="        return self.value + 1\n") for r in requests]


class Seen(Judge):
    name = "seen"
    items: list[JudgeInput] = []

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        Seen.items.extend(items)
        return [Judgment(item_id=i.item_id, judge=self.name, score=1.0) for i in items]

    def identity(self) -> dict[str, Any]:
        return {"judge": self.name}


def test_the_raw_answer_is_kept_beside_the_stripped_one(tiny_home: Path, tmp_path: Path) -> None:
    from lceval.engine import RunConfig, load_plugins
    from lceval.results import write_run

    class Plugin:
        @hookimpl
        def register_models(self, register):
            register("indented", lambda name, options: Indented())

        @hookimpl
        def register_judges(self, register):
            register("seen", lambda ctx: Seen())

    plugins = load_plugins(extra=[("indented", Plugin())])
    Seen.items = []
    state = execute_config(RunConfig(tasks="elitr_qa", models=["indented:x"], judge="seen", limit=2, progress=False,
                                     cache_path=tmp_path / "c.sqlite"), plugins, tiny_home)
    samples = [s for t in state.tasks for s in t.samples]
    assert samples and all(s.response == "return self.value + 1" for s in samples)
    assert all(s.raw_response == "        return self.value + 1\n" for s in samples)
    assert {(i.response, i.raw_response) for i in Seen.items} == {("return self.value + 1",
                                                                  "        return self.value + 1\n")}
    run_dir, _ = write_run(state, plugins, tmp_path / "runs")
    line = (run_dir / "samples.jsonl").read_text().splitlines()[0]
    assert '"raw_response": "        return self.value + 1\\n"' in line
