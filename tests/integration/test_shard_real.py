"""Shards on the real ELITR-Bench data: the published GPT-4 answers replayed and scored with
the recorded GPT-4 judge, run whole and in 2 and 3 shards; the merged results.json equals the
unsharded one field by field (Welch test and bootstrap intervals included)."""

from __future__ import annotations

from tests.cli import merge, run

from ..shards import assert_same_results, read

GENERATED = "elitr-bench/generated-responses/elitr-bench-qa_{{split}}_{mode}_gpt-4-eval.json"


def runs(task: str, model: str, home, out, **kwargs):
    return [d for d, _ in run(tasks=task, models=[model], judge="gpt4-recorded", data_home=home, output=out,
                              progress=False, **kwargs)]


def test_single_turn_qa_in_2_and_3_shards(real_home, tmp_path, shared_datasets):
    model = f"replay:{shared_datasets / GENERATED.format(mode='st')}#GPT-4"
    (whole,) = runs("elitr_qa", model, real_home, tmp_path / "whole")
    for n in (2, 3):
        shards = [d for i in range(n) for d in runs("elitr_qa", model, real_home, tmp_path / f"s{n}", shard=(i, n))]
        taken = [read(s, "manifest.json")["shard"]["contexts"] for s in shards]
        assert sorted(c for t in taken for c in t) == sorted(read(shards[0], "manifest.json")["shard"]["plan"]["weights"])
        assert len([c for t in taken for c in t]) == 18  # every meeting once, none split
        merged, _ = merge(shards, output=tmp_path / f"merged{n}")
        assert_same_results(whole, merged)
    score = read(merged, "results.json")["tasks"]["elitr_qa"]["metrics"]["score"]
    assert score["groups"]["test2"]["n"] == 130 and score["groups"]["dev"]["n"] == 141


def test_multi_turn_qa_with_two_seeds_in_3_shards(real_home, tmp_path, shared_datasets):
    # one recorded run per seed (the replay backend refuses several seeds of one file): the
    # published run stands in for both
    per_seed = tmp_path / "per-seed"
    per_seed.mkdir()
    for split in ("dev", "test2"):
        for seed in (0, 1):
            source = shared_datasets / GENERATED.format(mode="mt").replace("{split}", split)
            (per_seed / f"qa_{split}_mt_seed{seed}.json").symlink_to(source)
    model = f"replay:{per_seed}/qa_{{split}}_mt_seed{{seed}}.json#GPT-4"
    (whole,) = runs("elitr_qa_mt", model, real_home, tmp_path / "whole", seeds=[0, 1])
    shards = [d for i in range(3) for d in runs("elitr_qa_mt", model, real_home, tmp_path / "s", seeds=[0, 1],
                                                 shard=(i, 3))]
    merged, _ = merge(shards, output=tmp_path / "merged")
    assert_same_results(whole, merged)
    assert read(merged, "manifest.json")["usage"]["requests"] == 2 * 271
