"""The two batch protocols the `litellm:` backend speaks for `--batch`, in a small HTTP client
of our own (litellm's batch helpers wrap only some of each API and hide the request ids a
resumed run needs):

- OpenAI's Batch API, which vLLM's and other OpenAI-compatible servers also speak: the
  requests as a JSONL file uploaded to `/v1/files` (purpose "batch"), a batch created on it
  at `/v1/batches` (tagged with lceval's own batch id in its metadata, so a batch whose id
  was never recorded can be found again; a server that keeps no metadata is asked for the
  batch's input file, whose request ids must be ours), polled at `/v1/batches/{id}`, its
  answers and errors read from its output and error files (`/v1/files/{id}/content`). Docs:
  https://platform.openai.com/docs/guides/batch
- Anthropic's Message Batches: `POST /v1/messages/batches` with the requests inline, polled
  at `/v1/messages/batches/{id}`, the answers read from its `results_url`. A message batch
  carries no tag of ours and shows its requests' ids only in its results: a batch of the
  right size and time whose id was never recorded is a candidate, and becomes ours only when
  its results hold exactly our requests' ids (until then every candidate is waited for, none
  is cancelled, nothing is sent again). Docs: https://docs.anthropic.com/en/api/creating-message-batches

Both charge half their direct price. Each answer's cost is its tokens at the model's batch
price (`LiteLLMBackend.price(batch=True)`), the prompt tokens the provider read from or wrote
into its prompt cache at its cache prices (Anthropic's lines carry the cache breakpoint a direct
request would, at the lifetime a batch asks for: 1 hour unless `cache_ttl` says otherwise). A request the provider failed comes back as an
error answer (the engine sends it again in a later batch); one an expired or cancelled batch
did not finish is left out of the results (the engine sends it again). 401/403 stop the run.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from datetime import datetime
from typing import Any, Callable

from lceval.errors import UserError
from lceval.interfaces import BatchAPI, BatchStatus, Price
from lceval.types import Generation, GenerationRequest

from .api_calls import hint_of, kind_of_status

#: statuses of an OpenAI batch that will not change any more
OPENAI_ENDED = ("completed", "expired", "cancelled", "failed")
#: error codes of an OpenAI batch's error file that mean "not done", not "failed"
OPENAI_UNFINISHED = ("batch_expired", "batch_cancelled")
ANTHROPIC_VERSION = "2023-06-01"
#: batches looked at when searching for one whose id was never recorded
FIND_PAGES = 5


class HttpError(Exception):
    """A response with a status >= 400 (or none at all: status 0)."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"HTTP {status}: {text[:300]}")
        self.status = status


class _Client:
    """JSON over HTTP with urllib; credentials in headers only, never in an error text."""

    def __init__(self, base: str, headers: dict[str, str], timeout: float, what: str) -> None:
        self.base = base.rstrip("/")
        self.headers = headers
        self.timeout = timeout
        self.what = what

    def call(self, method: str, path: str, body: bytes | None = None, content_type: str = "application/json",
             url: str | None = None) -> bytes:
        request = urllib.request.Request(url or self.base + path, data=body, method=method,
                                         headers={**self.headers, **({"Content-Type": content_type} if body else {})})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 - http(s) only
                return response.read()
        except urllib.error.HTTPError as exc:
            text = exc.read().decode("utf-8", "replace")
            if exc.code in (401, 403):
                raise UserError(f"the {self.what} batch API refused the credentials (HTTP {exc.code})",
                                field="--model", hint="Check the key in the provider's variable (OPENAI_API_KEY, "
                                "ANTHROPIC_API_KEY) or the one named by api_key_env.") from None
            raise HttpError(exc.code, text) from None
        except (urllib.error.URLError, OSError) as exc:
            raise HttpError(0, str(getattr(exc, "reason", exc))) from None

    def json(self, method: str, path: str, payload: Any = None, url: str | None = None) -> Any:
        body = json.dumps(payload).encode() if payload is not None else None
        return json.loads(self.call(method, path, body, url=url) or b"{}")


def _jsonl(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]


