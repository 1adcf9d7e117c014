"""Long contexts at the cached price, run end to end (`lceval run` in-process) against local
servers that speak each provider's wire format and cache and charge as the provider documents
(tests/provider_caches.py): Anthropic's cache breakpoints (direct and in Message Batches),
OpenAI's automatic cache with `prompt_cache_key`, Gemini's implicit cache.

ELITR-Bench QA on a tiny dataset of ours whose transcripts are long enough to be cached (three
meetings asked 3, 2 and 2 questions): what lceval says a run cost is what the provider's
arithmetic bills, to the cent's millionth; the first question about a meeting writes its
transcript into the cache and the others read it, though the scheduler interleaves the
meetings' questions; reads, writes and the rest are counted apart and the same in samples.jsonl,
results.json, the manifest and the console. Then the same run with caching off, a provider whose
cache serves nothing (said on the console, the run goes on), and the bad input that exits 2."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from lceval.types import GenerationParams, GenerationRequest, Message, SharedPrefix
from tests import elitr_tiny
from tests.batch_server import BatchServer
from tests.cli import call
from tests.conftest import only_run
from tests.provider_caches import CacheLedger
from tests.provider_servers import ProviderServer

pytestmark = pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed")

FILLER = "".join(f"(PERSON9) Line {i} of the meeting, where nothing is decided.\n" for i in range(300))
#: provider -> (model string, the path asked); each prices its cache as litellm's map does
MODELS = {
    "anthropic": ("litellm:anthropic/claude-sonnet-4-5,api_base={root}", "/messages"),
    "openai": ("litellm:openai/gpt-4.1,api_base={url}", "/chat/completions"),
    "gemini": ("litellm:gemini/gemini-2.5-flash,api_base={root} --thinking off", ":generateContent"),
}


@pytest.fixture
def long_home(tmp_path: Path) -> Path:
    """The tiny ELITR-Bench, each transcript long enough (about 4,000 tokens) to be cached."""
    home = elitr_tiny.build(tmp_path / "data")
    for path in (home / "elitr-bench" / "transcripts").glob("*.txt"):
        path.write_text(path.read_text() + FILLER, encoding="utf-8")
    return home


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProviderServer]:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(name, "test-key-0000")
    srv = ProviderServer()
    srv.ledger = CacheLedger()
    yield srv
    srv.close()


def run(server: Any, home: Path, out: Path, model: str, *flags: str) -> tuple[int, str, str]:
    spec = model.format(url=getattr(server, "url", ""), root=server.root)
    return call("run", "--tasks", "elitr_qa", "--model", *spec.split(" "), "--data-home", home, "--output", out,
                "--cache", out.with_suffix(".sqlite"), "--no-progress", *flags)


def meeting_of(body: dict[str, Any]) -> str:
    """Which transcript a request is about (its first words tell the three apart)."""
    text = json.dumps(body)
    return next(t for t in ("Hello everyone", "Three of us", "I will write") if t in text)


def outputs(runs: Path) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    run_dir = only_run(runs)
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    tokens = json.loads((run_dir / "results.json").read_text())["tasks"]["elitr_qa"]["accounting"]["tokens"]
    return samples, tokens, json.loads((run_dir / "manifest.json").read_text())["usage"]


@pytest.mark.parametrize("provider", list(MODELS))
def test_a_run_costs_what_the_providers_cache_arithmetic_bills(provider: str, server: ProviderServer,
                                                               long_home: Path, tmp_path: Path) -> None:
    model, path = MODELS[provider]
    code, out, err = run(server, long_home, tmp_path / "runs", model)
    assert code == 0, err
    bodies, bills = server.bodies(path), server.ledger.bills  # type: ignore[union-attr]
    assert len(bodies) == len(bills) == 7

    # the first question about a meeting writes its transcript (Anthropic bills it; the automatic
    # caches write for free), every later one reads it, though the meetings' questions interleave
    meetings = [meeting_of(b) for b in bodies]
    assert meetings[:3] == sorted(set(meetings), key=meetings.index)  # each meeting primed before the others
    assert meetings != sorted(meetings, key=meetings.index)  # so their questions interleave
    for i, (meeting, bill) in enumerate(zip(meetings, bills)):
        if meetings.index(meeting) == i:
            assert bill.read == 0 and (bill.written > 3000) == (provider == "anthropic"), (i, bill)
        else:
            assert bill.read > 3000 and bill.written == 0, (i, bill)
    if provider == "anthropic":  # one breakpoint, where the question begins: the instruction after the
        for body in bodies:        # transcript is cached with it, not billed in full with every question
            blocks = body["messages"][0]["content"]
            assert [("cache_control" in b) for b in blocks] == [True, False]
            assert blocks[0]["cache_control"] == {"type": "ephemeral"}  # 5 minutes: answers come fast
            assert blocks[0]["text"].endswith("making inferences from the provided transcript.\n\n\n\n")
            assert blocks[1]["text"].endswith("?") and "transcript" not in blocks[1]["text"]
    if provider == "openai":  # one key per meeting
        keys = server.ledger.keys  # type: ignore[union-attr]
        assert len(set(keys)) == 3 and all(keys[meetings.index(m)] == k for m, k in zip(meetings, keys))
    if provider == "gemini":
        assert "cache_control" not in json.dumps(bodies) and "cachedContent" not in json.dumps(bodies)
    # each meeting's shared part sized once, by the provider's own count where it has one
    counted = {"anthropic": "/messages/count_tokens", "gemini": ":countTokens"}
    assert server.ledger.counted == (3 if provider in counted else 0)  # type: ignore[union-attr]
    if provider == "gemini":
        assert all(c["generateContentRequest"]["model"] == "models/gemini-2.5-flash"
                   for c in server.bodies(":countTokens"))

    # billed as the provider's arithmetic says, counted apart the same everywhere
    samples, tokens, usage = outputs(tmp_path / "runs")
    billed = server.ledger.total()  # type: ignore[union-attr]
    assert usage["cost_usd"] == pytest.approx(billed, abs=1e-8)
    read, written = sum(b.read for b in bills), sum(b.written for b in bills)
    uncached = sum(b.uncached for b in bills)
    assert (usage["cache_read_tokens"], usage["cache_write_tokens"], usage["uncached_prompt_tokens"]) == \
        (read, written, uncached)
    assert (tokens["cache_read"], tokens["cache_write"], tokens["uncached_input"]) == (read, written, uncached)
    assert sum(s["cache_read_tokens"] for s in samples) == read and tokens["cache_unreported"] == 0
    assert usage["cache_reads_expected"] == 4 and usage["cache_reads_missed"] == 0
    assert f"{read:,} prompt tokens read from the provider's cache" in out
    assert "billed in full" in out and "saved against no cache" in out


def test_with_caching_off_the_same_run_pays_every_transcript_in_full(server: ProviderServer, long_home: Path,
                                                                     tmp_path: Path) -> None:
    model = MODELS["anthropic"][0]
    code, _, err = run(server, long_home, tmp_path / "on", model)
    assert code == 0, err
    cached = server.ledger.total()  # type: ignore[union-attr]
    server.ledger = CacheLedger()
    code, out, err = run(server, long_home, tmp_path / "off", model + ",prompt_cache=off")
    assert code == 0, err
    assert "cache_control" not in json.dumps(server.bodies("/messages")[7:])
    _, tokens, usage = outputs(tmp_path / "off")
    assert usage["cost_usd"] == pytest.approx(server.ledger.total(), abs=1e-8)
    assert usage["cache_read_tokens"] == usage["cache_write_tokens"] == 0 and "prompt cache" not in out
    # 3 transcripts written at 1.25x and read 4 times at 0.1x, against 7 transcripts at 1x
    assert cached < 0.6 * usage["cost_usd"]


def test_a_provider_whose_cache_serves_nothing_is_said_and_the_run_goes_on(server: ProviderServer,
                                                                           long_home: Path, tmp_path: Path) -> None:
    """(With OpenAI's extended retention asked for: `prompt_cache_retention` on every request.)"""
    server.ledger.enabled = False  # type: ignore[union-attr]
    code, out, err = run(server, long_home, tmp_path / "runs", MODELS["openai"][0] + ",cache_ttl=24h")
    assert code == 0, err
    assert {b.get("prompt_cache_retention") for b in server.bodies("/chat/completions")} == {"24h"}
    assert ("the provider reported no cache read for 4 of the 4 answers sent after their context was cached"
            in out)
    _, _, usage = outputs(tmp_path / "runs")
    assert usage["cost_usd"] == pytest.approx(server.ledger.total(), abs=1e-8)  # type: ignore[union-attr]


def test_a_thinking_budget_keeps_a_context_for_an_hour(server: ProviderServer, long_home: Path,
                                                       tmp_path: Path) -> None:
    """Claude thinking 8,192 tokens may take minutes between two questions about a meeting: more
    than half of the 5-minute lifetime, so the breakpoint asks for an hour (a write at 2x), and the
    meetings asked twice are left unmarked (a write and a read would cost more than two prompts)."""
    code, _, err = run(server, long_home, tmp_path / "runs", MODELS["anthropic"][0] + " --thinking on")
    assert code == 0, err
    marks = [block["cache_control"] for body in server.bodies("/messages") for block in body["messages"][0]["content"]
             if "cache_control" in block]
    assert marks == [{"type": "ephemeral", "ttl": "1h"}] * 3
    _, _, usage = outputs(tmp_path / "runs")
    assert usage["cost_usd"] == pytest.approx(server.ledger.total(), abs=1e-8)  # type: ignore[union-attr]
    assert usage["cache_reads_expected"] == 2 and usage["cache_reads_missed"] == 0


def test_message_batches_carry_the_breakpoint_for_an_hour(long_home: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch is processed within hours, so its lines ask for the 1-hour lifetime (2x a write);
    a meeting asked twice is then left unmarked (a write and a read cost more than two prompts)."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-0000")
    srv = BatchServer()
    srv.ledger = CacheLedger()
    try:
        code, out, err = run(srv, long_home, tmp_path / "runs", "litellm:anthropic/claude-sonnet-4-5,api_base={root},"
                             "batch=true,batch_poll=0.05,batch_poll_max=0.2,batch_max_wait=0.3")
        lines = [line for b in srv.batches.values() for line in b["requests"].values()]
    finally:
        srv.close()
    assert code == 0, err
    marked = [line["messages"][0]["content"][0]["cache_control"] for line in lines
              if isinstance(line["messages"][0]["content"], list)]
    assert marked == [{"type": "ephemeral", "ttl": "1h"}] * 3  # the meeting asked three times
    _, tokens, usage = outputs(tmp_path / "runs")
    assert usage["batched"] == 7 and usage["cost_usd"] == pytest.approx(srv.ledger.total(), abs=1e-8)
    assert sum(b.written > 0 for b in srv.ledger.bills) == 1 and sum(b.read > 0 for b in srv.ledger.bills) == 2
    assert tokens["cache_write"] == usage["cache_write_tokens"] > 0


@pytest.mark.parametrize("option, said", [
    ("litellm:openai/gpt-4.1,cache_ttl=1h", "cache_ttl=1h: the prompt cache of OpenAI offers 24h"),
    ("litellm:anthropic/claude-sonnet-4-5,cache_ttl=24h",
     "cache_ttl=24h: the prompt cache of Anthropic's Messages API offers 5m or 1h"),
    ("litellm:gemini/gemini-2.5-flash,cache_ttl=1h", "cache_ttl=1h: the prompt cache of Gemini's API has no lifetime"),
    ("litellm:hosted_vllm/Qwen/Qwen3-8B,api_base=http://127.0.0.1:9,prompt_cache=on",
     "prompt_cache=on: an OpenAI-compatible server has no prompt cache lceval can use"),
    ("litellm:gemini/gemini-2.0-flash,prompt_cache=on", "Gemini caches implicitly from its 2.5 models on"),
    ("litellm:anthropic/claude-sonnet-4-5,cache_ttl=10m", "cache_ttl"),
])
def test_a_lifetime_or_cache_the_provider_does_not_offer_exits_2(option: str, said: str, long_home: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(name, "test-key-0000")
    code, out, err = call("run", "--tasks", "elitr_qa", "--model", option, "--data-home", long_home,
                          "--output", tmp_path / "runs", "--no-progress", "--dry-run")
    assert code == 2 and said in err, err
    assert "Traceback" not in err and not (tmp_path / "runs").exists()


def test_a_context_in_the_system_message_is_marked_there(server: ProviderServer, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the shared part ends inside the system message (a spec that puts the document there),
    the breakpoint goes there, directly and in a Message Batches line; the question is not cached."""
    from lceval_plugins.backends.litellm_api import make_litellm

    system = "Answer from this document.\n\n" + FILLER
    ask = GenerationRequest("q", [Message("system", system + "\nBe brief."), Message("user", "Who spoke?")],
                            GenerationParams(max_new_tokens=8),
                            shared=SharedPrefix("doc-1", 0, len(system), requests=5, reuse_within_s=10.0))
    make_litellm("anthropic/claude-sonnet-4-5", {"api_base": server.root}).generate([ask])
    (direct,) = server.bodies("/messages")
    assert direct["system"] == [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}},
                                {"type": "text", "text": "\nBe brief."}]
    assert "cache_control" not in json.dumps(direct["messages"])
    assert server.ledger.bills[0].written > 3000  # type: ignore[union-attr]

    batches = BatchServer()
    try:
        make_litellm("anthropic/claude-sonnet-4-5", {"api_base": batches.root}).batch_api().submit("b", [("b0", ask)])
        (line,) = next(iter(batches.batches.values()))["requests"].values()
    finally:
        batches.close()
    # a batch asks for an hour only when the engine says a context may wait that long (it does when batching)
    assert line["system"] == direct["system"] and line["messages"] == [{"role": "user", "content": "Who spoke?"}]


def test_a_context_near_the_minimum_is_sized_by_the_providers_token_count(server: ProviderServer, long_home: Path,
                                                                          tmp_path: Path) -> None:
    """Claude Haiku 4.5 caches from 4,096 tokens. Each transcript here is about 4,600 tokens as
    Anthropic counts them, and under 3,100 at the 6 characters a token lceval falls back on
    without a count: counted by Anthropic's /v1/messages/count_tokens (once per meeting), every
    question is marked and the later ones read their meeting from the cache; where the count is
    not to be had, the estimate leaves them unmarked, and says so."""
    model = "litellm:anthropic/claude-haiku-4-5,api_base={root}"
    code, out, err = run(server, long_home, tmp_path / "counted", model)
    assert code == 0, err
    counts = server.bodies("/messages/count_tokens")
    assert len(counts) == 3 and server.ledger.counted == 3  # type: ignore[union-attr]
    assert all(c["model"] == "claude-haiku-4-5" and "cache_control" not in json.dumps(c) for c in counts)
    bodies = server.bodies("/messages")
    assert all("cache_control" in json.dumps(b) for b in bodies) and len(bodies) == 7
    _, _, usage = outputs(tmp_path / "counted")
    assert usage["cache_reads_expected"] == 4 and usage["cache_reads_missed"] == 0 and usage["cache_saved_usd"] > 0
    assert "characters a token" not in err

    server.counting, server.ledger = False, CacheLedger()
    code, out, err = run(server, long_home, tmp_path / "estimated", model)
    assert code == 0, err
    assert "token count failed" in err and "at 6 characters a token, an under-count" in err
    assert not any("cache_control" in json.dumps(b) for b in server.bodies("/messages")[7:])


def test_an_unknown_price_is_said_unknown_never_0(server: ProviderServer, long_home: Path, tmp_path: Path) -> None:
    """A Claude model litellm's price map lacks (litellm makes up an entry of price 0 for it):
    its cost and what the cache saved are unknown on the console and null in the manifest."""
    code, out, err = run(server, long_home, tmp_path / "runs", "litellm:anthropic/claude-unpriced-1,api_base={root}")
    assert code == 0, err
    _, _, usage = outputs(tmp_path / "runs")
    assert usage["cache_read_tokens"] > 0 and usage["cache_saved_usd"] is None and usage["cost_unknown"] == 7
    manifest = json.loads((only_run(tmp_path / "runs") / "manifest.json").read_text())
    assert manifest["cost"]["generation"]["total_usd"] is None and manifest["cost"]["total_usd"] is None
    assert "what it saved is unknown (the price is unknown)" in out and "$0.0000" not in out
    assert "cost: unknown = generation unknown (7 answers of unknown price)" in out
    # and in the HTML report's cost section
    assert call("report", only_run(tmp_path / "runs"), "--format", "html", "--output", tmp_path / "r.html")[0] == 0
    html = (tmp_path / "r.html").read_text()
    costs = html[html.index('id="cost"'):html.index('id="runs"')]
    assert "unknown" in costs and "$0.0000" not in costs


def test_a_batch_whose_lines_each_write_their_context_says_what_caching_cost_more(long_home: Path, tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch
                                                                                  ) -> None:
    """A provider that processes a batch's lines at once: each line about a meeting writes it (at
    2x the input price for the hour) and none reads it, so caching cost more than none. Said as
    such, with its cause, in dollars a person reads (never `$-1.89e-01 saved`)."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-0000")
    srv = BatchServer()
    srv.ledger, srv.at_once = CacheLedger(), True
    try:
        code, out, err = run(srv, long_home, tmp_path / "runs", "litellm:anthropic/claude-sonnet-4-5,api_base={root},"
                             "batch=true,batch_poll=0.05,batch_poll_max=0.2,batch_max_wait=0.3")
    finally:
        srv.close()
    assert code == 0, err
    assert sum(b.written > 0 for b in srv.ledger.bills) == 3 and not any(b.read for b in srv.ledger.bills)
    _, _, usage = outputs(tmp_path / "runs")
    assert usage["cache_saved_usd"] < 0 and usage["cache_writes"] == 3
    (line,) = [x for x in out.splitlines() if x.startswith("prompt cache (generation)")]
    extra = -usage["cache_saved_usd"]
    assert f"caching cost ${extra:.4f} more than no cache (cache writes from 3 lines at once" in line
    assert "saved" not in line and "e-0" not in out
