"""Fuzzing every command that reads a user's file: specs, ELITR data files and transcripts,
replay files, haystacks, run directories and the cache. Each example writes one damaged
file (a valid one mutated in its JSON/YAML tree or in its bytes, or a hostile shape:
billion laughs, 5,000 brackets, bytes that are not UTF-8, a sparse file past the size
limit) and calls `lceval.cli.main` in-process.

The contract checked: exit 0 (the damage was harmless) or exit 2 with one message that
names a file, never a traceback or exit 1, and a run that fails writes no run directory.

Examples are derandomized and bounded (`LCEVAL_FUZZ_EXAMPLES`, default 10 per target) so CI
stays fast and reproducible; search further locally with, e.g.,
`LCEVAL_FUZZ_EXAMPLES=200 LCEVAL_FUZZ_RANDOM=1 python -m pytest tests/unit/test_fuzz_inputs.py`.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lceval.cli import main
from lceval.io import DATA_MAX_BYTES, SPEC_MAX_BYTES

from tests import elitr_tiny
from tests.conftest import serve_scripted

EXAMPLES = int(os.environ.get("LCEVAL_FUZZ_EXAMPLES", "10"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize="LCEVAL_FUZZ_RANDOM" not in os.environ,
                database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                                      HealthCheck.data_too_large])

# -- generated damage ----------------------------------------------------------------------

LEAF = st.one_of(st.none(), st.booleans(), st.integers(-10**9, 10**9), st.floats(), st.text(max_size=12),
                 st.sampled_from(["../../etc/passwd", "", " ", "\x00", "{context}", "M", "dev"]))
ANY_JSON = st.recursive(LEAF, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                        max_leaves=6)


def _paths(node: Any, at: tuple = ()) -> list[tuple]:
    out = [at]
    if isinstance(node, dict):
        for k, v in node.items():
            out.extend(_paths(v, at + (k,)))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.extend(_paths(v, at + (i,)))
    return out


@st.composite
def mutated_tree(draw: Callable, doc: Any) -> Any:
    """`doc` with one to three of: a value replaced by any JSON, a key or item removed, a value
    wrapped in a list."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(doc)))
        op = draw(st.sampled_from(["replace", "delete", "wrap"]))
        if not path:
            doc = draw(ANY_JSON) if op == "replace" else [doc]
            continue
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        if op == "delete":
            del parent[path[-1]]
        elif op == "wrap":
            parent[path[-1]] = [parent[path[-1]]]
        else:
            parent[path[-1]] = draw(ANY_JSON)
    return doc


def shape_paths(node: Any, at: tuple = ()) -> list[tuple]:
    """One path per position in the document's shape: list items only through their first
    element, so `meetings[0].questions[0].question` stands for every question."""
    out = [at]
    if isinstance(node, dict):
        for k, v in node.items():
            out.extend(shape_paths(v, at + (k,)))
    elif isinstance(node, list) and node:
        out.extend(shape_paths(node[0], at + (0,)))
    return out


#: what a field becomes in the systematic sweep: null, the wrong kind of value, or nothing
WRONG = [None, {}, "delete"]


def single_faults(doc: Any, keep: Callable[[tuple], bool] = lambda p: True,
                  every: bool = True) -> list[tuple[tuple, Any, Any]]:
    """(path, wrong value, damaged document) for every kept shape position, with every WRONG
    value (`every`) or one of them in turn (big documents, to stay fast)."""
    out = []
    for i, path in enumerate(p for p in shape_paths(doc)[1:] if keep(p)):
        for wrong in WRONG if every else [WRONG[i % len(WRONG)]]:
            bad = copy.deepcopy(doc)
            parent = bad
            for key in path[:-1]:
                parent = parent[key]
            if wrong == "delete":
                del parent[path[-1]]
            else:
                parent[path[-1]] = copy.deepcopy(wrong)
            out.append((path, wrong, bad))
    return out


