"""OpenAI MRCR: the shipped specs read rows in the dataset's real schema (openai/mrcr parquet
files, `prompt` the JSON text of the chat, put where huggingface_hub caches the pinned commit),
send each chat as its own messages byte for byte, bin each row by its tokens of prompt + answer
as the dataset card does, and grade as the card's `grade`: the expected ratios below are what the
card's own code gives on the same answers, computed by running it outside this repository."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lceval_plugins.mrcr.task as mrcr_task
from lceval.engine import check_spec, load_catalog, load_plugins
from lceval.errors import UserError
from lceval.interfaces import JudgeContext, TaskContext
from lceval.types import JudgeInput, Message
from lceval_plugins.mrcr.task import bin_of

from tests.conftest import run_engine
from tests.plugins.documents.conftest import put_in_hub_cache
from tests.plugins.documents.test_messages import sent
from tests.plugins.graphwalks.test_graphwalks import Answering

PLUGINS = load_plugins()
CATALOG = load_catalog(PLUGINS)
REPO, COMMIT = "openai/mrcr", "f4c69fae7cf81f7ca26b9fee34b392a50f6b8a1d"
P = "aYooSG8CQg"
POEM = ("**Verse 1**  \nIn the forest deep where shadows play,  \nThe tapir wanders through the day,  \n"
        "With gentle steps and quiet grace,  \nIt finds its home in this green place.  \n\n"
        "**Verse 2**  \nIts snout is long, its eyes are kind,  \nA gentler creature hard to find,  \n"
        "It swims the rivers, cool and wide,  \nWith calm and patience as its guide.")
ANSWER = P + POEM
# (the model's answer as written, the card's grade on it)
CASES = [(P + POEM, 1.0), (" " + P + POEM, 0.0), (POEM, 0.0), (P, 0.0),
         (P + POEM.replace("tapir", "Tapir"), 0.9970059880239521), (P + POEM[:120], 0.5286343612334802),
         (P + "\n" + POEM, 0.9985052316890882), (P + POEM + "\n\nI hope you enjoyed this poem!", 0.9556509298998569),
         ("aYooSG8CQG" + POEM, 0.0), (P + "Tapirs roam.", 0.017341040462427744)]


@pytest.mark.parametrize("answer,expected", CASES)
def test_the_metric_is_the_cards_grade(answer, expected):
    judge = PLUGINS.judges["mrcr"](JudgeContext(options={}))
    item = JudgeInput(item_id="train/0", question="Prepend ...", response=answer.strip(), reference=ANSWER,
                      metadata={"references": [ANSWER], "random_string_to_prepend": P},
                      raw_response=answer if answer != answer.strip() else None)
    (j,) = judge.judge([item])
    assert j.score == pytest.approx(100 * expected, abs=1e-12) and j.parse_status == "ok"


def test_the_bins_are_the_cards():
    assert [bin_of(n) for n in (4095, 4096, 8192, 8193, 131072, 131073, 1048576, 1048577)] == \
        ["<4k", "8k", "8k", "16k", "128k", "256k", "1M", ">1M"]


def chat(n: int, i: int) -> list[dict]:
    """A chat of the data: the few-shot preamble, `n` writing asks and answers, the last ask."""
    msgs = [{"role": "user", "content": "Here are some examples of conversations succeeded by a follow-up question "
                                        "answered correctly:\n\n======EXAMPLE======\nUser: write a short essay about "
                                        "education\nAssistant: Education matters.\n\n======END EXAMPLE======\n"}]
    for k in range(n):
        msgs += [{"role": "user", "content": f"write a poem about tapirs {i}" if k % 2 == 0 else "write a blog post about rocks"},
                 {"role": "assistant", "content": POEM if k == 0 else f"Rocks, part {k}.\n\n" + "Stone " * (5 * k)}]
    msgs.append({"role": "user", "content": f"Prepend {P} to the 1st (1 indexed) poem about tapirs {i}. Do not "
                                            "include any other text in your response."})
    return msgs


def rows(part: int) -> list[dict]:
    """Rows of 2needle/2needle_<part>.parquet: prompt (JSON text), answer, random_string_to_prepend,
    n_needles, desired_msg_index, total_messages, n_chars, date_added."""
    out = []
    for i, n in enumerate((2, 6) if part == 0 else (40,)):
        msgs = chat(n, 10 * part + i)
        out.append({"prompt": json.dumps(msgs), "answer": ANSWER, "random_string_to_prepend": P, "n_needles": 2,
                    "desired_msg_index": 2, "total_messages": len(msgs),
                    "n_chars": sum(len(m["content"]) for m in msgs), "date_added": "12-05-2025"})
    return out


class Words:
    """A stand-in for o200k_base (whose file is downloaded, not shipped): a token per word."""

    def encode(self, text: str, disallowed_special=()) -> list[int]:
        return [0] * len(text.split())


@pytest.fixture
def hub(_isolated_hf, monkeypatch):
    files = {}
    for part in (0, 1):
        data = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(rows(part)), data)
        files[f"2needle/2needle_{part}.parquet"] = data.getvalue()
    put_in_hub_cache(_isolated_hf / "hub", REPO, COMMIT, files)
    monkeypatch.setitem(mrcr_task._ENCODINGS, "o200k_base", Words())
    return _isolated_hf


def load(name: str, tmp_path, **options):
    spec = CATALOG.spec(name)
    task_type = check_spec(spec, PLUGINS)
    data = {**spec.data, "options": {**spec.data["options"], **options}}
    ctx = TaskContext(spec=data, spec_path=spec.path, data_home=tmp_path, splits=None, limit=None,
                      record_file=lambda p: None)
    return task_type.load(ctx)


def words(msgs: list[dict], answer: str) -> int:
    return sum(len(m["content"].split()) for m in msgs) + len(answer.split())


def test_each_chat_is_sent_as_its_messages_with_its_bin(hub, tmp_path):
    convs = load("mrcr_2needle", tmp_path)
    expected = rows(0) + rows(1)
    assert len(convs) == 3
    for conv, row in zip(convs, expected):
        msgs = json.loads(row["prompt"])
        assert sent(conv) == [Message(m["role"], m["content"]) for m in msgs]
        meta = conv.turns[0].metadata
        assert meta["bin_tokens"] == words(msgs, ANSWER) and meta["bin"] == bin_of(words(msgs, ANSWER))
        assert meta["random_string_to_prepend"] == P and meta["references"] == [ANSWER]
    assert [c.turns[0].metadata["bin"] for c in convs] == ["<4k", "<4k", "8k"]


def test_bins_keep_only_their_rows(hub, tmp_path, monkeypatch):
    class Thousands(Words):   # every word a thousand tokens: the rows spread over the card's bins
        def encode(self, text, disallowed_special=()):
            return [0] * (1000 * len(text.split()))

    monkeypatch.setitem(mrcr_task._ENCODINGS, "o200k_base", Thousands())
    every = load("mrcr_2needle", tmp_path)
    bins = [c.turns[0].metadata["bin"] for c in every]
    assert bins == ["256k", "512k", ">1M"]
    kept = load("mrcr_2needle", tmp_path, bins=["512k"])
    assert [c.turns[0].metadata["bin"] for c in kept] == ["512k"]
    assert kept[0].preamble == every[1].preamble


def test_without_the_encodings_file_the_error_says_what_to_do(hub, tmp_path, monkeypatch):
    import tiktoken

    monkeypatch.delitem(mrcr_task._ENCODINGS, "o200k_base")

    def offline(name):
        raise ConnectionError("no network")

    monkeypatch.setattr(tiktoken, "get_encoding", offline)
    with pytest.raises(UserError) as err:
        load("mrcr_2needle", tmp_path)
    assert err.value.field == "options.bin_encoding" and "bin_encoding=null" in err.value.hint
    convs = load("mrcr_2needle", tmp_path, bin_encoding=None)   # no bins, no tiktoken
    assert len(convs) == 3 and "bin" not in convs[0].turns[0].metadata


def test_a_run_grades_each_answer_and_reports_by_bin(hub, tmp_path):
    model = Answering({"tapirs 0.": P + POEM, "tapirs 1.": " " + P + POEM, "tapirs 10.": P + POEM[:120]},
                      window=8192)
    _, results, state = run_engine(model, "mrcr_2needle", tmp_path / "home", tmp_path)
    assert len(model.calls) == 3
    (task,) = state.tasks
    scores = [s.judgments[0].score for s in sorted(task.samples, key=lambda s: s.item_id)]
    assert scores == pytest.approx([100.0, 0.0, 100 * 0.5286343612334802])  # the leading space fails the gate
    block = results["tasks"]["mrcr_2needle"]["metrics"]["score"]
    assert block["breakdowns"]["bin"]["<4k"]["n"] == 2 and block["breakdowns"]["bin"]["8k"]["value"] == pytest.approx(52.86343612334802)
