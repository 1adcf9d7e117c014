"""Reasoning models through every provider's API, run end to end (`lceval run` in-process)
against one local server that speaks each provider's documented wire format and refuses what
the provider refuses (tests/provider_servers.py): OpenAI's o-series and GPT-5 (chat
completions, and the Responses API where litellm routes a model there), DeepSeek, Anthropic's
Messages, Gemini, and vLLM and SGLang servers with and without a reasoning parser.

For each: the request lceval sends is the provider's own (asserted on the wire), the answer
scored is the answer alone, the reasoning is kept, a thinking cut by the token limit is
censored (never judged), and the tokens are counted once and the same in samples.jsonl,
results.json, the manifest and the console. Then the thinking switches, budgets and efforts
each provider takes, and the bad input each refuses (exit 2, one line naming the flag)."""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from lceval.types import GenerationParams, GenerationRequest, Message
from tests import elitr_tiny
from tests.cli import call
from tests.conftest import only_run
from tests.provider_servers import ANSWER, PROMPT, THOUGHT, ProviderServer

pytestmark = pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed")

#: the question whose thinking outlasts any token limit (censored in every run)
LONG = "When is the next meeting?"
GROUND = {q: a for split in (elitr_tiny.DEV, elitr_tiny.TEST2) for m in split["meetings"]
          for q, a in ((x["question"], x["groundtruth-answer"]) for x in m["questions"])}


def answer_of(question: str) -> str:
    return next((a for q, a in GROUND.items() if q in question), "I do not know")


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProviderServer]:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "DEEPSEEK_API_KEY"):
        monkeypatch.setenv(name, "test-key-0000")
    srv = ProviderServer()
    srv.answer = answer_of
    srv.long = {LONG}
    yield srv
    srv.close()


def run(server: ProviderServer, home: Path, out: Path, model: str, *flags: str) -> tuple[int, str, str]:
    spec = model.format(url=server.url, root=server.root)
    return call("run", "--tasks", "elitr_qa", "--model", spec, "--data-home", home, "--output", out, "--no-progress",
                *flags)


def wire(body: dict[str, Any]) -> dict[str, Any]:
    """A request body without its messages: what the provider is told besides the prompt."""
    return {k: v for k, v in body.items()
            if k not in ("messages", "contents", "system", "system_instruction", "systemInstruction", "input",
                         "instructions")}


