"""The litellm backend against a scripted, faulty OpenAI-compatible server on loopback:
retries, Retry-After, failures that stay out of the cache, bounded concurrency, accounting
that never charges twice, and API keys that never reach a file."""

from __future__ import annotations

import importlib.util
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

from lceval.engine import Cache, CachedModel
from lceval.errors import UserError
from lceval.types import GenerationParams, GenerationRequest, Message
from tests.conftest import default_sigint

pytestmark = pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed")

from lceval_plugins.backends.litellm_api import OPTIONS, LiteLLMBackend, make_litellm, register_models  # noqa: E402

SECRET = "sk-secret-123"


class FakeOpenAI:
    """`/v1/chat/completions` answering each item (the last user message) from a script:
    a list of behaviours consumed one per request, then `default` ("ok") forever.

    Behaviours: "ok", "hold" (ok after a pause, to overlap requests), "last" (ok once the
    server has answered `last_after` requests, or after `last_wait_s`), "429", "429ra" (with
    Retry-After: 1), "400", "401", "404", "500", "503", "badjson", "nochoices", "emptychoices",
    "hang" (answers after the client's timeout).

    Counts, not clocks, say what overlapped: `max_inflight` (the most requests in at once) and
    `answered_during[item]` (how many other answers the server sent while `item` was in)."""

    PROMPT_TOKENS, COMPLETION_TOKENS = 10, 3

    def __init__(self, hang_s: float = 1.5, hold_s: float = 0.15, last_wait_s: float = 5.0) -> None:
        self.script: dict[str, list[str]] = {}
        self.hits: dict[str, int] = {}
        self.bodies: list[dict[str, Any]] = []
        self.auth: list[str | None] = []
        self.inflight = self.max_inflight = self.answered = 0
        self.order: list[str] = []  # items in the order they were answered
        self.default = "ok"  # the behaviour once an item's script is used up
        #: answers after which the server "dies": later requests, and those in flight, get
        #: their connection closed with no response (a killed process)
        self.die_after: int | None = None
        #: reported as usage.prompt_tokens_details.cached_tokens (None: no details, as llama.cpp)
        self.cached_tokens: int | None = None
        self.lock = threading.Lock()
        self.answered_changed = threading.Condition(self.lock)
        self.hang_s, self.hold_s, self.last_wait_s = hang_s, hold_s, last_wait_s
        #: how many answers a "last" request waits for
        self.last_after = 0
        #: per item, the answers the server sent to other requests while it was in
        self.answered_during: dict[str, int] = {}
        #: the assistant's text for an item (the last user message)
        self.reply: Any = lambda item: f"answer to {item}"
        self.arrivals: list[float] = []  # time.monotonic() of each request's arrival
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                with fake.lock:
                    fake.inflight += 1
                    fake.max_inflight = max(fake.max_inflight, fake.inflight)
                self.counted = True
                try:
                    fake.handle(self)
                finally:
                    fake.leave(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        body = json.loads(h.rfile.read(int(h.headers["Content-Length"])))
        item = body["messages"][-1]["content"]
        with self.lock:
            self.arrivals.append(time.monotonic())
            answered_before = self.answered
            self.hits[item] = self.hits.get(item, 0) + 1
            self.bodies.append(body)
            self.auth.append(h.headers.get("Authorization"))
            queue = self.script.get(item) or []
            behaviour = queue.pop(0) if queue else self.default
        if behaviour[:3].isdigit():
            # like some APIs, echo what was sent: error texts must be scrubbed before storing
            message = f"scripted {behaviour}, credentials {h.headers.get('Authorization')}"
            data = json.dumps({"error": {"message": message, "type": "x"}}).encode()
            h.send_response(int(behaviour[:3]))
            if behaviour.endswith("ra"):
                h.send_header("Retry-After", "1")
            return self._send(h, data, status_sent=True)
        if behaviour == "hang":
            time.sleep(self.hang_s)
        if behaviour == "hold":
            time.sleep(self.hold_s)
        if behaviour == "last":
            with self.answered_changed:
                self.answered_changed.wait_for(lambda: self.answered >= self.last_after, timeout=self.last_wait_s)
        if self.dead:
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)
            return
        ok = {"id": "x", "object": "chat.completion", "created": 1, "model": body["model"],
              "choices": [{"index": 0, "finish_reason": "stop",
                           "message": {"role": "assistant", "content": self.reply(item)}}],
              "usage": {"prompt_tokens": self.PROMPT_TOKENS, "completion_tokens": self.COMPLETION_TOKENS,
                        "total_tokens": self.PROMPT_TOKENS + self.COMPLETION_TOKENS}}
        if self.cached_tokens is not None:
            ok["usage"]["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
        if behaviour == "nochoices":
            del ok["choices"]
        if behaviour == "emptychoices":
            ok["choices"] = []
        data = b'{"choices": [ oops' if behaviour == "badjson" else json.dumps(ok).encode()
        self._send(h, data)
        with self.lock:
            self.answered_during[item] = self.answered - answered_before
            self.answered += 1
            self.order.append(item)
            self.answered_changed.notify_all()

    @property
    def dead(self) -> bool:
        return self.die_after is not None and self.answered >= self.die_after

    def leave(self, h: BaseHTTPRequestHandler) -> None:
        """The request stops counting as in flight (before its answer is sent: once the client
        has it, its next request may arrive before this thread runs again)."""
        with self.lock:
            if getattr(h, "counted", False):
                h.counted = False  # type: ignore[attr-defined]
                self.inflight -= 1

    def _send(self, h: BaseHTTPRequestHandler, data: bytes, status_sent: bool = False) -> None:
        self.leave(h)
        try:
            if not status_sent:
                h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)
        except OSError:  # the client gave up (timeout): nothing to answer
            pass

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    yield fake
    fake.close()