def _laughs(width: int, depth: int) -> bytes:
    lines = [f"a0: &a0 [{', '.join(['lol'] * width)}]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, depth)]
    return ("\n".join(lines) + "\n").encode()


@st.composite
def damaged_bytes(draw: Callable, good: bytes, hostile_yaml: bool = False) -> bytes | int:
    """Byte-level damage to `good`; an int means "a sparse file of that many bytes"."""
    kinds = ["truncate", "insert", "flip", "empty", "not_utf8", "deep_json", "bom", "huge", "binary"]
    if hostile_yaml:
        kinds += ["laughs", "deep_yaml", "tag", "recursive"]
    kind = draw(st.sampled_from(kinds))
    at = draw(st.integers(0, max(0, len(good) - 1)))
    if kind == "truncate":
        return good[:at]
    if kind == "insert":
        return good[:at] + draw(st.binary(min_size=1, max_size=8)) + good[at:]
    if kind == "flip":
        return good[:at] + bytes([good[at] ^ draw(st.integers(1, 255))]) + good[at + 1:] if good else b"\xff"
    if kind == "empty":
        return b""
    if kind == "not_utf8":
        return good[:at] + draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xe2\x82", b"\xed\xa0\x80"])) + good[at:]
    if kind == "deep_json":
        n = draw(st.integers(1000, 6000))
        return b"[" * n + b"]" * n
    if kind == "bom":
        return b"\xef\xbb\xbf" + good
    if kind == "huge":
        return max(SPEC_MAX_BYTES, DATA_MAX_BYTES) + 1
    if kind == "binary":
        return draw(st.binary(min_size=1, max_size=300))
    if kind == "laughs":
        return _laughs(draw(st.integers(5, 12)), draw(st.integers(5, 10)))
    if kind == "deep_yaml":
        n = draw(st.integers(100, 6000))
        return b"x: " + draw(st.sampled_from([b"[", b"{a: "])) * n
    if kind == "tag":
        return good + draw(st.sampled_from([b"\nx: !!python/object/apply:os.system [ls]\n", b"\ny: !function f\n"]))
    return b"a: &a [*a]\n" + good


def write(path: Path, damage: bytes | int | Any) -> None:
    """Write generated content: bytes as they are, an int as a sparse file, data as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(damage, bytes):
        path.write_bytes(damage)
    elif isinstance(damage, int) and not isinstance(damage, bool):
        with open(path, "wb") as fh:
            fh.truncate(damage)  # sparse: instant, takes no disk
    else:
        path.write_text(json.dumps(damage), encoding="utf-8")


def json_or_bytes(good: Any) -> st.SearchStrategy:
    raw = json.dumps(good, indent=1).encode()
    return st.one_of(mutated_tree(good), damaged_bytes(raw))

# -- the world every example starts from ---------------------------------------------------


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A data home, a replay file, a haystack and a finished run, built once; the plugins
    loaded once (with a `scripted:` model) and served to every in-process `main`."""
    from lceval_plugins.summhay.template import write_template

    root = tmp_path_factory.mktemp("fuzz-world")
    patch = pytest.MonkeyPatch()
    serve_scripted(patch)
    patch.setenv("LCEVAL_CACHE", str(root / "cache.sqlite"))
    home = elitr_tiny.build(root / "data")
    replay = copy.deepcopy(elitr_tiny.DEV)
    for meeting in replay["meetings"]:
        for q in meeting["questions"]:
            q["generated-responses"] = [{"model": "M", "generated-response": q["groundtruth-answer"],
                                         "gpt-4-eval_score": "8"}]
    (root / "replay.json").write_text(json.dumps(replay), encoding="utf-8")
    write_template(root / "hay" / "template.json", n_subtopics=2, insights_per_subtopic=2, n_documents=6, copies=2)
    argv = ["run", "--tasks", "elitr_qa", "--model", "scripted:x", "--data-home", str(home),
            "--output", str(root / "runs"), "--no-progress"]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0
        (run_dir,) = (root / "runs").iterdir()
        # a second system, so `rank` has two to compare
        assert main([a.replace("scripted:x", "scripted:y").replace(str(root / "runs"), str(root / "other"))
                     for a in argv]) == 0
    (other,) = (root / "other").iterdir()
    yield {"root": root, "home": home, "replay": root / "replay.json", "haystack": root / "hay" / "template.json",
           "run": run_dir, "other": other}
    patch.undo()


def call(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in argv])
    return rc, out.getvalue() + err.getvalue()


def check(rc: int, text: str, named: list[str], unwritten: list[Path] = ()) -> None:
    """Exit 0, or exit 2 with a message naming one of `named`; never a traceback; a failed run
    leaves `unwritten` absent."""
    assert "Traceback" not in text and "internal error" not in text, text
    assert rc in (0, 2), text
    if rc == 2:
        assert any(n in text for n in named), text
        for path in unwritten:
            assert not path.exists(), f"{path} written by a failed command:\n{text}"


@contextlib.contextmanager
def scratch():
    with tempfile.TemporaryDirectory(prefix="lceval-fuzz-") as tmp:
        yield Path(tmp)


def run_argv(tmp: Path, home: Path, tasks: str, *extra: str, model: str = "scripted:x") -> list[str]:
    return ["run", "--tasks", tasks, "--model", model, "--data-home", home, "--output", tmp / "out",
            "--cache", tmp / "cache.sqlite", "--no-progress", *extra]

# -- targets -------------------------------------------------------------------------------