#: provider -> (model string, server setup, the path asked, what every request must carry, and
#: not carry); each thinks THOUGHT tokens and answers in ANSWER ones
CASES: dict[str, tuple[str, Callable[[ProviderServer], None], str, dict[str, Any], tuple[str, ...]]] = {
    # an effort-only API: the provider's own effort (nothing sent), room for the hidden reasoning
    "openai-o4-mini": ("litellm:openai/o4-mini,api_base={url}", lambda s: None, "/chat/completions",
                       {"max_completion_tokens": 512 + 25_000}, ("max_tokens", "temperature", "reasoning_effort")),
    "openai-gpt-5": ("litellm:openai/gpt-5-mini,api_base={url}", lambda s: None, "/chat/completions",
                     {"max_completion_tokens": 512 + 25_000}, ("max_tokens", "temperature", "stop")),
    "deepseek": ("litellm:deepseek/deepseek-reasoner,api_base={url}", lambda s: None, "/chat/completions",
                 {"max_tokens": 512 + 32_768}, ("temperature", "thinking")),
    # thinking off unless switched on; on, it needs a budget: the family's, counted inside max_tokens
    "anthropic": ("litellm:anthropic/claude-sonnet-4-20250514,api_base={root} --thinking on", lambda s: None,
                  "/messages", {"thinking": {"type": "enabled", "budget_tokens": 8192}, "max_tokens": 512 + 8192},
                  ("temperature",)),
    # thinks as its API decides (no budget sent), its thoughts returned, room for them
    "gemini": ("litellm:gemini/gemini-2.5-flash,api_base={root}", lambda s: None, ":generateContent",
               {"generationConfig": {"temperature": 0.0, "max_output_tokens": 512 + 32_768, "seed": 0,
                                     "thinkingConfig": {"includeThoughts": True}}}, ()),
    "vllm-parser": ("litellm:hosted_vllm/Qwen/Qwen3-8B,api_base={url},reasoning=separate", lambda s: None,
                    "/chat/completions", {"max_tokens": 512 + 32_768}, ("chat_template_kwargs",)),
    "vllm-no-parser": ("litellm:hosted_vllm/Qwen/Qwen3-8B,api_base={url},reasoning=inline",
                       lambda s: setattr(s, "parser", False), "/chat/completions", {"max_tokens": 512 + 32_768}, ()),
    "sglang-parser": ("litellm:openai/Qwen/Qwen3-8B,api_base={url},reasoning=separate",
                      lambda s: setattr(s, "kind", "sglang"), "/chat/completions", {"max_tokens": 512 + 32_768}, ()),
    "sglang-no-parser": ("litellm:openai/Qwen/Qwen3-8B,api_base={url},reasoning=inline",
                         lambda s: (setattr(s, "kind", "sglang"), setattr(s, "parser", False)),
                         "/chat/completions", {"max_tokens": 512 + 32_768}, ()),
}
if importlib.util.find_spec("mcp") is not None:  # litellm 1.106's bridge to the Responses API imports it
    CASES["openai-responses"] = ("litellm:openai/o1-pro,api_base={url}", lambda s: None, "/responses",
                                 {"max_output_tokens": 512 + 25_000}, ("temperature", "reasoning"))


def _subset(want: dict[str, Any], got: dict[str, Any]) -> bool:
    return all(_subset(v, got.get(k) or {}) if isinstance(v, dict) and k != "thinking" else got.get(k) == v
               for k, v in want.items())


@pytest.mark.parametrize("case", list(CASES))
def test_a_provider_end_to_end(case: str, server: ProviderServer, tiny_home: Path, tmp_path: Path) -> None:
    model, setup, path, carries, never = CASES[case]
    setup(server)
    code, out, err = run(server, tiny_home, tmp_path / "runs", *model.split(" "))
    assert code == 0, err
    bodies = server.bodies(path)
    # nothing else, but for the provider's token count of each meeting's shared part (a prompt
    # cache's minimum is decided by it; this server has none, so it is asked once)
    counts = ("/messages/count_tokens", ":countTokens")
    assert len(bodies) == 7 and not [b for p, b in server.requests if not p.endswith((path, *counts))]
    assert len([p for p, _ in server.requests if p.endswith(counts)]) <= 1
    for body in bodies:  # the provider's own request, every time
        assert _subset(carries, body), wire(body)
        assert not set(never) & set(body), wire(body)

    run_dir = only_run(tmp_path / "runs")
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    results = json.loads((run_dir / "results.json").read_text())["tasks"]["elitr_qa"]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    answered = [s for s in samples if s["response"] is not None]
    (cut,) = [s for s in samples if s["response"] is None]
    # the answer alone is scored; the reasoning is kept beside it (hidden: "" with its tokens)
    assert [s["response"] for s in answered] == [answer_of(s["question"]) for s in answered]
    assert all("think" not in s["response"] and s["reasoning"] is not None for s in answered)
    if case.startswith(("openai", "deepseek")) or case in ("gemini", "vllm-parser", "vllm-no-parser"):
        assert all(s["reasoning_tokens"] == THOUGHT for s in answered)
    assert all(s["completion_tokens"] == THOUGHT + ANSWER and s["prompt_tokens"] == PROMPT for s in answered)
    # a thinking cut by the token limit is censored: no answer, never judged, at the bottom of the scale
    assert LONG in cut["question"] and cut["generation_extras"]["unclosed_thinking"] is True
    assert cut["judgments"][0]["parse_status"] == "censored" and cut["score"] == 1.0
    acc = results["accounting"]
    assert acc["censored"] == 1 and acc["unanswered"] == 1 and acc["judge_missing"] == 0
    assert results["metrics"]["uncensored_bound"]["n"] == 6 and results["metrics"]["score"]["n"] == 7

    # the tokens, counted once, the same everywhere
    completion = sum(s["completion_tokens"] for s in samples)
    thought = [s["reasoning_tokens"] for s in samples]
    reasoning = None if None in thought else sum(thought)
    assert acc["tokens"]["completion"] == completion == manifest["usage"]["completion_tokens"]
    assert acc["tokens"]["reasoning"] == reasoning == manifest["usage"]["reasoning_tokens"]
    assert acc["tokens"]["reasoning_unknown"] == thought.count(None) == manifest["usage"]["reasoning_unknown"]
    said = (f"thinking {reasoning:,} tokens of {completion:,} completion tokens" if reasoning is not None else
            f"thinking tokens not reported for {thought.count(None)} of 7 answer(s) (inside their {completion:,}")
    assert said in out and "1 censored" in out
    header = out.splitlines()[0].split()
    assert header[-1] == "censored" and "uncensored only (bound)" in out


