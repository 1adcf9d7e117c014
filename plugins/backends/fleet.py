"""`fleet:` backend: one model served by several OpenAI-compatible servers (vLLM, SGLang,
llama.cpp) as one backend.

    --model 'fleet:openai/llama-3.1-8b,servers=http://gpu1:8000/v1|http://gpu2:8000/v1,concurrency=32'

Why a backend of its own rather than a load balancer in front of the servers: a transcript's
prefix is cached on the server that prefilled it, so every request of one transcript goes to
that server (affinity, keyed by the engine's `prefix_group` hint). The engine sees the fleet
as one shared prefix cache with `concurrency` slots per server and at most `concurrency`
requests of one transcript at once (`max_in_flight_per_prefix`), so it keeps about one
transcript per server busy instead of queueing a transcript's questions on one server while
another idles. A new transcript goes to the least loaded server.

Servers fail and slow down: a server that refuses or drops a connection is marked down (two
timeouts in a row too), its transcripts move to the others, and the request that failed on
it is asked again elsewhere at once; a request is charged only for the response that came
back, so nothing is lost and nothing is counted twice. A server whose answers to requests
that hit its cache take `lag_factor` times longer than those of a server left idle hands its
transcript to the idle one (one more prefill, then the faster server's speed). When every
server is down, all are tried again with the usual retries and backoff.

Every server must serve the same weights with the same settings: answers are cached under
the model name, whichever server gave them, so a rerun after a server was replaced reuses
them. Everything else (retries, keys from the environment, accounting) is the litellm
backend's.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlsplit

from lceval import hookimpl
from lceval.errors import UserError
from lceval.interfaces import PrefixCache
from lceval.options import check_options
from lceval.types import GenerationRequest

from .litellm_api import OPTIONS as LITELLM_OPTIONS
from .litellm_api import LiteLLMBackend, _api_base, check_model_name

SCHEME = "fleet"
#: failure kinds that say the server itself is gone (the process died, the host went away)
DEAD_KINDS = ("connection",)
#: timeouts in a row after which a server counts as gone
TIMEOUTS_TO_DOWN = 2
#: successful attempts hitting a server's cache before its speed is trusted for lag decisions
MIN_SAMPLES = 3
EWMA_WEIGHT = 0.3

#: The litellm backend's options, one server's worth each, plus the fleet's own.
OPTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["servers"],
    "properties": {
        "servers": {"type": "string", "writeOnly": True,
                    "description": "the servers' OpenAI base URLs, separated by |; never echoed."},
        **{k: v for k, v in LITELLM_OPTIONS["properties"].items() if k not in ("api_base", "concurrency", "batch_api", "batch_price_factor")},
        "concurrency": {"type": "integer", "minimum": 1, "default": 1, "description": "requests in flight per server."},
        "cache_tokens": {"type": "integer", "minimum": 1, "description": "tokens each server's prefix cache holds."},
        "lag_factor": {"type": "number", "exclusiveMinimum": 1, "default": 4.0,
                       "description": "how many times slower than an idle server a server must answer cache hits "
                                      "before its transcript moves."},
    },
}


@dataclass
class Server:
    url: str
    slots: threading.Semaphore
    in_flight: int = 0
    alive: bool = True
    timeouts: int = 0
    answered: int = 0
    failed_attempts: int = 0
    #: smoothed seconds of answers that hit this server's cache (not its primers)
    speed: float | None = None
    samples: int = 0
    groups: set[str] = field(default_factory=set)

    @property
    def name(self) -> str:
        return urlsplit(self.url).netloc


@dataclass
class Lease:
    server: Server
    group: str
    primer: bool  # the first request of its group on this server (pays the prefill)


class FleetBackend(LiteLLMBackend):
    """The litellm backend with one base URL per attempt, chosen by transcript."""

    def __init__(self, model: str, options: dict[str, Any]) -> None:
        model = check_model_name(model, SCHEME)
        options = check_options(OPTIONS_SCHEMA, options, what=f"backend '{SCHEME}'")
        urls = [u.strip() for u in str(options["servers"]).split("|") if u.strip()]
        if not urls:
            raise UserError("fleet option servers names no server", field="servers",
                            hint="servers=http://host1:8000/v1|http://host2:8000/v1")
        checked = []
        for url in urls:
            parts = urlsplit(url)
            if parts.username or parts.password or parts.query or parts.fragment:
                raise UserError("fleet servers must be URLs without user:password@, ?query or #fragment",
                                field="servers", hint="Credentials come from the environment (api_key_env=NAME).")
            try:
                checked.append(_api_base(url))
            except ValueError:
                raise UserError(f"fleet server '{url}' is not an http(s) URL", field="servers") from None
        if len(set(checked)) != len(checked):
            raise UserError("fleet option servers names a server twice", field="servers")
        per_server = dict(options)
        per_server.pop("servers")
        self.lag_factor = float(per_server.pop("lag_factor"))
        self._setup(model, per_server)
        self.self_hosted = True
        self.servers = [Server(url, threading.Semaphore(self.concurrency)) for url in checked]
        self.max_in_flight = self.concurrency * len(self.servers)
        self.max_in_flight_per_prefix = self.concurrency
        capacity = options.get("cache_tokens")
        kind = options["prefix_cache"]
        # the engine sees one cache holding several transcripts, at most one server's worth each
        self.prefix_cache = PrefixCache("none" if kind == "none" else "shared",
                                        capacity * len(self.servers) if capacity and kind == "shared" else None)
        self._assigned: dict[str, Server] = {}
        self._lock = threading.Lock()
        self._moves = {"lagging": 0, "down": 0}

    def identity(self) -> dict[str, Any]:
        # any server's answer is the model's answer: the URLs are not part of it
        return {"scheme": SCHEME, "model": self.model, **self._sampling_identity()}

    def batch_api(self) -> None:
        """Several servers of one's own: no batch API (each would need its own batches)."""
        return None

    def stats(self) -> dict[str, Any]:
        with self._lock:
            servers = [{"server": s.name, "answered": s.answered, "failed_attempts": s.failed_attempts,
                        "down": not s.alive, "transcripts": len(s.groups),
                        "seconds_per_cached_answer": None if s.speed is None else round(s.speed, 3)}
                       for s in self.servers]
            moves = dict(self._moves)
        return {**super().stats(), "fleet": {"servers": servers, "transcripts_moved": moves}}

    # -- routing -----------------------------------------------------------------------------
    def _acquire(self, request: GenerationRequest) -> Lease:
        group = str(request.hints.get("prefix_group") or request.request_id)
        with self._lock:
            server = self._assigned.get(group)
            primer = False
            faster = self._faster_idle(server) if server is not None and server.alive else None
            if server is None or not server.alive or faster is not None:
                if server is not None:
                    self._moves["down" if not server.alive else "lagging"] += 1
                server = faster or self._least_loaded()
                self._assigned[group] = server
                server.groups.add(group)
                primer = True
            server.in_flight += 1
        while not server.slots.acquire(timeout=0.5):
            if self._stop.is_set():
                with self._lock:
                    server.in_flight -= 1
                raise RuntimeError("run abandoned")
        return Lease(server, group, primer)

    def _route_kwargs(self, where: Lease) -> dict[str, Any]:
        return {"api_base": where.server.url}

    def _release(self, where: Lease, failure: str | None, seconds: float) -> bool:
        server = where.server
        server.slots.release()
        with self._lock:
            server.in_flight -= 1
            if failure is None:
                server.answered += 1
                server.timeouts = 0
                if not where.primer:
                    server.speed = seconds if server.speed is None else (
                        EWMA_WEIGHT * seconds + (1 - EWMA_WEIGHT) * server.speed)
                    server.samples += 1
                return False
            if failure == "interrupted":
                return False
            server.failed_attempts += 1
            server.timeouts = server.timeouts + 1 if failure == "timeout" else 0
            if failure in DEAD_KINDS or server.timeouts >= TIMEOUTS_TO_DOWN:
                server.alive = False
            if server.alive:
                return False
            # its transcripts move when they next ask (`_acquire` sees the server down)
            if not any(s.alive for s in self.servers):
                for s in self.servers:  # all gone: try them all again, with the usual backoff
                    s.alive, s.timeouts = True, 0
                return False
            return True

    def _least_loaded(self) -> Server:
        """Alive server with the fewest requests in flight; ties go to the one that has
        taken fewer transcripts, then to the order given."""
        alive = [s for s in self.servers if s.alive] or self.servers
        return min(alive, key=lambda s: (s.in_flight, len(s.groups)))

    def _faster_idle(self, server: Server) -> Server | None:
        """Where a transcript on `server` should move, if anywhere: an alive server with
        nothing in flight that answers cache hits `lag_factor` times faster (both measured)."""
        if server.samples < MIN_SAMPLES or server.speed is None:
            return None
        candidates = [other for other in self.servers
                      if other is not server and other.alive and other.in_flight == 0
                      and other.samples >= MIN_SAMPLES and other.speed is not None
                      and server.speed > self.lag_factor * other.speed]
        return min(candidates, key=lambda s: s.speed or 0.0) if candidates else None


def make_fleet(model: str, options: dict[str, Any]) -> FleetBackend:
    return FleetBackend(model, options)


@hookimpl
def register_models(register: Callable[..., None]) -> None:
    register(SCHEME, make_fleet, options_schema=OPTIONS_SCHEMA)
