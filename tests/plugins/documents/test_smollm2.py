"""The real SmolLM2 model (llama.cpp, 2k window) on the worked example's JSONL, several
questions per document: each document is prefilled once, so the tokens prefilled stay within
1.1 x the floor (each document once, plus each question's own tokens)."""

from __future__ import annotations

import json

import pytest

from tests import cli as commands

from tests.paths import TEST_DATA

pytestmark = pytest.mark.slow


def prefill_floor(samples: list[dict]) -> tuple[int, int]:
    """(the documents' tokens once each, the questions' own tokens): a sample's own tokens are
    its prompt's less its document's (as sent, after any cut)."""
    documents = {s["metadata"]["document_id"]: s["context_cut"]["kept_tokens"] for s in samples}
    own = sum(s["prompt_tokens"] - s["context_cut"]["kept_tokens"] for s in samples)
    return sum(documents.values()), own


def test_questions_over_one_document_prefill_it_once(tmp_path):
    pytest.importorskip("llama_cpp")
    ((run_dir, table),) = commands.run(tasks=str(TEST_DATA / "documents" / "notes.yaml"),
                                       models=["smollm2,n_ctx=2048"], limit_per_context=2,
                                       overrides={"generation.max_new_tokens": 12},
                                       output=tmp_path / "runs", progress=False)
    results = json.loads((run_dir / "results.json").read_text())
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 4 and "notes_qa" in table
    documents, own = prefill_floor(samples)
    prefilled = results["tasks"]["notes_qa"]["accounting"]["tokens"]["prefilled"]
    assert prefilled <= 1.1 * (documents + own), (prefilled, documents, own)
    by_doc: dict[str, list[dict]] = {}
    for s in samples:
        by_doc.setdefault(s["metadata"]["document_id"], []).append(s)
    for first, second in by_doc.values():  # the second question reused the first one's document
        assert second["prefilled_tokens"] < second["context_cut"]["kept_tokens"]
