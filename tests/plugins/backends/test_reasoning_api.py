"""Reasoning models behind APIs, through litellm, against our own local servers (127.0.0.1):
an OpenAI-compatible server that returns `reasoning_content` and reasoning-token usage (as
vLLM's and DeepSeek's do), and Anthropic's Messages API with thinking blocks. What is scored
is the answer alone; the reasoning and its tokens are kept; the run's thinking settings reach
the provider in its own terms. And a recorded gpt-oss transcript (harmony channels) replayed."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

from lceval.types import GenerationParams, GenerationRequest, Message

pytest.importorskip("litellm")


class Server:
    """/v1/chat/completions (OpenAI) and /v1/messages (Anthropic), answering from a script."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.bodies.append(body)
                reply = server.anthropic(body) if self.path.endswith("/messages") else server.openai(body)
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @staticmethod
    def openai(body: dict[str, Any]) -> dict[str, Any]:
        return {"id": "c1", "object": "chat.completion", "created": 1, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": "Ana opened it.",
                    "reasoning_content": "The transcript starts with Ana greeting everyone."}}],
                "usage": {"prompt_tokens": 40, "completion_tokens": 19, "total_tokens": 59,
                          "completion_tokens_details": {"reasoning_tokens": 14}}}

    @staticmethod
    def anthropic(body: dict[str, Any]) -> dict[str, Any]:
        return {"id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
                "content": [{"type": "thinking", "thinking": "Who spoke first? Ana.", "signature": "sig"},
                            {"type": "text", "text": "Ana."}],
                "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": 30, "output_tokens": 25}}

    def close(self) -> None:
        self.httpd.shutdown()


@pytest.fixture()
def server() -> Iterator[Server]:
    fake = Server()
    yield fake
    fake.close()


def ask(params: GenerationParams = GenerationParams(max_new_tokens=64)) -> GenerationRequest:
    return GenerationRequest("q1", [Message("user", "Who opened the meeting?")], params)


def cached(backend: Any, tmp_path: Path) -> Any:
    from lceval.engine import Cache, CachedModel

    return CachedModel(backend, Cache(tmp_path / "cache.sqlite"), "api")


def test_an_openai_compatible_server_returns_the_reasoning_apart(server: Server, tmp_path: Path) -> None:
    from lceval_plugins.backends.litellm_api import make_litellm

    backend = make_litellm("openai/deepseek-r1", {"api_base": server.url + "/v1"})
    model = cached(backend, tmp_path)
    (gen,) = model.generate([ask(GenerationParams(max_new_tokens=64, thinking=True))])
    assert gen.text == "Ana opened it." and gen.reasoning == "The transcript starts with Ana greeting everyone."
    assert gen.reasoning_tokens == 14 and gen.completion_tokens == 19
    assert model.usage.reasoning_tokens == 14
    # a server of one's own is told the template switch (vLLM's chat_template_kwargs)
    assert server.bodies[-1]["chat_template_kwargs"] == {"enable_thinking": True}
    (again,) = model.generate([ask(GenerationParams(max_new_tokens=64, thinking=True))])
    assert again.cached and again.reasoning == gen.reasoning  # the cache keeps the reasoning


def test_anthropic_thinking_blocks_and_its_budget(server: Server, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from lceval_plugins.backends.litellm_api import make_litellm

    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    backend = make_litellm("anthropic/claude-sonnet-4-20250514", {"api_base": server.url})
    assert backend.handles_reasoning_budget  # Anthropic's API (here at our address) takes a budget
    (gen,) = cached(backend, tmp_path).generate([ask(GenerationParams(max_new_tokens=64, reasoning_budget=2048))])
    assert gen.text == "Ana." and gen.reasoning == "Who spoke first? Ana."
    body = server.bodies[-1]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] == 64 + 2048  # Anthropic counts the thinking in max_tokens


def test_a_recorded_gpt_oss_transcript_is_split_the_same_way(tmp_path: Path) -> None:
    from lceval_plugins.elitr.replay import make_replay

    from tests.paths import TEST_DATA

    data = json.loads((TEST_DATA / "replay_small.json").read_text())
    q = data["meetings"][0]["questions"][0]
    q["generated-responses"][0]["generated-response"] = (
        "<|channel|>analysis<|message|>The chair is named in the first minute: PERSON2.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>PERSON2 chaired it.<|return|>")
    (tmp_path / "oss_dev.json").write_text(json.dumps(data))
    backend = make_replay(str(tmp_path / "oss_dev.json") + "#ModelA", {})
    request = GenerationRequest("r", [Message("user", "ignored")], GenerationParams(), hints={
        "meeting_id": data["meetings"][0]["id"] if "id" in data["meetings"][0] else "meeting_fixture_001",
        "question_id": "1", "question": q.get("question"), "split": "dev"})
    (gen,) = cached(backend, tmp_path).generate([request])
    assert gen.text == "PERSON2 chaired it." and gen.reasoning == "The chair is named in the first minute: PERSON2."


def test_an_api_model_that_thinks_past_its_tokens_gave_no_answer(server: Server, tmp_path: Path) -> None:
    """OpenAI's reasoning models hide their reasoning: a response cut at max_tokens with reasoning
    tokens and no text is a thinking that never closed, not an empty answer."""
    from lceval_plugins.backends.litellm_api import make_litellm

    server.openai = lambda body: {  # type: ignore[method-assign]
        "id": "c2", "object": "chat.completion", "created": 1, "model": body["model"],
        "choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": ""}}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 64, "total_tokens": 104,
                  "completion_tokens_details": {"reasoning_tokens": 64}}}
    backend = make_litellm("openai/o4-mini", {"api_base": server.url + "/v1"})
    (gen,) = cached(backend, tmp_path).generate([ask(GenerationParams(max_new_tokens=64, reasoning_effort="low"))])
    assert gen.finish_reason == "unclosed_thinking" and gen.reasoning == "" and gen.reasoning_tokens == 64
    assert server.bodies[-1]["reasoning_effort"] == "low"
