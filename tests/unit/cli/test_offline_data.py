"""Air-gapped nodes, end to end: on a "connected" machine (its Hugging Face cache holding the
pinned files, tiktoken's cache, a data home, a local git repository standing in for GitHub)
`lceval data fetch` and `lceval data pack` gather what tasks need; on a "cluster" machine (other
caches, another data home, HF_HUB_OFFLINE and HF_DATASETS_OFFLINE set) `lceval data unpack`
installs it and every packed task validates and runs. Before unpacking, `validate` says "valid;
data not installed" (exit 4) with the command; a damaged, foreign or half-copied pack, a
read-only data home and a task the pack lacks are one line and exit 2, nothing installed.

The tasks cover the readers: a member of a Hub zip (LongBench), Hub parquet (LIBRA) and json
(CLongEval), a registered dataset (ELITR-Bench), tiktoken's o200k_base (MRCR, its real file
from litellm's copy), and authors' files from a git repository at a commit (a task type of an
in-process plugin that declares them)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from lceval import hookimpl
from lceval.interfaces import TaskContext, TaskType
from lceval.types import CONTEXT_SLOT, Conversation, Turn
from tests import elitr_tiny
from tests.cli import call
from tests.conftest import ScriptedModel, serve_plugin

pytestmark = pytest.mark.offline

LONGBENCH = ("THUDM/LongBench", "5e628be450b7e67fb7ae6e201bd6d8f7056f7672")
LIBRA = ("ai-forever/LIBRA", "c7a66710b8ab3e3a12b576bda29eddf394ada2fe")
CLONGEVAL = ("zexuanqiu22/CLongEval", "8a1696670b4a84364bef5f83d97b025f720a7916")
MRCR = ("openai/mrcr", "f4c69fae7cf81f7ca26b9fee34b392a50f6b8a1d")
O200K = "fb374d419588a4632f3f557e76b4b70aebbca790"  # sha1 of its URL: the name tiktoken caches it under
TASKS = ["longbench_trec", "libra_librusec_history", "clongeval_key_passage_retrieval_large", "elitr_qa", "gitnotes"]


def _o200k() -> Path | None:
    import importlib.util

    found = importlib.util.find_spec("litellm")  # litellm ships tiktoken's files, named as tiktoken caches them
    path = Path(found.origin).parent / "litellm_core_utils" / "tokenizers" / O200K if found and found.origin else None
    return path if path is not None and path.is_file() else None


def _put(hub: Path, repo: str, commit: str, files: dict[str, bytes]) -> None:
    """Files as huggingface_hub's cache holds them after a download (blobs, symlinked snapshot)."""
    import hashlib

    base = hub / f"datasets--{repo.replace('/', '--')}"
    for name, data in files.items():
        blob = base / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = base / "snapshots" / commit / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))


def _parquet(rows: list[dict]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), data)
    return data.getvalue()


def _jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()


def _hub_files(hub: Path) -> None:
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.writestr("data/trec.jsonl", _jsonl([{"input": f"Where is Rome {i}?", "context": "Q: Where? A: LOC",
                                                "answers": ["Location"], "length": 9, "dataset": "trec",
                                                "language": "en", "all_classes": ["Location"], "_id": f"t{i}"}
                                               for i in range(2)]))
    _put(hub, *LONGBENCH, {"data.zip": zipped.getvalue(), "README.md": b"LongBench\n"})
    _put(hub, *LIBRA, {"librusec_history/test-00000-of-00001.parquet": _parquet(
        [{"context": "Текст о Риме.", "input": "Где Рим?", "positive_outputs": ["в Италии"], "length": "8k",
          "negative_outputs": []}])})
    _put(hub, *CLONGEVAL, {"4-1_key_passage_retrieval/large.jsonl": _jsonl(
        [{"id": "k1", "context": "{\"a\": \"1\"}", "query": "a", "answer": "1"}])})