def backend(server: FakeOpenAI, **options: str) -> LiteLLMBackend:
    """Tiny backoff; `sleeps` records every wait asked for (Retry-After included) while
    really sleeping at most 10 ms, so no test waits on the clock."""
    opts = {"api_base": server.url, "backoff_base": "0.001", "backoff_max": "0.004", "timeout": "0.5",
            **options}
    model = make_litellm("openai/fake", opts)
    model.sleeps = []  # type: ignore[attr-defined]

    def sleep(seconds: float) -> None:
        model.sleeps.append(seconds)  # type: ignore[attr-defined]
        time.sleep(min(seconds, 0.01))

    model.sleep = sleep
    return model


def ask(item: str, params: GenerationParams = GenerationParams(max_new_tokens=8)) -> GenerationRequest:
    return GenerationRequest(request_id=item, messages=[Message("user", item)], params=params)


def test_registers_scheme() -> None:
    got: dict[str, Any] = {}
    register_models(lambda name, factory, options_schema: got.__setitem__(name, (factory, options_schema)))
    assert got == {"litellm": (make_litellm, OPTIONS)}


def test_every_transient_fault_is_retried_and_charged_once(server: FakeOpenAI) -> None:
    server.script = {"a": ["429ra", "ok"], "b": ["429"], "c": ["500"], "d": ["503"], "e": ["badjson"],
                     "f": ["hang"], "g": ["nochoices"], "h": ["emptychoices"], "i": ["500", "503", "429"]}
    model = backend(server, concurrency="3")
    items = list(server.script) + ["plain"]
    gens = model.generate([ask(x) for x in items])
    assert [g.request_id for g in gens] == items
    assert [g.text for g in gens] == [f"answer to {x}" for x in items]
    assert all(g.finish_reason == "stop" for g in gens)
    # a request that succeeded is never sent again: hits = scripted faults + 1
    assert server.hits == {"a": 2, "b": 2, "c": 2, "d": 2, "e": 2, "f": 2, "g": 2, "h": 2, "i": 4, "plain": 1}
    assert [g.extras["attempts"] for g in gens] == [2] * 8 + [4, 1]
    stats = model.stats()
    assert stats["attempts"] == sum(server.hits.values()) == 21
    assert stats["retries"] == 11 and stats["succeeded"] == 10 and stats["failed"] == 0
    assert stats["errors"] == {"malformed": 3, "rate_limit": 3, "server": 4, "timeout": 1}
    # tokens of successful responses only, even though 21 requests were sent
    assert stats["prompt_tokens"] == 10 * FakeOpenAI.PROMPT_TOKENS
    assert stats["completion_tokens"] == 10 * FakeOpenAI.COMPLETION_TOKENS
    assert all(g.prompt_tokens == 10 and g.completion_tokens == 3 for g in gens)
    assert stats["cost_usd"] is None and stats["responses_without_cost"] == 10  # no price known
    # Retry-After: 1 was honoured; every other wait is full jitter under backoff_max
    assert model.sleeps.count(1.0) == 1  # type: ignore[attr-defined]
    assert all(0 <= s <= 0.004 for s in model.sleeps if s != 1.0)  # type: ignore[attr-defined]
    assert len(model.sleeps) == 11  # type: ignore[attr-defined]


