"""`--batch` against our own batch server on loopback (tests/batch_server.py), speaking
OpenAI's /v1/batches and Anthropic's Message Batches: batches that succeed, partly fail,
expire; a run killed with SIGKILL between submit and results, whose rerun adopts the batch
(0 requests paid twice, counted by the server); answers judged as their batches end; cost
totals that are the sum over the requests; and the bad input that exits 2."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any, Iterator

import pytest

from lceval.engine import Cache, open_model
from lceval.results import load_run
from lceval.types import GenerationParams, GenerationRequest, Message
from tests.batch_server import COMPLETION_TOKENS, PROMPT_TOKENS, BatchServer
from tests.cli import call
from tests.conftest import only_run
from tests.paths import REPO

pytestmark = pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed")

#: quick polls and short waits, so a test's batches end in well under a second
FAST = "batch_poll=0.05,batch_poll_max=0.2,batch_max_wait=0.3"
#: USD per million tokens; a batch is charged half
PRICES = "input_cost_per_mtok=2,output_cost_per_mtok=8"
PER_ANSWER = (PROMPT_TOKENS * 1.0 + COMPLETION_TOKENS * 4.0) / 1e6  # at the batch price


@pytest.fixture
def server() -> Iterator[BatchServer]:
    srv = BatchServer()
    yield srv
    srv.close()


def spec(server: BatchServer, protocol: str, extra: str = "") -> str:
    base = server.url if protocol == "openai" else server.root
    return f"litellm:{protocol}/fake,api_base={base},batch=true,{FAST},{PRICES}" + (f",{extra}" if extra else "")


def asks(n: int, prefix: str = "q") -> list[GenerationRequest]:
    return [GenerationRequest(request_id=str(i), messages=[Message("user", f"{prefix}{i}")],
                              params=GenerationParams(max_new_tokens=8)) for i in range(n)]


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_batch_that_succeeds_answers_everything_once_at_half_the_price(server: BatchServer, protocol: str,
                                                                         tmp_path: Path) -> None:
    cache = tmp_path / "c.sqlite"
    with open_model(spec(server, protocol), cache_path=cache) as model:
        gens = model.generate(asks(5))
        usage = model.usage.as_dict()
    assert [g.text for g in gens] == [f"answer to q{i}" for i in range(5)]
    assert server.batch_count() == 1 and server.direct == 0 and not server.paid_twice()
    assert usage["generated"] == usage["batched"] == 5
    # cost totals are the sum over the requests, at the batch price (half of 2 and 8 USD per million)
    assert usage["cost_usd"] == usage["batch_cost_usd"] == pytest.approx(5 * PER_ANSWER)
    assert sum(g.extras["cost_usd"] for g in gens) == pytest.approx(usage["cost_usd"])
    # each answer was stored the moment its batch ended: asked again, nothing is sent
    with open_model(spec(server, protocol), cache_path=cache) as model:
        again = model.generate(asks(5))
        assert model.usage.cache_hits == 5 and model.usage.cached_cost_usd == pytest.approx(5 * PER_ANSWER)
    assert [g.text for g in again] == [g.text for g in gens] and server.batch_count() == 1


def test_a_batch_holds_at_most_batch_max_requests(server: BatchServer, tmp_path: Path) -> None:
    with open_model(spec(server, "openai", "batch_max_requests=2"), cache_path=tmp_path / "c.sqlite") as model:
        gens = model.generate(asks(5))
    assert len(gens) == 5 and [len(b["requests"]) for b in server.batches.values()] == [2, 2, 1]


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_requests_failed_inside_a_batch_go_again_in_a_later_batch(server: BatchServer, protocol: str,
                                                                  tmp_path: Path) -> None:
    server.script = {"q1": ["fail"], "q3": ["fail", "fail"]}
    with open_model(spec(server, protocol, "batch_retries=1"), cache_path=tmp_path / "c.sqlite") as model:
        gens = model.generate(asks(4))
        counters = model.batcher.counters
    assert [g.finish_reason for g in gens] == ["stop", "stop", "stop", "error"]
    # failed twice (the provider's 500: a server error, worth another batch): past its one retry
    assert gens[3].extras["error"]["kind"] == "server"
    assert (counters.retried, counters.failed, server.batch_count()) == (2, 1, 2)
    assert not server.paid_twice()
    # the failed one was not cached: the same command asks it again (and the server answers it now)
    with open_model(spec(server, protocol), cache_path=tmp_path / "c.sqlite") as model:
        assert model.generate(asks(4))[3].text == "answer to q3"
        assert model.usage.cache_hits == 3 and model.usage.batched == 1


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_request_the_provider_refuses_inside_a_batch_is_not_sent_again(server: BatchServer, protocol: str,
                                                                         tmp_path: Path) -> None:
    server.script = {"q1": ["refuse"]}
    with open_model(spec(server, protocol, "batch_retries=3"), cache_path=tmp_path / "c.sqlite") as model:
        gens = model.generate(asks(3))
        counters = model.batcher.counters
    error = gens[1].extras["error"]
    assert error["kind"] == "bad_request" and "prompt_cache=off" in error["hint"]
    assert (counters.retried, counters.failed, server.batch_count()) == (0, 1, 1)


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_an_expired_batch_sends_again_what_it_did_not_finish(server: BatchServer, protocol: str,
                                                            tmp_path: Path) -> None:
    server.script = {"q0": ["expire"], "q2": ["expire"]}
    with open_model(spec(server, protocol), cache_path=tmp_path / "c.sqlite") as model:
        gens = model.generate(asks(3))
        counters = model.batcher.counters
    assert [g.text for g in gens] == [f"answer to q{i}" for i in range(3)]
    assert (counters.resubmitted, counters.batches_sent, counters.failed) == (2, 2, 0)
    first, second = (b["requests"] for b in server.batches.values())
    assert len(first) == 3 and len(second) == 2  # only the two it did not finish went again
    assert not server.paid_twice()


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_batch_whose_id_was_never_recorded_is_found_and_adopted(server: BatchServer, protocol: str,
                                                                  tmp_path: Path) -> None:
    """The process died after the provider took the batch and before its id was written:
    the batch is recorded ("sending") with its requests, and the rerun finds it at the
    provider (OpenAI: by lceval's tag in its metadata; Anthropic: by its size and time)."""
    cache_path = tmp_path / "c.sqlite"
    with open_model(spec(server, protocol), cache_path=cache_path) as model:
        requests = asks(3)
        keys = [model.key(r) for r in requests]
        identity = model.batcher.model
        cache = Cache(cache_path)
        cache.record_batch("lceval-crashed", identity, protocol,
                           [(k, {"request_id": r.request_id}) for k, r in zip(keys, requests)])
        cache.close()
        model.batcher.api.submit("lceval-crashed", [(k, r) for k, r in zip(keys, requests)])
    assert server.batch_count() == 1
    with open_model(spec(server, protocol), cache_path=cache_path) as model:
        gens = model.generate(requests)
        counters = model.batcher.counters
    assert [g.text for g in gens] == [f"answer to q{i}" for i in range(3)]
    assert (counters.batches_adopted, counters.batches_sent, server.batch_count()) == (1, 0, 1)
    assert not server.paid_twice()


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_submission_that_failed_is_looked_for_before_it_is_sent_again(server: BatchServer, protocol: str,
                                                                        tmp_path: Path) -> None:
    """A refused submission is sent again (later); one whose answer was lost though the
    provider took the batch is found at the provider and not paid twice."""
    server.create_faults = ["refuse", "lose"]
    with open_model(spec(server, protocol), cache_path=tmp_path / "c.sqlite") as model:
        gens = model.generate(asks(3))
        counters = model.batcher.counters
    assert [g.text for g in gens] == [f"answer to q{i}" for i in range(3)]
    assert server.batch_count() == 1 and len(server.submitted) == 3 and not server.paid_twice()
    assert counters.submit_errors == 2 and counters.batches_sent == 1


def _run_argv(server: BatchServer, home: Path, tmp_path: Path, *extra: str) -> list[str]:
    return ["run", "--tasks", "elitr_qa", "--model", spec(server, "openai").replace("batch=true,", ""), "--batch",
            "--data-home", str(home), "--cache", str(tmp_path / "c.sqlite"), "--output", str(tmp_path / "runs"),
            "--no-progress", *extra]


def test_kill_9_between_submit_and_results_then_the_rerun_adopts_the_batch(server: BatchServer, tiny_home: Path,
                                                                          tmp_path: Path) -> None:
    server.hold.set()  # the batch stays in progress until the first run is dead
    argv = _run_argv(server, tiny_home, tmp_path)
    env = {**os.environ, "LCEVAL_AUTO_FETCH": "0", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "lceval", *argv], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while server.polls < 1 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # polled once: the batch's id is in the cache
        assert proc.poll() is None, proc.communicate()
        assert server.batch_count() == 1 and len(server.submitted) == 7
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    server.hold.clear()
    code, out, err = call(*argv)
    assert code == 0, err
    # the rerun sent nothing: it adopted the batch, and nothing was paid twice
    assert server.batch_count() == 1 and len(server.submitted) == 7 and not server.paid_twice()
    assert len(server.charged) == 7 and server.direct == 0
    run = load_run(only_run(tmp_path / "runs"))
    batch = run.record.usage["batch_api"]
    assert (batch["batches_adopted"], batch["batches_sent"], batch["answers"]) == (1, 0, 7)
    assert all(s.response for s in run.samples)


def test_answers_are_judged_as_their_batches_end_and_costs_add_up(server: BatchServer, tiny_home: Path,
                                                                  tmp_path: Path) -> None:
    """Model and judge through batches (OpenAI's and Anthropic's): the judge's batch goes out
    after the model's ends, within one run; the manifest's cost is the sum over the answers
    (samples' own costs for the model, the server's count for the judge)."""
    server.reply = lambda item: "Fair.\n\\boxed{7}"
    code, out, err = call(*_run_argv(server, tiny_home, tmp_path, "--judge", "rubric",
                                     "--judge-model", spec(server, "anthropic")))
    assert code == 0, err
    run = load_run(only_run(tmp_path / "runs"))
    assert [s.judgments[0].score for s in run.samples] == [7.0] * 7
    kinds = [b["kind"] for b in server.batches.values()]
    assert kinds == ["openai", "anthropic"] and not server.paid_twice() and len(server.charged) == 14
    cost = run.record.cost
    paid = sum(s.generation_extras["cost_usd"] for s in run.samples)
    assert cost["generation"]["paid_usd"] == pytest.approx(paid) == pytest.approx(7 * PER_ANSWER)
    assert cost["judging"]["paid_usd"] == pytest.approx(7 * PER_ANSWER)
    assert cost["by_task"]["elitr_qa"]["judging"]["batched"] == 7
    assert cost["total_usd"] == pytest.approx(14 * PER_ANSWER)
    assert "cost: $0.0020" in out and "through batches" in out
    # the same cost in the HTML report (per task, generation and judging, batch or not) and the bundle
    assert call("report", run.path, "--format", "html", "--output", tmp_path / "r.html")[0] == 0
    html = (tmp_path / "r.html").read_text()
    costs = html[html.index('id="cost"'):html.index('id="runs"')]
    assert "elitr_qa" in costs and costs.count("7 of 7 through batches ($0.0010)") == 2 and "$0.0020" in costs
    assert call("submit", run.path, "--output", tmp_path / "b.zip")[0] == 0
    with zipfile.ZipFile(tmp_path / "b.zip") as zf:
        (entry,) = json.loads(zf.read("bundle.json"))["runs"]
    assert entry["cost"]["total_usd"] == pytest.approx(14 * PER_ANSWER) and "partial" not in entry


def test_a_judge_batches_while_the_model_still_answers(server: BatchServer, tiny_home: Path,
                                                       tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A local model answering slowly, a batching judge: the judge's first batch is sent
    before the model's last answer (answers are judged as they come, not after the run)."""
    from tests.conftest import ScriptedModel, serve_scripted

    seen: list[int] = []

    class Slow(ScriptedModel):
        def generate(self, requests: list[GenerationRequest]) -> Any:
            if len(self.calls) == 6:  # the last answer waits (up to 30 s) for a judge batch
                deadline = time.monotonic() + 30
                while server.batch_count() == 0 and time.monotonic() < deadline:
                    time.sleep(0.02)
                seen.append(server.batch_count())
            return super().generate(requests)

    serve_scripted(monkeypatch, lambda: Slow(window=4096))
    server.reply = lambda item: "Fair.\n\\boxed{6}"
    code, out, err = call("run", "--tasks", "elitr_qa", "--model", "scripted:x", "--judge", "rubric",
                          "--judge-model", spec(server, "openai", "batch_max_wait=0.2"), "--data-home", tiny_home,
                          "--output", tmp_path / "runs", "--no-progress")
    assert code == 0, err
    assert seen == [1]  # a judge batch was out before the last answer existed
    run = load_run(only_run(tmp_path / "runs"))
    assert [s.judgments[0].score for s in run.samples] == [6.0] * 7
    assert server.batch_count() >= 2 and not server.paid_twice()


# -- bad input: exit 2 naming the flag and the value -----------------------------------------

def test_batch_for_a_run_without_a_batch_api_is_refused(tiny_home: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.conftest import serve_scripted

    serve_scripted(monkeypatch)
    code, _, err = call("run", "--tasks", "elitr_qa", "--model", "scripted:x", "--batch", "--data-home", tiny_home,
                        "--output", tmp_path / "runs", "--no-progress")
    assert code == 2 and "--batch" in err and "scripted:x" in err and "no" in err and "batch API" in err
    code, _, err = call("run", "--tasks", "elitr_qa", "--model", "litellm:gemini/gemini-pro,batch=true",
                        "--data-home", tiny_home, "--output", tmp_path / "runs", "--no-progress")
    assert code == 2 and "batch=true" in err and "gemini/gemini-pro" in err and "no batch API" in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("value", ["-1", "abc", "nan"])
def test_a_bad_max_cost_is_refused(value: str, tiny_home: Path) -> None:
    code, _, err = call("run", "--tasks", "elitr_qa", "--model", "litellm:openai/gpt-4o", f"--max-cost={value}",
                        "--data-home", tiny_home)
    assert code == 2 and "--max-cost" in err and f"'{value}'" in err


def test_max_cost_with_an_unknown_price_is_refused(server: BatchServer, tiny_home: Path, tmp_path: Path) -> None:
    code, _, err = call("run", "--tasks", "elitr_qa", "--model", f"litellm:openai/unpriced,api_base={server.url}",
                        "--max-cost", "5", "--data-home", tiny_home, "--output", tmp_path / "runs", "--no-progress")
    assert code == 2 and "--max-cost 5" in err and "price" in err and "input_cost_per_mtok" in err
    assert server.batch_count() == 0 and server.direct == 0 and not (tmp_path / "runs").exists()


def _strangers_batch(server: BatchServer, protocol: str, n: int) -> str:
    """A batch of `n` requests someone else sent to the same account (no tag of ours, other
    request ids), straight through the provider's HTTP API."""
    import urllib.request

    def post(url: str, data: bytes, content_type: str = "application/json") -> dict[str, Any]:
        request = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": content_type})
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - loopback
            return json.loads(response.read())

    if protocol == "anthropic":
        return post(server.root + "/v1/messages/batches", json.dumps({"requests": [
            {"custom_id": f"theirs-{i}", "params": {"model": "fake", "max_tokens": 8,
                                                    "messages": [{"role": "user", "content": f"q{i}"}]}}
            for i in range(n)]}).encode())["id"]
    lines = "".join(json.dumps({"custom_id": f"theirs-{i}", "method": "POST", "url": "/v1/chat/completions",
                                "body": {"model": "fake", "messages": [{"role": "user", "content": f"q{i}"}]}}) + "\n"
                    for i in range(n)).encode()
    form = (b'--b\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--b\r\nContent-Disposition: '
            b'form-data; name="file"; filename="theirs.jsonl"\r\n\r\n' + lines + b"\r\n--b--\r\n")
    uploaded = post(server.url + "/files", form, "multipart/form-data; boundary=b")
    return post(server.url + "/batches", json.dumps({"input_file_id": uploaded["id"], "endpoint": "/v1/chat/completions",
                                                     "completion_window": "24h"}).encode())["id"]


@pytest.mark.parametrize("ours_reached_the_provider", [True, False])
@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_strangers_batch_of_the_same_size_is_never_adopted(server: BatchServer, protocol: str,
                                                            ours_reached_the_provider: bool, tmp_path: Path) -> None:
    """A batch whose id was never recorded, and just after it a stranger's batch of the same size
    (no tag of ours: a matching size and time is all it has): the rerun adopts a batch only when
    the provider shows it holds our request ids, waits for both rather than guess, never cancels
    the stranger's, and sends our requests again only when none of them was ours."""
    cache_path = tmp_path / "c.sqlite"
    server.hold.set()  # both batches still running when the rerun looks for ours
    with open_model(spec(server, protocol), cache_path=cache_path) as model:
        requests = asks(3)
        keys = [model.key(r) for r in requests]
        cache = Cache(cache_path)
        cache.record_batch("lceval-crashed", model.batcher.model, protocol,
                           [(k, {"request_id": r.request_id}) for k, r in zip(keys, requests)])
        cache.close()
        if ours_reached_the_provider:
            model.batcher.api.submit("lceval-crashed", [(k, r) for k, r in zip(keys, requests)])
    theirs = _strangers_batch(server, protocol, 3)
    server.hold.clear()
    with open_model(spec(server, protocol), cache_path=cache_path) as model:
        gens = model.generate(requests)
        counters = model.batcher.counters
    assert [g.text for g in gens] == [f"answer to q{i}" for i in range(3)]
    assert not server.batches[theirs].get("cancel") and not server.paid_twice()
    ours = [k for k in server.charged if not k.startswith("theirs-")]
    assert sorted(ours) == sorted(keys)  # each of our requests paid exactly once
    assert counters.batches_adopted == 1 and counters.batches_sent == (0 if ours_reached_the_provider else 1)


def test_max_cost_set_to_the_dry_runs_at_most_runs_every_request(server: BatchServer, tiny_home: Path,
                                                                 tmp_path: Path) -> None:
    """The dry run's "at most" and what --max-cost reserves are one estimate (no tokenizer: 3
    characters a token), rounded up where it is shown. Through a batch every request is reserved
    before any is paid: the figure itself lets all 7 through in one batch, a hundredth of a cent
    less in two."""
    argv = ["run", "--tasks", "elitr_qa", "--model", spec(server, "openai"), "--data-home", tiny_home,
            "--no-progress"]
    code, out, err = call(*argv, "--dry-run")
    assert code == 0, err
    at_most = float(re.search(r"through its batch API \(as this run asks\): \$([0-9.]+)", out).group(1))
    assert "3 characters a token" in out and server.batch_count() == 0
    code, out, err = call(*argv, "--max-cost", str(at_most), "--output", tmp_path / "all",
                          "--cache", tmp_path / "all.sqlite")
    assert code == 0, err
    assert len(server.submitted) == 7 and "PARTIAL" not in out
    assert server.batch_count() == 1
    # a hundredth of a cent less: 6 fit beside each other; the 7th waits for their batch to come
    # back below its reservations (what they did not spend is free again) and goes in a batch of its own
    code, out, err = call(*argv, "--max-cost", f"{at_most - 0.0001:.4f}", "--output", tmp_path / "less",
                          "--cache", tmp_path / "less.sqlite")
    assert code == 0 and "PARTIAL" not in out, err
    assert len(server.submitted) == 7 + 7 and server.batch_count() == 1 + 2


def test_a_reasoning_models_batch_lines_are_in_its_apis_terms(server: BatchServer, tmp_path: Path) -> None:
    """A batch line goes to the provider's HTTP API as it is: an OpenAI reasoning model's limit
    is `max_completion_tokens` with no temperature; Claude's thinking carries its budget inside
    `max_tokens` and no temperature."""
    from lceval_plugins.backends.litellm_api import make_litellm

    ask = GenerationRequest("q", [Message("system", "Be brief."), Message("user", "q0")],
                            GenerationParams(max_new_tokens=64, reasoning_room=1000, reasoning_effort="low"))
    make_litellm("openai/o4-mini", {"api_base": server.url}).batch_api().submit("lceval-a", [("a0", ask)])
    think = GenerationRequest("q", ask.messages, GenerationParams(max_new_tokens=64, reasoning_budget=2048))
    make_litellm("anthropic/claude-sonnet-4-20250514", {"api_base": server.root}).batch_api().submit(
        "lceval-b", [("b0", think)])
    openai_line, anthropic_line = (b["requests"][cid] for b, cid in zip(server.batches.values(), ("a0", "b0")))
    assert {k: v for k, v in openai_line.items() if k != "messages"} == {
        "model": "o4-mini", "max_completion_tokens": 1064, "seed": 0, "reasoning_effort": "low"}
    assert {k: v for k, v in anthropic_line.items() if k != "messages"} == {
        "model": "claude-sonnet-4-20250514", "max_tokens": 64 + 2048, "system": "Be brief.",
        "thinking": {"type": "enabled", "budget_tokens": 2048}}