GOOD_SPEC = {"name": "fuzzed", "description": "fuzzed spec", "type": "elitr", "splits": ["dev"],
             "options": {"question_set": "qa", "mode": "single-turn"}, "generation": {"max_new_tokens": 8},
             "context": {"policy": "truncate-middle"}, "judge": {"name": "lexical"},
             "report": {"group_by": "split", "cluster_by": "meeting_id", "breakdowns": ["question_type"],
                        "tests": [{"name": "middle", "kind": "welch_one_tailed", "field": "answer_position",
                                   "value": "M"}]}}


@FUZZ
@given(damage=st.one_of(mutated_tree(GOOD_SPEC).map(lambda d: yaml.safe_dump(d).encode()),
                        damaged_bytes(yaml.safe_dump(GOOD_SPEC).encode(), hostile_yaml=True)))
def test_specs(world, damage):
    with scratch() as tmp:
        spec = tmp / "fuzzed.yaml"
        write(spec, damage)
        for argv in (["validate", spec], run_argv(tmp, world["home"], str(spec))):
            rc, text = call(argv)
            if rc == 4:  # validate: the spec is valid, its data (not in validate's data home) is not installed
                assert argv[0] == "validate" and text.startswith("valid; data not installed: "), text
                continue
            check(rc, text, [str(spec), "fuzzed.yaml", str(world["home"])], [tmp / "out"])


@FUZZ
@given(target=st.sampled_from(["questions", "transcript"]), data=st.data())
def test_elitr_data_files(world, target, data):
    with scratch() as tmp:
        home = tmp / "data"
        shutil.copytree(world["home"], home)
        if target == "questions":
            path = home / "elitr-bench" / "data" / "elitr-bench-qa_dev.json"
            damage = data.draw(json_or_bytes(elitr_tiny.DEV))
        else:
            path = home / "elitr-bench" / "transcripts" / "meeting_en_dev_901.txt"
            damage = data.draw(damaged_bytes(elitr_tiny.TRANSCRIPTS["meeting_en_dev_901"].encode()))
        write(path, damage)
        for tasks in ("elitr_qa", "elitr_qa_mt", "cream_elitr"):
            rc, text = call(run_argv(tmp, home, tasks, "--split", "dev"))
            check(rc, text, [str(home)], [tmp / "out"])


@FUZZ
@given(data=st.data())
def test_replay_files(world, data):
    good = json.loads(world["replay"].read_text())
    with scratch() as tmp:
        path = tmp / "replay.json"
        write(path, data.draw(json_or_bytes(good)))
        rc, text = call(run_argv(tmp, world["home"], "elitr_qa", "--split", "dev", "--judge", "gpt4-recorded",
                                 model=f"replay:{path}#M"))
        check(rc, text, [str(path)], [tmp / "out"])
        rc, text = call(["judge-agreement", f"a={path}#gpt-4-eval", f"b={path}#gpt-4-eval", "--n-boot", "20"])
        check(rc, text, [str(path)])


@FUZZ
@given(data=st.data())
def test_haystacks(world, data):
    good = json.loads(world["haystack"].read_text())
    with scratch() as tmp:
        path = tmp / "hay" / "fuzzed.json"
        write(path, data.draw(json_or_bytes(good)))
        rc, text = call(run_argv(tmp, world["home"], "summhay_full", "--set", f"options.haystack={path}"))
        check(rc, text, [str(path)], [tmp / "out"])
        rc, text = call(["summhay", "retrieval-report", path, "--budgets", "200", "--retrievers",
                         "keywords,bm25,oracle", "--tokenizer", "words"])
        check(rc, text, [str(path)])
        rc, text = call(["data", "fetch", "summhay", "--from", path.parent, "--data-home", tmp / "home"])
        check(rc, text, [str(path)], [tmp / "home" / "summhay"])


RUN_FILES = ["results.json", "manifest.json", "samples.jsonl"]


