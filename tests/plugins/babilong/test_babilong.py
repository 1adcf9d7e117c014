"""BABILong: the shipped specs read rows in the data's real schema (RMT-team/babilong-1k-samples
parquet and RMT-team/babilong JSON files, laid out as the Hub holds them at the pinned commits,
rows from tests/data/babilong/rows.json), build the authors' prompt byte for byte, and score with
the authors' `compare_answers`. The expected prompt digests and verdicts below are what the
authors' own `get_formatted_input` (babilong/prompts.py) and `compare_answers`
(babilong/metrics.py, booydar/babilong at 7a6efee) give on the same rows and answers, computed by
running their code outside this repository."""

from __future__ import annotations

import hashlib
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lceval.engine import check_spec, load_catalog, load_plugins
from lceval.errors import UserError
from lceval.interfaces import JudgeContext, TaskContext
from lceval.types import CONTEXT_SLOT, JudgeInput

from tests.conftest import run_engine
from tests.paths import TEST_DATA
from tests.plugins.documents.conftest import put_in_hub_cache
from tests.plugins.graphwalks.test_graphwalks import Answering

PLUGINS = load_plugins()
CATALOG = load_catalog(PLUGINS)
ROWS = json.loads((TEST_DATA / "babilong" / "rows.json").read_text())
ONE_K = ("RMT-team/babilong-1k-samples", "fc4d1a584dfc498c37578753bee4cdd91b987ae2")
HUNDRED = ("RMT-team/babilong", "ee0d588794c7ac098062ee0d247c733d62e94fe2")

#: sha256 of get_formatted_input(row input, row question, DEFAULT_PROMPTS[task] ...) for the two rows
PROMPT_SHA256 = {
    "qa1": ["9d64c6400eeeec330950d778eab26799c2616f32c55f59bf22e2ef905e350fbf",
            "656ac2cbd7f5f5da37dc4009f96a6ea55878f4b9fa331183218de9421761c087"],
    "qa2": ["47eba84a700464402ea1f2adc5996d2649242cda2cc430caf23e1c01d67a3862",
            "0692829a0b1ec55e92a819c35f293fb6ec5f0903264fe23c3369f9f0b9aee139"],
    "qa3": ["198bd035451df83d00daa5e145cd7cfb58ca83e12f6e37e46ec78b98433b740e",
            "1d514f3a3fa997893c929d26bac7bc0205ad1098ea051483b62dbd4d80c25b61"],
    "qa4": ["629dae584c242a50cfa15f63039234e14f73cea0cf5b0e483517a0627b175c2c",
            "9aee957e9cfed98329751bc19f39b08c637119b6758b082513ffb4b655337adb"],
    "qa5": ["de04851dbffd97b510607b503c7bad3cd26525ae8394e92d5f4e57b922d5b651",
            "347efb8a408c085b35ca0cd5097692e5ef8c609b1189c38f43a746125a6d77e3"],
    "qa6": ["88ca9a7b964d9d3818de01e59338f861b6a464c099464434c43ed2b8e7cd17ca",
            "793a17fa184cdd79424f0e34898c8b766ceea7b7086cb3fc46d59a79036284a4"],
    "qa7": ["ead03f1703ce3e35d415461b35073edd1791d6ce35b45506fa9095f3a6e4226c",
            "0575e58ff60a5a06bdfe228af8a9b925c69b38418057d360525eddff8d3ef9f9"],
    "qa8": ["bfdd10e1f3f44a8749dbcf5612d79ec4d7a8cb20796f89ca9ece8d28e2917e2d",
            "d5fa3daff948231fbd9a576934f7febb3371cbf410ce3e543faafe771bbe511b"],
    "qa9": ["ba19e89a7c8143a763732026e01aee0f81c8a6d92f7241ceb31fed107be80f9b",
            "7f86ab6738c2ce12a618ee22973489243c6fe83660281f2ec3e8b1985d78b22a"],
    "qa10": ["845630c2c8a0acc5cf8053d03c10edf61cac60af49a7f52bd296f556f955af92",
             "08414dd847432df7ec6d00abe6c5267c0c3d526735ebd2290c275271592fe067"],
    "qa11": ["833d37566c98214906f09cccca7e364d68466956f3d54051290f142d32cb38d2",
             "62194ba87dd8f7bf2c5039e788582681fb82e44311973cf1d5e3adf7d7da32bf"],
    "qa12": ["4daa9eaf981dd0712f2b22b1a47e1f47dc86a67aefd0fc365c4fdac88ed2cd92",
             "d3c084879403463452692372fd9104c6f40c6f9fa108c8c26b25bb2818a62e1a"],
    "qa13": ["e24ba7144aeaead29e5b780b888c5f09183d9a5d2da6ccb07052c8f79705780e",
             "0bd102ee771bf60de389c2e64dad2aa3b91433e5668c2fb4a962353966dfa350"],
    "qa14": ["b32e3bd12596b9a2cff5645f24f0c38f126c65e358a375940a28c93859164277",
             "144191a5e9daf9b3c121ac7bb58960f883e42b4ffc482d89f05450813569484a"],
    "qa15": ["d8cbb4e89d5d6c57eaccbe45228157de1247364e32ce875d6f2e699714eaf46c",
             "51d875a11957bae71f9c4541372f6186b2d18799825baff1edb535f18b497cf1"],
    "qa16": ["71bddd65566f93d4924085a18c5414003d931f54d453c8b27a30d5fde14797a0",
             "a6bcb37e3fc9caed99c5248d2f8f3925539096b3486795a3a1b36a7147cd77b0"],
    "qa17": ["7ce7370c1b30d17afdbb97cf86e2f7f696720640e2e8ae65dd3794b5469a6a2f",
             "d46b7f7ec47d546a547b4cf1c60068f350d2120df01d4cec55cd25801e60caa9"],
    "qa18": ["d15b49f240e528d047b0170f9dbd1a1e2ecfb20f9a6d8a48bb88fb827c70e40e",
             "27e405f2333246be1d37e8f35eb67768cbad02d59fcab90f0c91f82bcae27f18"],
    "qa19": ["9e746b28ab619954308460bcc037ee78013b97f3b5766ef92517ccf18b7b859e",
             "dfe22952d2d2a75525101732a4921bb8af6513cdc651f5ebbf0b284ee75a7a0f"],
    "qa20": ["0a8d27a15cffb8d823f84958522e91c7b08195a853d02e6aeee0137125e9245c",
             "c1133cb6578a322bdbf157726e7e5932685b1d8a6817652ecd742b3b0019805b"],
}

