"""The real SmolLM2 model (llama.cpp) on HELMET's NarrativeQA spec over rows we wrote in the Hub
dataset's schema, several questions per story: the story is prefilled once for its questions (its
demos are drawn per story, so they share the whole prefix), within 1.1 x the floor (each story once,
plus each question's own tokens)."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from tests import cli as commands
from tests.plugins.documents.test_smollm2 import prefill_floor

from .helpers import CATALOG, make_tokenizer, narrativeqa_rows

pytestmark = pytest.mark.slow


def test_a_storys_questions_prefill_it_once(tmp_path):
    pytest.importorskip("llama_cpp")
    data = copy.deepcopy(CATALOG.spec("helmet_narrativeqa").data)
    hub = tmp_path / "helmet" / "hub" / "narrativeqa"
    hub.mkdir(parents=True)
    for name, rows in (("test", narrativeqa_rows(2, 3, 500)), ("train", narrativeqa_rows(3, 2, 20))):
        (hub / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    data["options"].update(pretruncate_tokenizer=str(make_tokenizer(tmp_path / "tok")), min_tokens=100,
                           lengths={"4k": 400})
    data["splits"] = ["4k"]
    data.pop("judge", None)
    data["judge"] = {"name": "helmet_qa", "options": {"metric": "f1"}}
    spec = tmp_path / "helmet_narrativeqa_small.yaml"
    spec.write_text(yaml.safe_dump(data))
    ((run_dir, table),) = commands.run(tasks=str(spec), models=["smollm2,n_ctx=8192"],
                                       overrides={"generation.max_new_tokens": 8}, output=tmp_path / "runs",
                                       progress=False)
    results = json.loads((run_dir / "results.json").read_text())
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 6 and all(s["context_cut"]["action"] == "none" for s in samples)
    assert all(s["metadata"]["document_id"].startswith("4k/doc") for s in samples)
    documents, own = prefill_floor(samples)
    prefilled = results["tasks"]["helmet_narrativeqa"]["accounting"]["tokens"]["prefilled"]
    assert prefilled <= 1.1 * (documents + own), (prefilled, documents, own)
    print(f"prefilled {prefilled}, floor {documents + own} ({documents} + {own}): "
          f"{prefilled / (documents + own):.2f} x")