def test_what_each_api_is_told_for_thinking_on_off_budget_and_effort(server: ProviderServer, tmp_path: Path) -> None:
    """The backend alone, request by request: each provider's switch, budget and effort in its
    own terms (and the temperature rule while Claude thinks)."""
    from lceval.engine import Cache, CachedModel
    from lceval_plugins.backends.litellm_api import make_litellm

    def told(model: str, options: dict[str, str], path: str, **params: Any) -> dict[str, Any]:
        backend = make_litellm(model, options)
        before = len(server.bodies(path))
        CachedModel(backend, Cache(tmp_path / f"c{len(server.requests)}.sqlite"), "api").generate(
            [GenerationRequest("q", [Message("user", "Who opened the meeting?")],
                               GenerationParams(max_new_tokens=64, **params))])
        bodies = server.bodies(path)
        assert len(bodies) == before + 1, server.requests[-1]
        return wire(bodies[-1])

    url, root = {"api_base": server.url}, {"api_base": server.root}
    assert told("openai/o4-mini", url, "/chat/completions", reasoning_effort="high", reasoning_room=1000) == {
        "model": "o4-mini", "max_completion_tokens": 1064, "reasoning_effort": "high", "seed": 0}
    claude = "anthropic/claude-sonnet-4-20250514"
    assert told(claude, root, "/messages", thinking=False) == {
        "model": "claude-sonnet-4-20250514", "max_tokens": 64, "temperature": 0.0, "thinking": {"type": "disabled"}}
    assert told(claude, root, "/messages", reasoning_budget=2048, top_p=0.9) == {
        "model": "claude-sonnet-4-20250514", "max_tokens": 64 + 2048,
        "thinking": {"type": "enabled", "budget_tokens": 2048}}  # neither temperature 0 nor top_p 0.9
    gemini = told("gemini/gemini-2.5-flash", root, ":generateContent", thinking=False)["generationConfig"]
    assert gemini["thinkingConfig"] == {"thinkingBudget": 0} and gemini["max_output_tokens"] == 64
    gemini = told("gemini/gemini-2.5-flash", root, ":generateContent", reasoning_budget=2048)["generationConfig"]
    assert gemini["thinkingConfig"] == {"includeThoughts": True, "thinkingBudget": 2048}
    assert gemini["max_output_tokens"] == 64 + 2048  # the thoughts count inside
    assert told("deepseek/deepseek-reasoner", url, "/chat/completions", thinking=False)["thinking"] == {
        "type": "disabled"}
    assert told("deepseek/deepseek-reasoner", url, "/chat/completions", reasoning_effort="low")["reasoning_effort"] == "low"
    server_on = told("hosted_vllm/Qwen/Qwen3-8B", {**url, "reasoning": "separate"}, "/chat/completions",
                     thinking=True, reasoning_room=4096)
    assert server_on["chat_template_kwargs"] == {"enable_thinking": True} and server_on["max_tokens"] == 64 + 4096
    v31 = told("openai/deepseek-ai/DeepSeek-V3.1", {**url, "reasoning": "separate", "thinking_switch": "thinking"},
               "/chat/completions", thinking=False)
    assert v31["chat_template_kwargs"] == {"thinking": False}
    oss = told("openai/gpt-oss-20b", {**url, "reasoning": "separate", "takes_effort": "true",
                                      "thinking_switch": "none"}, "/chat/completions", reasoning_effort="low")
    assert oss["reasoning_effort"] == "low" and "chat_template_kwargs" not in oss