@FUZZ
@given(name=st.sampled_from(RUN_FILES), data=st.data())
def test_run_directories(world, name, data):
    with scratch() as tmp:
        run = tmp / world["run"].name
        shutil.copytree(world["run"], run)
        path = run / name
        if name == "samples.jsonl":
            lines = path.read_text().splitlines()
            i = data.draw(st.integers(0, len(lines) - 1))
            damage = data.draw(st.one_of(mutated_tree(json.loads(lines[i])).map(json.dumps),
                                         damaged_bytes(lines[i].encode()).filter(lambda d: isinstance(d, bytes))
                                         .map(lambda d: d.decode("utf-8", "surrogateescape"))))
            if isinstance(damage, str):
                lines[i] = damage.replace("\n", " ")
                path.write_bytes("\n".join(lines).encode("utf-8", "surrogateescape") + b"\n")
        else:
            write(path, data.draw(json_or_bytes(json.loads(path.read_text()))))
        good = world["run"]
        for argv in (["report", run], ["report", run, "--format", "markdown"], ["compare", run, good],
                     ["judge-agreement", f"a={run}", f"b={good}", "--n-boot", "20"],
                     ["score", run, "--judge", "lexical", "--output", tmp / "scored", "--cache", tmp / "c.sqlite"],
                     ["rank", run, world["other"], "--judge", "cream-lexical", "--output", tmp / "ranked",
                      "--n-boot", "10", "--n-orders", "10", "--cache", tmp / "c.sqlite"]):
            rc, text = call(argv)
            check(rc, text, [str(run)], [tmp / "scored", tmp / "ranked"])


@FUZZ
@given(data=st.data())
def test_cache_files(world, data):
    with scratch() as tmp:
        good = tmp / "good.sqlite"
        db = sqlite3.connect(good)
        db.execute("CREATE TABLE entries (key TEXT PRIMARY KEY, kind TEXT NOT NULL, value TEXT NOT NULL,"
                    " created REAL NOT NULL)")
        db.executemany("INSERT INTO entries VALUES (?, 'generate', ?, 0)",
                       [(f"k{i}", json.dumps({"text": "x" * 300})) for i in range(60)])
        db.commit()
        db.close()
        cache = tmp / "cache.sqlite"
        write(cache, data.draw(damaged_bytes(good.read_bytes())))
        argv = run_argv(tmp, world["home"], "elitr_qa", "--split", "dev")
        rc, text = call(argv[:argv.index("--cache")] + ["--cache", cache] + argv[argv.index("--cache") + 2:])
        check(rc, text, [str(cache)], [tmp / "out"])


def test_every_field_of_every_data_file_with_every_wrong_type(world):
    """The systematic half of the fuzzing: each field position of an ELITR questions file, a
    replay file, a haystack, a manifest and a sample line removed or set to null or {}, the wrong
    values in turn over the positions (each position one, every value many times: a third of
    the runs of trying all three everywhere)."""
    def sweep(good: Any, write_bad: Callable[[Any], None], argvs: list[list], named: list[str], out: list[Path],
              keep: Callable[[tuple], bool] = lambda p: True, every: bool = False):
        for path, wrong, bad in single_faults(good, keep, every):
            write_bad(bad)
            for argv in argvs:
                for folder in out:  # a harmless fault ran to the end and wrote: start clean
                    shutil.rmtree(folder, ignore_errors=True)
                rc, text = call(argv)
                try:
                    check(rc, text, named, out)
                except AssertionError as exc:
                    raise AssertionError(f"{'.'.join(map(str, path))} = {wrong!r}: {exc}") from None

    with scratch() as tmp:
        home = tmp / "data"
        shutil.copytree(world["home"], home)
        questions = home / "elitr-bench" / "data" / "elitr-bench-qa_dev.json"
        sweep(elitr_tiny.DEV, lambda d: write(questions, d),
              [run_argv(tmp, home, "elitr_qa", "--split", "dev")], [str(questions)], [tmp / "out"])
        write(questions, elitr_tiny.DEV)
        replay = tmp / "replay.json"
        sweep(json.loads(world["replay"].read_text()), lambda d: write(replay, d),
              [run_argv(tmp, home, "elitr_qa", "--split", "dev", "--judge", "gpt4-recorded", model=f"replay:{replay}#M")],
              [str(replay)], [tmp / "out"])
        hay = tmp / "hay.json"
        sweep(json.loads(world["haystack"].read_text()), lambda d: write(hay, d),
              [run_argv(tmp, home, "summhay_full", "--set", f"options.haystack={hay}")], [str(hay)], [tmp / "out"],
              every=False)
        run = tmp / "run"
        shutil.copytree(world["run"], run)
        manifest = json.loads((run / "manifest.json").read_text())
        reads = [["compare", run, world["run"]], ["score", run, "--judge", "lexical", "--output", tmp / "scored"]]
        # the parts of the manifest later stages read (not versions, usage, timings)
        sweep(manifest, lambda d: write(run / "manifest.json", d), reads, [str(run)], [tmp / "scored"],
              keep=lambda p: p[0] in ("config", "resolved", "data_files") and len(p) <= 5, every=False)
        write(run / "manifest.json", manifest)
        lines = (run / "samples.jsonl").read_text().splitlines()
        sweep(json.loads(lines[0]), lambda d: (run / "samples.jsonl").write_text("\n".join([json.dumps(d)] + lines[1:])),
              reads, [str(run)], [tmp / "scored"], every=False)
