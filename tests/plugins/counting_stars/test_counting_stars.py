"""Counting-Stars (Song et al., 2024): every row is the authors' byte for byte, the score is
theirs, and bad input names its option.

Expected values come from the authors' own code run outside this repository on our fixture
(tests/data/counting_stars/context_data: our own English essays and Chinese text in the layout of
their context_data, our own star counts): `gen_test_data.ipynb`'s cell (essays in sorted order,
the only change) for the prompts, and `viz.ipynb`'s `get_data_EN` / `get_data_ZH` (with
json_repair installed) on our predictions (tests/data/counting_stars/predictions.json, one row per
answer) for the scores."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from lceval.errors import UserError
from lceval.interfaces import TaskContext
from lceval.types import CONTEXT_SLOT, JudgeInput
from lceval_plugins.counting_stars.metric import CountingStarsJudge, parse_answer
from lceval_plugins.counting_stars.task import CountingStarsTaskType

from tests.conftest import complete, run_engine
from tests.paths import TEST_DATA
from tests.plugins.niah.test_niah import RegexModel

DATA = TEST_DATA / "counting_stars" / "context_data"
#: sha256 of json.dumps([question of the 4K row, of the 8K row], ensure_ascii=False) of the authors' files
AUTHORS = {
    ("EN", "searching"): "13e72d2eac00d9dd9c73315b056cf217f7c830935cfdcbbe57b0ea7cdcba4ff3",
    ("EN", "reasoning"): "311c99207cc44519746d96b818ef9c56ba520ab322364863fbb469115f58b9c6",
    ("ZH", "searching"): "6ae45cd24dae065ee61b53378b4c00f2580d73721336096cb1d046197fe511d5",
    ("ZH", "reasoning"): "1618f62a0265767adcfc71aa2ec1b907602677f63997c20c49a97e01bf975e55",
}
#: viz.ipynb's score (0-1) of each answer of predictions.json, scored as a row of its own
#: (json-repair 0.30.0 and 0.64.6 give the same): fenced answers in single or curly quotes and a
#: ZH answer in single quotes are read by json_repair there, and score here as there
AUTHORS_SCORES = {
    "EN/Acquisition": [1.0, 0.5, 0.3125, 0.0, 0.125, 0.1875, 0.25, 0.125, 0.375],
    "EN/Reasoning": [0.890625, 0.296875, 0.15625, 0.1953125, 0.078125],
    "ZH/Acquisition": [1.0, 0.625, 0.375, 0.1875, 0.25, 0.0625],
    "ZH/Reasoning": [0.6171875, 0.890625, 0.046875],
}


def load(language="EN", task="searching", splits=("4K", "8K"), files=None, **options):
    task_type = CountingStarsTaskType()
    spec = {"name": "cs", "type": "counting_stars", "splits": list(splits),
            "options": complete(task_type, {"language": language, "task": task, "context_data": str(DATA), **options})}
    ctx = TaskContext(spec=spec, spec_path=Path("cs.yaml"), data_home=Path("/nonexistent"), splits=list(splits),
                      limit=None, record_file=(files if files is not None else []).append)
    return task_type.load(ctx)


@pytest.mark.parametrize("language,task", sorted(AUTHORS))
def test_every_row_is_the_authors_byte_for_byte(language, task):
    convs = load(language, task)
    prompts = [c.turns[0].user.replace(CONTEXT_SLOT, c.context) for c in convs]
    assert hashlib.sha256(json.dumps(prompts, ensure_ascii=False).encode()).hexdigest() == AUTHORS[(language, task)]
    meta = convs[0].turns[0].metadata
    assert meta["context_size"] == (3200 if language == "EN" else 2800) and meta["length"] == "4K"
    assert convs[0].context.count("★") == 32 * (1 if task == "searching" else 2)


def test_files_read_are_recorded_and_stars_come_from_them():
    files: list = []
    (conv,) = load(splits=("4K",), files=files)
    assert sorted(p.name for p in files) == ["a_stars.txt", "essay_1.txt", "essay_2.txt", "essay_3.txt", "r_stars.txt"]
    assert conv.turns[0].metadata["stars"][:2] == [61, 102]
    assert "\nThe little penguin counted 61 ★\n" in conv.context


@pytest.mark.parametrize("key", sorted(AUTHORS_SCORES))
def test_the_score_is_the_authors(key):
    language, kind = key.split("/")
    answers = json.loads((TEST_DATA / "counting_stars" / "predictions.json").read_text())[key]
    (conv,) = load(language, "searching" if kind == "Acquisition" else "reasoning", splits=("4K",))
    judge = CountingStarsJudge({"task": "searching" if kind == "Acquisition" else "reasoning", "language": language})
    items = [JudgeInput(item_id=str(i), question="q", response=a.strip(), reference=conv.turns[0].reference,
                        raw_response=a, metadata=conv.turns[0].metadata) for i, a in enumerate(answers)]
    got = [j.score for j in judge.judge(items)]
    assert got == pytest.approx([100.0 * v for v in AUTHORS_SCORES[key]])


def test_an_answer_the_notebook_cannot_read_scores_zero():
    """The notebook stops on these (an unfenced EN answer json.loads cannot read, a ZH answer
    json_repair reads as no object); the specs' report.differs_from_paper says lceval scores 0."""
    assert parse_answer("I counted many stars.", "EN")[1] is False
    assert parse_answer("{'little_penguin': [61]}", "EN")[1] is False
    assert parse_answer("我数不清", "ZH")[1] is False
    assert parse_answer('{"little_penguin": "none"}', "EN")[0] == "none"
    judge = CountingStarsJudge({"task": "searching", "language": "EN"})
    (j,) = judge.judge([JudgeInput(item_id="1", question="q", response="no idea", reference="[61]",
                                   metadata={"stars": [61], "wrong_stars": [60]})])
    assert j.score == 0.0 and j.details["parsed"] is False


