"""`lceval data fetch ruler-essays` on tiny files we wrote in the formats of RULER's sources
(tests/data/ruler/essays): from a `--from` folder and from a local server standing in for the
sources, pinned files checked, a page that changed since the install named, and the installed
essays become the default essay haystack (ELITR's transcripts the fallback); a text too short
for a length names the command that gets RULER's essays. Nothing is downloaded from the internet."""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import shutil
import threading
from pathlib import Path

import pytest

from lceval.errors import UserError
from lceval_plugins.ruler import essays
from tests import elitr_tiny
from tests.cli import call
from tests.plugins.ruler.test_generators import load

FIXTURES = Path(__file__).parents[2] / "data" / "ruler" / "essays"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def sources(monkeypatch):
    """RULER's list made our fixtures': two pinned text files (in the list's order, not the
    name order) and, when asked, a page."""

    def use(*names: str) -> list:
        files = [essays.EssayFile(n, f"https://essays.invalid/{n}", None if n.endswith(".html") else _sha(FIXTURES / n))
                 for n in names]
        monkeypatch.setattr(essays, "essay_files", lambda: files)
        return files

    return use


def _text(home: Path) -> str:
    return json.loads((home / "ruler-essays" / "PaulGrahamEssays.json").read_text())["text"]


def test_fetch_from_a_folder_writes_rulers_json_and_checks_the_pins(sources, tmp_path):
    sources("zebra.txt", "apple.txt")
    home = tmp_path / "home"
    code, out, err = call("data", "fetch", "ruler-essays", "--from", FIXTURES, "--data-home", home)
    assert code == 0 and "ruler-essays: installed" in out, err
    # RULER's concatenation: the text files sorted by name, nothing between them
    assert _text(home) == (FIXTURES / "apple.txt").read_text() + (FIXTURES / "zebra.txt").read_text()
    record = json.loads((home / "ruler-essays" / "CHECKSUMS.json").read_text())
    assert record["archives"] == {"apple.txt": _sha(FIXTURES / "apple.txt"), "zebra.txt": _sha(FIXTURES / "zebra.txt")}
    code, out, _ = call("data", "fetch", "ruler-essays", "--from", FIXTURES, "--data-home", home)
    assert code == 0 and "already-present" in out
    # a pinned file with other content is refused, naming it and both digests; nothing installed
    bad = tmp_path / "bad"
    shutil.copytree(FIXTURES, bad)
    (bad / "zebra.txt").write_text("Another text altogether.\n")
    code, _, err = call("data", "fetch", "ruler-essays", "--from", bad, "--data-home", tmp_path / "other")
    assert code == 2 and "zebra.txt has sha256" in err and _sha(FIXTURES / "zebra.txt") in err, err
    assert not (tmp_path / "other" / "ruler-essays").exists()
    (bad / "zebra.txt").unlink()
    code, _, err = call("data", "fetch", "ruler-essays", "--from", bad, "--data-home", tmp_path / "other")
    assert code == 2 and "1 of the 2 pinned essay files are not in the folder: zebra.txt" in err, err


def test_a_folder_with_rulers_own_json_is_taken_as_it_is(tmp_path):
    made = tmp_path / "made"
    made.mkdir()
    (made / "PaulGrahamEssays.json").write_text(json.dumps({"text": "Made by RULER's script. Twice over."}))
    code, _, err = call("data", "fetch", "ruler-essays", "--from", made, "--data-home", tmp_path / "home")
    assert code == 0, err
    assert _text(tmp_path / "home") == "Made by RULER's script. Twice over."


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server(tmp_path):
    """A local HTTP server standing in for the essays' sources: (its URL, the folder it serves,
    a copy of the fixtures the test may change)."""
    folder = tmp_path / "served"
    shutil.copytree(FIXTURES, folder)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", folder
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_download_from_the_sources_and_a_pinned_file_that_differs(sources, server, tmp_path):
    sources("zebra.txt", "apple.txt")
    url, served = server
    home = tmp_path / "home"
    code, out, err = call("data", "fetch", "ruler-essays", "--from", url, "--data-home", home)
    assert code == 0 and "installed" in out, err
    assert "The apple essay" in _text(home)
    (served / "apple.txt").write_text("The source changed this file.\n")
    code, _, err = call("data", "fetch", "ruler-essays", "--from", url, "--data-home", tmp_path / "h2")
    assert code == 2 and "apple.txt has sha256" in err and "pinned" in err, err
    assert not (tmp_path / "h2" / "ruler-essays").exists()


