"""`run --shard I/N` and `merge`: shards hold whole contexts, merge back to exactly the
unsharded results on every task type, and refuse shards that do not belong together."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lceval.cli import main
from lceval.engine import RunConfig, assign
from lceval.errors import UserError
from lceval.results import add_up, first_difference
from lceval_plugins.summhay.template import write_template

from tests.cli import lceval, merge
from tests.conftest import ScriptedModel
from tests.shards import assert_same_results, engine_run, read


def sharded(tasks: str, home: Path, out: Path, n: int, **config) -> list[Path]:
    return [engine_run(ScriptedModel(window=8192), tasks, home, out / f"shards{n}", shard=(i, n), **config)
            for i in range(n)]


def check_merge_equals_whole(tasks: str, home: Path, tmp_path: Path, counts=(2, 3), **config) -> None:
    whole = engine_run(ScriptedModel(window=8192), tasks, home, tmp_path / "whole", **config)
    for n in counts:
        shards = sharded(tasks, home, tmp_path, n, **config)
        merged, _ = merge(shards[::-1], output=tmp_path / f"merged{n}")  # any order of arguments
        assert_same_results(whole, merged)
        a = [json.loads(line) for line in (whole / "samples.jsonl").read_text().splitlines()]
        b = [json.loads(line) for line in (merged / "samples.jsonl").read_text().splitlines()]
        assert [(s["task"], s["seed"], s["item_id"], s["response"], s["score"]) for s in a] == \
               [(s["task"], s["seed"], s["item_id"], s["response"], s["score"]) for s in b]


def test_elitr_single_and_multi_turn_with_two_seeds(tiny_home, tmp_path):
    check_merge_equals_whole("elitr_qa,elitr_qa_mt", tiny_home, tmp_path, seeds=[0, 1])


def test_cream(tiny_home, tmp_path):
    check_merge_equals_whole("cream_elitr", tiny_home, tmp_path)


@pytest.fixture
def three_haystacks(tmp_path) -> dict:
    folder = tmp_path / "haystacks"
    for seed in (0, 1, 2):
        write_template(folder / f"h{seed}.json", n_subtopics=3, insights_per_subtopic=2, n_documents=6, copies=2,
                       seed=seed)
    return {"options.haystack": str(folder), "options.budget_tokenizer": "words"}


@pytest.mark.parametrize("task", ["summhay_full", "summhay_rag_bm25"])
def test_summhay(task, three_haystacks, tmp_path):
    check_merge_equals_whole(task, tmp_path / "data", tmp_path, overrides=three_haystacks)


def test_two_benchmarks_in_one_run_where_some_shards_hold_no_context_of_a_task(tiny_home, three_haystacks,
                                                                               tmp_path):
    spec = lceval("tasks", "show", "summhay_full")  # the resolved spec, as a user copies one
    spec = spec.replace("name: summhay_full", "name: my_summhay").replace(
        "  retriever: full\n", f"  retriever: full\n  haystack: {three_haystacks['options.haystack']}\n").replace(
        "  budget_tokenizer: auto\n", "  budget_tokenizer: words\n")
    path = tmp_path / "my_summhay.yaml"
    path.write_text(spec)
    tasks = f"elitr_qa,{path}"
    check_merge_equals_whole(tasks, tiny_home, tmp_path, counts=(4,))
    per_shard = [{json.loads(line)["task"] for line in (d / "samples.jsonl").read_text().splitlines()}
                 for d in sorted((tmp_path / "shards4").iterdir())]
    assert {"elitr_qa"} in per_shard and {"my_summhay"} in per_shard  # a task can be absent from a shard


def test_a_shard_holds_whole_contexts_and_records_the_plan(tiny_home, tmp_path):
    shards = sharded("elitr_qa", tiny_home, tmp_path, 2)
    records = [read(s, "manifest.json")["shard"] for s in shards]
    assert [(r["index"], r["count"]) for r in records] == [(0, 2), (1, 2)]
    assert records[0]["fingerprint"] == records[1]["fingerprint"]
    taken = [set(r["contexts"]) for r in records]
    assert not taken[0] & taken[1]
    assert taken[0] | taken[1] == {"dev/meeting_en_dev_901", "dev/meeting_en_dev_902", "test2/meeting_en_test2_901"}
    for run_dir, mine in zip(shards, taken):
        samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
        assert {f"{s['metadata']['split']}/{s['metadata']['meeting_id']}" for s in samples} == mine
    assert read(shards[0], "manifest.json")["config"]["shard"] == [0, 2]
    # the heaviest meeting (dev_901: three questions) alone; the two lighter ones together
    assert taken[0] == {"dev/meeting_en_dev_901"}


def test_assignment_is_greedy_by_weight_and_deterministic():
    weights = {"a": 10, "b": 7, "c": 6, "d": 3, "e": 1}
    assert assign(weights, 2) == [["a", "d", "e"], ["b", "c"]]
    assert assign(dict(reversed(weights.items())), 2) == assign(weights, 2)  # not the input's order
    assert assign({"x": 5, "y": 5}, 3) == [["x"], ["y"], []]


def test_merged_manifest_lists_shards_and_sums_usage(tiny_home, tmp_path):
    shards = sharded("elitr_qa", tiny_home, tmp_path, 2)
    merged, _ = merge(shards, output=tmp_path / "merged")
    manifest = read(merged, "manifest.json")
    info = manifest["merged_from"]
    assert [s["index"] for s in info["shards"]] == [0, 1] and info["count"] == 2
    usages = [read(s, "manifest.json")["usage"] for s in shards]
    assert manifest["usage"]["requests"] == sum(u["requests"] for u in usages) == 7
    assert manifest["usage"]["seconds"] == pytest.approx(sum(u["seconds"] for u in usages))
    assert info["slowest_shard_seconds"] == max(u["seconds"] for u in usages)
    assert "sum of the shards' seconds" in info["usage_note"]
    assert manifest["shard"] is None and manifest["config"]["shard"] is None


def test_add_up_keeps_unknown_unknown():
    assert add_up([{"n": 1, "s": 0.5, "k": {"a": 1}}, {"n": 2, "s": 1.0, "k": {"b": 2}}]) == \
        {"n": 3, "s": 1.5, "k": {"a": 1, "b": 2}}
    assert add_up([{"prefilled": 10}, {"prefilled": None}]) == {"prefilled": None}
    assert add_up([{"note": "x"}, {"note": "y"}]) == {"note": None}
    assert add_up([None, None]) is None


def test_shard_flag_is_checked():
    def parse_shard(text: str) -> tuple[int, int] | None:  # `--shard TEXT` as `lceval run` reads it
        return RunConfig.from_flags({"shard": text}, tasks="elitr_qa", models=["scripted:x"]).shard

    assert parse_shard("3/4") == (3, 4)
    for bad in ("4/4", "1", "a/b", "-1/2", "0/0"):
        with pytest.raises(UserError, match="--shard"):
            parse_shard(bad)


def test_more_shards_than_contexts_is_refused(tiny_home, tmp_path):
    with pytest.raises(UserError, match=r"shard 3/4 gets no work: the run has only 3 context"):
        engine_run(ScriptedModel(), "elitr_qa", tiny_home, tmp_path, shard=(3, 4))


# -- refusals ----------------------------------------------------------------------------

@pytest.fixture
def two_shards(tiny_home, tmp_path) -> list[Path]:
    return sharded("elitr_qa", tiny_home, tmp_path, 2)


def refused(runs: list[Path], tmp_path: Path, *needles: str) -> str:
    out = tmp_path / "refused"
    with pytest.raises(UserError) as info:
        merge(runs, output=out)
    text = info.value.render()
    for needle in needles:
        assert needle in text, text
    assert not out.exists()
    return text


def test_refuses_a_missing_shard(two_shards, tmp_path):
    refused(two_shards[:1], tmp_path, "shard(s) 1/2 missing", str(two_shards[0]))


def test_refuses_a_shard_given_twice(two_shards, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(two_shards[0], copy)
    refused([two_shards[0], copy, two_shards[1]], tmp_path, "shard 0/2 is given twice", str(copy))


def test_refuses_shards_of_another_count(tiny_home, two_shards, tmp_path):
    three = sharded("elitr_qa", tiny_home, tmp_path, 3)
    refused([two_shards[0], three[1]], tmp_path, str(three[1]), "split into 3 shards, not 2")


def test_refuses_other_model_and_identity(tiny_home, two_shards, tmp_path):
    other = engine_run(ScriptedModel(window=8192), "elitr_qa", tiny_home, tmp_path / "o", spec="scripted:y",
                       shard=(1, 2))
    refused([two_shards[0], other], tmp_path, str(other), "model differs", "'scripted:x' vs 'scripted:y'")
    other = engine_run(ScriptedModel(window=4096), "elitr_qa", tiny_home, tmp_path / "w", shard=(1, 2))
    refused([two_shards[0], other], tmp_path, str(other), "model identity differs", "at 'window': 8192 vs 4096")


def test_refuses_other_spec_seeds_and_judge(tiny_home, two_shards, tmp_path):
    cases = [({"overrides": {"generation.max_new_tokens": 64}}, "task specs differ"),
             ({"seeds": [1]}, "seeds differ"),
             ({"judge": "lexical"}, "judge (--judge) differs")]
    for config, needle in cases:
        other = engine_run(ScriptedModel(window=8192), "elitr_qa", tiny_home, tmp_path / needle[:5], shard=(1, 2),
                           **config)
        refused([two_shards[0], other], tmp_path, str(other), needle.replace("specs differ", "specs differs"))


def test_refuses_other_data(tiny_home, two_shards, tmp_path):
    changed = tmp_path / "changed"
    shutil.copytree(tiny_home, changed)
    transcript = changed / "elitr-bench" / "transcripts" / "meeting_en_dev_902.txt"
    transcript.write_text(transcript.read_text() + "(PERSON4) One more line.\n")
    other = engine_run(ScriptedModel(window=8192), "elitr_qa", changed, tmp_path / "c", shard=(1, 2))
    refused([two_shards[0], other], tmp_path, str(other), "the data differ", "meeting_en_dev_902.txt")


def test_refuses_other_version_judge_identity_and_edited_plans(two_shards, tmp_path):
    def edited(name: str, change) -> Path:
        target = tmp_path / f"edit-{len(list(tmp_path.glob('edit-*')))}"
        shutil.copytree(two_shards[1], target)
        data = read(target, name)
        change(data)
        (target / name).write_text(json.dumps(data))
        return target

    other = edited("results.json", lambda r: r.update(lceval_version="0.0.1"))
    refused([two_shards[0], other], tmp_path, "lceval version differs", str(other))
    other = edited("results.json", lambda r: r["tasks"]["elitr_qa"]["judge"].update(version=99))
    refused([two_shards[0], other], tmp_path, "judge identity differs", "elitr_qa.version")
    other = edited("manifest.json", lambda m: m["shard"]["plan"]["weights"].update({"dev/x": 1}))
    refused([two_shards[0], other], tmp_path, "plan does not match its fingerprint")
    other = edited("manifest.json", lambda m: m.pop("shard"))
    refused([two_shards[0], other], tmp_path, "not a shard", str(other))


def test_merge_through_the_cli_exit_codes(two_shards, tmp_path, capsys):
    assert main(["merge", str(two_shards[0]), "-o", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert "shard(s) 1/2 missing" in err and "Traceback" not in err
    assert main(["merge", *map(str, two_shards), "-o", str(tmp_path / "m")]) == 0
    assert "wrote" in capsys.readouterr().out


def test_first_difference_names_the_field():
    assert first_difference({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "c": 3}}) == "at 'a.c': 2 vs 3"
    assert first_difference([1, 2], [1, 2, 3]) == "[1, 2] vs [1, 2, 3]"
    assert first_difference({"a": 1}, {}) == "at 'a': only in the first"
