"""`lceval data fetch elitr-bench --from <published archives>` yields the benchmark's files,
byte for byte the copies in ../shared/datasets/elitr-bench. Never touches the network."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from lceval.cli import main
from lceval.io import fetch, read_zip_member, sha256_file
from lceval_plugins.elitr.dataset import ELITR_BENCH, MEETING_IDS, PASSWORD

SUBDIRS = ("data", "czech", "generated-responses", "transcripts", "minutes")


def _files(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for sub in SUBDIRS for p in (root / sub).rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def installed(tmp_path_factory, shared_datasets) -> tuple[Path, Path]:
    """One real fetch from the published archives, shared by the checks below."""
    archives = shared_datasets / "elitr-bench" / "archives"
    home = tmp_path_factory.mktemp("elitr-home")
    report = fetch(ELITR_BENCH, str(archives), home)
    assert report.status == "installed" and report.path == home / "elitr-bench"
    return home, archives


def test_layout_and_bytes_match_the_shared_copy(installed, shared_datasets):
    home, _ = installed
    root, shared = home / "elitr-bench", shared_datasets / "elitr-bench"
    ours = _files(root)
    assert ours == _files(shared)
    for rel in ours:  # all byte-identical, meeting_en_test2_008 included (see dataset.py)
        assert (root / rel).read_bytes() == (shared / rel).read_bytes(), rel
    assert sorted(p.stem for p in (root / "transcripts").iterdir()) == sorted(MEETING_IDS)
    assert len(list((root / "generated-responses").glob("*.json"))) == 7
    assert {p.name for p in (root / "data").iterdir()} == {
        f"elitr-bench-{v}_{s}.json" for v in ("qa", "conv") for s in ("dev", "test2")}
    assert {p.name for p in (root / "czech").iterdir()} == {
        f"elitr-bench-czech-{v}_{s}.json" for v in ("qa", "conv") for s in ("dev", "test2")}
    assert all(p.name.startswith("minutes") for p in (root / "minutes").rglob("*") if p.is_file())
    assert not [p for p in root.rglob("*") if p.name.startswith("._") or p.name == ".DS_Store"]


def test_checksums_record_and_second_fetch_is_a_noop(installed):
    home, archives = installed
    root = home / "elitr-bench"
    record = json.loads((root / "CHECKSUMS.json").read_text())
    assert record["archives"] == {f.name: f.sha256 for f in ELITR_BENCH.files}
    assert record["archives"] == {f.name: sha256_file(archives / f.name) for f in ELITR_BENCH.files}
    assert record["source"] == str(archives.resolve())
    assert record["files"] == {p.as_posix(): sha256_file(root / p) for p in _files(root)}
    before = {p: (root / p).stat().st_mtime_ns for p in _files(root)}
    assert fetch(ELITR_BENCH, str(archives), home).status == "already-present"
    assert fetch(ELITR_BENCH, None, home).status == "already-present"  # no download attempted
    assert {p: (root / p).stat().st_mtime_ns for p in _files(root)} == before


def test_transcript_is_the_transcript_man_file(installed):
    """meeting_en_test2_008: the `<meeting>.txt` beside transcript_MAN_annot13.txt lacks the
    trailing spaces the benchmark's transcript has; everything else is the same."""
    home, archives = installed
    blob = read_zip_member(archives / "ELITR-English-test.tar.zip", ".tar", PASSWORD)
    with tarfile.open(fileobj=io.BytesIO(blob)) as tf:
        member = tf.extractfile("ELITR-English-test/meeting_en_test2_008/meeting_en_test2_008.txt")
        assert member is not None
        sibling = member.read()
    ours = (home / "elitr-bench" / "transcripts" / "meeting_en_test2_008.txt").read_bytes()
    assert ours != sibling
    assert [line.rstrip() for line in ours.split(b"\n")] == [line.rstrip() for line in sibling.split(b"\n")]


def test_cli_fetch(tmp_path, shared_datasets, capsys):
    archives = shared_datasets / "elitr-bench" / "archives"
    home = tmp_path / "home"
    assert main(["data", "fetch", "elitr-bench", "--from", str(archives), "--data-home", str(home)]) == 0
    assert "installed" in capsys.readouterr().out
    assert main(["data", "fetch", "elitr-bench", "--from", str(archives), "--data-home", str(home)]) == 0
    assert "already-present" in capsys.readouterr().out