# (task, target, question, answer) -> compare_answers
VERDICTS = [
    ("qa1", "bathroom", "Where is Mary? ", "The most recent location of Mary is bathroom.", True),
    ("qa1", "bathroom", "Where is Mary? ", "bathroom", True),
    ("qa1", "bathroom", "Where is Mary? ", "Mary is in the kitchen. Before that the bathroom.", False),
    ("qa1", "bathroom", "Where is Mary? ", "The bathroom or the hallway", False),
    ("qa1", "bathroom", "Where is Mary? ", "", False),
    ("qa3", "office", "Where was the apple before the kitchen? ", "The apple was in the office before the kitchen.", True),
    ("qa5", "Jeff", "Who gave the milk to Fred? ", "Jeff", True),
    ("qa5", "Jeff", "Who gave the milk to Fred? ", "Mr. Jeff gave it", False),
    ("qa6", "no", "Is John in the garden? ", "no", True),
    ("qa6", "no", "Is John in the garden? ", "Nope, not there", True),
    ("qa7", "none", "How many objects is Daniel carrying? ", "none", False),
    ("qa7", "one", "How many objects is Daniel carrying? ", "one", True),
    ("qa7", "two", "How many objects is Daniel carrying? ", "Two.", True),
    ("qa8", "apple,milk", "What is Daniel carrying? ", "apple,milk", True),
    ("qa8", "apple,milk", "What is Daniel carrying? ", "The apple and the milk", True),
    ("qa8", "apple,milk", "What is Daniel carrying? ", "apple", False),
    ("qa8", "nothing", "What is Daniel carrying? ", "nothing", True),
    ("qa10", "maybe", "Is Bill in the park? ", "maybe", True),
    ("qa10", "maybe", "Is Bill in the park? ", "Maybe, maybe not", False),
    ("qa15", "wolf", "What is gertrude afraid of? ", "wolf", True),
    ("qa15", "wolf", "What is gertrude afraid of? ", "wolves", False),
    ("qa19", "s,e", "How do you go from the kitchen to the garden? ", "s,e", True),
    ("qa19", "s,e", "How do you go from the kitchen to the garden? ", "s, e", False),
    ("qa20", "thirsty", "Why did antoine go to the kitchen? ", "thirsty\nQuestion: Why is yann tired? tired", False),
    ("qa20", "thirsty", "Why did antoine go to the kitchen? ", "Thirsty <example> tired", True),
]

