"""NeedleBench V1 (Li et al., 2024): every prompt and reference is the authors' byte for byte, the
evaluators are theirs, and bad input names its option.

The expected digests are those of what OpenCompass's own dataset loaders (open-compass/opencompass
at a5acc4b, opencompass/datasets/needlebench/{origin,multi,parallel,atc}.py) build from our
fixture (tests/data/needlebench: our own essays, Chinese text, needles, reasoning chains and names
in the dataset's schema), run outside this repository with their framework's imports stubbed: with
a word-and-punctuation tokenizer put in place of tiktoken on both sides, and with tiktoken's real
cl100k_base where its file is at hand. Their unseeded draws (multi-needle retrieval's needles, the
ancestral-trace names) were seeded as lceval seeds them (`random.seed(seed)` before a needle set,
`random.seed(seed + 1000 x needles + language)` before a trace dataset)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from lceval.errors import UserError
from lceval.interfaces import TaskContext
from lceval.types import CONTEXT_SLOT, JudgeInput
from lceval_plugins.needlebench.metric import NeedlebenchJudge
from lceval_plugins.needlebench.task import NeedlebenchTaskType

from tests.conftest import complete, run_engine
from tests.paths import TEST_DATA
from tests.plugins.niah.test_niah import RegexModel

DATA = TEST_DATA / "needlebench"
#: kind -> sha256 of json.dumps(sorted([id, prompt, answer]), ensure_ascii=False) of the authors' loaders:
#: lengths 1000 and 2000, depths 0/50/100, 3 repeats, both languages (atc: 2, 5 and 8 names)
AUTHORS = {
    "regex": {
        "single": "3a197df4809913b72e6391eec3b903433d3f5c644150108dabaef52e8fe429c4",
        "multi_reasoning": "7c2b0a6cd13edaf6c35fce372c06cbe463e681e24b5df50a26a6d3a5f5a771b6",
        "multi_retrieval": "41b68fa804aec0dc539c32005042ca9d25292a8da17679714a44c349143b3da4",
    },
    "gpt-4": {
        "single": "dff3b628c9e0822cedc9453f6f3f8d6f921b9ebb251ad6a23deea5aa250a5ee6",
        "multi_reasoning": "63450ad273df6a8fdba2e5aba7fd1b2035d52f3eb3c0e8c6f90fd3ae2d610676",
        "multi_retrieval": "c3aad05c1ae46a2a5e45f4df469c5649857b458726bc0285c5970bc38c9c5b46",
    },
}
ATC = {False: "7338af421373cf5d2511849d7136771f6a2655cfdb2c8be6713b3074744ccb0c",
       True: "398f6c0afa6626eda35ed04a5551e1cb10b383a2a4017ac13a91939ded53ed2c"}
BUFFER = {"single": {"en": 600, "zh": 200}, "multi_reasoning": {"en": 600, "zh": 200},
          "multi_retrieval": {"en": 1000, "zh": 200}}


def load(kind="single", splits=("1000", "2000"), model=None, limit=None, files=None, **options):
    task_type = NeedlebenchTaskType()
    opts = {"kind": kind, "data": str(DATA), "depths": [0, 50, 100], "repeats": 3, "needle_counts": [2, 3],
            "length_buffer": BUFFER.get(kind, {"en": 600, "zh": 200}), "tokenizer": "model", **options}
    spec = {"name": "nb", "type": "needlebench", "splits": list(splits), "options": complete(task_type, opts)}
    model = model if model is not None else RegexModel(window=None)
    ctx = TaskContext(spec=spec, spec_path=Path("nb.yaml"), data_home=Path("/nonexistent"),
                      splits=list(splits) if splits else None, limit=limit,
                      record_file=(files if files is not None else []).append, model_tokenizer=lambda: model)
    return task_type.load(ctx)


def answer_of(kind: str, meta: dict) -> str:
    """The authors' `answer` column, from what lceval keeps for the judge."""
    if kind in ("single", "atc"):
        return meta["needle"] + "*" + meta["keyword"]
    if kind == "multi_reasoning":
        return meta["answer"] + "*" + meta["answer"]
    return "*".join(meta["keywords"]) + "#" + "*".join(map(str, meta["depths"]))


def digest(kind: str, convs) -> str:
    rows = sorted([c.turns[0].item_id, c.turns[0].user.replace(CONTEXT_SLOT, c.context),
                   answer_of(kind, c.turns[0].metadata)] for c in convs)
    return hashlib.sha256(json.dumps(rows, ensure_ascii=False).encode()).hexdigest()


@pytest.mark.parametrize("kind", sorted(AUTHORS["regex"]))
def test_every_prompt_is_the_authors_byte_for_byte(kind):
    assert digest(kind, load(kind)) == AUTHORS["regex"][kind]


def _cl100k_at_hand() -> bool:
    import importlib.util

    spec = importlib.util.find_spec("litellm")      # litellm ships the file; found without importing it
    if spec is None or spec.origin is None:
        return False
    folder = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"
    if (folder / "9b5ad71b2ce5302211f9c61530b329a4922fc6a4").is_file():
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(folder))
    try:
        import tiktoken

        tiktoken.encoding_for_model("gpt-4")
        return True
    except Exception:  # noqa: BLE001 - no file and no network
        return False


@pytest.mark.parametrize("kind", sorted(AUTHORS["gpt-4"]))
def test_in_gpt4_tokens_too(kind):
    if not _cl100k_at_hand():
        pytest.skip("tiktoken's cl100k_base file is not at hand (no network, no litellm copy)")
    assert digest(kind, load(kind, tokenizer="gpt-4")) == AUTHORS["gpt-4"][kind]


