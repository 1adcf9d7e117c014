"""A long-context method as a setting of the `hf:` backend (`press=NAME,compression_ratio=R`),
without kvpress: the example package's `ends` method (a third party's press, found the way
`lceval.engine.load_plugins` finds every plugin) on the tiny model folder of
test_hf_backend.py. A press at ratio 0 answers as the batched engine does; at 0.5 the cache
keeps the positions the ratio says, a context is compressed once for all its questions (or per
question, query-aware), and a `--press-sweep` run gives `lceval report` its table and charts
against the ratio. Bad press options exit 2 naming the option. kvpress's own presses against
kvpress's pipeline: tests/kvpress (a venv of its own). Seconds."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from lceval.types import GenerationParams, GenerationRequest, Message
from tests.cli import call, run_config
from tests.plugins.backends.test_hf_backend import CORPUS, folder  # noqa: F401  (the tiny model fixture)

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed"),
    pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers not installed"),
    pytest.mark.skipif(importlib.util.find_spec("tokenizers") is None, reason="tokenizers not installed"),
]

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "lceval-example-plugin" / "src"
CONTEXT = "Meeting:\n" + CORPUS[0] * 6 + "\n"
QUESTIONS = ["Question: Who opened the meeting?", "Question: When is the next meeting?", "Question: What broke?"]


@pytest.fixture
def plugins(monkeypatch):
    """Every installed plugin and the example package's (its `ends` method), loaded as a
    command loads them: the backend's `press=ends` is built from these."""
    from lceval.engine import load_plugins

    monkeypatch.syspath_prepend(str(EXAMPLE))
    import lceval_example

    yield load_plugins(extra=[("example", lceval_example)])
    sys.modules.pop("lceval_example", None)


def ask(question: str, new: int = 10) -> GenerationRequest:
    return GenerationRequest(question, [Message("user", CONTEXT + question)], GenerationParams(max_new_tokens=new),
                             hints={"context_end": [0, len(CONTEXT)]})


def answers(folder: Path, **options: str):
    from lceval_plugins.backends.hf import make_hf

    backend = make_hf(str(folder), {"dtype": "auto", **options})
    try:
        return backend.generate([ask(q) for q in QUESTIONS]), backend.stats(), backend
    finally:
        backend.close()


def test_at_ratio_zero_a_press_answers_as_the_batched_engine(folder, plugins):
    plain, _, _ = answers(folder, batch_size="4")
    pressed, stats, backend = answers(folder, press="ends", compression_ratio="0")
    assert [g.text for g in pressed] == [g.text for g in plain]
    assert backend.max_in_flight == 1 and backend.prefix_cache.kind == "last-prompt"
    assert stats["batched_decoding"] is False and stats["batched_decoding_off_because"]
    assert pressed[0].extras["kv_context_tokens"] == pressed[0].extras["context_tokens"]


def test_the_cache_keeps_what_the_ratio_says_and_a_context_is_compressed_once(folder, plugins):
    gens, stats, backend = answers(folder, press="ends", compression_ratio="0.5", **{"press.sink": "2"})
    n = gens[0].extras["context_tokens"]
    assert all(g.extras["kv_context_tokens"] == max(1, int(n * 0.5)) for g in gens)
    assert stats["contexts_compressed"] == 1 and stats["prefix_reuse"] is True
    # the first answer prefilled the context; the others only their own tokens
    assert gens[0].prefilled_tokens == gens[0].prompt_tokens
    assert [g.prefilled_tokens for g in gens[1:]] == [g.prompt_tokens - n for g in gens[1:]]
    whole, _, _ = answers(folder, press="ends", compression_ratio="0")
    assert gens[0].extras["kv_cache_bytes"] < whole[0].extras["kv_cache_bytes"]
    identity = backend.identity()["press"]
    assert identity["compression_ratio"] == 0.5 and identity["sink"] == 2 and identity["query_aware"] is False