def _git_repo(folder: Path) -> str:
    """A git repository standing in for an authors' GitHub one; its commit."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True, text=True).stdout.strip()

    (folder / "data").mkdir(parents=True)
    (folder / "data" / "notes.txt").write_text("the meeting starts at noon\n", encoding="utf-8")
    git("init", "-q")
    git("-c", "user.name=a", "-c", "user.email=a@b", "add", ".")
    git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "the authors' notes")
    (folder / "data" / "notes.txt").write_text("changed after the pinned commit\n", encoding="utf-8")
    git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qam", "later")
    return git("rev-parse", "HEAD~1")


def _serve(monkeypatch, repo: Path, commit: str, specs: Path) -> None:
    """The CLI's plugins plus `gitnotes` (a task type reading authors' files it declares as
    GitFiles from `repo` at `commit`) and a `scripted:` model."""
    from lceval.io import GitFiles

    class GitNotes(TaskType):
        options_schema = {"type": "object", "properties": {}}

        def needs(self, ctx: TaskContext):
            return [GitFiles(str(repo), commit, ctx.data_home, paths={"data/notes.txt": "gitnotes/notes.txt"})]

        def load(self, ctx: TaskContext) -> list[Conversation]:
            text = (ctx.data_home / "gitnotes" / "notes.txt").read_text(encoding="utf-8")
            return [Conversation(conv_id="q", context=text, context_id="notes", metadata={"split": "all"},
                                 turns=[Turn(item_id="q", user=f"{CONTEXT_SLOT}\n\nWhen?", reference="noon",
                                             question="When?")])]

    (specs / "gitnotes.yaml").write_text("name: gitnotes\ndescription: d\ntype: gitnotes\n", encoding="utf-8")

    class Plugin:
        @hookimpl
        def register_task_types(self, register):
            register("gitnotes", GitNotes())

        @hookimpl
        def register_spec_dirs(self, register):
            register(specs)

        @hookimpl
        def register_models(self, register):
            register("scripted", lambda name, options: ScriptedModel(window=4096))

    serve_plugin(monkeypatch, "gitnotes", Plugin())


def _machine(monkeypatch, base: Path, offline: bool) -> Path:
    """Make `base` this process's machine: its Hub, datasets and tiktoken caches and its data
    home; offline as a node whose environment sets the variables before Python starts."""
    import datasets
    from huggingface_hub import constants

    for var, sub in (("HF_HUB_CACHE", "hub"), ("HF_DATASETS_CACHE", "datasets"), ("TIKTOKEN_CACHE_DIR", "tiktoken"),
                     ("LCEVAL_DATA", "data")):
        monkeypatch.setenv(var, str(base / sub))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(base / "hub"))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", base / "datasets")
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        if offline:
            monkeypatch.setenv(var, "1")
        else:
            monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", offline)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", offline)
    return base / "data"


@pytest.fixture
def packed(tmp_path, monkeypatch):
    """The connected machine: everything at hand, `lceval data fetch` gets the git files,
    `lceval data pack` writes the pack. Returns (pack, the tasks in it)."""
    repo = tmp_path / "github" / "authors"
    commit = _git_repo(repo)
    (tmp_path / "gitnotes").mkdir()  # the family: the spec's folder
    _serve(monkeypatch, repo, commit, tmp_path / "gitnotes")
    home = _machine(monkeypatch, tmp_path / "connected", offline=False)
    _hub_files(tmp_path / "connected" / "hub")
    elitr_tiny.build(home)
    tasks = list(TASKS)
    o200k = _o200k()
    if o200k is not None:  # MRCR: Hub parquet and tiktoken's real o200k_base file
        from tests.plugins.mrcr.test_mrcr import rows

        _put(tmp_path / "connected" / "hub", *MRCR,
             {f"2needle/2needle_{p}.parquet": _parquet(rows(p)) for p in (0, 1)})
        (tmp_path / "connected" / "tiktoken").mkdir()
        (tmp_path / "connected" / "tiktoken" / O200K).write_bytes(o200k.read_bytes())
        tasks.append("mrcr_2needle")
    code, out, err = call("data", "status", *tasks)
    assert code == 4 and "missing  gitnotes: gitnotes/notes.txt not in the data home. Run: `lceval data fetch gitnotes`" \
        in out, out + err
    code, out, err = call("data", "fetch", "gitnotes")  # git: the commit's file, not the later one
    assert code == 0 and "present  gitnotes" in out, err
    assert (home / "gitnotes" / "notes.txt").read_text() == "the meeting starts at noon\n"
    code, out, err = call("data", "status", *tasks)
    assert code == 0 and out.count("present  ") == len(tasks), out
    code, out, err = call("data", "pack", ",".join(tasks), "-o", tmp_path / "lceval-data.tar")
    assert code == 0, err
    assert f"wrote {tmp_path / 'lceval-data.tar'}: {len(tasks)} task(s)" in out
    return tmp_path / "lceval-data.tar", tasks


def test_a_pack_makes_every_task_validate_and_run_with_the_network_off(packed, tmp_path, monkeypatch):
    pack, tasks = packed
    home = _machine(monkeypatch, tmp_path / "cluster", offline=True)
    code, out, _ = call("validate", *tasks)
    assert code == 4 and out.count("valid; data not installed: ") == len(tasks), out
    assert "task 'longbench_trec': revision '5e628be450b7e67fb7ae6e201bd6d8f7056f7672' of dataset THUDM/LongBench is " \
           "not in the local Hugging Face cache and the Hub is offline" in out
    assert "Install it: `lceval data fetch longbench`" in out and "`lceval data pack longbench_trec -o FILE`" in out
    assert "(task 'elitr_qa', type 'elitr'): dataset 'elitr-bench' is not in the data home" in out
    assert "Run: `lceval data fetch elitr-bench`" in out
    code, out, err = call("data", "unpack", pack)
    assert code == 0, err
    assert f"{len(tasks)} task(s) ready without network (data home: {home})" in out
    code, out, _ = call("data", "status", *tasks)
    assert code == 0 and out.count("present  ") == len(tasks), out
    code, out, err = call("validate", *tasks)
    assert code == 0 and out.count("ok      ") == len(tasks), out + err
    code, out, err = call("run", "--tasks", ",".join(tasks), "--model", "scripted:x", "--limit", "1",
                          "--output", tmp_path / "runs", "--no-progress")
    assert code == 0, err
    (run,) = (tmp_path / "runs").iterdir()
    results = json.loads((run / "results.json").read_text())
    assert set(results["tasks"]) == set(tasks)
    # nothing was read from the connected machine's caches: every recorded file is the cluster's
    files = json.loads((run / "manifest.json").read_text())["data_files"]
    assert files and all(str(tmp_path / "cluster") in f for f in files), files
    code, out, err = call("data", "unpack", pack)  # again: everything is there already, nothing replaced
    assert code == 0 and f"installed 0 need(s)" in out, err


def _one_line(err: str) -> str:
    (line,) = err.strip().splitlines()
    assert line.startswith("lceval: error: ") and "Traceback" not in err
    return line


def test_a_task_the_pack_lacks_is_named_with_its_fix(packed, tmp_path, monkeypatch):
    pack, _ = packed
    _machine(monkeypatch, tmp_path / "cluster", offline=True)
    assert call("data", "unpack", pack)[0] == 0
    code, _, err = call("run", "--tasks", "libra_passkey", "--model", "scripted:x", "--output", tmp_path / "runs")
    line = _one_line(err)  # LIBRA's repository is here at its commit, this task's file is not
    assert code == 2 and "task 'libra_passkey'" in line and "`lceval data fetch libra`" in line
    assert "`lceval data pack libra_passkey -o FILE`" in line and "`lceval data unpack FILE`" in line


def _rewritten(pack: Path, out: Path, change) -> Path:
    """A copy of the pack with its manifest changed by `change(manifest)`."""
    with tarfile.open(pack) as src, tarfile.open(out, "w") as dst:
        for member in src:
            data = src.extractfile(member).read()
            if member.name == "lceval-pack.json":
                manifest = json.loads(data)
                change(manifest)
                data = json.dumps(manifest).encode()
                member.size = len(data)
            dst.addfile(member, io.BytesIO(data))
    return out


def test_bad_packs_and_places_are_one_line_and_install_nothing(packed, tmp_path, monkeypatch):
    pack, tasks = packed
    home = _machine(monkeypatch, tmp_path / "cluster", offline=True)
    size = pack.stat().st_size

    half = tmp_path / "half.tar"
    for cut in (size // 2, 1000):  # a copy cut off halfway, or inside the pack's list of files
        half.write_bytes(pack.read_bytes()[:cut])
        code, _, err = call("data", "unpack", half)
        assert code == 2 and "the pack is incomplete or damaged" in _one_line(err) and "Copy it again" in err

    flipped = bytearray(pack.read_bytes())
    at = flipped.rindex(b"the meeting starts at noon")  # one byte of a packed file changed
    flipped[at] ^= 1
    (tmp_path / "flipped.tar").write_bytes(bytes(flipped))
    code, _, err = call("data", "unpack", tmp_path / "flipped.tar")
    assert code == 2 and "gitnotes/notes.txt does not match its sha256" in _one_line(err)

    foreign = _rewritten(pack, tmp_path / "old.tar", lambda m: m.update(lceval="0.0.1"))
    code, _, err = call("data", "unpack", foreign)
    line = _one_line(err)
    assert code == 2 and "made by lceval 0.0.1" in line and f"`lceval data pack {','.join(tasks)} -o FILE`" in line

    (tmp_path / "notes.txt").write_text("not a pack")
    code, _, err = call("data", "unpack", tmp_path / "notes.txt")
    assert code == 2 and "is not an lceval data pack" in _one_line(err)

    assert not home.exists() and not (tmp_path / "cluster" / "hub").exists()  # nothing installed by any of them

    if Path("/proc").is_dir():  # a data home no file can be written to
        code, _, err = call("data", "unpack", pack, "--data-home", "/proc/lceval-data")
        assert code == 2 and "/proc" in _one_line(err) and "--data-home" in err


def test_a_failed_install_leaves_what_was_there(packed, tmp_path, monkeypatch):
    """A pack whose second need fails to stage installs nothing, the first included."""
    pack, _ = packed
    home = _machine(monkeypatch, tmp_path / "cluster", offline=True)
    (home / "elitr-bench").mkdir(parents=True)
    (home / "elitr-bench" / "mine.txt").write_text("a hand-made install")
    lacking = _rewritten(pack, tmp_path / "lacking.tar",
                         lambda m: m["needs"][-1]["files"].append({"path": "absent.bin", "sha256": "0" * 64, "size": 1}))
    code, _, err = call("data", "unpack", lacking)
    assert code == 2 and "1 file(s) missing, first absent.bin" in _one_line(err)
    assert sorted(p.name for p in home.rglob("*")) == ["elitr-bench", "mine.txt"]  # as it was
    assert not [p for p in (tmp_path / "cluster").rglob(".lceval-unpack-*")]  # no scratch left behind
