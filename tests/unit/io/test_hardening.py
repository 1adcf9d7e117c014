"""One regression test per input that used to crash, hang or pass silently (issue 13, item
1): each now ends in exit 2 with one line naming the file, the field or line and the value,
writes no run directory, and loads no model."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from lceval.cli import main

from tests.conftest import serve_scripted


@pytest.fixture
def models(monkeypatch):
    """The models the `scripted:` scheme built: empty when bad input stopped the run first."""
    return serve_scripted(monkeypatch)


def call(*argv) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in argv])
    return rc, out.getvalue() + err.getvalue()


def refused(rc: int, text: str, *needles: str) -> str:
    assert rc == 2, text
    assert "Traceback" not in text and "internal error" not in text, text
    for needle in needles:
        assert needle in text, text
    return text


def run(tmp_path: Path, home: Path, *extra) -> tuple[int, str]:
    return call("run", "--tasks", "elitr_qa", "--split", "dev", "--model", "scripted:x", "--data-home", home,
                "--output", tmp_path / "runs", "--no-progress", *extra)


def spec(tmp_path: Path, text: str | bytes, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


GOOD = "name: mine\ndescription: my task\ntype: elitr\n"

# -- specs -------------------------------------------------------------------------------


def test_billion_laughs_is_refused_at_once(tmp_path, monkeypatch):
    """Nine anchors of nine aliases: 9^9 values if expanded. The loader builds at most its
    bound of them (every YAML scalar is built by PyYAML's constructor, counted here) and
    refuses; past ten times the bound the count itself stops the expansion and fails."""
    import yaml

    from lceval.io import MAX_VALUES

    lines = ["a0: &a0 [" + ", ".join(["lol"] * 9) + "]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    path = spec(tmp_path, "\n".join(lines) + "\n")
    built = [0]  # the file's "lol"s built (no other file lceval reads holds one)
    real = yaml.constructor.SafeConstructor.construct_object

    def counted(self, node, deep=False):
        if getattr(node, "value", None) == "lol":
            built[0] += 1
            assert built[0] <= 10 * MAX_VALUES, "the aliases are being expanded"
        return real(self, node, deep=deep)

    monkeypatch.setattr(yaml.constructor.SafeConstructor, "construct_object", counted)
    refused(*call("validate", path), str(path), f"expands to more than {MAX_VALUES:,} values")
    assert 0 < built[0] <= MAX_VALUES  # of 9^9 = 387,420,489


def test_a_spec_past_the_size_limit_is_refused_before_parsing(tmp_path):
    path = tmp_path / "big.yaml"
    with open(path, "wb") as fh:
        fh.truncate(50 * 1024 * 1024)  # sparse: a 50 MB "spec"
    refused(*call("validate", path), str(path), "52,428,800 bytes", "refused before reading")


@pytest.mark.parametrize("opener", ["[", "{a: "])
def test_deep_nesting_is_refused_with_its_line(tmp_path, opener):
    path = spec(tmp_path, GOOD + "options:\n  x: " + opener * 5000 + "\n")
    refused(*call("validate", path), f"{path}:5", "nested more than 64 levels")


def test_a_spec_that_is_not_utf8_names_line_and_byte(tmp_path):
    path = spec(tmp_path, GOOD.encode() + b"citation: caf\xe9\n")
    refused(*call("validate", path), f"{path}:4", "not UTF-8", "0xe9")


def test_unknown_top_level_field_is_reported_at_its_own_line(tmp_path):
    path = spec(tmp_path, GOOD + "\n\nsplitz: [dev]\n")
    refused(*call("validate", path), f"{path}:6", "field 'splitz'", "did you mean 'splits'")


@pytest.mark.parametrize("extra,where,line,needle", [
    ("", "type", 3, "unknown task type 'elitrr'"),
    ("judge:\n  name: rubrik\n", "judge.name", 5, "did you mean 'rubric'"),
])
def test_unknown_plugins_in_a_spec_name_the_spec(tmp_path, tiny_home, models, extra, where, line, needle):
    text = (GOOD.replace("elitr", "elitrr") if where == "type" else GOOD) + extra
    path = spec(tmp_path, text)
    refused(*call("validate", path), f"{path}:{line}", f"field '{where}'", needle)
    refused(*call("run", "--tasks", path, "--model", "scripted:x", "--data-home", tiny_home,
                  "--output", tmp_path / "runs"), f"{path}:{line}", needle)
    assert not models and not (tmp_path / "runs").exists()


def test_unknown_retriever_in_a_spec_or_flag(tmp_path, models):
    path = spec(tmp_path, "name: mine\ndescription: d\ntype: summhay\noptions:\n  retriever: bm2\n")
    refused(*call("validate", path), f"{path}:5", "field 'options.retriever'", "unknown retriever 'bm2'",
            "did you mean 'bm25'")
    refused(*call("run", "--tasks", "summhay_full", "--model", "scripted:x", "--retriever", "bm2",
                  "--output", tmp_path / "runs"), "field '--retriever'", "unknown retriever 'bm2'")
    assert not models


def test_set_values_are_read_like_specs(tmp_path, tiny_home, models):
    laughs = "&a [" + ",".join(["x"] * 9) + "]"
    refused(*run(tmp_path, tiny_home, "--set", f"options.prompt={laughs}"), "--set")
    refused(*run(tmp_path, tiny_home, "--set", "options.prompt=!!python/object/apply:os.system [ls]"),
            "--set", "not allowed")
    assert not models

# -- data files ----------------------------------------------------------------------------


def _questions(home: Path) -> Path:
    return home / "elitr-bench" / "data" / "elitr-bench-qa_dev.json"


def test_elitr_meeting_without_id(tmp_path, tiny_home, models):
    data = json.loads(_questions(tiny_home).read_text())
    del data["meetings"][1]["id"]
    _questions(tiny_home).write_text(json.dumps(data))
    refused(*run(tmp_path, tiny_home), str(_questions(tiny_home)), "field 'meetings[1].id'", "lacks 'id'")
    assert not models and not (tmp_path / "runs").exists()


def test_elitr_question_that_is_a_number(tmp_path, tiny_home, models):
    data = json.loads(_questions(tiny_home).read_text())
    data["meetings"][0]["questions"][2]["question"] = 42
    _questions(tiny_home).write_text(json.dumps(data))
    refused(*run(tmp_path, tiny_home), str(_questions(tiny_home)), "field 'meetings[0].questions[2].question'",
            "must be a string, got 42")
    assert not models


def test_elitr_meeting_id_cannot_reach_outside_the_dataset(tmp_path, tiny_home, models):
    data = json.loads(_questions(tiny_home).read_text())
    data["meetings"][0]["id"] = "../../../etc/hostname"
    _questions(tiny_home).write_text(json.dumps(data))
    refused(*run(tmp_path, tiny_home), "field 'meetings[0].id'", "plain name", "'../../../etc/hostname'")


@pytest.mark.parametrize("content,needle", [(b"", "is empty (0 bytes)"), (b"\n \n", "is empty"),
                                            (b"(PERSON1) caf\xe9\n", "not UTF-8")])
def test_empty_or_undecodable_transcript(tmp_path, tiny_home, models, content, needle):
    path = tiny_home / "elitr-bench" / "transcripts" / "meeting_en_dev_902.txt"
    path.write_bytes(content)
    refused(*run(tmp_path, tiny_home), str(path), needle)
    assert not models and not (tmp_path / "runs").exists()


def test_haystack_and_replay_file_that_are_not_utf8(tmp_path, tiny_home, models):
    hay = tmp_path / "hay.json"
    hay.write_bytes(b'{"topic": "caf\xe9"}')
    refused(*call("run", "--tasks", "summhay_full", "--model", "scripted:x", "--set", f"options.haystack={hay}",
                  "--output", tmp_path / "runs"), f"{hay}:1", "not UTF-8")
    replay = tmp_path / "replay.json"
    replay.write_bytes(b'{"meetings": []}\n\xff')
    refused(*call("run", "--tasks", "elitr_qa", "--model", f"replay:{replay}#M", "--data-home", tiny_home,
                  "--output", tmp_path / "runs"), f"{replay}:2", "not UTF-8")


@pytest.mark.parametrize("name,content,argv,line", [
    ("corpus.jsonl", b'{"reference": "a b", "hypothesis": "a"}\n\xff\n', ["noise", "rules", "{f}", "-o", "{o}"], 2),
    ("corpus.tsv", b"a b\ta\nc\t\xff\n", ["noise", "rules", "{f}", "-o", "{o}"], 2),
    ("rules.json", b'{"format": "\xff"}', ["noise", "wer", "{f}", "{f}"], 1),
    ("sentences.txt", b"One sentence.\n\xff\n", ["noise", "corpus", "{f}", "-o", "{o}"], 2),
    ("rankings.json", b"\xff", ["report", "{d}", "--format", "html", "-o", "{o}"], 1),
])
def test_noise_and_report_inputs_that_are_not_utf8(tmp_path, name, content, argv, line):
    folder = tmp_path / "in"
    folder.mkdir()
    path = folder / name
    path.write_bytes(content)
    out = tmp_path / "out"
    refused(*call(*[a.format(f=path, o=out, d=folder) for a in argv]), f"{path}:{line}", "not UTF-8")
    assert not out.exists()


def test_json_lines_end_at_newline_only(tmp_path):
    """An answer holding U+2028, U+0085 or \\x1c is written raw (ensure_ascii=False) and must
    read back as one record, not as a broken line."""
    from lceval.io import read_json_lines

    answers = ["one\u2028two", "three\x85four", "five\x1csix"]
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps({"response": a}, ensure_ascii=False) + "\n" for a in answers) + "\r\n",
                    encoding="utf-8")
    assert read_json_lines(path, what="samples file") == [(n, {"response": a}) for n, a in enumerate(answers, 1)]


def test_fifo_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    refused(*call("validate", fifo), str(fifo), "not a regular file")

# -- outputs -------------------------------------------------------------------------------


def test_output_that_is_a_file(tmp_path, tiny_home, models):
    target = tmp_path / "runs"
    target.write_text("not a folder")
    refused(*run(tmp_path, tiny_home), str(target), "is a file, not a folder")
    assert not models and target.read_text() == "not a folder"


@pytest.mark.parametrize("code,needle", [(errno.EROFS, "Read-only file system"),
                                         (errno.ENOSPC, "No space left on device")])
def test_unwritable_output_is_refused_before_the_model_loads(tmp_path, tiny_home, models, monkeypatch, code, needle):
    import tempfile

    def fail(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(tempfile, "TemporaryFile", fail)
    refused(*run(tmp_path, tiny_home), "--output", needle)
    assert not models


def test_a_write_failing_after_the_work_loses_nothing(tmp_path, tiny_home, models, monkeypatch):
    real = Path.write_text

    def full_disk(self, *args, **kwargs):  # the disk fills up as the run's last file is written
        if self.name == "manifest.json":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full_disk)
    cache = tmp_path / "cache.sqlite"
    refused(*run(tmp_path, tiny_home, "--cache", cache), "No space left on device", "Nothing finished is lost")
    assert [p.name for p in (tmp_path / "runs").iterdir()] == []  # no half directory, no .partial
    monkeypatch.setattr(Path, "write_text", real)
    calls = len(models[0].calls)
    assert run(tmp_path, tiny_home, "--cache", cache)[0] == 0
    assert len(models[1].calls) == 0 and calls > 0  # the rerun came from the cache


def test_stale_partial_folders_are_removed_and_live_ones_kept(tmp_path, tiny_home, models):
    out = tmp_path / "runs"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    import socket

    for name, pid in ((".old.partial", dead.pid), (".busy.partial", os.getpid())):
        (out / name).mkdir(parents=True)
        (out / name / ".owner").write_text(f"{socket.gethostname()}:{pid}\n")
    assert run(tmp_path, tiny_home)[0] == 0
    names = sorted(p.name for p in out.iterdir())
    assert ".old.partial" not in names and ".busy.partial" in names

# -- the cache -----------------------------------------------------------------------------


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _good_cache(path: Path) -> Path:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE entries (key TEXT PRIMARY KEY, kind TEXT NOT NULL, value TEXT NOT NULL,"
               " created REAL NOT NULL)")
    db.executemany("INSERT INTO entries VALUES (?, 'generate', ?, 0)", [(str(i), "x" * 2000) for i in range(200)])
    db.commit()
    db.close()
    return path


@pytest.mark.parametrize("damage,needle", [
    (lambda p: p.write_bytes(os.urandom(4096)), "not an SQLite database"),
    (lambda p: p.write_bytes(_good_cache(p.with_suffix(".good")).read_bytes()[:40_000]), "truncated SQLite database"),
    (lambda p: sqlite3.connect(p).execute("CREATE TABLE notes (x)").connection.commit(), "not an lceval cache"),
])
def test_a_cache_file_that_is_not_ours_is_left_untouched(tmp_path, tiny_home, models, damage, needle):
    cache = tmp_path / "cache.sqlite"
    damage(cache)
    before = _digest(cache)
    refused(*run(tmp_path, tiny_home, "--cache", cache), str(cache), needle, "--cache NEW_FILE", "left untouched")
    assert _digest(cache) == before and not models
    assert not Path(f"{cache}-wal").exists()


def test_a_cache_path_that_is_a_folder_or_under_a_file(tmp_path, tiny_home, models):
    folder = tmp_path / "cachedir"
    folder.mkdir()
    refused(*run(tmp_path, tiny_home, "--cache", folder), str(folder), "is a folder", "--cache")
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    refused(*run(tmp_path, tiny_home, "--cache", blocker / "cache.sqlite"), "afile is a file, not a folder")
    assert blocker.read_text() == "x" and not models

# -- the command as users type it -----------------------------------------------------------


def test_no_sub_command_means_run(tmp_path, tiny_home, models):
    rc, text = call("--tasks", "elitr_qa", "--split", "dev", "--model", "scripted:x", "--data-home", tiny_home,
                    "--output", tmp_path / "runs", "--no-progress", "-p", "no:summhay")
    assert rc == 0, text
    assert "elitr_qa" in text and models
    rc, text = call("-p", "no:summhay", "--tasks", "nope", "--model", "scripted:x")
    refused(rc, text, "unknown task or suite 'nope'")
    # -p no:NAME after a nested sub-command too (pytest takes it anywhere)
    rc, text = call("data", "paths", "-p", "no:summhay")
    assert rc == 0 and "data home:" in text, text
    rc, text = call("summhay", "synth", "-pno:cream", tmp_path / "hay.json", "--template")
    assert rc == 0 and (tmp_path / "hay.json").is_file(), text


def test_help_with_and_without_the_sub_command(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    assert "--tasks TASKS --model MODEL" in top and "judge-agreement" in top and "validate" in top
    with pytest.raises(SystemExit):
        main(["--tasks", "elitr_qa", "--help"])
    implicit = capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert capsys.readouterr().out == implicit and implicit.startswith("usage: lceval run")


def test_a_broken_plugin_spec_does_not_break_the_catalog(tmp_path):
    from lceval import hookimpl
    from lceval.errors import UserError
    from lceval.engine import load_plugins
    from lceval.engine import load_catalog

    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "latin1.yaml").write_bytes(b"name: latin1\ndescription: caf\xe9\ntype: elitr\n")

    class SpecFolder:
        @hookimpl
        def register_spec_dirs(self, register):
            register(folder)

    catalog = load_catalog(load_plugins(extra=[("specfolder", SpecFolder())]))  # every other task still listed
    assert "elitr_qa" in catalog.specs and "latin1" in catalog.specs
    with pytest.raises(UserError, match="not UTF-8") as err:
        catalog.spec("latin1")
    assert f"{folder / 'latin1.yaml'}:2" in err.value.render()