def test_failure_past_budget_is_reported_not_cached_and_retried_next_run(server: FakeOpenAI,
                                                                         tmp_path: Path) -> None:
    server.script = {"bad": ["500", "503", "500"]}  # max_retries=2: three attempts, all fail
    cache = Cache(tmp_path / "cache.sqlite")
    try:
        first = CachedModel(backend(server, max_retries="2"), cache, "litellm:openai/fake")
        bad, good = first.generate([ask("bad"), ask("good")])
        assert bad.finish_reason == "error" and bad.text == ""
        assert bad.extras["error"]["kind"] == "server" and bad.extras["error"]["attempts"] == 3
        assert good.text == "answer to good"
        assert first.usage.failed == 1 and first.usage.generated == 1
        stats = first.backend.stats()
        assert stats["failed"] == 1 and stats["failed_by_kind"] == {"server": 1}
        assert stats["prompt_tokens"] == FakeOpenAI.PROMPT_TOKENS  # the failed one cost nothing
        assert cache._db.execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 1

        second = CachedModel(backend(server, max_retries="2"), cache, "litellm:openai/fake")
        bad2, good2 = second.generate([ask("bad"), ask("good")])
        assert bad2.text == "answer to bad" and not bad2.cached
        assert good2.cached and good2.text == "answer to good"
        assert server.hits == {"bad": 4, "good": 1}  # only the failed item was asked again
        assert second.backend.stats()["attempts"] == 1 and second.usage.failed == 0
    finally:
        cache.close()