def _message(body: Any) -> str:
    """An error body's message, however the provider nests it ({"error": {"message": ...}},
    Anthropic's {"error": {"type": "error", "error": {"type", "message"}}}, a bare string)."""
    for _ in range(3):
        if isinstance(body, dict) and "error" in body:
            body = body["error"]
    if isinstance(body, dict):
        return ": ".join(str(body[k]) for k in ("type", "message") if body.get(k)) or json.dumps(body)[:300]
    return str(body)


def _finish(cut: bool, text: str, reasoning: str | None) -> str:
    """A reply cut at its token limit with a thinking and no text never answered."""
    if cut and reasoning is not None and not text.strip():
        return "unclosed_thinking"
    return "length" if cut else "stop"


def _ids_digest(ids: Any) -> str:
    """One value for a set of request ids, kept in a handle instead of the ids themselves."""
    import hashlib

    return hashlib.sha256("\n".join(sorted(str(i) for i in ids)).encode()).hexdigest()


def _error_type(body: Any) -> str | None:
    """An error body's type or code (OpenAI's `error.code`, else `error.type`; Anthropic's inner
    `error.type`), however deep the provider nests it."""
    found = None
    for _ in range(3):
        if not (isinstance(body, dict) and isinstance(body.get("error"), dict)):
            break
        body = body["error"]
        found = body.get("code") if isinstance(body.get("code"), str) else body.get("type") or found
    return str(found) if found else None


def _failed(custom_id: str, kind: str, message: str) -> Generation:
    error = {"kind": kind, "message": message[:500]}
    hint = hint_of(kind, message)
    if hint is not None:
        error["hint"] = hint
    return Generation(request_id=custom_id, text="", finish_reason="error", extras={"error": error})


