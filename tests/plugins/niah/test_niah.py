"""The original needle in a haystack (Kamradt, 2023): each haystack is built as the author's
tester builds it, byte for byte, with the evaluated model's tokenizer; the prompt is the author's
OpenAI one; samples span the depth grid; a length that cannot fit the window is refused; string
match and the rubric judge (with the author's 1-10 rubric) score the answers.

The expected digests are those of the contexts the author's own `LLMNeedleHaystackTester.
generate_context` (gkamradt/LLMTest_NeedleInAHaystack at 7b90d28) builds from our essays
(tests/data/niah/essays) with the same tokenizer, at every depth of its linear and sigmoid grids,
computed by running its code outside this repository (its files read in sorted order, as lceval
reads them)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from lceval.engine import Cache, CachedModel, load_catalog, load_plugins
from lceval.errors import UserError
from lceval.interfaces import JudgeContext, ModelBackend, TaskContext
from lceval.types import CONTEXT_SLOT, Generation, JudgeInput, Message
from lceval_plugins.niah.task import NEEDLE, NiahTaskType, depth_grid

from tests.cli import lceval
from tests.conftest import complete, run_engine
from tests.paths import TEST_DATA

ESSAYS = TEST_DATA / "niah" / "essays"
PLUGINS = load_plugins()
CATALOG = load_catalog(PLUGINS)
#: sha256 of json.dumps([generate_context(L, d) for d in sorted(depths)]) of the author's tester
AUTHORS = {
    ("linear", 300): "0f1f8d60fe7be1a461e92c269c0f431d1a50b5d25dbcf047ea9d9db81c22bfed",
    ("linear", 1000): "9f2af8c714008b67b8ce7a5d086f6acf36bf884a5169dceec12276a1cf5a8826",
    ("linear", 2500): "9cede6229af9a50aa24b08af3345a3dc10d72c8775f0d87de8a4e7b1dd6e3a13",
    ("sigmoid", 300): "e4ffd744e0395fc1d122e31436e56deb77fa327d51896486e23b5441ad21d3d8",
    ("sigmoid", 1000): "aaf10179ed58fe482b3ebcf03d96bf33568b212b53ab8ecced4a707df60085ef",
    ("sigmoid", 2500): "09ad81dc7706fcf6b124a0eb024cda9ea33f6062218499200ce07e441e609807",
}
SYSTEM = "You are a helpful AI bot that answers questions for a user. Keep your response short and direct"
ASK = "What is the best thing to do in San Francisco? Don't give information outside the document or repeat your findings"


class RegexModel(ModelBackend):
    """A model whose tokens are words, punctuation marks and runs of white space (decoding is
    exact, and '.' is a token of its own, as in the author's cl100k), with a chat template of 3
    tokens per message; it answers with a chosen text."""

    def __init__(self, window: int | None = 8192, answer: str = "Eat a sandwich in Dolores Park.") -> None:
        self.context_window = window
        self.answer = answer
        self.vocab: dict[str, int] = {}
        self.words: list[str] = []
        self.calls: list = []

    def identity(self) -> dict:
        return {"scheme": "regex", "window": self.context_window}

    def tokenize(self, text: str) -> list[int]:
        out = []
        for w in re.findall(r"\w+|[^\w\s]|\s+", text):
            if w not in self.vocab:
                self.vocab[w] = len(self.words)
                self.words.append(w)
            out.append(self.vocab[w])
        return out

    def detokenize(self, tokens: list[int]) -> str:
        return "".join(self.words[t] for t in tokens)

    def count_tokens(self, messages: list[Message]) -> int:
        return sum(len(self.tokenize(m.content)) + 3 for m in messages) + 2

    def generate(self, requests):
        self.calls.extend(requests)
        return [Generation(request_id=r.request_id, text=self.answer, prompt_tokens=self.count_tokens(r.messages),
                           prefilled_tokens=None, completion_tokens=8) for r in requests]


def load(options: dict, length: int | None, model: ModelBackend | None = None, limit=None, select=lambda c: True,
         files: list | None = None):
    task_type = NiahTaskType()
    spec = {"name": "niah", "type": "niah", "options": complete(task_type, {"essay": str(ESSAYS), **options}),
            "generation": {"max_new_tokens": 300}}
    model = model if model is not None else RegexModel()
    ctx = TaskContext(spec=spec, spec_path=Path("niah.yaml"), data_home=Path("/nonexistent"), splits=None, limit=limit,
                      record_file=(files if files is not None else []).append, select_context=select,
                      model_tokenizer=lambda: model, context_length=length)
    return task_type.load(ctx)


@pytest.mark.parametrize("kind", ["linear", "sigmoid"])
@pytest.mark.parametrize("length", [300, 1000, 2500])
def test_every_haystack_is_the_authors_byte_for_byte(kind, length):
    convs = load({"depth_interval_type": kind}, length, model=RegexModel(window=None))
    by_depth = sorted(convs, key=lambda c: c.turns[0].metadata["depth"])
    assert len(by_depth) == 35
    digest = hashlib.sha256(json.dumps([c.context for c in by_depth]).encode()).hexdigest()
    assert digest == AUTHORS[(kind, length)]


def test_the_prompt_and_the_samples():
    files: list = []
    model = RegexModel()
    convs = load({}, 1000, model=model, files=files)
    assert sorted(files) == sorted(ESSAYS.glob("*.txt"))          # every essay read is recorded
    depths = [c.turns[0].metadata["depth"] for c in convs]
    assert depths == sorted(depth_grid({"depths": None, "depth_intervals": 35, "depth_interval_type": "linear"}),
                            reverse=True)                          # deepest first: consecutive prompts share most
    middle = next(c for c in convs if c.turns[0].metadata["depth"] == 50)
    assert [m.role for m in middle.preamble] == ["system", "user"]
    assert middle.preamble[0].content == SYSTEM and middle.preamble[1].content == CONTEXT_SLOT
    turn = middle.turns[0]
    assert turn.user == ASK and turn.question == "What is the best thing to do in San Francisco?"
    assert turn.reference == NEEDLE.strip() and turn.metadata["references"] == ["sandwich", "Dolores Park"]
    before, _, after = middle.context.partition(NEEDLE)
    assert before.endswith(".") and after                            # after a sentence's period, inside the text
    assert turn.metadata["haystack_tokens"] == 1000 - 200   # re-tokenized, white space around the needle may merge
    assert abs(len(model.tokenize(middle.context)) - 800) <= 2
    assert 45 < turn.metadata["depth_achieved"] <= 50
    top = next(c for c in convs if c.turns[0].metadata["depth"] == 0)
    assert top.context.startswith(NEEDLE + "March 2021")
    bottom = next(c for c in convs if c.turns[0].metadata["depth"] == 100)
    assert bottom.context.endswith(NEEDLE)


def test_limit_spans_the_depths_and_contexts_choose_samples():
    convs = load({}, 1000, limit=3)
    assert sorted(c.turns[0].metadata["depth"] for c in convs) == [0, 50, 100]
    chosen = load({"depths": [10, 90]}, 1000, select=lambda cid: cid == "1000/001")
    assert [c.conv_id for c in chosen] == ["1000/001"] and chosen[0].turns[0].metadata["depth"] == 90


@pytest.mark.parametrize("options,length,window,field,words", [
    ({}, 4000, 2048, "--context-lengths", "past the model's window"),
    ({"buffer": 290}, 300, None, "--context-lengths", "leave no room"),
    ({"essay": "/nonexistent/essays"}, 1000, None, "options.essay", "no file or folder"),
])
def test_bad_lengths_and_essays_name_the_option(options, length, window, field, words):
    with pytest.raises(UserError) as err:
        load(options, length, model=RegexModel(window=window))
    assert err.value.field == field and words in str(err.value)


def test_a_sweep_scores_by_string_match_per_depth(tmp_path):
    model = RegexModel(answer="Eat a sandwich and sit in the park.")
    run_dir, results, _ = run_engine(model, "niah", tmp_path / "home", tmp_path, context_lengths=[512, 1024],
                                   overrides={"options.essay": str(ESSAYS), "options.depths": [0, 50, 100]})
    assert len(model.calls) == 6
    first = model.calls[0].messages
    assert [m.role for m in first] == ["system", "user", "user"] and first[2].content == ASK
    tasks = results["tasks"]
    for name in ("niah@512", "niah@1k"):
        block = tasks[name]["metrics"]["score"]
        assert block["value"] == 50.0                              # "sandwich" named, "Dolores Park" not
        assert set(block["breakdowns"]["depth"]) == {"0", "50", "100"}
        assert tasks[name]["accounting"]["truncated"] == 0
    lceval("report", str(run_dir), "--format", "html", "-o", str(tmp_path / "report.html"))
    html = (tmp_path / "report.html").read_text()
    assert "niah: score by depth x context length" in html        # the author's heatmap


def test_the_rubric_judge_grades_on_the_authors_rubric(tmp_path):
    from tests.plugins.judges.test_llm_judges import ScriptedJudgeModel

    spec = CATALOG.spec("niah_rubric")
    backend = ScriptedJudgeModel(lambda r: "Feedback: it names the sandwich and the park.\n\\boxed{10}")
    judge = PLUGINS.judges["rubric"](JudgeContext(options=spec.judge.options, seed=0,
                                                  model=CachedModel(backend, Cache(tmp_path / "j.sqlite"), "judge:x")))
    (j,) = judge.judge([JudgeInput(item_id="1k/000", question="What is the best thing to do in San Francisco?",
                                   response="Eat a sandwich and sit in Dolores Park.", reference=NEEDLE.strip())])
    assert j.score == 10.0
    (request,) = backend.calls
    prompt = request.messages[-1].content
    assert "Score 7: The answer aligns with the reference but has minor omissions.\n" in prompt
    assert "### Reference answer (score 10):\nThe best thing to do in San Francisco is eat a sandwich" in prompt
    assert request.params.temperature == 0.0


#: samples_digest of every sample (issue 40: the shared haystack builder changes none)
SAMPLES = {("linear", 1000): "bbb4f86c1b97d6c9619fc4e2e568b5d55aa42160caa62cdd92280062f5c1be6c",
           ("sigmoid", 300): "624abf6efa98ef1402f17d5ddfcd4620f1077ecac088c9be4d86378477ba4ef2"}


@pytest.mark.parametrize("kind,length", sorted(SAMPLES))
def test_every_generated_sample_is_pinned(kind, length):
    from tests.plugins.samples_digest import samples_digest

    convs = load({"depth_interval_type": kind}, length, model=RegexModel(window=None))
    assert samples_digest(convs) == SAMPLES[(kind, length)]