def test_harmony_markers_are_named_one_by_one(server: ProviderServer, tiny_home: Path, tmp_path: Path) -> None:
    """gpt-oss behind a server without a reasoning parser writes its analysis channel in the
    text: its markers hold '|', so they are named with think_open/think_close/think_answer."""
    server.parser = False
    server.markers = ("<|channel|>analysis<|message|>", "<|end|><|start|>assistant<|channel|>final<|message|>")
    model = ("litellm:openai/gpt-oss-20b,api_base={url},reasoning=inline,think_open=<|channel|>analysis<|message|>,"
             "think_close=<|end|>,think_answer=<|start|>assistant<|channel|>final<|message|>")
    code, out, err = run(server, tiny_home, tmp_path / "runs", model)
    assert code == 0, err
    samples = [json.loads(line) for line in (only_run(tmp_path / "runs") / "samples.jsonl").read_text().splitlines()]
    answered = [s for s in samples if s["response"] is not None]
    assert len(answered) == 6 and all(s["response"] == answer_of(s["question"]) for s in answered)
    assert all(s["reasoning"] == "The transcript names who spoke; I check each line in turn." for s in answered)


def test_split_reasoning_false_scores_the_whole_text(server: ProviderServer, tiny_home: Path, tmp_path: Path) -> None:
    """litellm moves a closed <think> block out of the text; split_reasoning=false puts it back:
    the whole text is scored, as a model that does not think."""
    server.parser = False
    code, out, err = run(server, tiny_home, tmp_path / "runs",
                         "litellm:hosted_vllm/Qwen/Qwen3-8B,api_base={url},reasoning=inline,split_reasoning=false")
    assert code == 0, err
    samples = [json.loads(line) for line in (only_run(tmp_path / "runs") / "samples.jsonl").read_text().splitlines()]
    first = next(s for s in samples if LONG not in s["question"])
    assert first["response"].startswith("<think>\nThe transcript") and first["response"].endswith(
        "</think>\n\n" + answer_of(first["question"]))
    assert "reasoning" not in first and all(s["response"] is not None for s in samples)


def test_two_budgets_of_one_model_side_by_side(server: ProviderServer, tiny_home: Path, tmp_path: Path) -> None:
    """`lceval report` tells two thinking budgets of one model apart, each with its censored
    share and the score over its uncensored items; the HTML report marks the censored item."""
    claude = "litellm:anthropic/claude-sonnet-4-20250514,api_base={root}"
    server.long_thought = 3000  # cut within 2048 tokens of thinking, answered within 4096
    for budget in ("2048", "4096"):
        code, _, err = run(server, tiny_home, tmp_path / budget, claude, "--reasoning-budget", budget)
        assert code == 0, err
    runs = [only_run(tmp_path / b) for b in ("2048", "4096")]
    code, out, err = call("report", *runs, "--format", "markdown")
    assert code == 0, err
    rows = [line for line in out.splitlines() if line.startswith("| claude-sonnet-4-20250514 (budget")]
    assert [r.split("|")[1].strip() for r in rows[:2]] == ["claude-sonnet-4-20250514 (budget 2048)",
                                                           "claude-sonnet-4-20250514 (budget 4096)"]
    head = next(line for line in out.splitlines() if line.startswith("| model |"))
    assert "censored" in head and "uncensored only (bound)" in head
    cells = [[c.strip() for c in r.split("|")[2:-1]] for r in rows[:2]]
    assert cells[0][-2:] == ["0.14", "10.00"] and cells[1][-2:] == ["0.00", "10.00"]  # censored share, bound
    assert float(cells[0][-3]) < float(cells[1][-3])  # the score over all items: the censored one at the bottom
    code, _, err = call("report", runs[0], "--format", "html", "--output", tmp_path / "r.html")
    assert code == 0, err
    html = (tmp_path / "r.html").read_text()
    assert "14% censored" in html  # the overview, beside the score
    assert re.search(r'"status": ?"censored"', html)  # the sample browser marks the censored item