def test_pages_are_cleaned_as_rulers_script_and_a_changed_page_is_named(sources, server, tmp_path):
    pytest.importorskip("bs4")
    pytest.importorskip("html2text")
    sources("zebra.txt", "tables.html", "gone.html")
    url, served = server
    home = tmp_path / "home"
    code, out, err = call("data", "fetch", "ruler-essays", "--from", url, "--data-home", home)
    assert code == 0, err
    text = _text(home)
    # the text file first, then the page: its first <font> only, as html2text's markdown with RULER's
    # settings (links inline, images left out)
    assert text.startswith((FIXTURES / "zebra.txt").read_text() + "A table is a [wooden](https://example.org/wood) "
                           "thing (mostly).")
    assert "**Note:** this page" in text and "footer font" not in text and "Essays" not in text
    assert json.loads((home / "ruler-essays" / "sources.json").read_text())["left_out"] == ["gone.html"]
    # the install is damaged and the page changed at its source: named, not taken
    (home / "ruler-essays" / "PaulGrahamEssays.json").write_text("{}")
    (served / "tables.html").write_text((served / "tables.html").read_text().replace("century", "decade"))
    code, _, err = call("data", "fetch", "ruler-essays", "--from", url, "--data-home", home)
    assert code == 2 and "1 file(s) of 'ruler-essays' now differ from those its install recorded: tables.html" \
        in err, err


def _install_essays(home: Path, text: str) -> None:
    folder = home / "ruler-essays"
    folder.mkdir(parents=True)
    (folder / "PaulGrahamEssays.json").write_text(json.dumps({"text": text}))


def test_installed_essays_are_the_default_and_elitr_the_fallback(tmp_path):
    from lceval.interfaces import TaskContext
    from lceval_plugins.ruler.task import TASK_TYPES

    home = tmp_path / "home"
    elitr_tiny.build(home)
    files: list = []
    convs = load("ruler_niah", {"haystack": "essay"}, 1024, limit=1, files=files, home=home)
    assert any("elitr-bench" in str(p) for p in files) and convs[0].turns[0].metadata["essay_passes"] >= 1
    _install_essays(home, " ".join(f"Essay sentence number {i} is here." for i in range(400)))
    files.clear()
    convs = load("ruler_niah", {"haystack": "essay"}, 1024, limit=1, files=files, home=home)
    assert [p.name for p in files] == ["PaulGrahamEssays.json"] and "Essay sentence number 0" in convs[0].context
    task = TASK_TYPES["ruler_niah"]()
    ctx = TaskContext(spec={"options": {"haystack": "essay", "essay": "auto"}}, spec_path=Path("t.yaml"),
                      data_home=home, splits=None, limit=None, record_file=lambda p: None)
    assert [n.key for n in task.needs(ctx)] == ["ruler:essay-text"] and task.needs(ctx)[0].missing() is None
    assert task.needs(ctx)[0].files()[-1] == "ruler-essays/PaulGrahamEssays.json"


def test_a_text_too_short_repeats_as_ruler_or_names_the_fetch(tmp_path):
    home = tmp_path / "home"
    elitr_tiny.build(home)
    with pytest.raises(UserError) as err:  # RULER's repetition turned off: the fallback cannot reach 16k
        load("ruler_niah", {"haystack": "essay", "essay_repeat": False}, 16384, limit=1, home=home,
             model=__import__("tests.conftest", fromlist=["ScriptedModel"]).ScriptedModel(window=32768))
    assert err.value.field == "options.essay" and "16k" in err.value.message
    assert "`lceval data fetch ruler-essays`" in err.value.hint, err.value.hint
    _install_essays(home, "One short essay. It ends soon.")
    convs = load("ruler_niah", {"haystack": "essay"}, 1024, limit=1, home=home)  # repeated, as niah.py does
    assert convs[0].context.count("One short essay.") > 10 and convs[0].turns[0].metadata["essay_passes"] > 10
    with pytest.raises(UserError) as err:
        load("ruler_niah", {"haystack": "essay", "essay_repeat": False}, 1024, limit=1, home=home)
    assert "ruler-essays" in err.value.message and "fetch ruler-essays" not in err.value.hint


def test_status_pack_and_unpack_carry_the_essays(tmp_path, monkeypatch):
    made = tmp_path / "made"
    made.mkdir()
    (made / "PaulGrahamEssays.json").write_text(json.dumps({"text": "Essays to carry. " * 50}))
    connected, cluster = tmp_path / "connected", tmp_path / "cluster"
    monkeypatch.setenv("LCEVAL_DATA", str(connected))
    code, out, _ = call("data", "status", "ruler_niah_single_2")  # nothing yet: either text, and how to get it
    assert code == 4 and "`lceval data fetch ruler-essays`" in out and "`lceval data fetch elitr-bench`" in out, out
    code, _, err = call("data", "fetch", "ruler-essays", "--from", made)
    assert code == 0, err
    code, out, _ = call("data", "status", "ruler_niah_single_2")  # installed: the default, and what it needs
    assert code == 0 and "present  ruler_niah_single_2" in out, out
    code, out, err = call("data", "pack", "ruler_niah_single_2", "-o", tmp_path / "pack.tar")
    assert code == 0, err
    monkeypatch.setenv("LCEVAL_DATA", str(cluster))
    code, out, err = call("data", "unpack", tmp_path / "pack.tar")
    assert code == 0 and "ruler_niah_single_2" in out, err
    assert _text(cluster) == _text(connected)
    code, out, _ = call("data", "status", "ruler_niah_single_2")
    assert code == 0 and "present  ruler_niah_single_2" in out, out