def test_bad_request_is_not_retried(server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    server.script = {"x": ["400"]}
    model = backend(server)
    [gen] = model.generate([ask("x")])
    assert gen.finish_reason == "error" and gen.extras["error"]["kind"] == "bad_request"
    assert "scripted 400, credentials Bearer ***" in gen.extras["error"]["message"]
    assert SECRET not in json.dumps(gen.extras)
    assert server.hits == {"x": 1}
    assert model.stats()["retries"] == 0 and model.stats()["failed_by_kind"] == {"bad_request": 1}


@pytest.mark.parametrize("status, needle", [("401", "no usable credentials"), ("404", "does not know model")])
def test_auth_and_unknown_model_stop_the_run(server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch,
                                             status: str, needle: str) -> None:
    monkeypatch.setenv("MY_KEY", SECRET)
    server.script = {"x": [status]}
    with pytest.raises(UserError, match=needle) as err:
        backend(server, api_key_env="MY_KEY").generate([ask("x")])
    assert SECRET not in str(err.value)
    assert server.hits == {"x": 1}


def test_missing_key_stops_the_run(server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(UserError, match="no usable credentials.*OPENAI_API_KEY"):
        make_litellm("openai/gpt-4o", {"max_retries": "3"}).generate([ask("x")])  # no api_base: no request
    assert server.hits == {}


def test_a_persistent_pool_streams_with_concurrency_in_flight(server: FakeOpenAI, tmp_path: Path) -> None:
    """`concurrency` requests stay in flight, one per call, and a finished one frees its slot
    at once: eleven quick requests all finish while the slow first one is still out (the server
    holds it until it has answered them; a batch-and-wait pool would hold the next batch until
    the slow one came back, and only two would be answered beside it)."""
    items = [f"q{i}" for i in range(12)]
    server.script = {x: ["hold"] for x in items}
    server.script["q0"] = ["last"]
    server.last_after = 11
    model = backend(server, concurrency="3", timeout="10")
    assert (model.max_in_flight, model.batch_size) == (3, 1)
    sizes: list[int] = []
    original = model.generate

    def spy(requests: list[GenerationRequest]) -> Any:
        sizes.append(len(requests))
        return original(requests)

    model.generate = spy  # type: ignore[method-assign]
    cache = Cache(tmp_path / "cache.sqlite")
    try:
        cached = CachedModel(model, cache, "litellm:openai/fake")
        gens = cached.generate([ask(x) for x in items])
    finally:
        cache.close()
    assert [g.text for g in gens] == [f"answer to {x}" for x in items]  # in the order asked
    assert sizes == [1] * 12
    assert server.max_inflight == 3  # parallel, and never more than asked
    assert server.order[-1] == "q0"
    # the eleven others were answered while q0 was out: they overlapped it, each of them
    assert server.answered_during["q0"] == 11
    usage = cached.usage
    # the usage counters saw the overlap too: three at the backend at once, twelve generated
    assert usage.peak_in_flight == 3 and usage.generated == 12


def test_sampling_parameters_reach_the_server(server: FakeOpenAI) -> None:
    params = GenerationParams(max_new_tokens=7, temperature=0.6, top_p=0.9, seed=5, stop=("###",))
    backend(server).generate([ask("p", params)])
    body = server.bodies[-1]
    assert (body["max_tokens"], body["temperature"], body["top_p"], body["seed"], body["stop"]) == \
        (7, 0.6, 0.9, 5, ["###"])
    assert "repeat_penalty" not in body and "repetition_penalty" not in body
    model = backend(server)
    model.generate([ask("p", GenerationParams(max_new_tokens=7))])
    assert "top_p" not in server.bodies[-1] and "stop" not in server.bodies[-1]  # defaults left out
    # ... and the manifest says so: the server's own defaults applied to those
    assert model.stats()["sampling"] == {
        "sent": {"max_new_tokens": [7], "seed": [0], "temperature": [0.0]},
        "left_to_server_default": {"repeat_penalty": [1.0], "top_p": [1.0]}}


def test_explicit_sampling_sends_neutral_values_so_no_server_default_applies(server: FakeOpenAI) -> None:
    """llama.cpp's server applies repeat_penalty 1.1 and top_p 0.95 when none is sent."""
    model = backend(server, explicit_sampling="true")
    model.generate([ask("p", GenerationParams(max_new_tokens=7))])
    body = server.bodies[-1]
    assert body["top_p"] == 1.0 and body["repeat_penalty"] == 1.0
    assert model.stats()["sampling"]["left_to_server_default"] == {}
    assert model.identity()["explicit_sampling"] is True  # other outputs, other cache keys
    named = backend(server, repeat_penalty_field="repetition_penalty")
    named.generate([ask("p", GenerationParams(max_new_tokens=7))])
    assert server.bodies[-1]["repetition_penalty"] == 1.0  # named: sent at 1.0 too
    assert named.stats()["sampling"]["left_to_server_default"] == {"top_p": [1.0]}


def test_prefill_comes_from_the_cached_tokens_the_server_reports(server: FakeOpenAI) -> None:
    model = backend(server)
    [unknown] = model.generate([ask("a")])
    assert unknown.prompt_tokens == FakeOpenAI.PROMPT_TOKENS and unknown.prefilled_tokens is None
    server.cached_tokens = 8
    [known] = model.generate([ask("b")])
    assert known.prefilled_tokens == FakeOpenAI.PROMPT_TOKENS - 8
    stats = model.stats()
    assert stats["cached_prompt_tokens"] == 8 and stats["responses_without_cached_tokens"] == 1


def test_repeat_penalty_is_refused_unless_mapped(server: FakeOpenAI) -> None:
    params = GenerationParams(max_new_tokens=4, repeat_penalty=1.1)
    with pytest.raises(UserError, match="repeat_penalty_field"):
        backend(server).generate([ask("r", params)])
    assert server.hits == {}
    backend(server, repeat_penalty_field="repetition_penalty").generate([ask("r", params)])
    assert server.bodies[-1]["repetition_penalty"] == 1.1


def test_cost_from_per_million_token_prices(server: FakeOpenAI) -> None:
    model = backend(server, input_cost_per_mtok="2.5", output_cost_per_mtok="10")
    gens = model.generate([ask("a"), ask("b")])
    each = (10 * 2.5 + 3 * 10) / 1e6
    assert all(g.extras["cost_usd"] == pytest.approx(each) for g in gens)
    assert model.stats()["cost_usd"] == pytest.approx(2 * each)


def test_cost_from_litellms_price_map_when_the_model_is_known(server: FakeOpenAI) -> None:
    from lceval_plugins.backends.litellm_api import import_litellm

    prices = import_litellm().model_cost["gpt-4o-mini"]  # the bundled map: no network
    model = make_litellm("openai/gpt-4o-mini", {"api_base": server.url})
    model.generate([ask("a"), ask("b")])
    each = 10 * prices["input_cost_per_token"] + 3 * prices["output_cost_per_token"]
    assert each > 0 and model.stats()["cost_usd"] == pytest.approx(2 * each)
    assert model.stats()["responses_without_cost"] == 0


def test_key_comes_from_the_named_environment_variable(server: FakeOpenAI,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", SECRET)
    model = backend(server, api_key_env="MY_KEY")
    model.generate([ask("k")])
    assert server.auth == [f"Bearer {SECRET}"]
    assert SECRET not in json.dumps(model.identity()) and SECRET not in json.dumps(model.stats())
    monkeypatch.delenv("MY_KEY")
    with pytest.raises(UserError, match="MY_KEY"):
        backend(server, api_key_env="MY_KEY").generate([ask("k")])


def test_identity_names_model_and_base_only(server: FakeOpenAI) -> None:
    ident = backend(server, concurrency="2", timeout="9", context_window="4096").identity()
    assert ident == {"scheme": "litellm", "model": "openai/fake", "api_base": server.url}
    assert make_litellm("openai/gpt-4o", {}).identity()["api_base"] is None


@pytest.mark.parametrize("options, pattern", [
    ({"api_key": SECRET}, "never takes a secret"),
    ({"api_base": f"http://user:{SECRET}@host:1/v1"}, "without user:password"),
    ({"api_base": f"http://host/v1?token={SECRET}"}, "without user:password"),
    ({"api_base": "ftp://host"}, "http\\(s\\) URL"),
    ({"concurrency": "0"}, "concurrency=0: 0 is less than the minimum of 1"),
    ({"max_retries": "-1"}, "max_retries=-1: -1 is less than the minimum of 0"),
    ({"api_key_env": "sk-abc"}, "NAME of an environment variable"),
    ({"temperature": "1"}, "backend 'litellm' has no option 'temperature'"),
    ({"tokenizer": "gpt2"}, "llamacpp:GGUF .* or hf:NAME_OR_FOLDER"),
])
def test_bad_options(options: dict[str, str], pattern: str) -> None:
    with pytest.raises(UserError, match=pattern) as err:
        make_litellm("openai/fake", options)
    assert SECRET not in str(err.value)


def test_unknown_provider_is_a_user_error() -> None:
    with pytest.raises(UserError, match="provider of model 'nonsense-model-xyz'"):
        make_litellm("nonsense-model-xyz", {}).generate([ask("x")])


def test_engine_run_keeps_the_key_out_of_every_file(server: FakeOpenAI, tiny_home: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """`lceval run` with OPENAI_API_KEY set: the key is sent, and found in no output or cache byte."""
    import os

    from lceval.cli import main

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    server.script = {}
    out = tmp_path / "runs"
    code = main(["run", "--tasks", "elitr_qa", "--model", f"litellm:openai/fake,api_base={server.url}",
                 "--data-home", str(tiny_home), "--output", str(out), "--no-progress"])
    assert code == 0
    assert len(server.auth) == 7 and set(server.auth) == {f"Bearer {SECRET}"}
    (run_dir,) = [p for p in out.iterdir() if not p.name.startswith(".")]
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 7 and all(s["response"].startswith("answer to ") for s in samples)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["usage"]["generated"] == 7 and manifest["usage"]["failed"] == 0
    assert manifest["resolved"]["model_identity"] == {"scheme": "litellm", "model": "openai/fake",
                                                      "api_base": server.url}
    api = manifest["backend_stats"]["model"]
    assert api["attempts"] == 7 and api["prompt_tokens"] == 7 * FakeOpenAI.PROMPT_TOKENS
    cache = Path(os.environ["LCEVAL_CACHE"])
    files = [p for p in run_dir.rglob("*") if p.is_file()] + [
        p for p in cache.parent.iterdir() if p.name.startswith(cache.name)]
    assert cache in files and len(files) >= 4
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), path


def test_ctrl_c_exits_at_once_with_requests_in_flight(tiny_home: Path, tmp_path: Path) -> None:
    """Ctrl-C must not wait for in-flight API calls to time out: the workers are daemons."""
    import os
    import signal
    import subprocess
    import sys

    fake = FakeOpenAI(hang_s=600.0)  # every request hangs far longer than the test waits for the exit
    try:
        fake.default = "hang"
        cmd = [sys.executable, "-m", "lceval", "run", "--tasks", "elitr_qa", "--split", "dev", "--limit", "2",
               # both questions share a meeting: with no prefix cache declared, both go out at once
               "--model", f"litellm:openai/fake,api_base={fake.url},timeout=900,concurrency=2,prefix_cache=none",
               "--data-home", str(tiny_home), "--output", str(tmp_path / "runs"), "--no-progress"]
        proc = subprocess.Popen(cmd, env={**os.environ, "OPENAI_API_KEY": "x"}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                preexec_fn=default_sigint)
        deadline = time.monotonic() + 120
        while sum(fake.hits.values()) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert sum(fake.hits.values()) == 2, proc.communicate(timeout=30)
        proc.send_signal(signal.SIGINT)
        # "at once": long before the requests' 600 s, with room for a loaded machine's interpreter exit
        _, err = proc.communicate(timeout=90)
        assert proc.returncode == 130, err
        assert fake.answered == 0  # it left while both requests were still in flight
    finally:
        fake.close()