TASKS = [f"qa{i}" for i in range(1, 21)]


def parquet(rows: list[dict]) -> bytes:
    data = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), data)
    return data.getvalue()


@pytest.fixture
def hub(_isolated_hf):
    """Every task at 0k and qa1-qa5 at 1k in the 1k-sample set; qa1-qa10 at 1k and 64k in the
    100-sample set (its JSON arrays), each length's rows tagged so a test can tell them apart."""
    def tagged(task, length):
        return [{**r, "input": r["input"] + f" ({length})"} for r in ROWS[task]]

    one_k = {f"0k/{t}-00000-of-00001.parquet": parquet(ROWS[t]) for t in TASKS}
    one_k.update({f"1k/qa{i}-00000-of-00001.parquet": parquet(tagged(f"qa{i}", "1k")) for i in range(1, 6)})
    hundred = {f"data/qa{i}/{n}.json": json.dumps(tagged(f"qa{i}", n)).encode() for i in range(1, 11) for n in ("1k", "64k")}
    put_in_hub_cache(_isolated_hf / "hub", *ONE_K, one_k)
    put_in_hub_cache(_isolated_hf / "hub", *HUNDRED, hundred)
    return _isolated_hf


def load(name: str, tmp_path, splits=None, limit=None, **options):
    spec = CATALOG.spec(name)
    task_type = check_spec(spec, PLUGINS)
    data = {**spec.data, "options": {**spec.data["options"], **options}}
    sources: list = []
    ctx = TaskContext(spec=data, spec_path=spec.path, data_home=tmp_path, splits=splits, limit=limit,
                      record_file=lambda p: None, record_source=sources.append)
    return task_type.load(ctx), sources


def prompt(conv) -> str:
    return conv.turns[0].user.replace(CONTEXT_SLOT, conv.context)


@pytest.mark.parametrize("task", TASKS)
def test_the_prompt_is_the_authors_byte_for_byte(task, hub, tmp_path):
    convs, _ = load(f"babilong_{task}", tmp_path, splits=["0k"])
    assert [hashlib.sha256(prompt(c).encode()).hexdigest() for c in convs] == PROMPT_SHA256[task]
    first = convs[0]
    assert first.context == ROWS[task][0]["input"].strip() and first.turns[0].user.count(CONTEXT_SLOT) == 1
    assert first.turns[0].question == ROWS[task][0]["question"] and first.turns[0].reference == ROWS[task][0]["target"]


def test_the_parts_switched_off_leave_the_context_and_question():
    from lceval_plugins.babilong.task import prompt_parts

    head, tail = prompt_parts({"instruction": "", "examples": "", "post_prompt": ""}, "Where is Mary? ")
    # get_formatted_input(..., '', '', '') of the authors: the template stripped
    assert (head, tail) == ("<context>\n", "\n</context>\n\nQuestion: Where is Mary?")