class OpenAIBatches(BatchAPI):
    """OpenAI's Batch API (`/v1/files` + `/v1/batches`) at `base` (…/v1)."""

    name = "openai"

    def __init__(self, base: str, key: str | None, model: str, body: Callable[[GenerationRequest], dict[str, Any]],
                 price: Callable[[], Price | None], timeout: float = 600.0, window: str = "24h") -> None:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.client = _Client(base, headers, timeout, "OpenAI")
        self.model, self.body, self.price, self.window = model, body, price, window

    def submit(self, local_id: str, items: list[tuple[str, GenerationRequest]]) -> dict[str, Any]:
        lines = [json.dumps({"custom_id": cid, "method": "POST", "url": "/v1/chat/completions",
                             "body": {"model": self.model, **self.body(request)}}, ensure_ascii=False)
                 for cid, request in items]
        boundary = f"lceval-{uuid.uuid4().hex}"
        data = ("\n".join(lines) + "\n").encode("utf-8")
        form = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n"
                f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{local_id}.jsonl\"\r\n"
                "Content-Type: application/jsonl\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
        uploaded = json.loads(self.client.call("POST", "/files", form, f"multipart/form-data; boundary={boundary}"))
        batch = self.client.json("POST", "/batches", {
            "input_file_id": uploaded["id"], "endpoint": "/v1/chat/completions", "completion_window": self.window,
            "metadata": {"lceval_batch": local_id}})
        return {"id": batch["id"], "input_file_id": uploaded["id"]}

    def poll(self, handle: dict[str, Any]) -> BatchStatus:
        try:
            batch = self.client.json("GET", f"/batches/{handle['id']}")
        except HttpError as exc:
            if exc.status == 404:  # the provider no longer knows it: everything is sent again
                return BatchStatus(ended=True, state="not_found")
            raise
        state = str(batch.get("status"))
        if state not in OPENAI_ENDED:
            return BatchStatus(ended=False, state=state)
        results: dict[str, Generation] = {}
        price = self.price()
        for which in ("output_file_id", "error_file_id"):
            if batch.get(which):
                for line in _jsonl(self.client.call("GET", f"/files/{batch[which]}/content")):
                    cid = str(line.get("custom_id"))
                    gen = self._result(cid, line, price)
                    if gen is not None:
                        results[cid] = gen
        error = None
        if state == "failed":  # the whole batch was refused (its input): each request failed
            error = "; ".join(str(e.get("message")) for e in ((batch.get("errors") or {}).get("data") or []))
            error = error or "the batch failed"
        return BatchStatus(ended=True, state=state, results=results, error=error)

    def _result(self, cid: str, line: dict[str, Any], price: Price | None) -> Generation | None:
        error = line.get("error")
        response = line.get("response") or {}
        if error:
            code = str(error.get("code") or "")
            if code in OPENAI_UNFINISHED:
                return None  # not done: sent again
            return _failed(cid, kind_of_status(None, code) or "bad_request", f"{code}: {error.get('message')}")
        status = int(response.get("status_code") or 0)
        body = response.get("body") or {}
        if status != 200:
            kind = kind_of_status(status, _error_type(body)) or "server"
            return _failed(cid, kind, f"HTTP {status}: {_message(body)}")
        try:
            choice = body["choices"][0]
            message = choice["message"]
            text = message.get("content") or ""
        except (KeyError, IndexError, TypeError):
            return _failed(cid, "malformed", "a batch answer without choices")
        usage = body.get("usage") or {}
        prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
        thought = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or None
        reasoning = message.get("reasoning_content") or message.get("reasoning") or ("" if thought else None)
        extras: dict[str, Any] = {"batched": True}
        read = None if cached is None else int(cached)
        if price is not None:  # the prompt cache's reads at its price (OpenAI bills no writes)
            extras["cost_usd"] = round(price.cost(prompt, completion, read or 0), 8)
        return Generation(request_id=cid, text=text, prompt_tokens=prompt,
                          prefilled_tokens=None if read is None else max(0, prompt - read),
                          completion_tokens=completion,
                          finish_reason=_finish(choice.get("finish_reason") == "length", text, reasoning),
                          extras=extras, reasoning=reasoning, reasoning_tokens=int(thought) if thought else None,
                          cache_read_tokens=read, cache_write_tokens=None if read is None else 0)

    def cancel(self, handle: dict[str, Any]) -> None:
        self.client.json("POST", f"/batches/{handle['id']}/cancel", {})

    def find_batch(self, local_id: str, ids: list[str], since: float) -> dict[str, Any] | None:
        """Ours: the batch tagged `local_id`; on a server that keeps no metadata, a batch of
        the same size and time whose input file holds exactly our request ids."""
        after, wanted = None, _ids_digest(ids)
        for _ in range(FIND_PAGES):
            page = self.client.json("GET", "/batches?limit=100" + (f"&after={after}" if after else ""))
            for batch in page.get("data") or []:
                tag = (batch.get("metadata") or {}).get("lceval_batch")
                if tag == local_id:
                    return {"id": batch["id"], "input_file_id": batch.get("input_file_id")}
                if float(batch.get("created_at") or 0) < since:
                    return None  # newest first: older ones cannot be ours
                total = int((batch.get("request_counts") or {}).get("total") or 0)
                if tag is None and total == len(ids) and batch.get("input_file_id") and \
                        self._input_ids(batch["input_file_id"]) == wanted:
                    return {"id": batch["id"], "input_file_id": batch["input_file_id"]}
            if not page.get("has_more") or not page.get("data"):
                return None
            after = page["data"][-1]["id"]
        return None

    def _input_ids(self, file_id: str) -> str | None:
        try:
            return _ids_digest(line.get("custom_id") for line in _jsonl(self.client.call("GET", f"/files/{file_id}/content")))
        except HttpError:
            return None


