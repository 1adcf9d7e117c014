"""`lceval data fetch elitr-bench --from <published archives>` yields the benchmark's files."""

from __future__ import annotations

import json

from lceval.cli import main
from lceval.datahome import fetch
from lceval_plugins.tasks.elitr.dataset import ELITR_BENCH, MEETING_IDS


def test_fetch_from_published_archives(tmp_path, shared_datasets, capsys):
    archives = shared_datasets / "elitr-bench" / "archives"
    home = tmp_path / "home"
    assert main(["data", "fetch", "elitr-bench", "--from", str(archives), "--data-home", str(home)]) == 0
    assert "installed" in capsys.readouterr().out
    root = home / "elitr-bench"
    shared = shared_datasets / "elitr-bench"
    for sub in ("data", "czech", "generated-responses", "transcripts", "minutes"):
        ours = sorted(p.relative_to(root) for p in (root / sub).rglob("*") if p.is_file())
        theirs = sorted(p.relative_to(shared) for p in (shared / sub).rglob("*") if p.is_file())
        assert ours == theirs, sub
        for rel in ours:
            assert (root / rel).read_bytes() == (shared / rel).read_bytes(), rel
    assert sorted(p.stem for p in (root / "transcripts").iterdir()) == sorted(MEETING_IDS)
    record = json.loads((root / "CHECKSUMS.json").read_text())
    assert record["archives"] == {f.name: f.sha256 for f in ELITR_BENCH.files}
    assert len(record["files"]) > 40
    assert fetch(ELITR_BENCH, str(archives), home).status == "already-present"
