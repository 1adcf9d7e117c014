"""Needle Threading: the shipped specs read rows in the dataset's real schema (the parquet
conversion's files, put where huggingface_hub caches the pinned commit), send each row as
`haystack + '\\n' + question`, byte for byte, skip a haystack past the window rather than cut it,
and score with the authors' README rule. The expected verdicts of the single-value cases are
what the README's own evaluation lines give on the same replies (run outside this repository;
"raises" there is wrong here: the README's loop would stop)."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lceval.engine import check_spec, load_catalog, load_plugins
from lceval.interfaces import JudgeContext
from lceval.types import Generation, JudgeInput, Message

from tests.conftest import ScriptedModel, run_engine
from tests.plugins.documents.conftest import put_in_hub_cache

PLUGINS = load_plugins()
CATALOG = load_catalog(PLUGINS)
REPO, COMMIT = "jonathan-roberts1/needle-threading", "c534041f04b1f8592ce7de0d514815776a95fac6"
A = "1759edc3-72ae-2244-8b01-63c1cd9d2b7d"
B = "964a870c-7c87-9b74-1d87-8f9f9cdf5a86"
C = "f728b4fa-4248-5e3a-0a5d-2f346baa9455"

# (reply as the model wrote it, the README's verdict: True, False or the exception it raises)
README_CASES = [
    (f"'{A}'", True), (f'"{A}"', True), (A, "SyntaxError"), (f"'{A} is the value'", True), (f" '{A}'", True),
    (f"\n'{A}'", True), (f"'{A}'\n", True), (f"['{A}']", False), (f"'{A[:-1]}'", False), ("42", "TypeError"),
    (f"'Corresponding value: {A}'", False), (f"```\n'{A}'\n```", "SyntaxError"),
]


def judge(**options):
    return PLUGINS.judges["needle_threading"](JudgeContext(options=options))


def item(reply: str, gold: str) -> JudgeInput:
    return JudgeInput(item_id="Single_Needle/0", question="", response=reply.strip(), reference=gold,
                      metadata={"references": [gold]}, raw_response=reply if reply != reply.strip() else None)


@pytest.mark.parametrize("reply,readme", README_CASES)
def test_one_value_is_scored_as_the_readme_scores_it(reply, readme):
    (j,) = judge().judge([item(reply, A)])
    assert j.parse_status == "ok" and j.score == (100.0 if readme is True else 0.0)
    assert j.details["parsed"] is (readme != "SyntaxError")


@pytest.mark.parametrize("reply,all_,share", [
    (f"['{A}', '{B}']", 100.0, 100.0),
    (f"['{B}', '{A}']", 100.0, 100.0),                    # any order
    (f"['{A}']", 0.0, 50.0),
    (f"['{A}', '{B}', '{C}']", 100.0, 100.0),              # an extra value costs nothing (the prefix rule)
    (f"('{A}', '{B}')", 100.0, 100.0),
    (f"{A}, {B}", 0.0, 0.0),                              # no literal
    (f"'{A}'", 0.0, 0.0),                                 # a string, no list
])
def test_a_list_counts_each_gold_value_found(reply, all_, share):
    gold = str([A, B])
    (strict,) = judge(answer="list").judge([item(reply, gold)])
    (shared,) = judge(answer="list", lists="share").judge([item(reply, gold)])
    assert (strict.score, shared.score) == (all_, share)


def test_the_lenient_reading_takes_bare_uuids():
    assert judge(parse="uuids").judge([item(f"The value is {A}.", A)])[0].score == 100.0
    assert judge(parse="uuids", answer="list").judge([item(f"{B}, {A}", str([A, B]))])[0].score == 100.0
    assert judge().judge([item(f"The value is {A}.", A)])[0].score == 0.0


def rows() -> list[dict]:
    """Rows of the Single_Needle split in the dataset's schema; row 2's haystack is long."""
    out = []
    for i, pairs in enumerate([3, 4, 400]):
        hay = {f"{k:08x}-0000-4000-8000-{i:012x}": f"{k + 7:08x}-1111-4111-8111-{i:012x}" for k in range(pairs)}
        key, value = next(iter(hay.items()))
        out.append({"id": i, "haystack": json.dumps(hay), "keys": key, "values": value,
                    "question": ("Extract the value corresponding to the specified key in the JSON object. Key: "
                                 f'"{key}"\n Corresponding value: '),
                    "context_length": [2000, 2000, 64000][i], "num_kv_pairs": pairs, "repeat_number": i,
                    "needle_depth": ["0", "50", "100"][i], "num_needles": 1, "needle_placement": "depthwise",
                    "conditional_character": "N/A", "thread_length": 1, "thread_direction": "N/A", "num_threads": 0})
    return out


class Answering(ScriptedModel):
    """Answers row i's prompt with replies[i] (found by the row's key in the prompt)."""

    def __init__(self, replies: dict[str, str], window: int) -> None:
        super().__init__(window=window)
        self.replies = replies

    def generate(self, requests):
        out = []
        for r in requests:
            self.calls.append(r)
            text = next(a for k, a in self.replies.items() if k in r.messages[-1].content)
            out.append(Generation(request_id=r.request_id, text=text, prompt_tokens=10, prefilled_tokens=10,
                                  completion_tokens=5))
        return out


def test_the_spec_sends_haystack_newline_question_and_skips_a_haystack_past_the_window(_isolated_hf, tmp_path):
    data = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows()), data)
    put_in_hub_cache(_isolated_hf / "hub", REPO, COMMIT, {"default/Single_Needle/0000.parquet": data.getvalue()})
    spec = CATALOG.spec("nthread_single_needle")
    check_spec(spec, PLUGINS, data=True)
    r = rows()
    model = Answering({r[0]["keys"]: f"'{r[0]['values']}'", r[1]["keys"]: r[1]["values"]}, window=600)
    _, results, state = run_engine(model, "nthread_single_needle", tmp_path / "home", tmp_path)
    assert [c.messages for c in model.calls] == [[Message("user", row["haystack"] + "\n" + row["question"])]
                                                 for row in r[:2]]
    assert [c.params.max_new_tokens for c in model.calls] == [100, 100] and model.calls[0].params.temperature == 0
    (task,) = state.tasks
    by_id = {s.item_id: s for s in task.samples}
    assert by_id["Single_Needle/2"].context_cut.action == "skipped"    # 400 pairs: past the window, not cut
    assert by_id["Single_Needle/0"].judgments[0].score == 100.0
    assert by_id["Single_Needle/1"].judgments[0].score == 0.0          # unquoted: no Python literal
    block = results["tasks"]["nthread_single_needle"]["metrics"]["score"]
    assert block["breakdowns"]["needle_depth"]["0"]["value"] == 100.0
    assert block["breakdowns"]["context_length"]["2000"]["n"] == 2
    curve = results["length_bins"]["nthread_single_needle"]  # counted in the model's tokens, not the rows' characters
    assert curve["field"] == "tokens" and sum(p["n"] for p in curve["points"]) == block["n"] == 2
    assert [p["label"] for p in curve["points"]] == ["0-2k"]


@pytest.mark.parametrize("name,answer", [("nthread_single_needle", "value"), ("nthread_multiple_needles", "list"),
                                         ("nthread_conditional_needles", "list"), ("nthread_single_threads", "value"),
                                         ("nthread_multi_threads", "list")])
def test_every_task_asks_the_authors_way(name, answer):
    spec = CATALOG.spec(name)
    assert spec.data["options"]["prompt"]["user"] == "{{ context }}\n{{ question }}"
    assert spec.data["options"]["prompt"].get("system") is None
    assert spec.judge.name == "needle_threading" and spec.judge.options.get("answer", "value") == answer
    assert spec.data["options"]["source"]["revision"] == COMMIT and spec.family == "nthread"


def test_bad_option_exits_2_naming_it(monkeypatch):
    from tests.cli import call
    from tests.conftest import serve_scripted

    serve_scripted(monkeypatch, lambda: ScriptedModel(window=4096))
    code, _, err = call("run", "--tasks", "nthread_single_needle", "--judge", "needle_threading,lists=most",
                        "--model", "scripted:x", "--limit", "1", "--dry-run")
    assert code == 2 and "lists" in err and "most" in err, err
