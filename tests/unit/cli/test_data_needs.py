"""What tasks need on disk, got on a connected machine: `lceval data fetch TASKS_OR_FAMILY`
says what it will download and how much before it starts, gathers every failure into one line,
copies files only the user can provide from `--from`, and takes authors' files from a git
repository at their commit (a local repository stands in for GitHub)."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest

from lceval import hookimpl
from lceval.errors import UserError
from lceval.interfaces import TaskContext, TaskType
from lceval.io import DataHomePath, GitFiles
from lceval.needs import Need
from lceval.types import Conversation
from tests.cli import call
from tests.conftest import serve_plugin


class Published(Need):
    """A file "downloaded" from a folder standing in for a server; its size is known first."""

    def __init__(self, server: Path, name: str, home: Path) -> None:
        self.server, self.name, self.home = server, name, home
        self.key, self.label = f"published:{name}", f"published {name}"

    def root(self) -> Path:
        return self.home

    def missing(self) -> str | None:
        return None if (self.home / "shelf" / self.name).is_file() else f"{self.name} is not here"

    def size(self) -> int | None:
        return (self.server / self.name).stat().st_size if (self.server / self.name).is_file() else None

    def fetch(self, source: Path | None) -> None:
        if not (self.server / self.name).is_file():
            raise UserError(f"the server has no {self.name}")
        (self.home / "shelf").mkdir(parents=True, exist_ok=True)
        (self.home / "shelf" / self.name).write_bytes((self.server / self.name).read_bytes())

    def files(self) -> list[str]:
        return [f"shelf/{self.name}"]


def _serve(monkeypatch, tmp_path: Path, names: list[str]) -> None:
    server = tmp_path / "server"

    class Shelf(TaskType):
        options_schema = {"type": "object", "properties": {}}

        def needs(self, ctx: TaskContext) -> list[Need]:
            return [Published(server, n, ctx.data_home) for n in names] + [
                DataHomePath("shelf/licensed/rows.jsonl", ctx.data_home, "the rows you downloaded")]

        def load(self, ctx: TaskContext) -> list[Conversation]:
            return []

    folder = tmp_path / "shelf"
    folder.mkdir()
    (folder / "shelf_task.yaml").write_text("name: shelf_task\ndescription: d\ntype: shelf\n", encoding="utf-8")

    class Plugin:
        @hookimpl
        def register_task_types(self, register):
            register("shelf", Shelf())

        @hookimpl
        def register_spec_dirs(self, register):
            register(folder)

    serve_plugin(monkeypatch, "shelf", Plugin())


def test_fetch_says_what_it_downloads_first_and_copies_the_rest_from_a_folder(tmp_path, monkeypatch):
    (tmp_path / "server").mkdir()
    (tmp_path / "server" / "a.bin").write_bytes(b"x" * 3000)
    (tmp_path / "server" / "b.bin").write_bytes(b"y" * 100)
    _serve(monkeypatch, tmp_path, ["a.bin", "b.bin"])
    downloads = tmp_path / "downloads" / "licensed"
    downloads.mkdir(parents=True)
    (downloads / "rows.jsonl").write_text("{}\n")
    code, out, err = call("data", "fetch", "shelf", "--from", tmp_path / "downloads", "--data-home", tmp_path / "home")
    assert code == 0, err
    lines = err.splitlines()
    assert lines[0] == "to get: 3 items (3.0 kB to download, 1 from --from FOLDER)"
    assert lines[1:4] == ["          2.9 kB  published a.bin", "       100 bytes  published b.bin",
                          "   --from FOLDER  shelf/licensed/rows.jsonl in the data home"]
    assert "present  shelf_task (3 needs)" in out
    # FOLDER was the data home's folder itself (shelf/): the file lands at the path the spec reads
    assert (tmp_path / "home" / "shelf" / "licensed" / "rows.jsonl").read_text() == "{}\n"
    code, out, err = call("data", "fetch", "shelf", "--data-home", tmp_path / "home")
    assert code == 0 and "nothing to fetch" in out and not err


def test_every_failure_is_gathered_into_one_line(tmp_path, monkeypatch):
    (tmp_path / "server").mkdir()
    (tmp_path / "server" / "a.bin").write_bytes(b"x")
    _serve(monkeypatch, tmp_path, ["a.bin", "gone.bin"])
    code, _, err = call("data", "fetch", "shelf_task", "--data-home", tmp_path / "home")
    (line,) = [l for l in err.splitlines() if l.startswith("lceval: error: ")]
    assert code == 2 and "could not get published gone.bin: the server has no gone.bin" in line
    assert "(and 1 more: shelf/licensed/rows.jsonl in the data home: " in line and "--from FOLDER" in line
    assert "Got 1 of 3." in line and (tmp_path / "home" / "shelf" / "a.bin").is_file()  # the rest was got
    code, out, _ = call("data", "status", "shelf_task", "--data-home", tmp_path / "home")
    assert code == 4 and "missing  shelf_task: 2 of 3 not here" in out
    assert "Run: `lceval data fetch shelf --from FOLDER` (FOLDER: the rows you downloaded)" in out
    code, _, err = call("data", "fetch", "shelfs")
    assert code == 2 and "unknown task, suite or family 'shelfs'" in err and "lceval data list" in err


def _repo(folder: Path) -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@b", *args], cwd=folder, check=True,
                              capture_output=True, text=True).stdout.strip()

    (folder / "evaluation").mkdir(parents=True)
    (folder / "evaluation" / "rows.jsonl").write_text('{"prompt": "write"}\n')
    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "pinned")
    (folder / "evaluation" / "rows.jsonl").write_text('{"prompt": "later"}\n')
    git("commit", "-qam", "later")
    return git("rev-parse", "HEAD~1")


def test_authors_files_and_archives_come_from_git_at_their_commit(tmp_path):
    commit = _repo(tmp_path / "authors")
    home = tmp_path / "home"
    files = GitFiles(str(tmp_path / "authors"), commit, home, paths={"evaluation/rows.jsonl": "bench/rows.jsonl"})
    archive = GitFiles(str(tmp_path / "authors"), commit, home, archive=f"Bench-{commit}.zip", prefix=f"Bench-{commit}/")
    assert files.missing() and archive.missing()
    files.fetch(None)
    archive.fetch(None)
    assert (home / "bench" / "rows.jsonl").read_text() == '{"prompt": "write"}\n'  # the commit's, not the later one
    with zipfile.ZipFile(home / f"Bench-{commit}.zip") as zf:  # members as GitHub's "Download ZIP" names them
        assert zf.read(f"Bench-{commit}/evaluation/rows.jsonl") == b'{"prompt": "write"}\n'
    assert files.missing() is None and archive.missing() is None
    assert files.files() == ["bench/rows.jsonl"] and archive.files() == [f"Bench-{commit}.zip"]
    assert not [p for p in home.iterdir() if p.name.startswith(".")]  # no scratch left behind
    wrong = GitFiles(str(tmp_path / "authors"), "0" * 40, tmp_path / "other", paths={"evaluation/rows.jsonl": "x"})
    with pytest.raises(UserError, match="git checkout of .* at 0000000000000000000000000000000000000000 failed"):
        wrong.fetch(None)
    assert not (tmp_path / "other" / "x").exists()
