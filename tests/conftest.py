"""Shared fixtures: data homes (our tiny fixture, or the real data in ../shared/datasets),
an isolated cache, and a scripted model backend for engine tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lceval.interfaces import ModelBackend
from lceval.types import Generation, GenerationRequest, Message

from . import elitr_tiny
from .paths import REPO, SHARED  # noqa: F401 - REPO and SHARED are imported from here by tests


def default_sigint() -> None:
    """`preexec_fn` of a child the test will interrupt: a test runner started in the background
    of a non-interactive shell (`nohup pytest &`) ignores SIGINT, an ignored signal is inherited
    across exec, and Python then never installs its KeyboardInterrupt handler in the child."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def only_run(folder: Path) -> Path:
    """The one finished directory a command wrote into `folder` (partial ones start with ".")."""
    (run_dir,) = [p for p in folder.iterdir() if not p.name.startswith(".")]
    return run_dir


#: The tests CI runs a second time with HF_HUB_OFFLINE=1 and HF_DATASETS_OFFLINE=1 set before
#: Python starts (`pytest -m offline`; the libraries read them at import): one per reader path,
#: about 15 s in all. The files of a Hub archive, Hub parquet and json, a dataset installed by
#: `data fetch`, tiktoken's o200k_base and authors' files from git: test_offline_data.py (which
#: marks itself); besides it (.ci/run names the files these are in, to collect only them):
OFFLINE_SUBSET = (
    # LongBench-E and LongBench's Chinese tasks: members of the Hub's data.zip, a whole run
    "tests/plugins/documents/test_longbench_zh_e.py::test_a_run_reports_scorer_e_by_length_bin",
    "tests/plugins/documents/test_longbench_zh_e.py::test_each_chinese_task_asks_the_authors_prompt_and_scores_"
    "with_their_metric[dureader]",
    # a Hub config resolved from the cached dataset card and snapshot (no listing asked of the Hub)
    "tests/plugins/documents/test_hub_and_verify.py::test_the_shipped_spec_reads_the_pinned_commit_and_reports_as_"
    "the_authors",
    # BABILong: Hub parquet (1k samples) and json (64k, 128k) of two repositories, a whole run
    "tests/plugins/babilong/test_babilong.py::test_a_run_scores_each_length_and_their_mean",
    # NeedleBench in GPT-4's tokens: tiktoken's cl100k_base from its cache
    "tests/plugins/needlebench/test_needlebench.py::test_in_gpt4_tokens_too[multi_reasoning]",
    # LongWriter: a member of GitHub's archive of the authors' commit, in the data home
    "tests/plugins/longwriter/test_longwriter.py::test_a_run_gives_the_authors_scores_tries_and_totals",
)


def pytest_collection_modifyitems(items):
    for item in items:
        if item.nodeid in OFFLINE_SUBSET:
            item.add_marker(pytest.mark.offline)


@pytest.fixture(autouse=True)
def _isolated_homes(tmp_path_factory, monkeypatch):
    """Never touch the user's real cache or data home from a test."""
    base = tmp_path_factory.mktemp("homes")
    monkeypatch.setenv("LCEVAL_CACHE", str(base / "cache.sqlite"))
    monkeypatch.setenv("LCEVAL_DATA", str(base / "data"))
    monkeypatch.delenv("LCEVAL_DISABLE_PLUGINS", raising=False)
    # tests never download: a missing dataset is an error (tests/unit/engine/test_auto_fetch.py
    # turns fetching on with a dataset served from a local file:// URL)
    monkeypatch.setenv("LCEVAL_AUTO_FETCH", "0")


@pytest.fixture
def tiny_home(tmp_path) -> Path:
    return elitr_tiny.build(tmp_path / "data")


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    if not (SHARED / "elitr-bench" / "data").is_dir():
        pytest.skip(f"real datasets not found at {SHARED} (set LCEVAL_SHARED_DATASETS)")
    return SHARED


@pytest.fixture
def real_home(tmp_path, shared_datasets) -> Path:
    """A data home whose elitr-bench folder points at the shared real data (read-only)."""
    root = tmp_path / "realdata" / "elitr-bench"
    root.mkdir(parents=True)
    for sub in ("data", "czech", "transcripts", "generated-responses", "minutes"):
        (root / sub).symlink_to(shared_datasets / "elitr-bench" / sub)
    return tmp_path / "realdata"


