"""SCBench's tests read rows WE wrote in the schema of microsoft/SCBench's configs
(tests/data/scbench/rows.json), laid out as the Hub's cache holds the pinned commit: one parquet
file per config (`scbench_<task>/test-00000-of-00001.parquet`) and a card declaring the configs."""

from __future__ import annotations

import io
import json

import pytest

from tests.paths import TEST_DATA
from tests.plugins.documents.conftest import put_in_hub_cache

REPO, COMMIT = "microsoft/SCBench", "283310bb8c5ba6909dd9a6b1be087d2937f76f6d"
ROWS: dict[str, list[dict]] = json.loads((TEST_DATA / "scbench" / "rows.json").read_text(encoding="utf-8"))
#: what the authors' eval_utils.py builds from these rows (ChatML chat template), each request's full text,
#: computed by running their create_multiturn_prompt / create_scdq_prompt (commit fb56c91) in a scratch folder
AUTHORS_PROMPTS: dict[str, list[str]] = json.loads(
    (TEST_DATA / "scbench" / "authors_prompts.json").read_text(encoding="utf-8"))


def card() -> bytes:
    lines = ["---", "license: mit", "configs:"]
    for config in ROWS:
        lines += [f"- config_name: {config}", "  data_files:", "  - split: test", f"    path: {config}/test-*"]
    return ("\n".join(lines + ["---", "SCBench (rows written for lceval's tests)", ""])).encode()


def parquet(rows: list[dict]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buffer)
    return buffer.getvalue()


@pytest.fixture
def scbench_hub(tmp_path_factory, monkeypatch):
    """An offline Hugging Face cache holding our rows at the pinned commit (nothing downloads)."""
    import datasets
    from huggingface_hub import constants

    base = tmp_path_factory.mktemp("hf")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(base / "datasets"))
    monkeypatch.setenv("HF_HUB_CACHE", str(base / "hub"))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", base / "datasets")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(base / "hub"))
    files: dict[str, bytes] = {"README.md": card()}
    files.update({f"{c}/test-00000-of-00001.parquet": parquet(rows) for c, rows in ROWS.items()})
    put_in_hub_cache(base / "hub", REPO, COMMIT, files)
    return base
