"""What a new user still tripped on (issue 30), each through the command line as typed:
offline data instructions that name every archive and can be pasted, `validate` by task name,
an unclosed quote reported where it opened, advice that fits why a folder cannot be written, a
missing extra as one line (never a traceback), and a rerun served from the cache that leaves
one run folder, not two."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from lceval import hookimpl
from lceval.errors import UserError
from lceval.interfaces import Dataset, DatasetFile, TaskContext, TaskType
from lceval.types import CONTEXT_SLOT, Conversation, Turn

from tests import elitr_tiny
from tests.cli import call
from tests.conftest import ScriptedModel, serve_scripted

ARCHIVES = ("notes.zip", "people.zip", "rooms.zip")


def _archives(folder: Path) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    digests = {}
    for name in ARCHIVES:
        with zipfile.ZipFile(folder / name, "w") as zf:
            zf.writestr(name.replace(".zip", ".txt"), f"the {name} say: the meeting starts at noon")
        digests[name] = hashlib.sha256((folder / name).read_bytes()).hexdigest()
    return digests


def _serve_notes(monkeypatch, digests: dict[str, str]) -> None:
    """The CLI's plugins plus a `notes` dataset of three archives published at an address that
    cannot be reached (tests never download), a task type reading it, and `scripted:`."""
    import lceval.engine

    def install(archives: dict[str, Path], dest: Path) -> None:
        for path in archives.values():
            with zipfile.ZipFile(path) as zf:
                zf.extractall(dest)

    class Notes(TaskType):
        options_schema = {"type": "object", "properties": {}}
        dataset = "notes"

        def load(self, ctx: TaskContext) -> list[Conversation]:
            path = ctx.dataset_dir(self.dataset) / "notes.txt"
            if not path.is_file():
                raise UserError("notes not found", file=path, hint="Run: lceval data fetch notes")
            return [Conversation(conv_id="q", context=path.read_text(), context_id="notes", metadata={"split": "all"},
                                 turns=[Turn(item_id="q", user=f"{CONTEXT_SLOT}\n\nWhen?", reference="noon",
                                             question="When?")])]

    class Plugin:
        @hookimpl
        def register_datasets(self, register):
            register(Dataset(name="notes", description="tiny", install=install,
                             files=[DatasetFile(name=n, url=f"http://127.0.0.1:9/pub/{n}", sha256=digests[n])
                                    for n in ARCHIVES]))

        @hookimpl
        def register_task_types(self, register):
            register("notes", Notes())

        @hookimpl
        def register_models(self, register):
            register("scripted", lambda name, options: ScriptedModel(window=4096))

    original = lceval.engine.load_plugins
    loaded = {}

    def load(disabled=(), extra=(), overrides=()):
        if "p" not in loaded:
            loaded["p"] = original(list(disabled), extra=[("notes", Plugin())], overrides=overrides)
        return loaded["p"]

    monkeypatch.setattr(lceval.engine, "load_plugins", load)


def _notes_spec(tmp_path: Path) -> Path:
    spec = tmp_path / "notes.yaml"
    spec.write_text("name: notes\ndescription: d\ntype: notes\n")
    return spec


def test_first_run_offline_names_every_archive_and_says_what_to_paste(tmp_path, monkeypatch):
    monkeypatch.setenv("LCEVAL_AUTO_FETCH", "1")
    _serve_notes(monkeypatch, _archives(tmp_path / "published"))
    code, _, err = call("run", "--tasks", _notes_spec(tmp_path), "--model", "scripted:x",
                        "--output", tmp_path / "runs")
    assert code == 2, err
    (line,) = err.strip().splitlines()  # one line
    assert "--data-home" not in line  # no flag was given: the error does not pretend one was
    assert "dataset 'notes' is not in the data home" in line and "could not be fetched" in line
    assert "Its 3 archives: notes.zip, people.zip, rooms.zip." in line
    # the commands are whole and use no variable the user does not have
    assert ("`mkdir notes-archives && cd notes-archives && curl -fL --remote-name-all "
            "http://127.0.0.1:9/pub/notes.zip http://127.0.0.1:9/pub/people.zip http://127.0.0.1:9/pub/rooms.zip`") in line
    assert "`lceval data fetch notes --from notes-archives`" in line and "$" not in line


def test_the_pasted_commands_work_and_an_empty_folder_lists_every_missing_archive(tmp_path, monkeypatch):
    digests = _archives(tmp_path / "published")
    _serve_notes(monkeypatch, digests)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes-archives").mkdir()
    (tmp_path / "notes-archives" / "people.zip").write_bytes((tmp_path / "published" / "people.zip").read_bytes())
    code, _, err = call("data", "fetch", "notes", "--from", "notes-archives", "--data-home", tmp_path / "home")
    assert code == 2
    assert "2 of the 3 archives of 'notes' are missing from the --from folder: notes.zip, rooms.zip" in err
    for name in ARCHIVES:  # what the curl line would have put there
        (tmp_path / "notes-archives" / name).write_bytes((tmp_path / "published" / name).read_bytes())
    code, out, err = call("data", "fetch", "notes", "--from", "notes-archives", "--data-home", tmp_path / "home")
    assert code == 0, err
    assert "notes: installed" in out


def test_validate_takes_task_and_suite_names(tmp_path, monkeypatch):
    code, out, _ = call("validate", "elitr_qa")  # valid, its data not fetched yet: exit 4, and how to get it
    assert code == 4 and out.startswith("valid; data not installed: ")
    assert "elitr_qa.yaml (task 'elitr_qa', type 'elitr')" in out and "Run: `lceval data fetch elitr-bench`" in out
    monkeypatch.setenv("LCEVAL_DATA", str(elitr_tiny.build(tmp_path / "home")))
    code, out, err = call("validate", "elitr_qa")
    assert code == 0, err
    assert out.startswith("ok      ") and "elitr_qa.yaml (task 'elitr_qa', type 'elitr')" in out
    code, out, _ = call("validate", "ruler")  # a suite: each of its tasks (its two QA tasks' data not fetched)
    assert code == 4 and out.count("ok      ") == 11 and out.count("valid; data not installed: ") == 2, out
    assert "Run: `lceval data fetch squad-v2-dev`" in out
    code, out, _ = call("validate", "elitr_q")
    assert code == 2
    assert "'elitr_q' is neither a spec file, a plugin folder nor a task or suite name" in out
    assert "Did you mean: elitr_qa" in out
    code, out, _ = call("validate", tmp_path / "missing.yaml")
    assert code == 2 and "YAML file not found" in out


def test_an_unclosed_quote_is_reported_at_the_line_where_it_opened(tmp_path):
    spec = tmp_path / "quote.yaml"
    spec.write_text('name: quoted\ndescription: "never closed\ntype: elitr\noptions:\n  mode: single-turn\n')
    code, out, _ = call("validate", spec)
    assert code == 2
    assert f"{spec}:2: invalid YAML: the quoted string that opens here (column 14) is never closed" in out
    assert "end of stream at line 6" in out


def test_a_folder_that_takes_no_files_is_not_told_to_free_space(tmp_path):
    proc = Path("/proc/x")
    if not Path("/proc").is_dir():
        pytest.skip("no /proc here")
    code, _, err = call("run", "--tasks", "elitr_qa", "--model", "replay:x", "--output", proc)
    assert code == 2
    assert "free some space" not in err and "field '--output'" in err
    assert "does not take files" in err


def test_a_missing_package_that_an_extra_installs_is_one_line_with_the_extra(tiny_home, tmp_path, monkeypatch):
    def backend_without_its_package():
        raise ModuleNotFoundError("No module named 'jinja2'", name="jinja2")

    serve_scripted(monkeypatch, backend_without_its_package)
    code, _, err = call("run", "--tasks", "elitr_qa", "--model", "scripted:x", "--data-home", tiny_home,
                        "--output", tmp_path / "runs", "--limit", "1")
    assert code == 4, err  # something to install, nothing wrong with the input
    assert "Traceback" not in err
    assert err.strip() == ("lceval: error: this needs the Python package 'jinja2', which is not installed. "
                           "Install it with: pip install 'lceval[documents]'")


def test_a_missing_module_no_extra_installs_is_still_an_internal_error(tiny_home, tmp_path, monkeypatch):
    def broken():
        raise ModuleNotFoundError("No module named 'lceval_no_such_module'", name="lceval_no_such_module")

    serve_scripted(monkeypatch, broken)
    code, _, err = call("run", "--tasks", "elitr_qa", "--model", "scripted:x", "--data-home", tiny_home,
                        "--output", tmp_path / "runs", "--limit", "1")
    assert code == 1 and "Traceback" in err


def _runs(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if not p.name.startswith("."))


def test_a_rerun_served_from_the_cache_replaces_its_folder(tiny_home, tmp_path, monkeypatch):
    models = serve_scripted(monkeypatch)
    argv = ["run", "--tasks", "elitr_qa", "--model", "scripted:x", "--data-home", tiny_home,
            "--output", tmp_path / "runs", "--no-progress", "--limit", "2"]
    code, out, err = call(*argv)
    assert code == 0, err
    (first,) = _runs(tmp_path / "runs")
    assert f"wrote {first}" in out
    generated = len(models[0].calls)
    samples = (first / "samples.jsonl").read_text()

    code, out, err = call(*argv)  # the same command again: every answer from the cache
    assert code == 0, err
    assert sum(len(m.calls) for m in models) == generated  # nothing generated
    assert _runs(tmp_path / "runs") == [first]  # one folder, the same name
    assert f"rewrote {first} (the same run as before" in out
    manifest = json.loads((first / "manifest.json").read_text())
    assert manifest["replaced"]["run_id"] == first.name and manifest["run_id"] == first.name
    again = [json.loads(line) for line in (first / "samples.jsonl").read_text().splitlines()]
    before = [json.loads(line) for line in samples.splitlines()]
    assert [{**r, "cached": None} for r in again] == [{**r, "cached": None} for r in before]
    assert all(r["cached"] for r in again)  # and the folder says where its answers came from this time
    assert json.loads((first / "results.json").read_text())["run_id"] == first.name

    code, out, err = call(*argv[:-1], "3")  # another run: a folder of its own
    assert code == 0, err
    assert len(_runs(tmp_path / "runs")) == 2 and "wrote " in out and "rewrote" not in out


def test_with_fetching_off_a_missing_dataset_says_how_to_fetch_it_online_and_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("LCEVAL_AUTO_FETCH", "0")
    _serve_notes(monkeypatch, _archives(tmp_path / "published"))
    code, _, err = call("run", "--tasks", _notes_spec(tmp_path), "--model", "scripted:x", "--output", tmp_path / "runs")
    assert code == 2
    (line,) = err.strip().splitlines()
    assert "dataset 'notes' is not in the data home" in line and "LCEVAL_AUTO_FETCH=0" in line
    assert "Run: `lceval data fetch notes`." in line and "`lceval data fetch notes --from notes-archives`" in line
