"""`lceval cache export/import`: answers move between request caches (each machine of a
cluster keeps its own), a run reads the imported ones instead of generating, and nothing a
cache holds is ever replaced."""

from __future__ import annotations

import gzip
import json
import time

from tests.cli import call, lceval
from tests.conftest import ScriptedModel, only_run, serve_scripted

RUN = ["run", "--tasks", "elitr_qa", "--model", "scripted:x", "--judge", "lexical", "--no-progress"]


def usage(folder) -> dict:
    return json.loads((only_run(folder) / "manifest.json").read_text())["usage"]


def lines(path) -> list[dict]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def test_answers_exported_on_one_machine_are_read_on_another(tiny_home, tmp_path, monkeypatch):
    models = serve_scripted(monkeypatch, lambda: ScriptedModel(window=4096))
    here, there = tmp_path / "here.sqlite", tmp_path / "there.sqlite"
    lceval(*RUN, "--data-home", tiny_home, "--cache", here, "--output", tmp_path / "first")
    assert usage(tmp_path / "first")["generated"] == 7
    out = lceval("cache", "export", tmp_path / "answers.jsonl.gz", "--cache", here)
    assert out.startswith("exported 7 answers")
    exported = lines(tmp_path / "answers.jsonl.gz")
    assert len(exported) == 7 and {"key", "kind", "value", "created"} <= set(exported[0])

    out = lceval("cache", "import", tmp_path / "answers.jsonl.gz", "--cache", there)
    assert "7 answers added, 0 already there, 0 kept" in out
    lceval(*RUN, "--data-home", tiny_home, "--cache", there, "--output", tmp_path / "second")
    assert usage(tmp_path / "second")["cache_hits"] == 7 and usage(tmp_path / "second")["generated"] == 0
    assert sum(len(m.calls) for m in models) == 7  # the second run asked the model nothing

    # again: nothing added; another cache's database is read directly too
    assert "0 answers added, 7 already there" in lceval("cache", "import", tmp_path / "answers.jsonl.gz",
                                                        "--cache", there)
    assert "0 answers added, 7 already there" in lceval("cache", "import", here, "--cache", there)


def test_an_answer_already_there_is_never_replaced(tiny_home, tmp_path, monkeypatch):
    serve_scripted(monkeypatch)
    cache = tmp_path / "cache.sqlite"
    lceval(*RUN, "--data-home", tiny_home, "--cache", cache, "--output", tmp_path / "run")
    lceval("cache", "export", tmp_path / "mine.jsonl", "--cache", cache)
    mine = lines(tmp_path / "mine.jsonl")
    theirs = [dict(e, value={**e["value"], "text": "another machine sampled this"}) for e in mine[:2]]
    theirs.append({"key": "f" * 64, "kind": "generation", "value": {"text": "new"}, "created": time.time()})
    (tmp_path / "theirs.jsonl").write_text("".join(json.dumps(e) + "\n" for e in theirs))
    out = lceval("cache", "import", tmp_path / "theirs.jsonl", "--cache", cache)
    assert "1 answers added, 0 already there, 2 kept as they were" in out
    lceval("cache", "export", tmp_path / "after.jsonl", "--cache", cache)
    after = {e["key"]: e["value"] for e in lines(tmp_path / "after.jsonl")}
    assert all(after[e["key"]] == e["value"] for e in mine) and after["f" * 64] == {"text": "new"}


def test_since_exports_only_what_was_stored_after(tiny_home, tmp_path, monkeypatch):
    serve_scripted(monkeypatch)
    cache = tmp_path / "cache.sqlite"
    lceval(*RUN, "--data-home", tiny_home, "--cache", cache, "--output", tmp_path / "run")
    assert lceval("cache", "export", tmp_path / "none.jsonl", "--cache", cache,
                  "--since", "2999-01-01T00:00").startswith("exported 0 answers")
    assert lceval("cache", "export", tmp_path / "all.jsonl", "--cache", cache,
                  "--since", "2000-01-01").startswith("exported 7 answers")


def test_bad_files_are_refused_naming_file_and_line(tmp_path):
    cache = tmp_path / "cache.sqlite"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"key": "a", "kind": "generation", "value": {}}\nnot json\n')
    code, _, err = call("cache", "import", bad, "--cache", cache)
    assert code == 2 and f"{bad}:2" in err and "not a JSON line" in err
    bad.write_text('{"key": "a", "kind": "generation", "value": "text"}\n')
    code, _, err = call("cache", "import", bad, "--cache", cache)
    assert code == 2 and f"{bad}:1" in err and "object `value`" in err
    code, _, err = call("cache", "import", tmp_path / "missing.jsonl", "--cache", cache)
    assert code == 2 and "no such file" in err
    other = tmp_path / "other.sqlite"
    import sqlite3

    db = sqlite3.connect(other)
    db.execute("CREATE TABLE notes (text TEXT)")
    db.commit()
    db.close()
    code, _, err = call("cache", "import", other, "--cache", cache)
    assert code == 2 and "not an lceval cache" in err and "field 'FILE'" in err
    code, _, err = call("cache", "export", tmp_path / "x.jsonl", "--cache", tmp_path / "never.sqlite")
    assert code == 2 and "no cache here yet" in err and not (tmp_path / "never.sqlite").exists()
    code, _, err = call("cache", "export", tmp_path / "x.jsonl", "--cache", cache, "--since", "yesterday")
    assert code == 2 and "field '--since'" in err