@pytest.mark.parametrize("ordered", [False, True])
def test_the_ancestral_trace_challenge_is_the_authors(ordered):
    convs = load("atc", splits=(), needle_counts=[2, 5, 8], atc_ordered=ordered)
    assert len(convs) == 18 and digest("atc", convs) == ATC[ordered]


def test_samples_fields_and_limit():
    files: list = []
    convs = load("single", files=files)
    assert sorted(p.name for p in files) == ["PaulGrahamEssays.jsonl", "needles.jsonl", "zh_finance.jsonl"]
    assert len(convs) == 2 * 2 * 3 * 3
    meta = next(c for c in convs if c.turns[0].item_id == "2000/zh/d50/r1").turns[0].metadata
    assert meta["length"] == "2000" and meta["depth"] == 50 and meta["language"] == "zh"
    few = load("single", splits=("1000",), limit=2, languages=["en"])
    assert sorted(c.turns[0].metadata["depth"] for c in few) == [0, 100]     # --limit spans the depths


@pytest.mark.parametrize("kw,field,words", [
    ({"data": "/nonexistent/nb"}, "options.data", "no folder"),
    ({"splits": ("1000", "2k5")}, "--split", "not a length"),
    ({"kind": "multi_reasoning", "needle_counts": [4]}, "options.needle_counts", "no record of 4 needles"),
    ({"kind": "multi_retrieval", "depths": [0, 10, 20, 30, 40, 50, 60, 70]}, "options.depths", "distinct"),
    ({"kind": "atc", "splits": ("1000",)}, "--split", "no lengths"),
])
def test_bad_input_names_the_option(kw, field, words):
    with pytest.raises(UserError) as err:
        load(**kw)
    assert err.value.field == field and words in str(err.value)


#: the authors' evaluators (origin.py, multi.py, parallel.py at a5acc4b) run outside this repository
#: on these answers, one at a time (score of a list of one)
ORIGIN = [  # needle "\nHidden on Maple Island is the legendary Copper Lantern.\n", keyword "Copper Lantern"
    ("The legendary item hidden on the Maple Island is Copper Lantern.", 100.0),
    ("The legendary item hidden on the Maple Island is the copper lantern.", 9.12280701754386),
    ("I could not find it.", 3.404255319148937),
    ("", 0.0),
]
MULTI = [  # answer "Pier Nine"
    ("The red boat is kept at Pier Nine.", 100.0), ("It is kept at pier 9.", 50.0), ("Nowhere.", 0.0)]
PARALLEL = [  # keywords Copper Lantern, Silver Compass, Glass Crown at depths 0, 50, 100
    ("Copper Lantern、Silver Compass、Glass Crown", 100.0), ("Copper Lantern and the silver compass", 100 / 3),
    ("nothing", 0.0)]


def _judge(mode, text, **meta):
    (j,) = NeedlebenchJudge({"mode": mode}).judge([JudgeInput(item_id="1", question="q", response=text.strip(),
                                                             reference="r", raw_response=text, metadata=meta)])
    return j.score


@pytest.mark.parametrize("answer,expected", ORIGIN)
def test_the_single_needle_score_is_the_authors(answer, expected):
    got = _judge("origin", answer, needle="\nHidden on Maple Island is the legendary Copper Lantern.\n",
                 keyword="Copper Lantern")
    assert got == pytest.approx(expected)


@pytest.mark.parametrize("answer,expected", MULTI)
def test_the_reasoning_score_is_the_authors(answer, expected):
    assert _judge("multi", answer, answer="Pier Nine") == pytest.approx(expected)


@pytest.mark.parametrize("answer,expected", PARALLEL)
def test_the_retrieval_score_is_the_authors(answer, expected):
    got = _judge("parallel", answer, keywords=["Copper Lantern", "Silver Compass", "Glass Crown"], depths=[0, 50, 100])
    assert got == pytest.approx(expected)


def test_a_run_of_a_shipped_spec_scores_and_draws_the_heatmap(tmp_path):
    from tests.cli import lceval

    model = RegexModel(window=None, answer="The legendary item is the Copper Lantern.")
    run_dir, results, _ = run_engine(model, "needlebench_single_4k", tmp_path / "home", tmp_path, splits=["1K"],
                                   limit=4, overrides={"options.data": str(DATA), "options.tokenizer": "model"})
    block = results["tasks"]["needlebench_single_4k"]["metrics"]["score"]
    assert block["n"] == 8 and set(block["breakdowns"]["language"]) == {"en", "zh"}
    points = results["length_bins"]["needlebench_single_4k"]["points"]  # the split as named, K = 1,000
    assert [(p["label"], p["length"], p["n"]) for p in points] == [("1K", 1000, 8)]
    lceval("report", str(run_dir), "--format", "html", "-o", str(tmp_path / "report.html"))
    assert "needlebench_single_4k: score by depth x length" in (tmp_path / "report.html").read_text()


#: samples_digest of every sample of each kind (issue 40: the shared haystack builder changes none)
SAMPLES = {"single": "f9b7e1bec5e9af63662f27f88585f05273f32f235e35a20c8faf364384962e46",
           "multi_retrieval": "88d08b8915603fffbc4fdfd44c5b874f22d2f8e9e5fef8436a66b6b41854079a",
           "multi_reasoning": "d1898e358f601eb1d9ef8ce106cf2a2f9b3f7b8b880b8da45f7a88099b598f3a",
           "atc": "f7db7ea8d709fb5529d3b671bea849dfece9d02c07ae990b2290c4294a9dcde5"}


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_every_generated_sample_is_pinned(kind):
    from tests.plugins.samples_digest import samples_digest

    convs = load(kind, splits=("1000", "2000")) if kind != "atc" else load(kind, splits=(), needle_counts=[2, 5, 8])
    assert samples_digest(convs) == SAMPLES[kind]
