"""Each answer goes to the judge the moment it exists: with an API judge (the fake
OpenAI-compatible server, a fixed latency per call) the judging runs beside the generation,
and when the last answer arrives only its own judging is left. A judge's error stops the
run, and no answer is judged twice."""

from __future__ import annotations

import importlib.util
import threading
import time
from pathlib import Path

import pytest

from lceval import hookimpl
from lceval.engine import RunConfig, load_plugins
from lceval.interfaces import Judge
from lceval.types import CONTEXT_SLOT, Conversation, JudgeInput, Judgment, Turn

from tests.conftest import ScriptedModel, execute_config
from tests.unit.engine.served import serve

# looked up, not imported: lceval imports litellm itself, offline (its bundled cost map)
needs_litellm = pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed")


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


@needs_litellm
def test_an_api_judge_judges_while_the_model_still_answers(tiny_home: Path, tmp_path: Path):
    from lceval_plugins.backends.litellm_api import import_litellm

    from tests.plugins.backends.test_litellm_api import FakeOpenAI

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
    try:
        start = time.monotonic()
        state = execute_config(config, plugins, tiny_home)  # the cache: $LCEVAL_CACHE
        end = time.monotonic()
    finally:
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


def test_a_judge_error_stops_the_run_and_nothing_is_judged_twice(tmp_path: Path):
    """A judge that calls no model, beside one that does (so the judge model's four slots are
    on offer): its first call is still running when two more answers arrive, and it is still
    called once at a time. It breaks on "bad" while the model answers on; the next answer is
    not handed to any judge, the run stops with the judge's error (nothing after it is
    asked), and every answer the judge saw it saw once."""
    answering_after = threading.Event()

    class Failing(Judge):
        name = "failing"
        scale = (0.0, 1.0)

        def __init__(self) -> None:
            self.seen: list[str] = []
            self.lock = threading.Lock()
            self.calls_at_once = self.peak_at_once = 0
            self.broke = threading.Event()
            self.thread: threading.Thread | None = None

        def judge(self, items: list[JudgeInput]) -> list[Judgment]:
            with self.lock:
                self.seen.extend(i.item_id for i in items)
                self.calls_at_once += 1
                self.peak_at_once = max(self.peak_at_once, self.calls_at_once)
            try:
                if any(i.item_id == "a" for i in items):  # busy until "b" and "bad" were handed over
                    assert answering_after.wait(timeout=60)
                if any(i.item_id == "bad" for i in items):
                    self.thread = threading.current_thread()
                    self.broke.set()
                    raise RuntimeError("judge broke")
                return [Judgment(item_id=i.item_id, judge=self.name, score=1.0) for i in items]
            finally:
                with self.lock:
                    self.calls_at_once -= 1

    class Modelled(Judge):
        """The headline: a judge that calls the judge model (here it needs no answer of it)."""

        name = "modelled"
        scale = (0.0, 1.0)
        uses_model = True

        def judge(self, items: list[JudgeInput]) -> list[Judgment]:
            return [Judgment(item_id=i.item_id, judge=self.name, score=1.0) for i in items]

    failing = Failing()

    class Patient(ScriptedModel):
        """Answers "after" only once the failing judge's call with "bad" has ended in its error."""

        def generate(self, requests):
            if any(r.request_id == "after" for r in requests):
                answering_after.set()
                assert failing.broke.wait(timeout=60)
                assert failing.thread is not None
                failing.thread.join(timeout=60)  # the judging thread is done: its error is the run's
            return super().generate(requests)

    judge_model = ScriptedModel(window=4096)
    judge_model.max_in_flight = 4
    items = ["a", "b", "bad", "after", "last"]
    convs = [Conversation(conv_id=item, context="the meeting", context_id="m",
                          turns=[Turn(item_id=item, user=f"{CONTEXT_SLOT}\n\n{item}?", reference="x", question=item)])
             for item in items]
    model = Patient(window=4096)
    with pytest.raises(RuntimeError, match="judge broke"):
        serve(model, convs, tmp_path, spec="judge: {name: served}\nmetrics: [{name: served_metric}]\n",
              judges={"served": Modelled(), "served_metric": failing}, judge_model=judge_model)
    assert sorted(failing.seen) == ["a", "b", "bad"]  # each once; "after" never reached the judge
    assert failing.peak_at_once == 1  # a judge without a model: one call at a time, whatever the slots
    assert [r.request_id for r in model.calls] == ["a", "b", "bad", "after"]  # the run stopped there
    assert judge_model.calls == []
