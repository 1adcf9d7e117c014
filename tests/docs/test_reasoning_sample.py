"""docs/reasoning.md shows a thinking model's sample and a censored one: their fields are the
fields a run's samples.jsonl holds (a run of a thinking model behind a local server that speaks
a vLLM server's shapes, tests/provider_servers.py), where the page says they are."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.cli import call
from tests.conftest import only_run
from tests.paths import REPO

pytestmark = pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed")


def _page_samples() -> list[dict[str, Any]]:
    text = (REPO / "docs" / "reasoning.md").read_text(encoding="utf-8")
    start = text.index("A thinking model's sample, and a censored one")
    blocks = re.findall(r"```json\n(.*?)```", text[start:], re.S)[:2]
    return [json.loads(b) for b in blocks]


def _shape(value: Any) -> Any:
    """The keys of a sample, one level into the parts the page explains, and their JSON types."""
    if isinstance(value, dict):
        return {k: _shape(v) if k in ("judgments", "generation_extras", "context_cut") else type(v).__name__
                for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value[:1]]
    return type(value).__name__


def test_the_sample_fields_the_page_shows_are_what_a_run_writes(tiny_home: Path, tmp_path: Path) -> None:
    from tests.plugins.backends.test_reasoning_providers import LONG, answer_of
    from tests.provider_servers import ProviderServer

    thinking, censored = _page_samples()
    server = ProviderServer()
    server.answer, server.long = answer_of, {LONG}
    try:
        code, _, err = call("run", "--tasks", "elitr_qa", "--model",
                            f"litellm:hosted_vllm/Qwen/Qwen3-8B,api_base={server.url},reasoning=separate",
                            "--data-home", tiny_home, "--output", tmp_path / "runs", "--no-progress")
    finally:
        server.close()
    assert code == 0, err
    written = [json.loads(line) for line in (only_run(tmp_path / "runs") / "samples.jsonl").read_text().splitlines()]
    real = {s["item_id"]: s for s in written}
    for shown in (thinking, censored):
        got = real[shown["item_id"]]
        assert _shape(shown) == _shape({**got, "metadata": shown["metadata"]}), shown["item_id"]
        for key in ("response", "score", "reasoning_tokens", "completion_tokens", "question"):
            assert shown[key] == got[key], key
        assert shown["judgments"][0]["parse_status"] == got["judgments"][0]["parse_status"]
        assert shown["generation_extras"] == {k: v for k, v in got["generation_extras"].items() if k != "cost_usd"}