def test_each_length_comes_from_the_set_the_authors_read_it_from(hub, tmp_path):
    convs, sources = load("babilong_qa1", tmp_path, splits=["0k", "1k", "64k"])
    assert [(c.turns[0].metadata["length"], c.turns[0].metadata["samples"]) for c in convs] == \
        [("0k", "1k"), ("0k", "1k"), ("1k", "1k"), ("1k", "1k"), ("64k", "100"), ("64k", "100")]
    assert [s["dataset"] for s in sources] == [ONE_K[0], ONE_K[0], HUNDRED[0]]
    assert [s["revision"] for s in sources] == [ONE_K[1], ONE_K[1], HUNDRED[1]]
    assert convs[2].context.endswith("(1k)") and convs[2].conv_id == "1k/0000"
    qa6, _ = load("babilong_qa6", tmp_path, splits=["0k", "1k"])   # the 1k-sample set has qa6 at 0k only
    assert [c.turns[0].metadata["samples"] for c in qa6] == ["1k", "1k", "100", "100"]
    limited, _ = load("babilong_qa1", tmp_path, splits=["0k", "1k"], limit=1)
    assert [c.conv_id for c in limited] == ["0k/0000", "1k/0000"]   # --limit: per length


@pytest.mark.parametrize("name,splits,options,field,words", [
    ("babilong_qa11", ["1k"], {}, "--split", "no qa11 at 1k"),
    ("babilong_qa1", ["3k"], {}, "--split", "no BABILong length"),
    ("babilong_qa6", ["4k"], {"samples": "1k"}, "--split", "1k-sample set has no qa6 at 4k"),
])
def test_a_length_the_data_lacks_is_refused(hub, tmp_path, name, splits, options, field, words):
    with pytest.raises(UserError) as err:
        load(name, tmp_path, splits=splits, **options)
    assert err.value.field == field and words in str(err.value)


@pytest.mark.parametrize("task,target,question,answer,right", VERDICTS)
def test_the_metric_is_compare_answers(task, target, question, answer, right):
    judge = PLUGINS.judges["babilong"](JudgeContext(options={}))
    (j,) = judge.judge([JudgeInput(item_id="0k/0", question=question, response=answer, reference=target,
                                   metadata={"task": task, "references": [target]})])
    assert j.score == (100.0 if right else 0.0)


def test_a_run_scores_each_length_and_their_mean(hub, tmp_path):
    model = Answering({"(1k)": "The most recent location of Mary is kitchen.",
                       "": "The most recent location of Mary is bathroom."}, window=4096)
    _, results, _ = run_engine(model, "babilong_qa1", tmp_path / "home", tmp_path, splits=["0k", "1k"])
    block = results["tasks"]["babilong_qa1"]["metrics"]["score"]
    assert block["groups"]["0k"]["value"] == 100.0 and block["groups"]["1k"]["value"] == 0.0
    assert block["mean_of_groups"] == 50.0


@pytest.mark.parametrize("argv,words", [
    (["--tasks", "babilong_qa11", "--split", "1k"], "no qa11 at 1k"),
    (["--tasks", "babilong_qa1", "--set", "options.samples=10k"], "options.samples"),
    (["--tasks", "mrcr_2needle", "--set", "options.bins=[7k]"], "options.bins"),
    (["--tasks", "graphwalks_128k", "--judge", "graphwalks,grader=latest"], "grader"),
    (["--tasks", "niah", "--context-lengths", "8k"], "past the model's window"),
])
def test_bad_input_exits_2_naming_the_option(hub, monkeypatch, argv, words):
    """Through the command line: exit 2, one message naming the option and the value."""
    from tests.cli import call
    from tests.conftest import ScriptedModel, serve_scripted

    serve_scripted(monkeypatch, lambda: ScriptedModel(window=4096))
    essay = ["--set", f"options.essay={TEST_DATA / 'niah' / 'essays'}"] if "niah" in argv else []
    code, _, err = call("run", *argv, *essay, "--model", "scripted:x", "--limit", "1", "--dry-run")
    assert code == 2 and words in err, err


def test_every_generated_sample_is_pinned(hub, tmp_path):
    """samples_digest of every task's samples at 0k and 1k, from the shipped specs (issue 40:
    their prompts' parts moved to the family's defaults, and no sample changed)."""
    from tests.plugins.samples_digest import samples_digest

    convs = [c for task in TASKS for c in load(f"babilong_{task}", tmp_path, splits=["0k", "1k"] if int(task[2:]) <= 5
                                                else ["0k"])[0]]
    assert samples_digest(convs) == "b1c917617f6250be248a15e238e619d601184a73bddc82cb4f7cd35fce15a8c5"
