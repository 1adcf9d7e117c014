"""One server on loopback (127.0.0.1 only) that answers as each provider's reasoning API does,
from their documented request and response shapes, and refuses what each refuses, so a test
sees the request lceval really sent and what lceval makes of the provider's own answer:

- OpenAI chat completions for o-series and GPT-5 (`POST /v1/chat/completions`): takes
  `max_completion_tokens` and `reasoning_effort`, refuses `max_tokens`, a temperature other
  than 1 and `top_p` (400, OpenAI's error body); the reasoning is hidden, only
  `usage.completion_tokens_details.reasoning_tokens` says it;
- OpenAI's Responses API (`POST /v1/responses`): `max_output_tokens`, `reasoning.effort`; a
  reasoning item then a message in `output`, `usage.output_tokens_details.reasoning_tokens`;
  a cut answer is `status: incomplete` with `incomplete_details.reason: max_output_tokens`;
- DeepSeek (`/v1/chat/completions`, model `deepseek-*`): `thinking: {type}`,
  `reasoning_content` apart, reasoning tokens in the usage;
- Anthropic's Messages (`POST /v1/messages`): `thinking: {type: enabled, budget_tokens}` with
  `budget_tokens >= 1024` and below `max_tokens`, no temperature but 1 while thinking, top_p
  only from 0.95; thinking blocks then a text block; `usage.output_tokens` holds the thinking;
- Gemini (`POST .../models/MODEL:generateContent`): `generationConfig.thinkingConfig`
  (`thinkingBudget`, 0 is off; `includeThoughts` returns `thought: true` parts), thoughts
  inside `maxOutputTokens`, `usageMetadata.thoughtsTokenCount`;
- a vLLM or SGLang server (`/v1/chat/completions`, any other model): with a reasoning parser
  the thinking comes as `reasoning_content`; without one it stays in `content` between
  `<think>` and `</think>` (and vLLM still counts reasoning tokens); `chat_template_kwargs`
  switches the thinking.

Every model thinks `THOUGHT` tokens then answers in `ANSWER` tokens; when its token limit
leaves less than that, the thinking is cut and no answer comes (`finish_reason: length`).
`requests` holds every (path, body) received; `answer(question)` gives the answer text.

`fail(status, message)` makes the server refuse requests as the provider would, with the
provider's error body for that status (OpenAI's `{"error": {message, type, code}}`, Anthropic's
`{"type": "error", "error": {type, message}}`, Gemini's `{"error": {code, status, message}}`):
400 (a request the provider refuses), 401, 404, 429, 500, and `CONTENT_FILTER` (Azure
OpenAI's 400 with `code: content_filter`).

With a `ledger` (tests/provider_caches.py), Anthropic's, OpenAI's (`gpt-4.1`) and Gemini's
answers count their prompt's tokens from its text and cache and charge them as each provider
documents (breakpoints, the automatic caches), and Anthropic's `/v1/messages/count_tokens` and
Gemini's `:countTokens` count a prompt the same way; without one, every prompt is `PROMPT`
tokens and there is no token count (404).
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from tests.provider_caches import CacheLedger, Refusal

PROMPT, THOUGHT, ANSWER = 100, 1000, 5
#: the thinking of a question in `ProviderServer.long`: longer than any token limit a run gives
LONG = 10**7
THINKING = "The transcript names who spoke; I check each line in turn."
EFFORTS = ("minimal", "low", "medium", "high")
#: `fail(CONTENT_FILTER)`: Azure OpenAI's refusal of a prompt its content filter flagged
CONTENT_FILTER = 4001
#: status -> (OpenAI's error type, Anthropic's error type, Gemini's status), as each documents them
ERROR_TYPES = {
    400: ("invalid_request_error", "invalid_request_error", "INVALID_ARGUMENT"),
    401: ("invalid_request_error", "authentication_error", "UNAUTHENTICATED"),
    404: ("invalid_request_error", "not_found_error", "NOT_FOUND"),
    429: ("requests", "rate_limit_error", "RESOURCE_EXHAUSTED"),
    500: ("server_error", "api_error", "INTERNAL"),
}


class Refused(Exception):
    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(json.dumps(body))
        self.body = body


def _openai_error(message: str, param: str | None = None) -> Refused:
    return Refused({"error": {"message": message, "type": "invalid_request_error", "param": param, "code": None}})


class ProviderServer:
    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.answer: Callable[[str], str] = lambda question: "[PERSON1]"
        #: questions (substrings) that take `long_thought` tokens of thinking (by default more
        #: than any token limit a run gives: cut, never answered)
        self.long: set[str] = set()
        self.long_thought = LONG
        #: a vLLM or SGLang server started with a reasoning parser (the thinking apart)
        self.parser = True
        #: the server's kind for other models: "vllm" (counts reasoning tokens even without a
        #: parser, returns the thinking as `reasoning_content`) or "sglang"
        self.kind = "vllm"
        #: what a model without a reasoning parser writes around its thinking (its template's
        #: markers: gpt-oss writes harmony channels) and before its answer
        self.markers = ("<think>\n", "\n</think>\n\n")
        #: a model that never thinks, whatever the request says
        self.silent = False
        #: the providers' prompt caches and their charges (None: every prompt is PROMPT tokens)
        self.ledger: CacheLedger | None = None
        #: False: the token-count endpoints are not there (404)
        self.counting = True
        #: refusals to answer with, one per request in turn, then `failing` for every request
        self.failures: list[tuple[int, str]] = []
        self.failing: tuple[int, str] | None = None
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                with server.lock:
                    server.requests.append((self.path, body))
                status, reply = server.refusal(self.path) or server.route(self.path, body)
                data = json.dumps(reply).encode()
                self.send_response(status)
                if status == 429:
                    self.send_header("Retry-After", "0")  # asked again at once: no test waits
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.root = f"http://127.0.0.1:{self.http.server_address[1]}"
        self.url = self.root + "/v1"
        # a short poll: shutdown() waits for it (every test closes a server)
        threading.Thread(target=self.http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()

    def bodies(self, path: str) -> list[dict[str, Any]]:
        with self.lock:
            return [body for p, body in self.requests if p.endswith(path)]

    def fail(self, status: int, message: str, times: int | None = None) -> None:
        """Refuse the next `times` requests (None: every request from now on) with `status`
        (400, 401, 404, 429, 500 or CONTENT_FILTER) and `message`, as the provider would."""
        with self.lock:
            if times is None:
                self.failing = (status, message)
            else:
                self.failures.extend([(status, message)] * times)

    def refusal(self, path: str) -> tuple[int, dict[str, Any]] | None:
        with self.lock:
            chosen = self.failures.pop(0) if self.failures else self.failing
        if chosen is None:
            return None
        status, message = chosen
        if status == CONTENT_FILTER:  # Azure OpenAI's shape (https://learn.microsoft.com/azure/ai-services/openai/concepts/content-filter)
            return 400, {"error": {"message": message, "type": None, "param": "prompt", "code": "content_filter",
                                   "status": 400}}
        openai, anthropic, gemini = ERROR_TYPES[status]
        if path.endswith("/messages"):
            return status, {"type": "error", "error": {"type": anthropic, "message": message}}
        if path.endswith(":generateContent"):
            return status, {"error": {"code": status, "message": message, "status": gemini}}
        code = {401: "invalid_api_key", 404: "model_not_found", 429: "rate_limit_exceeded"}.get(status)
        return status, {"error": {"message": message, "type": openai, "param": None, "code": code}}

    # -- routing ---------------------------------------------------------------------------
    def route(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        try:
            if path.endswith(":countTokens") and self.ledger is not None and self.counting:
                return 200, self.ledger.count_gemini(body)
            if path.endswith("/messages/count_tokens") and self.ledger is not None and self.counting:
                return 200, self.ledger.count_anthropic(body)
            if path.endswith(":generateContent"):
                return 200, self.gemini(path, body)
            if path.endswith("/messages"):
                return 200, self.messages(body)
            if path.endswith("/responses"):
                return 200, self.responses(body)
            if path.endswith("/chat/completions"):
                model = str(body.get("model"))
                if model.startswith("deepseek"):
                    return 200, self.deepseek(body)
                if re.match(r"^(o\d|gpt-5)", model):
                    return 200, self.openai_reasoning(body)
                if self.ledger is not None and model.startswith("gpt-4"):
                    return 200, self.openai_chat(body)
                return 200, self.own_server(body)
        except Refused as exc:
            return 400, exc.body
        except Refusal as exc:  # the prompt cache's own rules, in the provider's error body
            error = {"type": "invalid_request_error", "message": str(exc)}
            return 400, ({"type": "error", "error": error} if path.endswith("/messages") else {"error": error})
        return 404, {"error": {"message": f"no route {path}"}}

    @staticmethod
    def _question(messages: list[dict[str, Any]]) -> str:
        for m in reversed(messages):
            if m.get("role") == "user":
                content = m.get("content")
                if isinstance(content, list):  # Gemini's and the Responses API's parts
                    return " ".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
                return str(content)
        return ""

    def _reply(self, limit: int, question: str) -> tuple[bool, int, int]:
        """(answered, completion tokens, thinking tokens): the thinking then the answer when the
        token limit holds both, else the thinking cut at the limit and no answer."""
        thought = self.long_thought if any(q in question for q in self.long) else THOUGHT
        if limit >= thought + ANSWER:
            return True, thought + ANSWER, thought
        return False, limit, limit

    # -- OpenAI's reasoning models -----------------------------------------------------------
    def openai_reasoning(self, body: dict[str, Any]) -> dict[str, Any]:
        if "max_tokens" in body:
            raise _openai_error("Unsupported parameter: 'max_tokens' is not supported with this model. "
                                "Use 'max_completion_tokens' instead.", "max_tokens")
        if body.get("temperature", 1) != 1:
            raise _openai_error("Unsupported value: 'temperature' does not support 0 with this model. Only the "
                                "default (1) value is supported.", "temperature")
        if "top_p" in body:
            raise _openai_error("Unsupported parameter: 'top_p' is not supported with this model.", "top_p")
        if body.get("reasoning_effort", "medium") not in EFFORTS:
            raise _openai_error("Invalid value for 'reasoning_effort'.", "reasoning_effort")
        limit = int(body.get("max_completion_tokens") or 10**9)
        answered, completion, thought = self._reply(limit, self._question(body["messages"]))
        message = {"role": "assistant", "content": self.answer(self._question(body["messages"])) if answered else ""}
        return self._chat(body, message, answered, completion, thought)

    @staticmethod
    def _chat(body: dict[str, Any], message: dict[str, Any], answered: bool, completion: int,
              reasoning: int | None) -> dict[str, Any]:
        usage: dict[str, Any] = {"prompt_tokens": PROMPT, "completion_tokens": completion,
                                 "total_tokens": PROMPT + completion}
        if reasoning is not None:
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": body.get("model"),
                "choices": [{"index": 0, "finish_reason": "stop" if answered else "length", "message": message}],
                "usage": usage}

    # -- OpenAI's Responses API -----------------------------------------------------------------
    def responses(self, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("temperature", 1) != 1:
            raise _openai_error("Unsupported parameter: 'temperature' is not supported with this model.", "temperature")
        effort = (body.get("reasoning") or {}).get("effort", "medium")
        if effort not in EFFORTS:
            raise _openai_error("Invalid value for 'reasoning.effort'.", "reasoning.effort")
        given = body.get("input")
        question = given if isinstance(given, str) else self._question(
            [{"role": m.get("role"), "content": m.get("content")} for m in given or [] if isinstance(m, dict)])
        limit = int(body.get("max_output_tokens") or 10**9)
        answered, completion, thought = self._reply(limit, question)
        output: list[dict[str, Any]] = [{"type": "reasoning", "id": "rs_1", "summary": []}]
        if answered:
            output.append({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                           "content": [{"type": "output_text", "text": self.answer(question), "annotations": []}]})
        return {"id": "resp_1", "object": "response", "created_at": 1, "model": body.get("model"),
                "status": "completed" if answered else "incomplete",
                "incomplete_details": None if answered else {"reason": "max_output_tokens"},
                "output": output,
                "usage": {"input_tokens": PROMPT, "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens": completion,
                          "output_tokens_details": {"reasoning_tokens": thought},
                          "total_tokens": PROMPT + completion}}

    # -- OpenAI's chat models, with the automatic prompt cache (a ledger) ----------------------
    def openai_chat(self, body: dict[str, Any]) -> dict[str, Any]:
        assert self.ledger is not None
        question = self._question(body["messages"])
        reply = self._chat(body, {"role": "assistant", "content": self.answer(question)}, True, ANSWER, None)
        reply["usage"] = self.ledger.openai(str(body["model"]), body, ANSWER)
        return reply

    # -- DeepSeek --------------------------------------------------------------------------------
    def deepseek(self, body: dict[str, Any]) -> dict[str, Any]:
        thinking = (body.get("thinking") or {}).get("type", "enabled")
        if thinking not in ("enabled", "disabled"):
            raise _openai_error("thinking.type must be enabled or disabled", "thinking")
        question = self._question(body["messages"])
        if thinking == "disabled":
            return self._chat(body, {"role": "assistant", "content": self.answer(question)}, True, ANSWER, None)
        answered, completion, thought = self._reply(int(body.get("max_tokens") or 10**9), question)
        message = {"role": "assistant", "content": self.answer(question) if answered else "",
                   "reasoning_content": THINKING}
        return self._chat(body, message, answered, completion, thought)

    # -- a vLLM or SGLang server -------------------------------------------------------------------
    def own_server(self, body: dict[str, Any]) -> dict[str, Any]:
        question = self._question(body["messages"])
        switch = body.get("chat_template_kwargs") or {}
        if switch.get("enable_thinking") is False or self.silent:
            return self._chat(body, {"role": "assistant", "content": self.answer(question)}, True, ANSWER, None)
        answered, completion, thought = self._reply(int(body.get("max_tokens") or 10**9), question)
        answer = self.answer(question) if answered else ""
        if self.parser:
            message = {"role": "assistant", "content": answer, "reasoning_content": THINKING}
        else:  # the template's markers in the text; a cut thinking never closes
            opened, closed = self.markers
            message = {"role": "assistant",
                       "content": f"{opened}{THINKING}{closed}{answer}" if answered else f"{opened}{THINKING}"}
        counted = thought if self.kind == "vllm" else None
        return self._chat(body, message, answered, completion, counted)

    # -- Anthropic's Messages --------------------------------------------------------------------
    def messages(self, body: dict[str, Any]) -> dict[str, Any]:
        thinking = body.get("thinking") or {"type": "disabled"}
        limit = int(body["max_tokens"])
        def refuse(message: str) -> Refused:
            return Refused({"type": "error", "error": {"type": "invalid_request_error", "message": message}})
        if thinking.get("type") == "enabled":
            budget = int(thinking.get("budget_tokens") or 0)
            if budget < 1024:
                raise refuse("thinking.budget_tokens: Input should be greater than or equal to 1024")
            if budget >= limit:
                raise refuse("`max_tokens` must be greater than `thinking.budget_tokens`")
            if body.get("temperature", 1) != 1:
                raise refuse("`temperature` may only be set to 1 when thinking is enabled")
            if body.get("top_p", 1) < 0.95:
                raise refuse("`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled")
        elif thinking.get("type") != "disabled":
            raise refuse("thinking.type: Input should be 'enabled' or 'disabled'")
        question = self._question(body["messages"])
        thinks = thinking.get("type") == "enabled"
        answered, completion, _ = self._reply(limit, question) if thinks else (True, ANSWER, 0)
        content: list[dict[str, Any]] = [{"type": "thinking", "thinking": THINKING, "signature": "sig"}] if thinks else []
        if answered:
            content.append({"type": "text", "text": self.answer(question)})
        usage = ({"input_tokens": PROMPT, "output_tokens": completion} if self.ledger is None
                 else self.ledger.anthropic(str(body.get("model")), body, completion))
        return {"id": "msg_1", "type": "message", "role": "assistant", "model": body.get("model"), "content": content,
                "stop_reason": "end_turn" if answered else "max_tokens", "stop_sequence": None, "usage": usage}

    # -- Gemini -----------------------------------------------------------------------------------
    def gemini(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        config = body.get("generationConfig") or {}
        thinking = config.get("thinkingConfig") or {}
        budget = thinking.get("thinkingBudget")
        if budget is not None and not (budget == 0 or 128 <= budget <= 32768):
            raise Refused({"error": {"code": 400, "status": "INVALID_ARGUMENT",
                                     "message": "The thinking budget is out of range."}})
        contents = body.get("contents") or []
        question = self._question([{"role": c.get("role"), "content": c.get("parts")} for c in contents])
        limit = int(config.get("max_output_tokens") or config.get("maxOutputTokens") or 10**9)
        thinks = budget != 0
        answered, completion, thoughts = self._reply(limit, question) if thinks else (True, ANSWER, 0)
        parts: list[dict[str, Any]] = []
        if thinks and thinking.get("includeThoughts"):
            parts.append({"text": THINKING, "thought": True})
        if answered:
            parts.append({"text": self.answer(question)})
        usage = {"promptTokenCount": PROMPT, "candidatesTokenCount": completion - thoughts,
                 "totalTokenCount": PROMPT + completion}
        if self.ledger is not None:  # the prompt's tokens counted, cached and charged
            usage.update(self.ledger.gemini(path.rsplit("/", 1)[-1].split(":")[0], body, completion))
            usage["totalTokenCount"] = usage["promptTokenCount"] + completion
        if thoughts:
            usage["thoughtsTokenCount"] = thoughts
        return {"candidates": [{"content": {"role": "model", "parts": parts},
                                "finishReason": "STOP" if answered else "MAX_TOKENS", "index": 0}],
                "usageMetadata": usage, "modelVersion": path.rsplit("/", 1)[-1].split(":")[0]}
