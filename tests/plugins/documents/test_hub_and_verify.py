"""A shipped spec over Hub data, end to end and offline: LongBench v2's own spec reads its
`data.json` (here a fixture in the real schema, put where huggingface_hub caches the pinned
commit), runs, reports by difficulty, length and domain with intervals over documents,
records the commit it read, and `lceval verify` checks that commit against the verifier's."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from lceval.engine import load_catalog
from lceval.leaderboard import submit
from lceval.leaderboard import verify_bundle

from tests.conftest import ScriptedModel, plugins_with_model, run_engine
from tests.paths import TEST_DATA

from .conftest import put_in_hub_cache

REPO, COMMIT = "zai-org/LongBench-v2", "2b48e494f2c7a2f0af81aae178e05c7e1dde0fe9"
SAMPLE = TEST_DATA / "documents" / "longbench_v2_sample.json"


@pytest.fixture
def longbench_v2_run(tmp_path, _isolated_hf):
    put_in_hub_cache(_isolated_hf / "hub", REPO, COMMIT, {"data.json": SAMPLE})
    model = ScriptedModel(window=4096)
    run_dir, results, _ = run_engine(model, "longbench_v2", tmp_path / "home", tmp_path)
    return run_dir, results, model


def test_the_shipped_spec_reads_the_pinned_commit_and_reports_as_the_authors(longbench_v2_run):
    run_dir, results, model = longbench_v2_run
    task = results["tasks"]["longbench_v2"]
    score = task["metrics"]["score"]
    assert task["n_samples"] == 6 and score["spread"]["clusters"] == 3  # 3 documents, 2 questions each
    assert list(score["breakdowns"]["difficulty"]) == ["easy", "hard"]
    assert list(score["breakdowns"]["length"]) == ["short", "medium", "long"]
    assert set(score["breakdowns"]["domain"]) == {"Single-Document QA", "Long-dialogue History Understanding"}
    manifest = json.loads((run_dir / "manifest.json").read_text())
    (source,) = manifest["data_sources"]["longbench_v2"]
    assert source["dataset"] == REPO and source["revision"] == COMMIT and source["data_files"] == ["data.json"]
    assert hashlib.sha256(SAMPLE.read_bytes()).hexdigest() in manifest["data_files"].values()
    first = model.calls[0].messages[0].content  # prompts/0shot.txt, the stripped context in place of $DOC$
    assert first.startswith("Please read the following text and answer the question below.\n\n<text>\nAnnual report")
    assert first.endswith("(D) 0.96 euros per cubic metre\n\nFormat your response as follows: \"The correct answer is "
                          "(insert answer here)\".")
    # the two questions of a document went one after the other, so its prefix was prefilled once
    docs = [c.hints["document_id"] for c in model.calls]
    assert docs[0] == docs[1] and docs[2] == docs[3] and docs[4] == docs[5] and len(set(docs)) == 3


def _with_manifest(bundle: Path, out: Path, edit) -> Path:
    """A copy of `bundle` whose run manifest `edit` changed, bundle.json's hash of it updated."""
    with zipfile.ZipFile(bundle) as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
    index = json.loads(files["bundle.json"])
    run = index["runs"][0]
    name = f"runs/{run['run_id']}/manifest.json"
    manifest = json.loads(files[name])
    edit(manifest)
    files[name] = json.dumps(manifest).encode()
    run["files"]["manifest.json"] = hashlib.sha256(files[name]).hexdigest()
    files["bundle.json"] = json.dumps(index).encode()
    with zipfile.ZipFile(out, "w") as zf:
        for n, data in files.items():
            zf.writestr(n, data)
    return out


