"""`--contexts`: choose meetings or haystacks by context id (or a glob) on every task type;
composes with --split, --limit and --shard; unknown ids are refused with the known ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lceval.cli import main
from lceval.errors import UserError
from lceval.engine import RunConfig
from lceval_plugins.summhay.annotated import annotated_conversations
from lceval_plugins.summhay.template import write_template

from tests.conftest import ScriptedModel, run_engine
from tests.shards import read

DEV1, DEV2, TEST1 = "dev/meeting_en_dev_901", "dev/meeting_en_dev_902", "test2/meeting_en_test2_901"


def engine_run(model: ScriptedModel, tasks: str, home: Path, out: Path, **config) -> Path:
    """One run of the engine on a scripted model (no CLI); returns its run directory."""
    run_dir, _, _ = run_engine(model, tasks, home, out, **config)
    return run_dir


def samples(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]


def meetings(run_dir: Path) -> set[str]:
    return {f"{s['metadata']['split']}/{s['metadata']['meeting_id']}" for s in samples(run_dir)}


def test_patterns_match_whole_ids_leading_or_trailing_parts_and_globs(tiny_home, tmp_path):
    runs = iter(range(100))

    def chosen(pattern: str) -> set[str]:
        return meetings(engine_run(ScriptedModel(), "elitr_qa", tiny_home, tmp_path / str(next(runs)),
                                   contexts=[pattern]))

    assert chosen(DEV1) == chosen("meeting_en_dev_901") == {DEV1}  # the whole id, its trailing part
    assert chosen("dev") == chosen("dev/*") == {DEV1, DEV2}  # its leading part, a glob
    assert chosen("*_90?") == {DEV1, DEV2, TEST1}
    assert chosen("test2") == {TEST1}  # not the dev meetings
    with pytest.raises(UserError, match="'meeting_en_dev_90'"):  # a part of an id's segment is no id
        chosen("meeting_en_dev_90")
    flags = {"tasks": "elitr_qa", "models": ["m"]}
    assert RunConfig.from_flags({**flags, "contexts": ["a,b", " c "]}).contexts == ["a", "b", "c"]
    assert RunConfig.from_flags(flags).contexts is None
    with pytest.raises(UserError) as err:
        RunConfig.from_flags({**flags, "contexts": [" , "]})
    assert err.value.field == "--contexts"


@pytest.mark.parametrize("task", ["elitr_qa", "elitr_qa_mt", "cream_elitr"])
def test_selects_meetings_and_is_recorded(task, tiny_home, tmp_path):
    run_dir = engine_run(ScriptedModel(), task, tiny_home, tmp_path, contexts=["meeting_en_dev_902", "test2/*"])
    assert meetings(run_dir) == {DEV2, TEST1}
    assert read(run_dir, "manifest.json")["config"]["contexts"] == ["meeting_en_dev_902", "test2/*"]


def test_limit_counts_within_the_chosen_meetings(tiny_home, tmp_path):
    run_dir = engine_run(ScriptedModel(), "elitr_qa", tiny_home, tmp_path, contexts=[DEV2], limit=1)
    assert [s["item_id"] for s in samples(run_dir)] == [f"{DEV2}/1"]
    run_dir = engine_run(ScriptedModel(), "cream_elitr", tiny_home, tmp_path / "c", contexts=["dev"], limit=1,
                         splits=["dev"])
    assert meetings(run_dir) == {DEV1}


def test_composes_with_shards(tiny_home, tmp_path):
    runs = [engine_run(ScriptedModel(), "elitr_qa", tiny_home, tmp_path / str(i), contexts=[DEV1, TEST1],
                       shard=(i, 2)) for i in range(2)]
    assert [meetings(r) for r in runs] == [{DEV1}, {TEST1}]
    assert set(read(runs[0], "manifest.json")["shard"]["plan"]["weights"]) == {DEV1, TEST1}


def test_unknown_id_names_it_and_lists_the_known(tiny_home, tmp_path):
    with pytest.raises(UserError) as info:
        engine_run(ScriptedModel(), "elitr_qa", tiny_home, tmp_path, contexts=[DEV1, "meeting_en_dev_999"])
    text = info.value.render()
    assert "--contexts" in text and "'meeting_en_dev_999'" in text and f"{DEV1}, {DEV2}, {TEST1}" in text
    # a pattern known in another split than the chosen one is unknown there, and it says which split
    with pytest.raises(UserError, match=r"in split\(s\) test2: test2/meeting_en_test2_901"):
        engine_run(ScriptedModel(), "elitr_qa", tiny_home, tmp_path, contexts=[DEV1], splits=["test2"])


def test_cli_exit_code_2_for_an_unknown_context(tiny_home, tmp_path, capsys):
    code = main(["run", "--tasks", "elitr_qa", "--model", "replay:nothing.json#M", "--data-home", str(tiny_home),
                 "--output", str(tmp_path), "--contexts", "nope", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "'nope'" in err and DEV1 in err and "Traceback" not in err


def test_summhay_haystacks_by_topic_id(tmp_path):
    folder = tmp_path / "haystacks"
    topics = []
    for seed in (0, 1):
        path = write_template(folder / f"h{seed}.json", n_subtopics=2, insights_per_subtopic=2, n_documents=6,
                              copies=2, seed=seed)
        topics.append(json.loads(path.read_text())["topic_id"])
    opts = {"options.haystack": str(folder), "options.budget_tokenizer": "words"}
    full = engine_run(ScriptedModel(window=8192), "summhay_full", tmp_path / "d", tmp_path / "f",
                      contexts=[topics[1]], overrides=opts)
    assert {s["metadata"]["topic_id"] for s in samples(full)} == {topics[1]} and len(samples(full)) == 2
    # retrieval gives each subtopic its own documents, so its own context `topic/subtopic`;
    # the topic id still selects the whole haystack, `topic/subtopic` one query
    rag = engine_run(ScriptedModel(window=8192), "summhay_rag_bm25", tmp_path / "d", tmp_path / "r",
                     contexts=[topics[0]], overrides=opts)
    chosen = samples(rag)
    assert {s["metadata"]["topic_id"] for s in chosen} == {topics[0]} and len(chosen) == 2
    one = f"{topics[0]}/{chosen[1]['metadata']['subtopic_id']}"
    rag = engine_run(ScriptedModel(window=8192), "summhay_rag_bm25", tmp_path / "d", tmp_path / "r1",
                     contexts=[one], overrides=opts)
    assert [s["item_id"] for s in samples(rag)] == [chosen[1]["item_id"]]


def test_summhay_annotated_summaries_by_subtopic(tmp_path):
    base = {"topic": "t", "subtopic": "plans", "summary": ["* a"], "reference_insights": [
        {"insight_id": "i1", "insight": "x"}]}
    path = tmp_path / "annotated.json"
    path.write_text(json.dumps([{**base, "subtopic_id": s, "summkey": k}
                                for s, k in [("s1", "a"), ("s2", "a"), ("s2", "b")]]))
    convs = annotated_conversations(path, limit=1, select=lambda cid: "s2" in cid.split("/"))
    assert [c.context_id for c in convs] == ["s2/a"]