@pytest.mark.parametrize("kw,field,words", [
    ({"context_data": "/nonexistent/context_data"}, "options.context_data", "no folder"),
    ({"stars": 7}, "options.stars", "key '7'"),
    ({"splits": ("4K", "four")}, "--split", "not a length"),
    ({"splits": ("1",)}, "--split", "cannot hold 32 stars"),
])
def test_bad_input_names_the_option(kw, field, words):
    with pytest.raises(UserError) as err:
        load(**kw)
    assert err.value.field == field and words in str(err.value)


def test_a_run_scores_each_length_and_draws_the_star_heatmap(tmp_path):
    from tests.cli import lceval

    model = RegexModel(window=None, answer='{"little_penguin": [61, 102, 99, 57]}')
    run_dir, results, _ = run_engine(model, "counting_stars_acquisition_en", tmp_path / "home", tmp_path,
                                   splits=["4K", "8K"], overrides={"options.context_data": str(DATA)})
    block = results["tasks"]["counting_stars_acquisition_en"]["metrics"]["score"]
    assert block["value"] == pytest.approx(100 * 4 / 32) and set(block["breakdowns"]["length"]) == {"4K", "8K"}
    curve = results["length_bins"]["counting_stars_acquisition_en"]  # the authors' K is 1,000: 4K is 4,000
    assert [(p["label"], p["length"], p["n"]) for p in curve["points"]] == [("4K", 4000, 1), ("8K", 8000, 1)]
    lceval("report", str(run_dir), "--format", "html", "-o", str(tmp_path / "report.html"))
    assert "counting_stars_acquisition_en: score by star x length" in (tmp_path / "report.html").read_text()


#: samples_digest of every sample (issue 40: the shared haystack builder changes none)
SAMPLES = {("EN", "searching"): "5aa008f0d371f15eb0e646263791b3e5b7b1b514898dc11c1a3398008bcab6fc",
           ("EN", "reasoning"): "43089213e8736bcf448f884fac7b191235856e27bc6f9b24db8d518a8db07887",
           ("ZH", "searching"): "3638e5036110e4f6cbed6be78d8e35b565736b885e329380cfe8d75ac2168f5d",
           ("ZH", "reasoning"): "f366c1093f461dcd42fec2d2dfee3ca33846b97709a631b234516f999265be06"}


@pytest.mark.parametrize("language,task", sorted(SAMPLES))
def test_every_generated_sample_is_pinned(language, task):
    from tests.plugins.samples_digest import samples_digest

    assert samples_digest(load(language, task)) == SAMPLES[(language, task)]
