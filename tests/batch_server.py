"""Our own batch server on loopback (127.0.0.1 only) speaking both batch protocols the
`litellm:` backend uses with `--batch`, with what each request was charged counted:

- OpenAI's: `POST /v1/files` (multipart, purpose batch), `POST /v1/batches`, `GET
  /v1/batches[/{id}]`, `POST /v1/batches/{id}/cancel`, `GET /v1/files/{id}/content`;
- Anthropic's: `POST /v1/messages/batches`, `GET /v1/messages/batches[/{id}]`,
  `POST .../{id}/cancel`, `GET .../{id}/results`;
- and `POST /v1/chat/completions`, so a test can see that nothing went around the batches.

A batch is "in_progress" while `hold` is set (a test's way to kill a run between submit and
results), and ends at the first poll after that. How each request ends is scripted by its
last user message: `fail` (the provider fails it `fails` times, then answers: a 500),
`refuse` (the provider refuses it: a 400, its prompt-cache mark not permitted), `expire` (the
batch expires without it, once). `charged[custom_id]` counts the answers the server billed:
a request paid twice shows 2.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

#: what the server says of a request it refuses (`refuse`)
REFUSAL = "messages.0.content.0.cache_control: Extra inputs are not permitted"

PROMPT_TOKENS, COMPLETION_TOKENS = 100, 10


class BatchServer:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}  # id -> {"kind", "requests", "state", ...}
        self.charged: dict[str, int] = {}
        self.submitted: list[str] = []  # custom ids, once per submission
        self.direct = 0  # chat completions asked outside any batch
        self.hold = threading.Event()
        self.polls = 0
        #: item text -> how it ends: "fail" or "expire" (consumed), else answered
        self.script: dict[str, list[str]] = {}
        #: how every item the script does not name ends ("refuse": each is refused)
        self.every = "ok"
        #: how the next batch creations go wrong, one per creation: "refuse" (HTTP 500, no batch
        #: made) or "lose" (the batch is made, but the answer is an HTTP 500: the client cannot
        #: tell it was taken)
        self.create_faults: list[str] = []
        #: the answer to an item (the last user message)
        self.reply: Callable[[str], str] = lambda item: f"answer to {item[-40:]}"
        #: the providers' prompt caches and their charges (tests/provider_caches.py); None: every
        #: prompt is PROMPT_TOKENS tokens
        self.ledger: Any = None
        #: a batch's lines processed at once, as a provider may: none of them sees the cache
        #: entries another line of the same batch writes (each writes its context again)
        self.at_once = False
        self._before: dict[str, Any] | None = None
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server.route(self, "GET")

            def do_POST(self) -> None:
                server.route(self, "POST")

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/v1"
        self.root = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()

    # -- what tests read -----------------------------------------------------------------
    def paid_twice(self) -> list[str]:
        with self.lock:
            return [cid for cid, n in self.charged.items() if n > 1]

    def batch_count(self) -> int:
        with self.lock:
            return len(self.batches)

    # -- routing ---------------------------------------------------------------------------
    def route(self, h: BaseHTTPRequestHandler, method: str) -> None:
        path = h.path.split("?")[0]
        body = h.rfile.read(int(h.headers.get("Content-Length") or 0)) if method == "POST" else b""
        routes = [
            ("POST", r"/v1/files", self.upload), ("GET", r"/v1/files/([^/]+)/content", self.content),
            ("POST", r"/v1/batches", self.openai_create), ("GET", r"/v1/batches", self.openai_list),
            ("GET", r"/v1/batches/([^/]+)", self.openai_get), ("POST", r"/v1/batches/([^/]+)/cancel", self.cancel),
            ("POST", r"/v1/messages/batches", self.anthropic_create),
            ("GET", r"/v1/messages/batches", self.anthropic_list),
            ("GET", r"/v1/messages/batches/([^/]+)", self.anthropic_get),
            ("GET", r"/v1/messages/batches/([^/]+)/results", self.anthropic_results),
            ("POST", r"/v1/messages/batches/([^/]+)/cancel", self.cancel),
            ("POST", r"/v1/chat/completions", self.chat),
            ("POST", r"/v1/messages/count_tokens", self.count_tokens),
        ]
        for verb, pattern, handler in routes:
            match = re.fullmatch(pattern, path)
            if verb == method and match:
                status, payload, raw = handler(h, body, *match.groups())
                data = raw if raw is not None else json.dumps(payload).encode()
                h.send_response(status)
                h.send_header("Content-Type", "application/json")
                h.send_header("Content-Length", str(len(data)))
                h.end_headers()
                h.wfile.write(data)
                return
        h.send_response(404)
        h.send_header("Content-Length", "0")
        h.end_headers()

    def count_tokens(self, h: Any, body: bytes) -> tuple[int, Any, Any]:
        """Anthropic's token count, as the ledger counts a prompt (none without a ledger: 404)."""
        if self.ledger is None:
            return 404, {"type": "error", "error": {"type": "not_found_error", "message": "no token count"}}, None
        return 200, self.ledger.count_anthropic(json.loads(body)), None

    # -- OpenAI --------------------------------------------------------------------------
    def upload(self, h: Any, body: bytes) -> tuple[int, Any, Any]:
        boundary = h.headers["Content-Type"].split("boundary=")[1].encode()
        content = next(part for part in body.split(b"--" + boundary) if b'name="file"' in part)
        data = content.split(b"\r\n\r\n", 1)[1].rsplit(b"\r\n", 1)[0]
        fid = f"file-{uuid.uuid4().hex[:12]}"
        with self.lock:
            self.files[fid] = data
        return 200, {"id": fid, "object": "file", "purpose": "batch"}, None

    def content(self, h: Any, body: bytes, fid: str) -> tuple[int, Any, Any]:
        with self.lock:
            return (200, None, self.files[fid]) if fid in self.files else (404, {"error": {"message": "no file"}}, None)

    def _fault(self) -> str | None:
        with self.lock:
            return self.create_faults.pop(0) if self.create_faults else None

    def openai_create(self, h: Any, body: bytes) -> tuple[int, Any, Any]:
        fault = self._fault()
        if fault == "refuse":
            return 500, {"error": {"message": "scripted refusal"}}, None
        spec = json.loads(body)
        with self.lock:
            lines = [json.loads(x) for x in self.files[spec["input_file_id"]].decode().splitlines() if x.strip()]
        requests = {line["custom_id"]: line["body"] for line in lines}
        bid = f"batch_{uuid.uuid4().hex[:12]}"
        with self.lock:
            self.batches[bid] = {"kind": "openai", "requests": requests, "state": "in_progress",
                                 "metadata": spec.get("metadata") or {}, "created": time.time(),
                                 "input_file_id": spec["input_file_id"]}
            self.submitted += list(requests)
        if fault == "lose":
            return 500, {"error": {"message": "scripted lost answer"}}, None
        return 200, self._openai_view(bid), None

    def openai_list(self, h: Any, body: bytes) -> tuple[int, Any, Any]:
        with self.lock:
            ids = [b for b in sorted(self.batches, key=lambda b: -self.batches[b]["created"])
                   if self.batches[b]["kind"] == "openai"]
        return 200, {"data": [self._openai_view(b) for b in ids], "has_more": False}, None

    def openai_get(self, h: Any, body: bytes, bid: str) -> tuple[int, Any, Any]:
        if bid not in self.batches:
            return 404, {"error": {"message": "no batch"}}, None
        self._advance(bid)
        return 200, self._openai_view(bid), None

    def _openai_view(self, bid: str) -> dict[str, Any]:
        b = self.batches[bid]
        view = {"id": bid, "object": "batch", "status": b["state"], "metadata": b["metadata"],
                "created_at": int(b["created"]), "input_file_id": b["input_file_id"],
                "output_file_id": b.get("output"), "error_file_id": b.get("errors"),
                "request_counts": {"total": len(b["requests"])}}
        return view

    # -- Anthropic ---------------------------------------------------------------------------
    def anthropic_create(self, h: Any, body: bytes) -> tuple[int, Any, Any]:
        fault = self._fault()
        if fault == "refuse":
            return 500, {"error": {"type": "api_error", "message": "scripted refusal"}}, None
        spec = json.loads(body)
        requests = {r["custom_id"]: r["params"] for r in spec["requests"]}
        bid = f"msgbatch_{uuid.uuid4().hex[:12]}"
        with self.lock:
            self.batches[bid] = {"kind": "anthropic", "requests": requests, "state": "in_progress",
                                 "created": time.time()}
            self.submitted += list(requests)
        if fault == "lose":
            return 500, {"error": {"type": "api_error", "message": "scripted lost answer"}}, None
        return 200, self._anthropic_view(bid), None

    def anthropic_list(self, h: Any, body: bytes) -> tuple[int, Any, Any]:
        with self.lock:
            ids = [b for b in sorted(self.batches, key=lambda b: -self.batches[b]["created"])
                   if self.batches[b]["kind"] == "anthropic"]
        return 200, {"data": [self._anthropic_view(b) for b in ids], "has_more": False}, None

    def anthropic_get(self, h: Any, body: bytes, bid: str) -> tuple[int, Any, Any]:
        if bid not in self.batches:
            return 404, {"error": {"type": "not_found_error", "message": "no batch"}}, None
        self._advance(bid)
        return 200, self._anthropic_view(bid), None

    def _anthropic_view(self, bid: str) -> dict[str, Any]:
        b = self.batches[bid]
        ended = b["state"] != "in_progress"
        created = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(b["created"])) + f".{int(b['created'] % 1 * 1e6):06d}Z"
        return {"id": bid, "type": "message_batch", "processing_status": "ended" if ended else "in_progress",
                "created_at": created, "request_counts": {"processing": 0 if ended else len(b["requests"]),
                                                          "succeeded": len(b["requests"]) if ended else 0},
                "results_url": f"{self.root}/v1/messages/batches/{bid}/results" if ended else None}

    def anthropic_results(self, h: Any, body: bytes, bid: str) -> tuple[int, Any, Any]:
        return 200, None, self.batches[bid]["results"]

    # -- both ------------------------------------------------------------------------------
    def cancel(self, h: Any, body: bytes, bid: str) -> tuple[int, Any, Any]:
        with self.lock:
            self.batches[bid]["cancel"] = True
        return 200, {"id": bid}, None

    def chat(self, h: Any, body: bytes) -> tuple[int, Any, Any]:
        with self.lock:
            self.direct += 1
        return 500, {"error": {"message": "this test sends everything through batches"}}, None

    def _usage(self, kind: str, params: dict[str, Any]) -> dict[str, Any]:
        """A batch answer's usage: its tokens counted, cached and charged by the ledger, in the
        order the batch's requests are processed; else the fixed counts."""
        if self.ledger is not None:
            counted = self.ledger.anthropic if kind == "anthropic" else self.ledger.openai
            if self._before is None:
                return counted(params["model"], params, COMPLETION_TOKENS, batch=True)
            written = self.ledger.entries
            self.ledger.entries = dict(self._before)  # what the cache held when the batch began
            try:
                return counted(params["model"], params, COMPLETION_TOKENS, batch=True)
            finally:
                self.ledger.entries = {**written, **self.ledger.entries}
        if kind == "anthropic":
            return {"input_tokens": PROMPT_TOKENS, "output_tokens": COMPLETION_TOKENS}
        return {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS}

    def _advance(self, bid: str) -> None:
        """End the batch at the first poll once it is no longer held: answer, fail or leave each request."""
        with self.lock:
            self.polls += 1
            b = self.batches[bid]
            if b["state"] != "in_progress" or self.hold.is_set():
                return
            done, failed, expired = [], [], False
            refused: set[str] = set()
            for cid, params in b["requests"].items():
                item = params["messages"][-1]["content"]
                item = item if isinstance(item, str) else "".join(block.get("text", "") for block in item)
                queue = self.script.get(item) or []
                fate = queue.pop(0) if queue else self.every
                if fate == "expire" or b.get("cancel"):
                    expired = True
                    continue
                if fate in ("fail", "refuse"):
                    failed.append(cid)
                    if fate == "refuse":
                        refused.add(cid)
                    continue
                self.charged[cid] = self.charged.get(cid, 0) + 1
                done.append((cid, params, self.reply(item)))
            self._before = dict(self.ledger.entries) if self.at_once and self.ledger is not None else None
            if b["kind"] == "openai":
                b["state"] = "cancelled" if b.get("cancel") else "expired" if expired else "completed"
                out = [{"id": f"r{i}", "custom_id": cid, "error": None, "response": {"status_code": 200, "body": {
                    "id": "x", "object": "chat.completion", "model": params["model"],
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": text}}],
                    "usage": self._usage("openai", params)}}}
                    for i, (cid, params, text) in enumerate(done)]
                errors = [{"id": "e", "custom_id": cid, "error": None, "response": (
                    {"status_code": 400, "body": {"error": {"message": REFUSAL, "type": "invalid_request_error"}}}
                    if cid in refused else {"status_code": 500, "body": {"error": {"message": "scripted failure"}}})}
                    for cid in failed]
                errors += [{"id": "e", "custom_id": cid, "response": None,
                            "error": {"code": "batch_expired", "message": "expired"}}
                           for cid in b["requests"] if expired and cid not in {d[0] for d in done} | set(failed)]
                for name, lines in (("output", out), ("errors", errors)):
                    if lines:
                        fid = f"file-{uuid.uuid4().hex[:12]}"
                        self.files[fid] = "".join(json.dumps(x) + "\n" for x in lines).encode()
                        b[name] = fid
            else:
                b["state"] = "ended"
                lines = [{"custom_id": cid, "result": {"type": "succeeded", "message": {
                    "id": "m", "type": "message", "role": "assistant", "content": [{"type": "text", "text": text}],
                    "stop_reason": "end_turn", "usage": self._usage("anthropic", params)}}}
                         for cid, params, text in done]
                lines += [{"custom_id": cid, "result": {"type": "errored", "error": {"type": "error", "error": (
                    {"type": "invalid_request_error", "message": REFUSAL} if cid in refused
                    else {"type": "api_error", "message": "scripted failure"})}}} for cid in failed]
                lines += [{"custom_id": cid, "result": {"type": "expired"}} for cid in b["requests"]
                          if cid not in {d[0] for d in done} | set(failed)]
                b["results"] = "".join(json.dumps(x) + "\n" for x in lines).encode()
            self._before = None
