"""Leaderboard bundles: `submit` packs runs, `verify` accepts an honest bundle and rejects
each kind of tampering with what differs, `leaderboard` ranks only verified ones.

The data is our tiny ELITR-shaped fixture, installed by `data fetch` from a zip whose
sha256 a test dataset plugin pins, exactly as the real `elitr-bench` plugin pins its
archives; answers are replayed from a recorded-responses file inside it (a recomputable
model) and judged by the offline lexical judge."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

import lceval.engine
from lceval import hookimpl
from lceval.cli import main
from lceval.engine import load_catalog, load_plugins
from lceval.interfaces import Dataset, DatasetFile
from lceval.io import extract_zip, fetch
from lceval.leaderboard import differences, open_bundle, submit, verify_bundle, write_site
from lceval.results import sample_from_record, score_task

from tests import cli as commands
from tests import elitr_tiny

DATASET = "tiny-elitr"


def _responses(split_data: dict) -> dict:
    """A recorded-responses file (ELITR's format) answering every question, for `replay:`."""
    meetings = []
    for m in split_data["meetings"]:
        qs = [{"id": q["id"], "question": q["question"],
               "generated-responses": [{"model": "M", "generated-response": f"I think: {q['groundtruth-answer']}",
                                        "gpt-4-eval_score": 8}]} for q in m["questions"]]
        meetings.append({"id": m["id"], "questions": qs})
    return {"split": split_data["split"], "meetings": meetings}


def _dataset(archive: Path, pinned: bool = True) -> Dataset:
    def install(archives: dict[str, Path], dest: Path) -> None:
        extract_zip(archives["tiny.zip"], dest, None, lambda rel: rel)

    sha = hashlib.sha256(archive.read_bytes()).hexdigest()
    files = [DatasetFile("tiny.zip", "https://example.invalid/tiny.zip", sha)] if pinned else []
    collect = None if pinned else (lambda folder: {"tiny.zip": folder / "tiny.zip"})
    return Dataset(DATASET, "tiny test dataset", files, install, collect=collect)


def _plugins(archive: Path, pinned: bool = True, extra: tuple = ()):
    class TinyData:
        @hookimpl
        def register_datasets(self, register):
            register(_dataset(archive, pinned))

    return load_plugins(extra=[("tinydata", TinyData()), *extra])


@pytest.fixture
def setup(tmp_path):
    """(data home with the pinned install, the plugins knowing the dataset, a finished run)."""
    src = elitr_tiny.build(tmp_path / "src") / "elitr-bench"
    (src / "generated-responses").mkdir()
    for split, data in (("dev", elitr_tiny.DEV), ("test2", elitr_tiny.TEST2)):
        (src / "generated-responses" / f"tiny_{split}.json").write_text(json.dumps(_responses(data)))
    archives = tmp_path / "archives"
    archives.mkdir()
    with zipfile.ZipFile(archives / "tiny.zip", "w") as zf:
        for p in sorted(src.rglob("*")):
            if p.is_file():
                zf.write(p, p.relative_to(src).as_posix())
    home = tmp_path / "home"
    plugins = _plugins(archives / "tiny.zip")
    fetch(plugins.datasets[DATASET], str(archives), home)
    spec = tmp_path / "tiny_qa.yaml"
    spec.write_text(commands.lceval("tasks", "show", "elitr_qa").replace("name: elitr_qa", "name: tiny_qa")
                    .replace("dataset: elitr-bench", f"dataset: {DATASET}"))
    recorded = home / DATASET / "generated-responses" / "tiny_{split}.json"
    ((run_dir, _),) = commands.run(tasks=str(spec), models=[f"replay:{recorded}#M"],
                                   judge="lexical", output=tmp_path / "runs", data_home=home, progress=False)
    return home, plugins, run_dir


def _verify(bundle: Path, home: Path, plugins, **kw):
    return verify_bundle(bundle, plugins, load_catalog(plugins), home, **kw)


def test_an_honest_bundle_is_verified(setup, tmp_path):
    home, plugins, run_dir = setup
    bundle = submit([run_dir], tmp_path / "b.zip", plugins, name="tiny M")
    with open_bundle(bundle) as b:
        (entry,) = b.index["runs"]
        assert b.index["name"] == "tiny M" and entry["tasks"]["tiny_qa"]["judge"]["judge"] == "lexical"
        assert {(d["dataset"], d["path"]) for d in entry["data"]} >= {(DATASET, "data/elitr-bench-qa_dev.json")}
        assert {"tinydata", "replay"} <= set(b.index["plugins"])
    v = _verify(bundle, home, plugins)
    assert v.ok, v.problems
    text = "\n".join(v.passed)
    for expected in ("values recomputed from 7 samples", "all 7 items of the task", "data: 7 files have the sha256",
                     "7 of 7 answered items (seeded sample) judged again with lexical",
                     "7 of 7 answered items (seeded sample) asked again of replay"):
        assert expected in text


def _tampered(bundle: Path, out: Path, edit, rescore: bool = True, rehash: bool = True) -> Path:
    """A copy of `bundle` with `edit(records, manifest)` applied, its results recomputed (as a
    careful cheat would) and bundle.json's hashes updated, so only the deep checks can tell."""
    with zipfile.ZipFile(bundle) as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
    index = json.loads(files["bundle.json"])
    run = index["runs"][0]
    base = f"runs/{run['run_id']}/"
    recs = [json.loads(line) for line in files[base + "samples.jsonl"].decode().splitlines()]
    results = json.loads(files[base + "results.json"])
    manifest = json.loads(files[base + "manifest.json"])
    recs = edit(recs, manifest)
    if rescore:
        for task, t in results["tasks"].items():
            samples = [sample_from_record(r) for r in recs if r["task"] == task]
            results["tasks"][task] = score_task(samples, manifest["resolved"]["tasks"][task]["spec"], t["judge"])
    files[base + "samples.jsonl"] = ("\n".join(json.dumps(r) for r in recs) + "\n").encode()
    files[base + "results.json"] = json.dumps(results).encode()
    files[base + "manifest.json"] = json.dumps(manifest).encode()
    if rehash:
        for name in ("results.json", "samples.jsonl", "manifest.json"):
            run["files"][name] = hashlib.sha256(files[base + name]).hexdigest()
        run["data"] = [{**d, "sha256": manifest["data_files"].get(next(
            (k for k in manifest["data_files"] if k.endswith(d["path"])), ""), d["sha256"])} for d in run["data"]]
    files["bundle.json"] = json.dumps(index).encode()
    with zipfile.ZipFile(out, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return out


def _set_score(recs, manifest):
    recs[1]["score"] = recs[1]["judgments"][0]["score"] = 10.0 if recs[1]["score"] != 10.0 else 1.0
    return recs


def _set_answer(recs, manifest):
    recs[1]["response"] = "Nobody knows."
    return recs


def _set_data(recs, manifest):
    key = next(k for k in manifest["data_files"] if k.endswith("elitr-bench-qa_dev.json"))
    manifest["data_files"][key] = "0" * 64
    return recs


def _set_reference(recs, manifest):
    recs[2]["reference"] = "Something the data does not say"
    return recs


CASES = {
    "edited score": (_set_score, {}, "judged again with lexical: dev/meeting_en_dev_901/2 (seed 0): recorded"),
    "edited answer": (_set_answer, {}, "asked again: dev/meeting_en_dev_901/2 (seed 0): answer differs"),
    "dropped sample": (lambda recs, m: recs[:3] + recs[4:], {}, "sample missing (dropped?): dev/meeting_en_dev_902/1"),
    "other reference": (_set_reference, {}, "dev/meeting_en_dev_901/3 (seed 0): reference differs from the data"),
    "other data": (_set_data, {}, "other data: tiny-elitr/data/elitr-bench-qa_dev.json: submitted 000000000000"),
    "edited results": (_set_score, {"rescore": False}, "results tiny_qa.metrics.score.breakdowns.answer_position"),
    "edited after packing": (_set_score, {"rehash": False}, "differ from the sha256 listed in bundle.json"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_tampered_bundle_is_rejected_with_what_differs(setup, tmp_path, case):
    home, plugins, run_dir = setup
    edit, kw, expected = CASES[case]
    honest = submit([run_dir], tmp_path / "honest.zip", plugins)
    bad = _tampered(honest, tmp_path / "bad.zip", edit, **kw)
    v = _verify(bad, home, plugins)
    assert not v.ok
    assert any(expected in p for p in v.problems), v.problems


def test_verify_exit_code_and_json(setup, tmp_path, monkeypatch, capsys):
    home, plugins, run_dir = setup
    # what `lceval.cli.main` loads the plugins with: the ones that know the tiny dataset
    monkeypatch.setattr(lceval.engine, "load_plugins", lambda disabled=(), **kw: plugins)
    honest = submit([run_dir], tmp_path / "honest.zip", plugins)
    assert main(["verify", str(honest), "--data-home", str(home)]) == 0
    assert "VERIFIED" in capsys.readouterr().out
    bad = _tampered(honest, tmp_path / "bad.zip", lambda recs, m: recs[:-1])
    assert main(["verify", str(bad), "--data-home", str(home), "--format", "json"]) == 2
    rep = json.loads(capsys.readouterr().out)
    assert rep["ok"] is False and any("test2/meeting_en_test2_901/2" in p for p in rep["problems"])


def test_the_verifiers_own_data_must_be_as_fetched(setup, tmp_path):
    home, plugins, run_dir = setup
    bundle = submit([run_dir], tmp_path / "b.zip", plugins)
    transcript = home / DATASET / "transcripts" / "meeting_en_dev_901.txt"
    transcript.write_text(transcript.read_text() + "(PERSON9) an extra line\n")
    v = _verify(bundle, home, plugins)
    assert any("this machine's data changed since it was fetched" in p and "meeting_en_dev_901.txt" in p
               for p in v.problems), v.problems


def test_unpinned_data_needs_consent(setup, tmp_path):
    home, _, run_dir = setup
    unpinned = _plugins(tmp_path / "archives" / "tiny.zip", pinned=False)
    bundle = submit([run_dir], tmp_path / "b.zip", unpinned)
    v = _verify(bundle, home, unpinned)
    assert any("publishes no checksums" in p for p in v.problems)


def test_results_differences_name_every_leaf():
    diffs, n = differences({"a": {"b": 1.0, "c": [1, 2]}, "d": "x"}, {"a": {"b": 1.0 + 1e-12, "c": [1, 3]}, "e": 1},
                           "r")
    assert n == 3
    assert diffs == ["r.a.c[1]: reported 2, recomputed 3", "r.d: reported, but not in the recomputed results",
                     "r.e: recomputed, but missing from the reported results"]


def test_leaderboard_ranks_only_verified_bundles(setup, tmp_path):
    home, plugins, run_dir = setup
    honest = submit([run_dir], tmp_path / "honest.zip", plugins, name="honest M")
    bad = _tampered(honest, tmp_path / "bad.zip", _set_answer)
    text = write_site([honest, bad], tmp_path / "site", plugins, load_catalog(plugins), home)
    assert "verified     honest M" in text and "rejected" in text
    index = (tmp_path / "site" / "index.html").read_text()
    ranked = index.split('id="rejected"')[0]
    assert ranked.count('href="submissions/') == 1 and 'id="rejected"' in index
    pages = sorted(p.name for p in (tmp_path / "site" / "submissions").iterdir())
    assert len(pages) == 2
    assert "Verification: rejected" in (tmp_path / "site" / "submissions" / pages[1]).read_text()


def test_a_recorded_backend_stays_recomputable_behind_an_options_check(setup, tmp_path):
    """`replay:` is marked `recomputable`: registered with an options schema (which wraps the
    factory in a check) it is still asked again by verify; the same backend from a factory
    that is not marked is not."""
    from lceval_plugins.elitr.replay import make_replay

    home, _, _ = setup
    schema = {"type": "object", "additionalProperties": False, "properties": {}}

    class Typed:
        @hookimpl
        def register_models(self, register):
            register("typed-replay", make_replay, options_schema=schema)
            register("plain", lambda model, options: make_replay(model, options), options_schema=schema)

    plugins = _plugins(tmp_path / "archives" / "tiny.zip", extra=(("typed", Typed()),))
    recorded = home / DATASET / "generated-responses" / "tiny_{split}.json"
    asked: dict[str, list[str]] = {}
    for scheme in ("typed-replay", "plain"):
        ((run_dir, _),) = commands.run(tasks=str(tmp_path / "tiny_qa.yaml"), models=[f"{scheme}:{recorded}#M"],
                                       plugins=plugins, judge="lexical", output=tmp_path / scheme, data_home=home,
                                       progress=False)
        v = _verify(submit([run_dir], tmp_path / f"{scheme}.zip", plugins), home, plugins)
        assert v.ok, v.problems
        assert any("judged again with lexical" in p for p in v.passed), v.passed  # verified all the same
        asked[scheme] = [p for p in v.passed if "asked again of" in p]
    (line,) = asked["typed-replay"]
    assert line.endswith("tiny_qa: 7 of 7 answered items (seeded sample) asked again of typed-replay: same answers, "
                         "prompts and recorded extras"), line
    assert asked["plain"] == []
