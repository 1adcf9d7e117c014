"""A dataset missing from the data home is fetched on first use from its official source,
verified against its pinned checksums; one already there is left alone; without network the
error says how to fetch from a folder. The "official source" here is a local file:// URL:
tests never download."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from lceval import hookimpl
from lceval.engine import RunConfig, load_plugins
from lceval.errors import UserError
from lceval.interfaces import Dataset, DatasetFile, TaskContext, TaskType
from lceval.types import CONTEXT_SLOT, Conversation, Turn

from tests.conftest import ScriptedModel, session_answer


def _archive(folder: Path) -> tuple[Path, str]:
    path = folder / "notes.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("notes.txt", "the meeting starts at noon")
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def _plugin(url: str, sha256: str, installs: list[Path]):
    def install(archives: dict[str, Path], dest: Path) -> None:
        installs.append(dest)
        with zipfile.ZipFile(archives["notes.zip"]) as zf:
            zf.extractall(dest)

    class Notes(TaskType):
        options_schema = {"type": "object", "properties": {}}
        dataset = "notes"

        def load(self, ctx: TaskContext) -> list[Conversation]:
            path = ctx.dataset_dir(self.dataset) / "notes.txt"
            if not path.is_file():
                raise UserError("notes not found", file=path, hint="Run: lceval data fetch notes")
            ctx.record_file(path)
            return [Conversation(conv_id="q", context=path.read_text(), context_id="notes", metadata={"split": "all"},
                                 turns=[Turn(item_id="q", user=f"{CONTEXT_SLOT}\n\nWhen?", reference="noon",
                                             question="When?")])]

    class Plugin:
        @hookimpl
        def register_datasets(self, register):
            register(Dataset(name="notes", description="tiny", install=install,
                             files=[DatasetFile(name="notes.zip", url=url, sha256=sha256)]))

        @hookimpl
        def register_task_types(self, register):
            register("notes", Notes())

        @hookimpl
        def register_models(self, register):
            register("scripted", lambda name, options: ScriptedModel(window=4096))

    return Plugin()


def _run(tmp_path: Path, plugin, home: Path):
    spec = tmp_path / "notes.yaml"
    spec.write_text("name: notes\ndescription: d\ntype: notes\n")
    plugins = load_plugins(extra=[("notes", plugin)])
    return session_answer(RunConfig(tasks=str(spec), models=["scripted:x"], progress=False), plugins, tmp_path / "cache.sqlite", home)


def test_a_missing_dataset_is_fetched_once_and_verified(tmp_path, monkeypatch):
    monkeypatch.setenv("LCEVAL_AUTO_FETCH", "1")
    archive, sha = _archive(tmp_path)
    installs: list[Path] = []
    plugin = _plugin(archive.as_uri(), sha, installs)
    state = _run(tmp_path, plugin, tmp_path / "home")
    assert len(installs) == 1 and (tmp_path / "home" / "notes" / "notes.txt").is_file()
    assert (tmp_path / "home" / "notes" / "CHECKSUMS.json").is_file()
    assert state.tasks[0].samples[0].response is not None
    _run(tmp_path, plugin, tmp_path / "home")
    assert len(installs) == 1  # there now: not fetched again


def test_a_wrong_checksum_or_no_network_says_how_to_fetch_from_a_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("LCEVAL_AUTO_FETCH", "1")
    archive, _ = _archive(tmp_path)
    with pytest.raises(UserError) as err:
        _run(tmp_path, _plugin(archive.as_uri(), "0" * 64, []), tmp_path / "home")
    assert "could not be fetched: checksum mismatch" in err.value.message
    assert "lceval data fetch notes --from notes-archives" in err.value.hint
    assert not (tmp_path / "home" / "notes").exists()  # nothing half-installed
    with pytest.raises(UserError) as err:
        _run(tmp_path, _plugin("http://127.0.0.1:9/notes.zip", "0" * 64, []), tmp_path / "home")
    assert "could not be fetched: cannot download http://127.0.0.1:9/notes.zip" in err.value.message


def test_fetching_can_be_turned_off_and_a_folder_there_is_left_alone(tmp_path, monkeypatch):
    archive, sha = _archive(tmp_path)
    installs: list[Path] = []
    monkeypatch.setenv("LCEVAL_AUTO_FETCH", "0")
    with pytest.raises(UserError, match="dataset 'notes' is not in the data home .*LCEVAL_AUTO_FETCH=0"):
        _run(tmp_path, _plugin(archive.as_uri(), sha, installs), tmp_path / "home")
    monkeypatch.setenv("LCEVAL_AUTO_FETCH", "1")
    (tmp_path / "home2" / "notes").mkdir(parents=True)  # laid out by hand (a fixture, a mirror)
    with pytest.raises(UserError, match="notes not found"):
        _run(tmp_path, _plugin(archive.as_uri(), sha, installs), tmp_path / "home2")
    assert installs == []
