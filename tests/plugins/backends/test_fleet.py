"""The `fleet:` backend against several scripted OpenAI-compatible servers on loopback:
affinity (a transcript's requests on one server), a server dying mid-run (its transcript
moves, the request it dropped is asked again elsewhere, every answer exactly once and
charged once), a lagging server handing its transcript to an idle one, and the options."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Iterator

import pytest

from lceval import hookimpl
from lceval.cli import main
from lceval.engine import RunConfig, RunState, load_plugins
from lceval.errors import UserError
from lceval.interfaces import ModelBackend, TaskContext, TaskType
from lceval.types import Conversation, Turn

from tests.conftest import execute_config, only_run

pytestmark = pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed")

from lceval_plugins.backends.fleet import FleetBackend  # noqa: E402

from tests.plugins.backends.test_litellm_api import FakeOpenAI  # noqa: E402


def conversations(shape: list[list[int]], sizes: list[int]) -> list[Conversation]:
    """shape[g] = turns of each conversation about transcript g (1 turn: single-turn); the
    transcript of group g is `sizes[g]` words `w<g>`."""
    out = []
    for g, convs in enumerate(shape):
        context = " ".join([f"w{g}"] * sizes[g])
        for c, turns in enumerate(convs):
            out.append(Conversation(
                conv_id=f"g{g}c{c}", context=context, context_id=f"g{g}",
                turns=[Turn(item_id=f"g{g}c{c}t{t}", user=("{context}\n" if t == 0 else "") + f"q{g}.{c}.{t}",
                            reference="r", question=f"q{t}") for t in range(turns)]))
    return out


class GivenTask(TaskType):
    """A task type serving the conversations a test hands it."""

    options_schema: dict = {"type": "object", "properties": {}}

    def __init__(self, convs: list[Conversation]) -> None:
        self.convs = convs

    def load(self, ctx: TaskContext) -> list[Conversation]:
        return list(self.convs)


def drive(model: ModelBackend, convs: list[Conversation],
          tmp_path: Path) -> tuple[dict[tuple[str, int], str], RunState]:
    """A run of `convs` answered by `model`, as `lceval run` has it (the engine's scheduler,
    request cache and usage counters; nothing written); returns the answers by (conversation,
    turn), every turn answered once, and the run's state."""

    class Given:
        @hookimpl
        def register_task_types(self, register):
            register("given", GivenTask(convs))

        @hookimpl
        def register_models(self, register):
            register("given", lambda name, options: model)

    spec = tmp_path / "given.yaml"
    spec.write_text("name: given\ndescription: conversations handed in by a test\ntype: given\n"
                    "generation: {max_new_tokens: 3}\n")
    config = RunConfig(tasks=str(spec), models=["given:x"], progress=False, cache_path=tmp_path / "cache.sqlite")
    state = execute_config(config, load_plugins(extra=[("given", Given())]), tmp_path / "data")
    samples = state.tasks[0].samples
    answers = {(s.conv_id, s.turn_index): s.response for s in samples}
    assert len(answers) == len(samples) == sum(len(c.turns) for c in convs), "a turn was answered twice or never"
    assert all(a is not None for a in answers.values()), "a turn was left unanswered"
    return answers, state


@pytest.fixture
def fakes() -> Iterator[list[FakeOpenAI]]:
    servers = [FakeOpenAI(hold_s=0.02) for _ in range(3)]
    for s in servers:
        s.default = "hold"
    yield servers
    for s in servers:
        s.close()


def fleet(servers: list[FakeOpenAI], **options: str) -> FleetBackend:
    """Through the entry point and its options schema, as `--model fleet:...` builds it."""
    factory = load_plugins().models["fleet"]
    opts = {"servers": "|".join(s.url for s in servers), "backoff_base": "0.001", "backoff_max": "0.004",
            "timeout": "5", **options}
    return factory("openai/fake", opts)


def group_of(item: str) -> str:
    """The transcript a request's text carries (conversations() writes w<g> words)."""
    return item.split()[0][1:]


def test_each_transcript_stays_on_one_server(fakes: list[FakeOpenAI], tmp_path: Path) -> None:
    model = fleet(fakes)
    assert (model.max_in_flight, model.max_in_flight_per_prefix) == (3, 1)
    answers, state = drive(model, conversations([[1] * 4] * 3, [20, 20, 20]), tmp_path)
    assert len(answers) == 12
    owners = {}
    for server in fakes:
        for item in server.order:
            assert owners.setdefault(group_of(item), server) is server  # affinity
    assert len(owners) == 3 and len({id(s) for s in owners.values()}) == 3  # spread over the fleet
    # the three transcripts in flight at once: three requests out together, one per server (a
    # server never had two: one transcript's requests never overlap), each server one transcript
    assert state.usage["peak_in_flight"] == 3 and [s.max_inflight for s in fakes] == [1, 1, 1]
    stats = model.stats()
    assert stats["succeeded"] == 12 and [s["answered"] for s in stats["fleet"]["servers"]] == [4, 4, 4]