def test_verify_checks_the_recorded_revision(longbench_v2_run, tmp_path):
    run_dir, _, model = longbench_v2_run
    plugins = plugins_with_model(model)
    catalog = load_catalog(plugins)
    bundle = submit([run_dir], tmp_path / "b.zip", plugins)
    v = verify_bundle(bundle, plugins, catalog, tmp_path / "home")
    assert v.ok, v.problems
    assert any(f"longbench_v2: 1 dataset revision(s) as the run recorded them ({COMMIT[:12]})" in p for p in v.passed)
    assert any("6 of 6 answered items (seeded sample) judged again with choice" in p for p in v.passed)

    def other_commit(manifest):
        manifest["data_sources"]["longbench_v2"][0]["revision"] = "c" * 40

    v = verify_bundle(_with_manifest(bundle, tmp_path / "bad.zip", other_commit), plugins, catalog, tmp_path / "home")
    assert not v.ok
    assert any(f"data source {REPO} ['data.json']: the run recorded revision {'c' * 40}, this machine read {COMMIT}"
               in p for p in v.problems), v.problems


CARD = """---
license: mit
configs:
- config_name: easy
  default: true
  data_files:
  - split: test
    path: easy/test-*.parquet
- config_name: hard
  data_files:
  - split: test
    path: hard/test-*.parquet
  - split: dev
    path: hard/dev.parquet
---
# A dataset
"""


def _card_repo(hub: Path) -> None:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    def parquet(prefix: str, n: int) -> bytes:
        out = io.BytesIO()
        pq.write_table(pa.table({"id": [f"{prefix}{i}" for i in range(n)], "context": [f"Text {prefix}{i}. " * 3
                                                                                      for i in range(n)],
                                 "question": ["Q?"] * n, "answer": ["A"] * n}), out)
        return out.getvalue()

    put_in_hub_cache(hub, "someone/cards", "d" * 40, {"README.md": CARD.encode(), "easy/test-00000.parquet":
                                                      parquet("e", 2), "easy/test-00001.parquet": parquet("f", 1),
                                                      "hard/test-00000.parquet": parquet("h", 3),
                                                      "hard/dev.parquet": parquet("v", 1)})


@pytest.mark.parametrize("name,split,ids", [(None, "test", ["e0", "e1", "f0"]), ("hard", "test", ["h0", "h1", "h2"]),
                                            ("hard", "dev", ["v0"])])
def test_a_config_of_a_hub_dataset_is_the_files_its_card_declares(tmp_path, _isolated_hf, name, split, ids):
    from lceval.interfaces import TaskContext
    from lceval_plugins.documents.task import DocumentsTaskType

    from tests.conftest import complete

    _card_repo(_isolated_hf / "hub")
    files, sources = [], []
    options = {"source": {"path": "someone/cards", "revision": "d" * 40, "name": name, "split": split},
               "fields": {"id": "id"}}
    ctx = TaskContext(spec={"options": complete(DocumentsTaskType(), options)}, spec_path=tmp_path / "s.yaml",
                      data_home=tmp_path, splits=None, limit=None, record_file=files.append,
                      record_source=sources.append)
    convs = DocumentsTaskType().load(ctx)
    assert [c.conv_id for c in convs] == [f"{split}/{i}" for i in ids]
    assert sources[0]["revision"] == "d" * 40 and sources[0]["name"] == name and len(files) == len(sources[0]["data_files"])


@pytest.mark.parametrize("source,needle", [
    ({"name": "medium"}, "unknown config of someone/cards 'medium' (known: easy, hard)"),
    ({"name": "easy", "split": "dev"}, "unknown split of someone/cards config 'easy' 'dev' (known: test)"),
    ({"name": "easy", "data_files": "x.json"}, "give options.source.name or data_files, not both"),
])
def test_a_config_or_split_the_card_lacks_is_named(tmp_path, _isolated_hf, capsys, source, needle):
    from lceval.cli import main

    from .conftest import write_spec

    _card_repo(_isolated_hf / "hub")
    spec = write_spec(tmp_path, {"source": {"path": "someone/cards", "revision": "d" * 40, "split": "test", **source},
                                 "fields": {"id": "id"}})
    assert main(["validate", str(spec)]) == 2
    out = capsys.readouterr().out
    assert needle in out and f"{spec}:" in out
