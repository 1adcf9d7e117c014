"""`lceval summhay from-hf`: the Hugging Face haystacks as JSON files, with `datasets` faked
(no network in tests): rows as the hub serves them, nested fields as JSON strings or with
None-filled struct keys, a clear error offline or without the package."""

from __future__ import annotations

import argparse
import json
import sys
import types

import pytest

from lceval.errors import UserError
from lceval_plugins.summhay.commands import SummhayCommand
from lceval_plugins.summhay.dataset import collect
from lceval_plugins.summhay.haystack import load_haystack
from lceval_plugins.summhay.template import template_haystack


def rows():
    conv = template_haystack(n_subtopics=2, insights_per_subtopic=2, n_documents=4, copies=2)
    conv["topic_id"] = "conv1"
    news = template_haystack(n_subtopics=2, insights_per_subtopic=2, n_documents=4, copies=2, domain="news")
    news["topic_id"] = "news/1"
    # parquet: a struct field absent from this row comes back as None
    news["subtopics"][0]["retriever"] = {"bm25": {d["document_id"]: 0.5 for d in news["documents"]}, "vector": None}
    news["subtopics"][0]["insights"][0]["insight_name"] = None
    conv["subtopics"] = json.dumps(conv["subtopics"])  # a nested field served as a JSON string
    return [conv, news]


def command(*argv):
    cmd = SummhayCommand()
    parser = argparse.ArgumentParser()
    cmd.add_arguments(parser)
    return cmd.run(parser.parse_args(argv))


@pytest.fixture
def fake_datasets(monkeypatch):
    calls = []

    def load_dataset(name, split=None, revision=None):
        calls.append((name, split, revision))
        if name != "Salesforce/summary-of-a-haystack":
            raise ConnectionError("Couldn't reach 'x' on the Hub (LocalEntryNotFoundError)")
        return rows()

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    return calls


def test_rows_become_checked_haystack_files(fake_datasets, tmp_path):
    out = command("from-hf", str(tmp_path / "hs"), "--revision", "abc123")
    assert "wrote 2 haystacks" in out
    assert fake_datasets == [("Salesforce/summary-of-a-haystack", "train", "abc123")]
    files = sorted(p.name for p in (tmp_path / "hs").iterdir())
    assert files == ["topic_conv1.json", "topic_news_1.json"]
    conv, news = (load_haystack(tmp_path / "hs" / f) for f in files)
    assert conv.domain == "conversation" and len(conv.subtopics) == 2
    assert news.domain == "news" and set(news.subtopics[0].retriever_scores) == {"bm25"}
    assert set(collect(tmp_path / "hs")) == set(files)  # installable with data fetch --from


def test_offline_and_missing_package_are_user_errors(fake_datasets, tmp_path, monkeypatch):
    with pytest.raises(UserError, match="could not load .*ConnectionError"):
        command("from-hf", str(tmp_path / "hs"), "--dataset", "nobody/nothing")
    assert not (tmp_path / "hs").exists()
    monkeypatch.setitem(sys.modules, "datasets", None)  # import datasets -> ImportError
    with pytest.raises(UserError, match="needs the `datasets` package"):
        command("from-hf", str(tmp_path / "hs"))


def test_a_row_off_the_schema_names_the_row(monkeypatch, tmp_path):
    bad = rows()[1]
    del bad["documents"]
    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=lambda *a, **k: [bad]))
    with pytest.raises(UserError, match="documents") as err:
        command("from-hf", str(tmp_path / "hs"))
    assert "train[0]" in str(err.value)
