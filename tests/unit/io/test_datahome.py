"""`data fetch`: checksums first, atomic install, a second fetch is a no-op, and a bad
archive leaves the data home exactly as it was."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from lceval.io import data_home, dataset_path, extract_zip, fetch, read_zip_member, sha256_file
from lceval.errors import UserError
from lceval.interfaces import Dataset, DatasetFile


def make_zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


class Counting:
    def __init__(self, fail: bool = False) -> None:
        self.calls = 0
        self.fail = fail

    def __call__(self, archives: dict[str, Path], dest: Path) -> None:
        self.calls += 1
        extract_zip(archives["a.zip"], dest, None, lambda rel: rel)
        if self.fail:
            raise UserError("install step failed on purpose")


@pytest.fixture
def source(tmp_path) -> Path:
    folder = tmp_path / "published"
    folder.mkdir()
    make_zip(folder / "a.zip", {"x/one.txt": b"one", "two.txt": b"two", "__MACOSX/._two.txt": b"junk",
                                "x/.DS_Store": b"junk"})
    return folder


def dataset(source: Path, install, sha: str | None = None) -> Dataset:
    digest = sha or sha256_file(source / "a.zip")
    return Dataset(name="toy", description="toy", files=[DatasetFile("a.zip", "http://127.0.0.1:9/a.zip", digest)],
                   install=install)


def test_install_then_noop(tmp_path, source):
    install = Counting()
    home = tmp_path / "home"
    first = fetch(dataset(source, install), str(source), home)
    assert first.status == "installed" and install.calls == 1
    assert snapshot(home / "toy").keys() == {"x/one.txt", "two.txt", "CHECKSUMS.json"}
    second = fetch(dataset(source, install), str(source), home)
    assert second.status == "already-present" and install.calls == 1
    assert dataset_path("toy", home) == home / "toy"
    assert [p.name for p in home.iterdir()] == ["toy"]  # no scratch folders left behind


def test_modified_install_is_repaired(tmp_path, source):
    install = Counting()
    home = tmp_path / "home"
    fetch(dataset(source, install), str(source), home)
    (home / "toy" / "two.txt").write_bytes(b"edited")
    assert fetch(dataset(source, install), str(source), home).status == "installed"
    assert (home / "toy" / "two.txt").read_bytes() == b"two" and install.calls == 2


def test_checksum_mismatch_leaves_home_untouched(tmp_path, source):
    home = tmp_path / "home"
    fetch(dataset(source, Counting()), str(source), home)
    before = snapshot(home)
    install = Counting()
    with pytest.raises(UserError, match="checksum mismatch") as err:
        fetch(dataset(source, install, sha="0" * 64), str(source), home)
    assert "a.zip" in err.value.render() and install.calls == 0
    assert snapshot(home) == before


def test_partial_archive_is_rejected(tmp_path, source):
    good = sha256_file(source / "a.zip")
    data = (source / "a.zip").read_bytes()
    (source / "a.zip").write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match="checksum mismatch"):
        fetch(dataset(source, Counting(), sha=good), str(source), tmp_path / "home")
    assert not (tmp_path / "home" / "toy").exists()


def test_failing_install_keeps_the_previous_copy(tmp_path, source):
    home = tmp_path / "home"
    fetch(dataset(source, Counting()), str(source), home)
    (home / "toy" / "two.txt").write_bytes(b"edited")  # forces a reinstall
    before = snapshot(home)
    with pytest.raises(UserError, match="on purpose"):
        fetch(dataset(source, Counting(fail=True)), str(source), home)
    assert snapshot(home) == before


def test_path_traversal_is_refused(tmp_path):
    bad = make_zip(tmp_path / "evil.zip", {"../../escape.txt": b"x"})
    with pytest.raises(UserError, match="outside the dataset folder"):
        extract_zip(bad, tmp_path / "out", None, lambda rel: rel)
    assert not (tmp_path.parent / "escape.txt").exists()


@pytest.mark.skipif(shutil.which("zip") is None, reason="needs the zip command for an encrypted archive")
def test_password_protected_zip(tmp_path):
    (tmp_path / "secret.txt").write_text("hidden")
    subprocess.run(["zip", "-q", "-P", "pw", "s.zip", "secret.txt"], cwd=tmp_path, check=True)
    out = extract_zip(tmp_path / "s.zip", tmp_path / "out", "pw", lambda rel: rel)
    assert out[0].read_text() == "hidden"
    with pytest.raises(UserError, match="cannot unpack"):
        extract_zip(tmp_path / "s.zip", tmp_path / "out2", "wrong", lambda rel: rel)


def test_missing_dataset_and_missing_source(tmp_path, source):
    with pytest.raises(UserError, match="lceval data fetch toy"):
        dataset_path("toy", tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UserError, match="1 of the 1 archives of 'toy' is missing from the --from folder: a.zip"):
        fetch(dataset(source, Counting()), str(empty), tmp_path / "h")


def test_unreachable_url_says_to_use_from(tmp_path, source):
    with pytest.raises(UserError, match="cannot download http://127.0.0.1:9/a.zip") as err:
        fetch(dataset(source, Counting()), None, tmp_path / "home")
    # the offline recipe names every archive and is pasteable as written (issue 30)
    assert "Its archive: a.zip" in err.value.hint
    assert "`mkdir toy-archives && cd toy-archives && curl -fL --remote-name-all http://127.0.0.1:9/a.zip`" in err.value.hint
    assert err.value.hint.endswith("`lceval data fetch toy --from toy-archives`")
    assert not (tmp_path / "home").exists()  # created for the fetch, removed with it


def test_download_from_a_url_prefix(tmp_path, source):
    """The download path, against a server on loopback serving the published folder."""
    import functools
    import http.server
    import threading

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(source))
    handler.log_message = lambda *args: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        report = fetch(dataset(source, Counting()), url, tmp_path / "home")
        assert report.status == "installed"
        assert (tmp_path / "home" / "toy" / "x" / "one.txt").read_bytes() == b"one"
        with pytest.raises(UserError, match="cannot download"):
            fetch(dataset(source, Counting(), sha="1" * 64), url + "/nothing-here", tmp_path / "home2")
    finally:
        server.shutdown()
        server.server_close()


def test_checksums_record(tmp_path, source):
    home = tmp_path / "home"
    report = fetch(dataset(source, Counting()), str(source), home)
    record = json.loads((home / "toy" / "CHECKSUMS.json").read_text())
    assert record["archives"] == {"a.zip": sha256_file(source / "a.zip")} == report.files
    assert record["files"] == {"x/one.txt": sha256_file(home / "toy" / "x" / "one.txt"),
                               "two.txt": sha256_file(home / "toy" / "two.txt")}
    assert record["source"] == str(source.resolve())


def test_noop_download_check_happens_before_any_download(tmp_path, source):
    """Installed from a folder, then fetched from the (unreachable) official URL: the record
    alone proves the install is current, so nothing is downloaded."""
    install = Counting()
    home = tmp_path / "home"
    fetch(dataset(source, install), str(source), home)
    assert fetch(dataset(source, install), None, home).status == "already-present"
    assert install.calls == 1


def test_noop_with_a_folder_still_hashes_the_folder(tmp_path, source):
    home = tmp_path / "home"
    install = Counting()
    fetch(dataset(source, install), str(source), home)
    before = snapshot(home)
    make_zip(source / "a.zip", {"two.txt": b"tampered"})  # the folder now holds another archive
    with pytest.raises(UserError, match="checksum mismatch for 'a.zip'"):
        fetch(dataset(source, install, sha=json.loads(before["toy/CHECKSUMS.json"])["archives"]["a.zip"]),
              str(source), home)
    assert snapshot(home) == before and install.calls == 1


def test_single_archive_as_from(tmp_path, source):
    home = tmp_path / "home"
    assert fetch(dataset(source, Counting()), str(source / "a.zip"), home).status == "installed"
    two = Dataset(name="two", description="", files=[DatasetFile("a.zip", "u", "0" * 64),
                                                     DatasetFile("b.zip", "u", "0" * 64)],
                  install=Counting())
    with pytest.raises(UserError, match="needs 2 archives"):
        fetch(two, str(source / "a.zip"), home)


def test_failed_swap_puts_the_old_copy_back(tmp_path, source, monkeypatch):
    home = tmp_path / "home"
    fetch(dataset(source, Counting()), str(source), home)
    (home / "toy" / "two.txt").write_bytes(b"edited")  # forces a reinstall
    before = snapshot(home)
    real_replace = os.replace
    calls = []

    def flaky(src, dst):
        calls.append(src)
        if len(calls) == 2:  # renaming the new copy in fails
            raise OSError("disk trouble")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", flaky)
    with pytest.raises(OSError, match="disk trouble"):
        fetch(dataset(source, Counting()), str(source), home)
    assert snapshot(home) == before and [p.name for p in home.iterdir()] == ["toy"]


@pytest.mark.parametrize("field, kwargs", [
    ("files.sha256", {"sha256": "abc"}),
    ("files.name", {"name": "../a.zip"}),
])
def test_bad_dataset_definition(tmp_path, source, field, kwargs):
    file = DatasetFile(**{"name": "a.zip", "url": "u", "sha256": "0" * 64, **kwargs})
    bad = Dataset(name="toy", description="", files=[file], install=Counting())
    with pytest.raises(UserError) as err:
        fetch(bad, str(source), tmp_path / "home")
    assert err.value.field == field and not (tmp_path / "home").exists()


def test_data_home_env(monkeypatch, tmp_path):
    monkeypatch.setenv("LCEVAL_DATA", str(tmp_path / "d"))
    assert data_home() == tmp_path / "d"
    monkeypatch.delenv("LCEVAL_DATA")
    assert data_home().name == "data" and "lceval" in str(data_home())


def test_dataset_path_message(tmp_path):
    with pytest.raises(UserError) as err:
        dataset_path("nope", tmp_path)
    assert err.value.render() == (f"dataset 'nope' is not in the data home {tmp_path}. "
                                  "Run: lceval data fetch nope [--from DIR]")


def test_junk_and_nested_archive_helpers(tmp_path):
    z = make_zip(tmp_path / "t.tar.zip", {"__MACOSX/._x.tar": b"junk", "x.tar": b"tarbytes"})
    assert read_zip_member(z, ".tar", None) == b"tarbytes"
    with pytest.raises(UserError, match="exactly one"):
        read_zip_member(z, ".json", None)
    bad = make_zip(tmp_path / "abs.zip", {"/etc/evil": b"x"})
    with pytest.raises(UserError, match="outside the dataset folder"):
        extract_zip(bad, tmp_path / "out", None, lambda rel: rel)