class AnthropicBatches(BatchAPI):
    """Anthropic's Message Batches (`/v1/messages/batches`) at `base` (the API's root)."""

    name = "anthropic"

    def __init__(self, base: str, key: str | None, model: str, body: Callable[[GenerationRequest], dict[str, Any]],
                 price: Callable[[], Price | None], timeout: float = 600.0) -> None:
        headers = {"anthropic-version": ANTHROPIC_VERSION, **({"x-api-key": key} if key else {})}
        self.client = _Client(base.removesuffix("/v1"), headers, timeout, "Anthropic")
        self.model, self.body, self.price = model, body, price

    def submit(self, local_id: str, items: list[tuple[str, GenerationRequest]]) -> dict[str, Any]:
        batch = self.client.json("POST", "/v1/messages/batches", {"requests": [
            {"custom_id": cid, "params": {"model": self.model, **self.body(request)}} for cid, request in items]})
        return {"id": batch["id"]}

    def poll(self, handle: dict[str, Any]) -> BatchStatus:
        if "candidates" in handle:
            return self._poll_candidates(handle)
        try:
            batch = self.client.json("GET", f"/v1/messages/batches/{handle['id']}")
        except HttpError as exc:
            if exc.status == 404:
                return BatchStatus(ended=True, state="not_found")
            raise
        state = str(batch.get("processing_status"))
        if state != "ended":
            return BatchStatus(ended=False, state=state)
        lines = self._result_lines(batch)
        price = self.price()
        results: dict[str, Generation] = {}
        for line in lines:
            cid = str(line.get("custom_id"))
            gen = self._result(cid, line.get("result") or {}, price)
            if gen is not None:
                results[cid] = gen
        return BatchStatus(ended=True, state=state, results=results)

    def _result_lines(self, batch: dict[str, Any]) -> list[dict[str, Any]]:
        url = batch.get("results_url")
        return _jsonl(self.client.call("GET", "", url=url)) if url else []

    def _poll_candidates(self, handle: dict[str, Any]) -> BatchStatus:
        """A lost batch's candidates (right size, right time): each that ends is ours only if
        its results hold exactly our request ids; the others are left alone (never cancelled)."""
        waiting = 0
        for bid in handle["candidates"]:
            try:
                batch = self.client.json("GET", f"/v1/messages/batches/{bid}")
            except HttpError as exc:
                if exc.status == 404:
                    continue
                raise
            if str(batch.get("processing_status")) != "ended":
                waiting += 1
            elif _ids_digest(line.get("custom_id") for line in self._result_lines(batch)) == handle["ids_sha256"]:
                return self.poll({"id": bid})
        if waiting:
            return BatchStatus(ended=False, state=f"telling ours from {waiting} batch(es) of the same size")
        return BatchStatus(ended=True, state="not_found")

    def _result(self, cid: str, result: dict[str, Any], price: Price | None) -> Generation | None:
        kind = result.get("type")
        if kind in ("canceled", "expired"):
            return None  # not done: sent again
        if kind != "succeeded":
            return _failed(cid, kind_of_status(None, _error_type(result)) or "server", _message(result))
        message = result.get("message") or {}
        blocks = message.get("content") or []
        text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        thinking = "\n\n".join(b.get("thinking", "") for b in blocks if b.get("type") == "thinking") or None
        usage = message.get("usage") or {}
        read = int(usage.get("cache_read_input_tokens") or 0)
        written = int(usage.get("cache_creation_input_tokens") or 0)
        prompt = int(usage.get("input_tokens") or 0) + read + written
        completion = int(usage.get("output_tokens") or 0)
        extras: dict[str, Any] = {"batched": True}
        if price is not None:  # the cache's writes and reads at their prices (the batch's lifetime)
            extras["cost_usd"] = round(price.cost(prompt, completion, read, written), 8)
        # the Messages API counts the thinking inside output_tokens only: its tokens are unknown
        return Generation(request_id=cid, text=text, prompt_tokens=prompt, prefilled_tokens=prompt - read,
                          completion_tokens=completion,
                          finish_reason=_finish(message.get("stop_reason") == "max_tokens", text, thinking),
                          extras=extras, reasoning=thinking, cache_read_tokens=read, cache_write_tokens=written)

    def cancel(self, handle: dict[str, Any]) -> None:
        if "id" in handle:  # a candidate not proven ours is never cancelled
            self.client.json("POST", f"/v1/messages/batches/{handle['id']}/cancel", {})

    def find_batch(self, local_id: str, ids: list[str], since: float) -> dict[str, Any] | None:
        """A batch holding exactly our request ids (read from the results of each ended batch of
        the right size and time); while some such batches still run, all of them, to be told
        apart as they end (`poll`)."""
        page = self.client.json("GET", "/v1/messages/batches?limit=100")
        wanted, pending = _ids_digest(ids), []
        for batch in page.get("data") or []:
            created = _rfc3339(str(batch.get("created_at") or ""))
            counts = batch.get("request_counts") or {}
            if created < since or sum(int(v or 0) for v in counts.values()) != len(ids):
                continue
            if str(batch.get("processing_status")) != "ended":
                pending.append(batch["id"])
            elif _ids_digest(line.get("custom_id") for line in self._result_lines(batch)) == wanted:
                return {"id": batch["id"]}
        return {"candidates": pending, "ids_sha256": wanted} if pending else None


def _rfc3339(text: str) -> float:
    """`2024-09-24T18:37:24.100435Z` as Unix time (0 when unreadable)."""
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0