def test_query_aware_compresses_each_prompt_with_its_question(folder, plugins):
    gens, stats, _ = answers(folder, press="ends", compression_ratio="0.5", press_query_aware="true")
    assert stats["contexts_compressed"] == len(QUESTIONS) and stats["prefix_reuse"] is False
    assert all(g.prefilled_tokens == g.prompt_tokens for g in gens)
    assert all(g.extras["context_tokens"] > len(CONTEXT) // 8 for g in gens)


@pytest.mark.parametrize("model, field", [
    ("hf:{folder},press=snapkvv,compression_ratio=0.5", "press"),
    ("hf:{folder},press=snapkv,compression_ratio=1", "compression_ratio"),
    ("hf:{folder},press=snapkv,compression_ratio=-0.1", "compression_ratio"),
    ("hf:{folder},compression_ratio=0.5", "compression_ratio"),
    ("hf:{folder},press.window_size=8", "press.window_size"),
    ("hf:{folder},press=snapkv,compression_ratio=0.5,press.windw_size=8", "press.windw_size"),
    ("llamacpp:/nowhere/model.gguf,press=snapkv", "--model"),
    ("litellm:openai/gpt-4o,press=snapkv,compression_ratio=0.5", "--model"),
])
def test_bad_press_options_exit_2_naming_the_option(folder, tiny_home, tmp_path, model, field):
    code, _, err = call("run", "--tasks", "elitr_qa", "--model", model.format(folder=folder), "--data-home",
                        tiny_home, "--output", tmp_path, "--no-progress")
    assert code == 2 and f"field '{field}'" in err and len(err.strip().splitlines()) == 1, err
    if field == "--model":
        assert "'press'" in err and "hf:" in err  # the option, and the backend that takes it


def test_a_press_sweep_with_a_bad_ratio_exits_2_and_a_missing_press_library_exits_4(folder, tiny_home, tmp_path):
    code, _, err = call("run", "--tasks", "elitr_qa", "--model", f"hf:{folder}", "--press-sweep", "snapkv:0,1.5",
                        "--data-home", tiny_home, "--output", tmp_path)
    assert code == 2 and "--press-sweep" in err
    if importlib.util.find_spec("kvpress") is None:
        code, _, err = call("run", "--tasks", "elitr_qa", "--model", f"hf:{folder},press=snapkv,compression_ratio=0.5",
                            "--data-home", tiny_home, "--output", tmp_path, "--no-progress")
        assert code == 4 and "kvpress" in err  # a package still to be installed, as everywhere


def test_a_press_sweep_runs_each_ratio_and_the_report_draws_it(folder, plugins, tiny_home, tmp_path):
    from lceval.engine import RunConfig

    config = RunConfig(tasks="elitr_qa", models=[f"hf:{folder},dtype=auto"], press_sweep="ends:0,0.5",
                       overrides={"generation.max_new_tokens": 6}, data_home=tiny_home, output=tmp_path / "runs",
                       progress=False)
    done = run_config(config, plugins)
    assert len(done) == 2
    manifests = [json.loads((d / "manifest.json").read_text()) for d, _ in done]
    assert [m["config"]["press_sweep"] for m in manifests] == ["ends:0,0.5"] * 2
    assert sorted(m["resolved"]["model_identity"]["press"]["compression_ratio"] for m in manifests) == [0.0, 0.5]
    assert all(m["backend_stats"]["model"]["batched_decoding"] is False for m in manifests)
    code, out, err = call("report", *[d for d, _ in done], "--format", "markdown")
    assert code == 0, err
    table = out.split("by compression ratio")[1].split("###")[0]
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in table.splitlines() if line.startswith("| ends")}
    assert set(rows) == {"ends 0", "ends 0.5"}
    # columns: score mean/low/high, diff/low/high/p, KV peak/mean, kept, prefill, decode
    assert rows["ends 0"][3] == "-" and rows["ends 0.5"][6] != "-"  # the paired test, against ratio 0
    assert float(rows["ends 0.5"][7]) < float(rows["ends 0"][7])  # less KV memory
    if importlib.util.find_spec("altair") is not None:
        page = tmp_path / "report.html"
        code, _, err = call("report", *[d for d, _ in done], "--format", "html", "--output", page)
        assert code == 0, err
        html = page.read_text()
        assert "score by compression ratio" in html and "KV cache memory by compression ratio" in html


