"""`--max-cost USD` and a model's `max_cost=`: no request is sent once what the command spent
plus the most its requests in flight may cost would pass the limit; the answers so far are
written as a partial run (never over a complete one) and the command exits 3 with what to
do; a rerun goes on without paying anything twice. Cost totals are the sum over requests."""

from __future__ import annotations

import importlib.util
import json
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from lceval.interfaces import PrefixCache, Price, PromptCaching
from lceval.results import load_run
from lceval.types import Generation, GenerationRequest, Message
from tests.cli import call
from tests.conftest import ScriptedModel, only_run, serve_scripted

#: a token costs a thousandth of a dollar, in and out
PRICE = Price(1000.0, 1000.0)


class PricedModel(ScriptedModel):
    """The scripted model, sold by the token."""

    def price(self, batch: bool = False) -> Price | None:
        return PRICE


def _run(home: Path, out: Path, cache: Path, *extra: str) -> tuple[int, str, str]:
    return call("run", "--tasks", "elitr_qa", "--model", "scripted:x", "--data-home", home, "--output", out,
                "--cache", cache, "--no-progress", "--set", "generation.max_new_tokens=5", *extra)


def test_a_limit_hit_mid_run_writes_a_partial_run_and_a_rerun_goes_on(tiny_home: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    built = serve_scripted(monkeypatch, lambda: PricedModel(window=4096))
    code, _, err = _run(tiny_home, tmp_path / "free", tmp_path / "other.sqlite")
    assert code == 0, err
    (full,) = list((tmp_path / "free").iterdir())
    whole = json.loads((full / "manifest.json").read_text())["cost"]["total_usd"]
    built.clear()

    limit = round(whole / 2, 6)
    code, out, err = _run(tiny_home, tmp_path / "runs", tmp_path / "c.sqlite", "--max-cost", str(limit))
    assert code == 3, err
    assert f"--max-cost ${limit:g} reached" in err and "partial run" in err and "Run the same command again" in err
    (partial,) = list((tmp_path / "runs").iterdir())
    assert partial.name.endswith("_partial") and "PARTIAL" in out
    run = load_run(partial)
    assert run.results["partial"]["limit"] == "--max-cost" and run.record.partial["requests_not_sent"] > 0
    answered = [s for s in run.samples if s.response is not None]
    assert 0 < len(answered) < 7
    # never past the limit: what was spent is the sum over the answers, and under it
    spent = run.record.usage["cost_usd"]
    assert spent == pytest.approx(sum(PRICE.cost(s.prompt_tokens, s.completion_tokens) for s in answered))
    assert spent <= limit
    acc = run.results["tasks"]["elitr_qa"]["accounting"]
    assert acc["not_sent_cost_limit"] == 7 - len(answered) == run.record.usage["cost_limited"]

    # a rerun with a higher limit resumes: the answered ones come from the cache, the rest are asked once
    code, _, err = _run(tiny_home, tmp_path / "runs", tmp_path / "c.sqlite", "--max-cost", str(whole * 2))
    assert code == 0, err
    complete = [p for p in (tmp_path / "runs").iterdir() if p != partial]
    assert len(complete) == 1 and not complete[0].name.endswith("_partial") and partial.is_dir()
    again = load_run(complete[0])
    assert all(s.response for s in again.samples) and "partial" not in again.results
    asked = [r.messages[-1].content for m in built for r in m.calls]
    assert len(asked) == len(set(asked)) == 7  # nothing asked (paid) twice
    cost = again.record.cost["generation"]
    assert cost["paid_usd"] + cost["cached_usd"] == pytest.approx(whole)
    assert cost["cached_usd"] == pytest.approx(spent)


def test_the_next_models_are_not_started_once_the_limit_is_hit(tiny_home: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    built = serve_scripted(monkeypatch, lambda: PricedModel(window=4096))
    code, _, err = _run(tiny_home, tmp_path / "runs", tmp_path / "c.sqlite", "--model", "scripted:y",
                        "--max-cost", "0.01")
    assert code == 3 and "1 more model(s) not started" in err
    assert len(built) == 1 and len(list((tmp_path / "runs").iterdir())) == 1


@pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed")
def test_a_judge_models_own_limit_stops_its_requests(tiny_home: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.batch_server import BatchServer

    serve_scripted(monkeypatch)
    server = BatchServer()
    try:
        code, out, err = _run(tiny_home, tmp_path / "runs", tmp_path / "c.sqlite", "--judge", "rubric",
                              "--judge-model", f"litellm:openai/judge,api_base={server.url},max_cost=0,"
                              "input_cost_per_mtok=2,output_cost_per_mtok=8")
    finally:
        server.close()
    assert code == 3 and "--judge-model option max_cost $0 reached" in err
    assert server.direct == 0  # not one judge request was sent
    run = load_run(next((tmp_path / "runs").iterdir()))
    assert all(s.response for s in run.samples)  # the model (free) answered everything
    assert run.results["tasks"]["elitr_qa"]["accounting"]["judge_missing"] == 7
    assert run.record.judge_usage["cost_limited"] == 7


def test_a_local_model_costs_nothing_and_says_nothing(tiny_home: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    serve_scripted(monkeypatch)
    code, out, err = _run(tiny_home, tmp_path / "runs", tmp_path / "c.sqlite", "--max-cost", "0")
    assert code == 0, err  # free: a limit of 0 stops nothing
    assert "cost:" not in out
    run = load_run(next((tmp_path / "runs").iterdir()))
    assert run.record.cost["total_usd"] == 0 and run.record.usage["cost_unknown"] == 0


def test_a_dry_run_prints_what_the_run_then_costs(tiny_home: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted by the model's own tokenizer, with every answer at its max_new_tokens (this
    model always writes them all), the estimate is exactly what the run then pays."""
    serve_scripted(monkeypatch, lambda: PricedModel(window=4096))
    code, out, err = _run(tiny_home, tmp_path / "runs", tmp_path / "c.sqlite", "--dry-run")
    assert code == 0, err
    assert not (tmp_path / "c.sqlite").exists()  # nothing opened, nothing sent
    (line,) = [x for x in out.splitlines() if x.startswith("generation: ")]
    assert "7 requests" in line and "counted by the model's tokenizer" in line and "at most 35 answer tokens" in line
    estimate = float(out.split("\ntotal: $")[1].split()[0].rstrip(";"))
    code, _, err = _run(tiny_home, tmp_path / "runs", tmp_path / "c.sqlite")
    assert code == 0, err
    run = load_run(next((tmp_path / "runs").iterdir()))
    assert run.record.cost["total_usd"] == pytest.approx(estimate, abs=1e-4)


#: the same, with a prompt cache that reads at a tenth of the input price and writes at 1.25x
CACHED_PRICE = Price(1000.0, 1000.0, cache_read_per_mtok=100.0, cache_write_per_mtok=1250.0)


class CachingModel(PricedModel):
    """An API whose provider caches the part a context's requests share (`request.shared`), as
    lceval's arithmetic says: the first request about a context writes it, the later ones read it."""

    def __init__(self, window: int | None = None) -> None:
        super().__init__(window)
        self.written: set[str] = set()

    def price(self, batch: bool = False) -> Price | None:
        return CACHED_PRICE

    def prompt_caching(self, request: GenerationRequest, batch: bool = False) -> PromptCaching | None:
        return PromptCaching(CACHED_PRICE) if request.shared is not None else None

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        out = []
        for request, gen in zip(requests, super().generate(requests)):
            shared = request.shared
            part = self.count_tokens(shared.head(request.messages)) if shared is not None else 0
            read = shared is not None and shared.group in self.written
            if shared is not None:
                self.written.add(shared.group)
            out.append(replace(gen, cache_read_tokens=part if read else 0, cache_write_tokens=0 if read else part))
        return out


def test_the_dry_run_and_max_cost_count_the_prompt_cache_the_run_gets(tiny_home: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Each meeting's first question writes its transcript, the others read it: the dry run's
    estimate is what the run then pays, and what --max-cost reserves before each request is the
    same arithmetic, so a limit at the estimate lets every request through and one a hundredth
    of a cent lower (the figure is rounded up there) stops the last (this model answers one
    request at a time, at its full length)."""
    serve_scripted(monkeypatch, lambda: CachingModel(window=4096))
    code, out, err = _run(tiny_home, tmp_path / "dry", tmp_path / "dry.sqlite", "--dry-run")
    assert code == 0, err
    (line,) = [x for x in out.splitlines() if x.startswith("generation: ")]
    assert "read from the provider's prompt cache" in line and "without the prompt cache" in line
    estimate = float(out.split("\ntotal: $")[1].split()[0].rstrip(";"))
    uncached = float(line.split(" without the prompt cache")[0].rsplit("$", 1)[1])
    assert estimate < uncached

    code, _, err = _run(tiny_home, tmp_path / "all", tmp_path / "all.sqlite", "--max-cost", str(estimate))
    assert code == 0, err
    run = load_run(next((tmp_path / "all").iterdir()))
    usage = run.record.usage
    assert usage["cost_usd"] == pytest.approx(estimate, abs=1e-4) and usage["cost_limited"] == 0
    assert usage["cache_reads_expected"] == 4 and usage["cache_reads_missed"] == 0 and usage["cache_write_tokens"] > 0
    code, _, err = _run(tiny_home, tmp_path / "less", tmp_path / "less.sqlite", "--max-cost", f"{estimate - 1e-4:.4f}")
    assert code == 3, err
    assert json.loads((next((tmp_path / "less").iterdir()) / "manifest.json").read_text())["usage"]["cost_limited"] == 1


class ConcurrentPricedModel(PricedModel):
    """Sold by the token, three requests at once, each answering 5 tokens whatever its limit:
    cheaper than the bound a cost limit reserves for it (its 50 tokens of room). With `gated`,
    the next-to-last request stays in flight until the last one has been estimated (its prompt
    counted, just before its reservation): the last request meets one in flight."""

    max_in_flight = 3
    prefix_cache = PrefixCache("none")  # no primer first: requests go out together

    def __init__(self, window: int | None = None, gated: bool = False) -> None:
        super().__init__(window)
        self.gated = gated
        self.lock = threading.Lock()
        self.flying = self.most = self.started = 0
        self.estimated = threading.Event()
        self.watching = False

    def count_tokens(self, messages: list[Message]) -> int | None:
        if self.watching:
            self.estimated.set()
        return super().count_tokens(messages)

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        with self.lock:
            self.flying += 1
            self.most = max(self.most, self.flying)
            self.started += 1
            hold = self.gated and self.started == 6
            self.watching = self.watching or hold
        try:
            if hold:  # until the 7th is estimated, and a moment for its reservation to be decided
                self.estimated.wait(10)
                threading.Event().wait(0.2)
            return super().generate(requests)
        finally:
            with self.lock:
                self.flying -= 1


def _run_50(home: Path, out: Path, *extra: str) -> tuple[int, str, str]:
    return call("run", "--tasks", "elitr_qa", "--model", "scripted:x", "--data-home", home, "--output", out,
                "--cache", out.with_suffix(".sqlite"), "--no-progress", "--set", "generation.max_new_tokens=50",
                *extra)


def test_a_limit_waits_for_the_requests_in_flight_and_sends_again_when_it_allows(
        tiny_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three requests in flight reserve 50 answer tokens each and spend 5: under a limit that the
    whole run fits with room for one request's bound, a request that does not fit beside those in
    flight waits for them to come back (what they did not spend is free again) and is sent; one
    that would pass the limit even then is refused, and the message says what was spent, what was
    in flight when the limit was reached and what was not sent, as the manifest counts them."""
    built = serve_scripted(monkeypatch, lambda: ConcurrentPricedModel(window=4096, gated=bool(built)))
    code, _, err = _run_50(tiny_home, tmp_path / "free")
    assert code == 0, err
    whole = json.loads((only_run(tmp_path / "free") / "manifest.json").read_text())["usage"]["cost_usd"]

    # the whole run, and room for one more request's unspent bound (45 tokens): every request goes
    limit = round(whole + PRICE.cost(0, 45), 6)
    code, out, err = _run_50(tiny_home, tmp_path / "fits", "--max-cost", str(limit))
    assert code == 0, err
    usage = json.loads((only_run(tmp_path / "fits") / "manifest.json").read_text())["usage"]
    assert usage["generated"] == 7 and usage["cost_limited"] == 0 and usage["cost_usd"] == pytest.approx(whole)
    assert built[-1].estimated.is_set() and "PARTIAL" not in out  # the last met one in flight

    # a thousandth of a dollar short of the whole run: the last request cannot fit, and is not sent
    code, out, err = _run_50(tiny_home, tmp_path / "short", "--max-cost", f"{whole - 0.001:.6f}")
    assert code == 3, err
    run = load_run(only_run(tmp_path / "short"))
    partial, usage = run.record.partial, run.record.usage
    assert usage["generated"] + usage["cost_limited"] == 7 and usage["cost_limited"] >= 1
    assert partial["requests_not_sent"] == usage["cost_limited"] and partial["spent_usd"] == pytest.approx(
        usage["cost_usd"])
    flying = partial["in_flight_requests"]
    assert f"spent ${usage['cost_usd']:.4f} in all" in err and f"{usage['cost_limited']} request(s) not sent" in err
    assert (f"{flying} request(s) were in flight when it was reached" in err) if flying else \
        ("none in flight when it was reached" in err)
    assert (partial["in_flight_usd"] > 0) == (flying > 0)


class VerboseModel(ScriptedModel):
    """A free local model that writes every token it may (`max_new_tokens` words of 4
    characters): answers longer than the references the dry run once stood them in with."""

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        return [replace(gen, text=" ".join(["yes"] * r.params.max_new_tokens), completion_tokens=r.params.max_new_tokens)
                for r, gen in zip(requests, super().generate(requests))]


@pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed")
@pytest.mark.parametrize("path", ["direct", "batch"])
def test_max_cost_set_to_the_dry_runs_at_most_lets_every_judge_request_through(
        path: str, tiny_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The dry run prices the judge's prompts around the longest answer the model may write, with
    the one estimate a cost limit reserves: --max-cost set to its "at most" lets every judge
    request through, sent directly or in a batch, though the model's answers are longer than the
    references (which the dry run used to stand in for them)."""
    from tests.batch_server import BatchServer
    from tests.provider_servers import ProviderServer

    serve_scripted(monkeypatch, lambda: VerboseModel(window=4096))
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-0000")
    server: Any = BatchServer() if path == "batch" else ProviderServer()
    server.reply = server.answer = lambda item: "Fair.\n\\boxed{7}"
    server.silent = True
    judge = f"litellm:openai/judge,api_base={server.url},input_cost_per_mtok=2,output_cost_per_mtok=8" + (
        ",batch=true,batch_poll=0.05,batch_poll_max=0.2,batch_max_wait=0.3" if path == "batch" else "")
    argv = ["--set", "generation.max_new_tokens=20", "--judge", "rubric", "--judge-model", judge]
    try:
        code, out, err = _run(tiny_home, tmp_path / "dry", tmp_path / "dry.sqlite", *argv, "--dry-run")
        assert code == 0, err
        (line,) = [x for x in out.splitlines() if x.startswith("judging (")]
        assert "7 requests" in line
        at_most = line.split("(as this run asks): $")[1] if path == "batch" else line.split(": $")[1]
        at_most = at_most.split()[0].rstrip(";")
        code, out, err = _run(tiny_home, tmp_path / "runs", tmp_path / "c.sqlite", *argv, "--max-cost", at_most)
        # all at once: none waited for the others to come back below their reservations
        batches = server.batch_count() if path == "batch" else None
    finally:
        server.close()
    assert code == 0, err
    run = load_run(only_run(tmp_path / "runs"))
    usage = run.record.judge_usage
    assert usage["generated"] == 7 and usage["cost_limited"] == 0 and usage["batched"] == (7 if path == "batch" else 0)
    assert [s.judgments[0].score for s in run.samples] == [7.0] * 7
    assert all(len(s.response.split()) == 20 for s in run.samples) and batches in (None, 1)