def test_a_server_dying_mid_run_loses_nothing_and_charges_nothing_twice(fakes: list[FakeOpenAI],
                                                                        tmp_path: Path) -> None:
    fakes[1].die_after = 1  # answers its transcript's primer, then drops every connection
    model = fleet(fakes)
    answers, _ = drive(model, conversations([[1] * 4] * 3, [20, 20, 20]), tmp_path)
    assert len(answers) == 12  # every question answered, once (drive refuses a second answer)
    assert sum(s.answered for s in fakes) == 12  # each answered by exactly one server
    stats = model.stats()
    assert stats["succeeded"] == 12 and stats["failed"] == 0
    assert stats["prompt_tokens"] == 12 * FakeOpenAI.PROMPT_TOKENS  # charged once each
    assert stats["errors"].get("connection", 0) >= 1
    servers = stats["fleet"]["servers"]
    assert servers[1]["down"] and servers[1]["answered"] == 1
    assert stats["fleet"]["transcripts_moved"]["down"] >= 1
    # the dead server's transcript finished on one other server
    moved = [group_of(i) for i in fakes[1].order]
    later = [s for s in (fakes[0], fakes[2]) if any(group_of(i) == moved[0] for i in s.order)]
    assert len(later) == 1


def test_a_lagging_server_hands_its_transcript_to_an_idle_one(tmp_path: Path) -> None:
    slow, fast = FakeOpenAI(hold_s=0.25), FakeOpenAI(hold_s=0.005)
    try:
        slow.default = fast.default = "hold"
        model = fleet([slow, fast], lag_factor="4")
        answers, _ = drive(model, conversations([[1] * 8, [1] * 8], [20, 20]), tmp_path)
        assert len(answers) == 16
        stats = model.stats()
        assert stats["fleet"]["transcripts_moved"]["lagging"] == 1
        # the slow server's transcript: primer and a few measured answers there, the rest on the fast one
        slow_group = group_of(slow.order[0])
        assert 4 <= sum(group_of(i) == slow_group for i in slow.order) < 8
        assert sum(group_of(i) == slow_group for i in fast.order) >= 1
    finally:
        slow.close()
        fast.close()


def test_identity_is_the_model_whatever_the_servers(fakes: list[FakeOpenAI]) -> None:
    a, b = fleet(fakes), fleet(fakes[:2])
    assert a.identity() == b.identity() == {"scheme": "fleet", "model": "openai/fake"}
    assert fleet(fakes, explicit_sampling="true").identity()["explicit_sampling"] is True
    assert a.prefix_cache.kind == "shared" and a.prefix_cache.capacity_tokens is None
    assert fleet(fakes, cache_tokens="1000").prefix_cache.capacity_tokens == 3000


@pytest.mark.parametrize("options, pattern", [
    ({"servers": "http://u:pw@h:1/v1"}, "without user:password"),
    ({"servers": "ftp://h/v1"}, "not an http"),
    ({"servers": "http://h:1/v1|http://h:1/v1"}, "twice"),
    ({"servers": "|"}, "names no server"),
    ({"servers": "http://h:1/v1", "concurency": "2"}, "Did you mean 'concurrency'"),
    ({"servers": "http://h:1/v1", "api_key": "sk-abcdef123456"}, "never takes a secret"),
    ({"servers": "http://h:1/v1", "concurrency": "0"}, "concurrency"),
])
def test_bad_options(options: dict[str, str], pattern: str) -> None:
    factory = load_plugins().models["fleet"]
    with pytest.raises(UserError) as info:
        factory("openai/fake", options)
    text = str(info.value) + (info.value.hint or "")
    assert pattern in text
    assert "pw@" not in text and "sk-abcdef" not in text  # never echoed


def test_litellm_points_several_servers_to_the_fleet() -> None:
    factory = load_plugins().models["litellm"]
    with pytest.raises(UserError, match="one server") as info:
        factory("openai/fake", {"api_base": "http://a:1/v1|http://b:1/v1"})
    assert "fleet:" in (info.value.hint or "")


def test_engine_run_through_a_fleet(fakes: list[FakeOpenAI], tiny_home: Path, tmp_path: Path) -> None:
    fakes[2].die_after = 0  # dead from the start: every connection dropped
    servers = "|".join(s.url for s in fakes)
    assert main(["run", "--tasks", "elitr_qa", "--model", f"fleet:openai/fake,servers={servers},timeout=5",
                 "--data-home", str(tiny_home), "--output", str(tmp_path / "runs"), "--no-progress"]) == 0
    run_dir = only_run(tmp_path / "runs")
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 7 and all(s["response"] for s in samples)
    # the fakes report no cached tokens: prefill unknown, never the whole prompt
    assert all(s["prefilled_tokens"] is None for s in samples)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["usage"]["prefilled_tokens"] is None and manifest["usage"]["prefill_unknown"] == 7
    results = json.loads((run_dir / "results.json").read_text())
    assert results["tasks"]["elitr_qa"]["accounting"]["tokens"]["prefilled"] is None
    fleet_stats = manifest["backend_stats"]["model"]["fleet"]
    assert fleet_stats["servers"][2]["down"] and fleet_stats["servers"][2]["answered"] == 0
    assert manifest["backend_stats"]["model"]["succeeded"] == 7
    assert manifest["resolved"]["model_identity"] == {"scheme": "fleet", "model": "openai/fake"}
