"""Each answer goes to the judge the moment it exists: with an API judge (the fake
OpenAI-compatible server, a fixed latency per call) the judging runs beside the generation,
and when the last answer arrives only its own judging is left."""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from pathlib import Path

import pytest

from lceval import hookimpl
from lceval.engine import Cache, RunConfig, load_catalog, load_plugins
from lceval.engine._judging import JudgingPool
from lceval.interfaces import Judge
from lceval.types import JudgeInput, Judgment

from tests.conftest import ScriptedModel, execute_config
from tests.plugins.backends.test_litellm_api import FakeOpenAI

# looked up, not imported: lceval imports litellm itself, offline (its bundled cost map)
pytestmark = pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed")


class SlowModel(ScriptedModel):
    """Takes `delay` seconds per answer and notes when each one is done. Its last answer
    waits (up to `patience` seconds) until the judge has been sent every earlier answer: a
    run that judges while generating gets there at once, one that judges only after the last
    answer never does, whatever the machine's load (the test counts, it does not time)."""

    def __init__(self, delay: float, answers: int, judge_calls: list[float], patience: float = 30.0) -> None:
        super().__init__(window=4096)
        self.delay, self.answers, self.judge_calls, self.patience = delay, answers, judge_calls, patience
        self.done_at: list[float] = []
        self._lock = threading.Lock()
        self._started = 0

    def generate(self, requests):
        time.sleep(self.delay)
        with self._lock:
            self._started += len(requests)
            last = self._started >= self.answers
        if last:
            deadline = time.monotonic() + self.patience
            while len(self.judge_calls) < self.answers - 1 and time.monotonic() < deadline:
                time.sleep(0.01)
        out = super().generate(requests)
        self.done_at.append(time.monotonic())
        return out


def test_an_api_judge_judges_while_the_model_still_answers(tiny_home: Path, tmp_path: Path):
    from lceval_plugins.backends.litellm_api import import_litellm

    import_litellm()  # imported before the clock starts: the overlap is what is measured, not the import
    server = FakeOpenAI(hold_s=0.3)
    server.default = "hold"  # every judge call takes 0.3 s
    server.reply = lambda item: "Fair.\n\\boxed{7}"
    model = SlowModel(delay=0.25, answers=7, judge_calls=server.arrivals)

    class Plugin:
        @hookimpl
        def register_models(self, register):
            register("scripted", lambda name, options: model)

    plugins = load_plugins(extra=[("scripted", Plugin())])
    config = RunConfig(tasks="elitr_qa", models=["scripted:x"], judge="rubric", progress=False,
                       judge_model=f"litellm:openai/fake,api_base={server.url},concurrency=4")
    cache = Cache(Path(os.environ["LCEVAL_CACHE"]))
    try:
        start = time.monotonic()
        state = execute_config(config, plugins, load_catalog(plugins), cache, tiny_home)
        end = time.monotonic()
    finally:
        cache.close()
        server.close()
    samples = state.tasks[0].samples
    assert len(samples) == 7 and all(s.judgments and s.judgments[0].score == 7.0 for s in samples)
    assert [s.item_id for s in samples] == sorted((s.item_id for s in samples), key=[s.item_id for s in samples].index)
    last_answer = max(model.done_at)
    # every answer but the last was sent to the judge before the model gave its last answer
    assert sum(1 for t in server.arrivals if t < last_answer) >= len(samples) - 1
    assert sum(1 for t in server.arrivals if t >= last_answer) <= 1
    generation, tail = last_answer - start, end - last_answer
    print(f"generation {generation:.2f}s, judging after the last answer {tail:.2f}s, wall {end - start:.2f}s")


def test_a_judge_error_stops_the_run_and_nothing_is_judged_twice():
    class Failing(Judge):
        name = "failing"

        def __init__(self) -> None:
            self.seen: list[str] = []
            self.lock = threading.Lock()

        def judge(self, items: list[JudgeInput]) -> list[Judgment]:
            with self.lock:
                self.seen.extend(i.item_id for i in items)
            if any(i.item_id == "bad" for i in items):
                raise RuntimeError("judge broke")
            return [Judgment(item_id=i.item_id, judge=self.name, score=1.0) for i in items]

    pool = JudgingPool()
    judge = Failing()
    verdicts = pool.add_judge(judge, slots=4)
    for item in ("a", "b", "bad"):
        pool.submit(judge, JudgeInput(item_id=item, question="q", response="r", reference="x"))
    with pytest.raises(RuntimeError, match="judge broke"):
        pool.wait()
    assert sorted(judge.seen) == ["a", "b", "bad"]  # a judge without a model: one call at a time
    assert set(verdicts) <= {"a", "b"}
    with pytest.raises(RuntimeError, match="judge broke"):
        pool.submit(judge, JudgeInput(item_id="c", question="q", response="r", reference="x"))