@pytest.mark.parametrize("declared", ["reasoning=separate", "reasoning=inline"])
def test_a_server_model_declared_to_think_takes_the_effort(declared: str, server: ProviderServer, tiny_home: Path,
                                                          tmp_path: Path) -> None:
    """vLLM and SGLang pass `reasoning_effort` to the models that use it (gpt-oss): what the
    refusal of an effort for a server model advises (declare it) leads to a run that sends it."""
    server.parser = declared.endswith("separate")
    model = f"litellm:hosted_vllm/openai/gpt-oss-20b,api_base={{url}},{declared},thinking_switch=none"
    code, out, err = run(server, tiny_home, tmp_path / "runs", model, "--reasoning-effort", "high", "--limit", "1")
    assert code == 0, err
    bodies = server.bodies("/chat/completions")
    assert bodies and all(b["reasoning_effort"] == "high" for b in bodies)


def test_named_markers_declare_a_model_its_backend_thinks_cannot_think(tiny_home: Path, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A model whose backend reads no thinking in its template (gpt-oss's harmony channels are
    no `<think>`) is refused an effort with the advice to name its markers: named, the effort goes."""
    from lceval.interfaces import ReasoningControls
    from tests.conftest import ScriptedModel, serve_scripted

    class Unthinking(ScriptedModel):
        def reasoning_controls(self) -> ReasoningControls:
            return ReasoningControls(thinks=False, switch=False)

        def generate(self, requests: list[GenerationRequest]) -> list[Any]:
            return [replace(g, text="<a>I check each line.</a>" + g.text) for g in super().generate(requests)]

    built = serve_scripted(monkeypatch, lambda: Unthinking(window=4096))

    def effort(model: str) -> tuple[int, str]:
        code, _, err = call("run", "--tasks", "elitr_qa", "--model", model, "--data-home", tiny_home, "--output",
                            tmp_path / "runs", "--no-progress", "--limit", "1", "--reasoning-effort", "high",
                            "--cache", tmp_path / "c.sqlite")
        return code, err

    code, err = effort("scripted:x")
    assert code == 2 and "think_markers=OPEN|CLOSE" in err
    code, err = effort("scripted:x,think_markers=<a>|</a>")
    assert code == 0, err
    assert {r.params.reasoning_effort for r in built[-1].calls} == {"high"}


# -- bad input: exit 2, one line naming the flag, the model and what to use instead ---------------

@pytest.mark.parametrize("model,flags,field,says", [
    ("litellm:openai/o4-mini,api_base={url}", ["--reasoning-budget", "2000"], "--reasoning-budget",
     "takes a reasoning effort, not a thinking budget"),
    ("litellm:openai/o4-mini,api_base={url}", ["--thinking", "off"], "--thinking", "--reasoning-effort low"),
    ("litellm:openai/gpt-4o,api_base={url}", ["--reasoning-effort", "high"], "--reasoning-effort", "does not think"),
    ("litellm:anthropic/claude-sonnet-4-20250514,api_base={root}", ["--reasoning-effort", "high"],
     "--reasoning-effort", "--reasoning-budget N"),
    ("litellm:gemini/gemini-2.5-pro,api_base={root}", ["--thinking", "off"], "--thinking", "always thinks"),
    ("litellm:hosted_vllm/Qwen/Qwen3-8B,api_base={url},reasoning=separate", ["--reasoning-budget", "1000"],
     "--reasoning-budget", "generation.reasoning_room"),
    ("litellm:hosted_vllm/Qwen/Qwen3-8B,api_base={url},reasoning=none", ["--reasoning-effort", "low"],
     "--reasoning-effort", "reasoning=separate or reasoning=inline"),
    ("litellm:hosted_vllm/m,api_base={url},think_markers=<|channel|>analysis<|message|>|<|end|>", [],
     "think_markers", "think_open="),
    ("litellm:hosted_vllm/m,api_base={url},think_marker=<a>|</a>", [], "think_marker",
     "backend 'litellm' has no option 'think_marker' (given think_marker=<a>|</a>). Did you mean 'think_markers'"),
])
def test_bad_reasoning_input_exits_2_before_any_request(model: str, flags: list[str], field: str, says: str,
                                                        server: ProviderServer, tiny_home: Path,
                                                        tmp_path: Path) -> None:
    code, out, err = run(server, tiny_home, tmp_path / "runs", model, *flags)
    assert code == 2, (out, err)
    line = err.strip().splitlines()[-1]
    named = model.split(",")[0].removeprefix("litellm:") if field != "think_marker" else "litellm"
    assert field in line.split("':")[0] and says in line and named in line and server.url not in line, line
    assert not server.requests and not (tmp_path / "runs").exists()


def test_markers_that_never_appear_in_a_declared_thinking_run_exit_2(server: ProviderServer, tiny_home: Path,
                                                                    tmp_path: Path) -> None:
    server.silent = True  # a model declared to think (reasoning=inline) whose answers hold no thinking
    code, out, err = run(server, tiny_home, tmp_path / "runs",
                         "litellm:openai/Qwen/Qwen3-8B,api_base={url},reasoning=inline,concurrency=1")
    assert code == 2, err
    line = err.strip().splitlines()[-1]
    assert "'--model'" in line and "declared to think" in line and "reasoning=separate" in line
    assert re.search(r"openai/Qwen/Qwen3-8B", line) and len(server.requests) == 3


def test_a_rerun_from_the_cache_counts_the_same_tokens(server: ProviderServer, tiny_home: Path,
                                                       tmp_path: Path) -> None:
    """The manifest keeps this command's thinking apart from the cache's; together they are the
    samples' and results.json's, which do not change when every answer comes from the cache."""
    server.parser = False
    model = "litellm:hosted_vllm/Qwen/Qwen3-8B,api_base={url},reasoning=inline"
    for out in ("first", "again"):
        code, _, err = run(server, tiny_home, tmp_path / out, model)
        assert code == 0, err
    assert len(server.requests) == 7
    first, again = (json.loads((only_run(tmp_path / o) / "results.json").read_text())["tasks"]["elitr_qa"]
                    for o in ("first", "again"))
    assert first["accounting"]["tokens"] == again["accounting"]["tokens"]
    usage = json.loads((only_run(tmp_path / "again") / "manifest.json").read_text())["usage"]
    assert usage["reasoning_tokens"] == 0 and usage["cached_reasoning_tokens"] == again["accounting"]["tokens"]["reasoning"]


def test_a_model_litellm_sends_to_the_responses_api_needs_mcp(server: ProviderServer, tiny_home: Path,
                                                              tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """litellm 1.106's bridge to OpenAI's Responses API imports mcp: without it every request
    would fail, so the run stops before the first one, saying what to install."""
    import importlib.util as util

    found = util.find_spec
    monkeypatch.setattr(util, "find_spec", lambda name, *a: None if name == "mcp" else found(name, *a))
    code, _, err = run(server, tiny_home, tmp_path / "runs", "litellm:openai/o1-pro,api_base={url}")
    assert code == 4 and "Responses API" in err and "pip install mcp" in err and "o1-pro" in err
    assert not server.requests