class ScriptedModel(ModelBackend):
    """A model with a word tokenizer and a chat template of 3 tokens per message.

    It answers with the first words of the question and counts every request it really
    generates, so tests can prove what came from the cache. `fail_after` raises
    KeyboardInterrupt after that many generations, like a user pressing Ctrl-C.
    """

    batch_size = 1

    def __init__(self, window: int | None = None, fail_after: int | None = None) -> None:
        self.context_window = window
        self.fail_after = fail_after
        self.calls: list[GenerationRequest] = []

    def identity(self) -> dict:
        return {"scheme": "scripted", "window": self.context_window}

    def count_tokens(self, messages: list[Message]) -> int | None:
        return sum(len(m.content.split()) + 3 for m in messages) + 2

    def tokenize(self, text: str) -> list[int] | None:
        vocab = self.__dict__.setdefault("_vocab", {})
        words = self.__dict__.setdefault("_words", [])
        ids = []
        for w in text.split():
            if w not in vocab:
                vocab[w] = len(words)
                words.append(w)
            ids.append(vocab[w])
        return ids

    def detokenize(self, tokens: list[int]) -> str:
        return " ".join(self._words[t] for t in tokens)

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        out = []
        for r in requests:
            if self.fail_after is not None and len(self.calls) >= self.fail_after:
                raise KeyboardInterrupt
            self.calls.append(r)
            last = r.messages[-1].content
            out.append(Generation(request_id=r.request_id, text="answer: " + " ".join(last.split()[-4:]),
                                  prompt_tokens=self.count_tokens(r.messages) or 0,
                                  prefilled_tokens=5, completion_tokens=5))
        return out


def complete(task_type, options: dict) -> dict:
    """`options` with the task type's schema defaults filled in, as the engine hands them to
    `TaskType.load` (`ctx.options` arrives complete; a task type merges no defaults)."""
    from lceval.options import defaults

    return {**defaults(task_type.options_schema), **options}


def plugins_with_model(model: ModelBackend):
    """The installed plugins plus an in-process `scripted:` scheme serving `model`."""
    from lceval import hookimpl
    from lceval.engine import load_plugins

    class ScriptedPlugin:
        @hookimpl
        def register_models(self, register):
            register("scripted", lambda name, options: model)

    return load_plugins(extra=[("scripted", ScriptedPlugin())])


def serve_scripted(patch: pytest.MonkeyPatch, factory=lambda: ScriptedModel(window=4096)) -> list:
    """Make the in-process CLI (`lceval.cli.main`) see a `scripted:` model scheme, with the
    plugins loaded once; returns the list of models the factory built (none = no model loaded)."""
    from lceval import hookimpl

    built: list = []

    class ScriptedPlugin:
        @hookimpl
        def register_models(self, register):
            register("scripted", lambda name, options: built.append(factory()) or built[-1])

    serve_plugin(patch, "scripted", ScriptedPlugin())
    return built


def serve_plugin(patch: pytest.MonkeyPatch, name: str, plugin: object) -> None:
    """Make the in-process CLI (`lceval.cli.main`) load the installed plugins plus `plugin`
    (an object with hook implementations) under `name`, once per set of -p flags."""
    import lceval.engine

    original = lceval.engine.load_plugins
    cached: dict = {}

    def load(disabled=(), extra=(), overrides=()):
        key = (tuple(disabled), tuple(overrides))
        if key not in cached:
            cached[key] = original(list(disabled), extra=[(name, plugin)], overrides=overrides)
        return cached[key]

    patch.setattr(lceval.engine, "load_plugins", load)  # what `lceval.cli.main` loads the plugins with


def execute_config(config, plugins, home: Path):
    """A one-model RunConfig answered and judged through the engine's Session, as `lceval run`
    does for each model (nothing written); returns the RunState."""
    from dataclasses import replace

    from lceval.engine import Session

    with Session(replace(config, data_home=home), plugins) as session:
        (model,) = session.plan().models
        return session.answer(model)


def run_engine(model: ModelBackend, tasks: str, home: Path, tmp_path: Path, **config):
    """Run the engine (no CLI) and write the run directory; returns (run_dir, results, state)."""
    from lceval.engine import RunConfig
    from lceval.results import write_run

    plugins = plugins_with_model(model)
    cfg = RunConfig(tasks=tasks, models=["scripted:x"], progress=False, **config)
    state = execute_config(cfg, plugins, home)
    run_dir, results = write_run(state, plugins, tmp_path / "runs")
    return run_dir, results, state


def session_answer(config, plugins, cache_path: Path, home: Path):
    """One model's run of `config` through the engine's Session, with its own cache and data
    home (nothing written); returns the RunState."""
    from dataclasses import replace

    from lceval.engine import Session

    with Session(replace(config, cache_path=Path(cache_path), data_home=Path(home)), plugins) as session:
        return session.answer(session.plan().models[0])


def spec_notes(spec) -> str:
    """A shipped spec's file and its family file as text: what it says of the authors' code it
    follows (notes its family's specs share are written once, in _family.yaml; issue 40)."""
    family = spec.path.parent / "_family.yaml"
    return spec.path.read_text(encoding="utf-8") + (family.read_text(encoding="utf-8") if family.is_file() else "")
