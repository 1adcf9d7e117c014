"""Single result files (reports, bundles, rules, noisy transcripts) appear whole or not at all."""

from __future__ import annotations

import pytest

from lceval.io import atomic_file, write_text_atomic


def test_a_file_replaces_the_old_one_only_when_complete(tmp_path):
    target = tmp_path / "deep" / "report.html"
    write_text_atomic(target, "first\r\n")
    assert target.read_bytes() == b"first\r\n"  # no newline translation
    with pytest.raises(RuntimeError):
        with atomic_file(target) as tmp:
            tmp.write_text("half of the second")
            raise RuntimeError("the build failed")
    assert target.read_bytes() == b"first\r\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.html"]  # no .partial left


def test_the_temporary_file_is_hidden_beside_the_target(tmp_path):
    with atomic_file(tmp_path / "b.zip") as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(".b.zip.") and tmp.name.endswith(".partial")
        tmp.write_bytes(b"PK")
    assert (tmp_path / "b.zip").read_bytes() == b"PK" and not tmp.exists()