FAKE_KVPRESS = Path(__file__).resolve().parents[2] / "data" / "fake_kvpress"


@pytest.fixture
def fake_kvpress(monkeypatch):
    """tests/data/fake_kvpress: kvpress's AdaKVPress as far as lceval reads it (the keys it
    masks, left on each attention module), so a head-wise press runs without kvpress."""
    if importlib.util.find_spec("kvpress") is not None:
        pytest.skip("kvpress is installed: tests/kvpress runs its real head-wise presses")
    monkeypatch.syspath_prepend(str(FAKE_KVPRESS))
    yield
    sys.modules.pop("kvpress", None)


def test_a_head_wise_press_reports_what_it_kept_apart_from_the_memory_its_cache_takes(folder, fake_kvpress, tiny_home,
                                                                                      tmp_path):
    code, out, err = call("run", "--tasks", "elitr_qa", "--model", f"hf:{folder},dtype=auto", "--press-sweep",
                          "adakv_snapkv:0,0.5", "--set", "generation.max_new_tokens=4", "--limit", "2",
                          "--data-home", tiny_home, "--output", tmp_path / "runs", "--no-progress")
    assert code == 0, err
    runs = sorted(p for p in (tmp_path / "runs").iterdir() if not p.name.startswith("."))
    by_ratio = {json.loads((r / "manifest.json").read_text())["resolved"]["model_identity"]["press"]
                ["compression_ratio"]: r for r in runs}
    # the folders say the press and the ratio, not only the time
    assert "_adakv_snapkv-0_" in by_ratio[0.0].name and "_adakv_snapkv-0.5_" in by_ratio[0.5].name
    stats = {r: json.loads((d / "manifest.json").read_text())["backend_stats"]["model"] for r, d in by_ratio.items()}
    assert stats[0.0]["kept_share"] == 1.0 and stats[0.0]["masked_entries"] == 0
    # every position held (the memory of the uncompressed cache), half the entries kept
    assert stats[0.5]["held_share"] == 1.0 and 0.45 < stats[0.5]["kept_share"] <= 0.5
    assert stats[0.5]["masked_entries"] > 0
    samples = [json.loads(line) for line in (by_ratio[0.5] / "samples.jsonl").read_text().splitlines()]
    extras = samples[0]["generation_extras"]
    assert extras["kv_context_tokens"] == extras["context_tokens"]
    assert extras["kv_kept_bytes"] < extras["kv_cache_bytes"] and 0.45 < extras["kv_kept_share"] <= 0.5

    code, out, err = call("report", *runs, "--format", "markdown")
    assert code == 0, err
    table = out.split("by compression ratio")[1].split("###")[0]
    rows = {line.split("|")[1].strip(): [float(c) if c.strip() != "-" else None for c in line.split("|")[2:-1]]
            for line in table.splitlines() if line.startswith("| adakv_snapkv")}
    # columns: score mean/low/high, diff/low/high/p, KV held peak/mean, kept entries' MiB, kept share,
    # positions held, prefill, decode
    zero, half = rows["adakv_snapkv 0"], rows["adakv_snapkv 0.5"]
    assert half[7] == zero[7] and half[11] == zero[11]  # the same memory held, the same positions
    assert half[9] < half[7] and zero[9] == zero[7]  # the kept entries would take less
    assert zero[10] == 1.0 and 0.45 < half[10] <= 0.5
    assert "adakv_snapkv masks keys instead of removing them" in out


def test_a_press_sweep_beside_a_model_that_names_a_press_exits_2_naming_both(tiny_home, tmp_path):
    model = "hf:some/model,press=snapkv,compression_ratio=0.5"
    code, _, err = call("run", "--tasks", "elitr_qa", "--model", model, "--press-sweep", "expected_attention:0,0.5",
                        "--data-home", tiny_home, "--output", tmp_path / "runs")
    assert code == 2 and "--press-sweep expected_attention:0,0.5" in err and model in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "runs").exists()
