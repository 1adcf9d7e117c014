"""Failures said out loud, through `lceval run` and `lceval score` as a user meets them, against
a local server that refuses as the providers do (tests/provider_servers.py, `fail`): each
refusal classified by its HTTP status and the provider's error type, only the transient ones
retried (requests counted, backoff at a microsecond), the end of the run saying on stderr what
failed by kind with its count, first message and hint, and where it is recorded; a run in which
nothing could be generated or judged exits 5, one with some failures exits 0.

ELITR-Bench QA on a tiny dataset of ours (tests/elitr_tiny.py), one question per split."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.batch_server import BatchServer
from tests.cli import call
from tests.conftest import only_run, serve_scripted
from tests.provider_servers import CONTENT_FILTER, ProviderServer

pytestmark = pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed")

#: backoff of a microsecond: a retry waits on no clock
FAST = "backoff_base=0.000001,backoff_max=0.000001"
QUESTIONS = 2
NOTHING_MEASURED = 5
CACHE_REFUSAL = "messages.0.content.0.cache_control: Extra inputs are not permitted"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProviderServer]:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.setenv(name, "test-key-0000")
    srv = ProviderServer()
    srv.silent = True  # a model that answers at once: no thinking to make room for
    yield srv
    srv.close()


def run(home: Path, out: Path, model: str, *flags: str) -> tuple[int, str, str]:
    return call("run", "--tasks", "elitr_qa", "--model", model, "--data-home", home, "--output", out,
                "--cache", out.with_suffix(".sqlite"), "--no-progress", *(flags or ("--limit", "1")))


def samples(runs: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (only_run(runs) / "samples.jsonl").read_text().splitlines()]


def failed(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s["generation_extras"]["generation_failed"]["error"] for s in records
            if "generation_failed" in s["generation_extras"]]


def test_each_refusal_has_its_kind_and_only_transient_ones_are_asked_again(server: ProviderServer, tiny_home: Path,
                                                                          tmp_path: Path) -> None:
    # the requests, one at a time, meet in turn: a 400, a content filter, a context past the
    # window (OpenAI's 400 for it), a 429, a 500, then answers
    for status in (400, CONTENT_FILTER):
        server.fail(status, f"refused with {status}", times=1)
    server.fail(400, "This model's maximum context length is 8192 tokens. However, your messages resulted in "
                     "9000 tokens. Please reduce the length of the messages.", times=1)
    for status in (429, 500):
        server.fail(status, f"refused with {status}", times=1)
    code, out, err = run(tiny_home, tmp_path / "runs",
                         f"litellm:openai/m,api_base={server.url},max_retries=2,concurrency=1,{FAST}", "--limit", "2")
    assert code == 0, err  # some failures: exit 0, said
    records = samples(tmp_path / "runs")
    assert len(records) == 4
    # a refusal is met again: never asked twice; the 429 and the 500 were asked again and answered
    assert len(server.requests) == 4 + 2
    errors = sorted(failed(records), key=lambda e: e["kind"])
    assert [(e["kind"], e["attempts"]) for e in errors] == [("bad_request", 1), ("content_filter", 1),
                                                             ("context_window", 1)]
    assert "refused with 400" in errors[0]["message"] and "--context-policy" in errors[2]["hint"]
    # how many, of which kind, the first message of each, and where they are recorded
    where = only_run(tmp_path / "runs") / "samples.jsonl"
    assert "3 of 4 answer(s) could not be generated" in err and str(where) in err
    assert "bad_request     1  first: " in err and "content_filter  1  first: " in err
    assert "context_window  1  first: " in err
    assert "refused with 400" in err and "rate_limit  " not in err and "server  " not in err


def test_a_run_where_every_request_is_refused_exits_5_and_says_why(server: ProviderServer, tiny_home: Path,
                                                                   tmp_path: Path) -> None:
    server.fail(400, CACHE_REFUSAL)  # a gateway that takes no cache_control
    code, out, err = run(tiny_home, tmp_path / "runs",
                         f"litellm:anthropic/claude-sonnet-4-5,api_base={server.root},{FAST}")
    assert code == NOTHING_MEASURED
    assert len(server.requests) == QUESTIONS  # no retry of a 400 (max_retries is 6 by default)
    assert [e["kind"] for e in failed(samples(tmp_path / "runs"))] == ["bad_request"] * QUESTIONS
    assert f"{QUESTIONS} of {QUESTIONS} answer(s) could not be generated" in err
    assert f"bad_request  {QUESTIONS}  first: " in err and "cache_control" in err
    assert "hint: " in err and "prompt_cache=off" in err
    assert "no answer was generated" in err
    # the advice leads somewhere: the same run with the prompt cache off goes through
    server.failing = None
    server.requests.clear()
    code, out, err = run(tiny_home, tmp_path / "again",
                         f"litellm:anthropic/claude-sonnet-4-5,api_base={server.root},prompt_cache=off,{FAST}")
    assert code == 0 and "could not be generated" not in err
    assert "cache_control" not in json.dumps(server.bodies("/messages"))


def test_a_server_error_past_the_retries_is_counted_with_its_attempts(server: ProviderServer, tiny_home: Path,
                                                                      tmp_path: Path) -> None:
    server.fail(500, "the server is overloaded")
    code, out, err = run(tiny_home, tmp_path / "runs", f"litellm:openai/m,api_base={server.url},max_retries=2,{FAST}")
    assert code == NOTHING_MEASURED
    assert len(server.requests) == 3 * QUESTIONS  # each asked three times
    assert {e["attempts"] for e in failed(samples(tmp_path / "runs"))} == {3}
    assert f"server  {QUESTIONS}  first: " in err and "overloaded" in err


@pytest.mark.parametrize("status, said", [(401, "OPENAI_API_KEY"), (404, "Check the model name")])
def test_refused_credentials_or_an_unknown_model_stop_the_run_at_once(status: int, said: str, server: ProviderServer,
                                                                      tiny_home: Path, tmp_path: Path) -> None:
    server.fail(status, "no such key or model")
    code, out, err = run(tiny_home, tmp_path / "runs", f"litellm:openai/m,api_base={server.url},concurrency=1,{FAST}")
    assert code == 2 and said in err
    assert len(server.requests) == 1  # every other request would fail the same way


def test_judge_failures_are_said_and_a_run_judged_by_nothing_exits_5(server: ProviderServer, tiny_home: Path,
                                                                     tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    serve_scripted(monkeypatch)  # the model answers locally; the judge is the API
    server.answer = lambda prompt: "Feedback: it is right. [RESULT] 5"
    judge = f"litellm:openai/judge,api_base={server.url},max_retries=0,{FAST}"

    def judged(out: Path) -> tuple[int, str]:
        code, _, err = call("run", "--tasks", "elitr_qa", "--model", "scripted:x", "--data-home", tiny_home,
                            "--output", out, "--cache", out.with_suffix(".sqlite"), "--no-progress", "--limit", "1",
                            "--judge", "prometheus", "--judge-model", judge)
        return code, err

    server.fail(500, "the judge is overloaded", times=1)
    code, err = judged(tmp_path / "some")
    assert code == 0, err
    where = only_run(tmp_path / "some") / "samples.jsonl"
    assert f"1 of {QUESTIONS} verdict(s) could not be given" in err and str(where) in err
    assert "server  1  first: " in err and "judge is overloaded" in err
    verdicts = [s["judgments"][0] for s in samples(tmp_path / "some")]
    assert [v["details"]["judge_error"]["kind"] for v in verdicts if v["parse_status"] == "missing"] == ["server"]

    server.fail(400, "the judge refuses the request")
    code, err = judged(tmp_path / "none")
    assert code == NOTHING_MEASURED
    assert f"{QUESTIONS} of {QUESTIONS} verdict(s) could not be given" in err and "bad_request" in err
    assert "no answer could be judged" in err
    # re-judged with `lceval score`: the same summary, the same exit
    code, _, err = call("score", only_run(tmp_path / "some"), "--judge", "prometheus", "--judge-model", judge,
                        "--output", tmp_path / "rescored", "--cache", tmp_path / "rescored.sqlite")
    assert code == NOTHING_MEASURED and "no answer could be judged" in err


def test_batch_lines_the_provider_refuses_are_said_and_not_sent_again(tiny_home: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-0000")
    srv = BatchServer()
    srv.every = "refuse"  # each line: a 400 naming cache_control
    try:
        code, out, err = run(tiny_home, tmp_path / "runs", f"litellm:anthropic/claude-sonnet-4-5,api_base={srv.root},"
                             "batch=true,batch_poll=0.05,batch_poll_max=0.2,batch_max_wait=0.3")
        batches = len(srv.batches)
    finally:
        srv.close()
    assert code == NOTHING_MEASURED
    assert batches == 1  # a refused line is not sent in another batch (batch_retries is 3)
    assert [e["kind"] for e in failed(samples(tmp_path / "runs"))] == ["bad_request"] * QUESTIONS
    assert f"bad_request  {QUESTIONS}  first: " in err and "prompt_cache=off" in err


def test_litellms_catch_all_error_is_no_connection_error_unless_the_connection_was_lost() -> None:
    """litellm raises its APIConnectionError for whatever it cannot map, a server's 400 among
    them: only a transport error in its chain makes it a lost connection."""
    import httpx
    import litellm

    from lceval_plugins.backends.api_calls import classify

    refused = litellm.APIConnectionError(message="OpenAIException - Error code: 400 - cache_control not permitted",
                                         llm_provider="openai", model="m")
    assert classify(refused, litellm) == "bad_request"
    unknown = litellm.APIConnectionError(message="OpenAIException - something odd", llm_provider="openai", model="m")
    assert classify(unknown, litellm) == "server"  # retried, but not moved as if its server were gone
    lost = litellm.APIConnectionError(message="OpenAIException - Connection error.", llm_provider="openai", model="m")
    lost.__cause__ = httpx.ConnectError("connection refused")
    assert classify(lost, litellm) == "connection"
