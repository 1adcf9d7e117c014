"""A model's long-context settings (`ModelBackend.long_context`: window, RoPE scaling, chunked
prefill, prefix caching) are part of every cache key and of the run's record (issue 44, part
4): two runs that differ only by them share no answer, the same settings again are served from
the cache, the manifest keeps them and the report's run table shows them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lceval.engine import RunRecord
from lceval.types import LongContextSettings, RopeScaling
from tests.conftest import ScriptedModel, run_engine

YARN = LongContextSettings(window=4096, position_embeddings=4096, rope=RopeScaling("yarn", 4.0, 1024),
                           chunked_prefill=True, prefill_chunk=512, prefix_caching=True)


class StretchedModel(ScriptedModel):
    """The scripted model, stretched to its window by `settings` (its identity the same whatever
    they are: only the engine's key tells the runs apart)."""

    def __init__(self, settings: LongContextSettings | None) -> None:
        super().__init__(window=4096)
        self.settings = settings

    def long_context(self) -> LongContextSettings | None:
        return self.settings


@pytest.mark.parametrize("other", [
    LongContextSettings(window=4096, position_embeddings=4096, rope=RopeScaling("dynamic", 4.0, 1024),
                        chunked_prefill=True, prefill_chunk=512, prefix_caching=True),
    LongContextSettings(window=4096, position_embeddings=4096, rope=RopeScaling("yarn", 4.0, 2048),
                        chunked_prefill=True, prefill_chunk=512, prefix_caching=True),
    LongContextSettings(window=4096, position_embeddings=4096, rope=RopeScaling("yarn", 4.0, 1024),
                        chunked_prefill=True, prefill_chunk=2048, prefix_caching=True),
    LongContextSettings(window=4096, position_embeddings=4096, rope=RopeScaling("yarn", 4.0, 1024),
                        chunked_prefill=True, prefill_chunk=512, prefix_caching=False),
    None,
], ids=["rope-type", "original-window", "prefill-chunk", "prefix-caching", "none-reported"])
def test_runs_that_differ_only_by_long_context_settings_share_no_answer(other, tiny_home, tmp_path):
    cache = tmp_path / "cache.sqlite"
    first = StretchedModel(YARN)
    run_dir, _, _ = run_engine(first, "elitr_qa", tiny_home, tmp_path / "a", cache_path=cache, limit=2)
    asked = len(first.calls)
    assert asked == 4  # two questions of each split
    changed = StretchedModel(other)
    run_engine(changed, "elitr_qa", tiny_home, tmp_path / "b", cache_path=cache, limit=2)
    assert len(changed.calls) == asked  # nothing served from the first run's answers
    again = StretchedModel(YARN)
    run_engine(again, "elitr_qa", tiny_home, tmp_path / "c", cache_path=cache, limit=2)
    assert again.calls == []  # the same settings: every answer from the cache

    record = RunRecord.read(run_dir)
    assert record.long_context == YARN
    recorded = json.loads((run_dir / "manifest.json").read_text())["resolved"]["model_identity"]["long_context"]
    assert recorded["rope"] == {"type": "yarn", "factor": 4.0, "original_window": 1024}


def test_a_backend_that_reports_none_keeps_the_keys_it_always_had(tiny_home, tmp_path):
    _, _, state = run_engine(StretchedModel(None), "elitr_qa", tiny_home, tmp_path / "a", limit=1)
    assert state.model_identity == {"scheme": "scripted", "window": 4096}


def test_the_report_run_table_shows_the_settings(tiny_home, tmp_path):
    pytest.importorskip("altair")
    from lceval.engine import load_plugins
    from lceval.report import ReportInputs, build_report
    from lceval.results import load_run

    plain, _, _ = run_engine(StretchedModel(None), "elitr_qa", tiny_home, tmp_path / "a", limit=1)
    yarn, _, _ = run_engine(StretchedModel(YARN), "elitr_qa", tiny_home, tmp_path / "b", limit=1)
    page = build_report(ReportInputs(runs=[load_run(plain), load_run(yarn)]), load_plugins())
    runs = page[page.index('<section id="runs"'):]
    assert '<th scope="col">long context</th>' in runs
    assert "window 4,096; yarn x4 of 1,024; chunked prefill 512; prefix cache on" in runs
    assert "<td>-</td>" in runs  # the run whose backend said nothing


def test_settings_go_round_through_their_dict_form():
    assert LongContextSettings.from_dict(json.loads(json.dumps(YARN.as_dict()))) == YARN
    bare = LongContextSettings(window=8192, chunked_prefill=False, prefix_caching=False)
    assert LongContextSettings.from_dict(bare.as_dict()) == bare
    assert bare.summary() == "window 8,192; no chunked prefill; prefix cache off"
    assert RunRecord.from_manifest({"run_id": "r"}, Path("run")).long_context is None  # an older lceval's run
