"""L-CiteEval: rows WE wrote in the dataset's schema (tests/data/l_citeeval/L-CiteEval-Data/, put where
huggingface_hub caches the pinned commit) and prompt files WE wrote in the authors' format
(tests/data/l_citeeval/prompt/). Every prompt is byte for byte what the authors'
`get_instruction_template` (ZetangForward/L-CITEEVAL script/inference_1shot_vllm.py at 6e493267) makes
of the same rows and files (expected_prompts.json, written by running it outside this repository);
the citation scores equal their `compute_autoais`, `compute_niah_citation` and
`compute_counting_stars_citation` (script/eval_citation.py) and the answer scores their
eval_correct.py steps, on the same answers, with the same stub NLI (entailment iff every word of
four letters or more of the sentence is in the passages) and untrained punkt sentence splitting on
both sides (NLTK's punkt data is a download); the values below are what their code returned. The
real model path (transformers' pipeline) runs on a tiny randomly initialised model saved to a
folder: no download."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from nltk.tokenize.punkt import PunktSentenceTokenizer

from lceval.engine import load_plugins
from lceval.interfaces import JudgeContext
from lceval.types import Generation, JudgeInput, Message

from lceval_plugins.l_citeeval.citation import CitationJudge
from lceval_plugins.l_citeeval.task import bin_of
from tests.cli import call, lceval
from tests.conftest import ScriptedModel, run_engine, serve_scripted
from tests.plugins.documents.conftest import put_in_hub_cache

PLUGINS = load_plugins()
DATA = Path(__file__).parents[2] / "data" / "l_citeeval"
EXPECTED = json.loads((DATA / "expected_prompts.json").read_text(encoding="utf-8"))
REPO, COMMIT = "Jonaszky123/L-CiteEval", "23678a2c7a322cdf638c402abc06948d3ac1f0a5"
SPLIT = PunktSentenceTokenizer().tokenize
DOCS = ["Anna grew up in a small village by the sea.", "Her brother left for the city and never wrote back.",
        "One spring Anna left the village to find her brother.", "The city was loud and strange."]
# answer -> compute_autoais' (recall, precision, F1, citations); None: no sentence, left out
AUTOAIS = [
    ("Anna left the village to find her brother [3]. She grew up by the sea [1][2].", (1.0, 2 / 3, 0.8, 3)),
    ("Anna left to find her brother [3][2][1]. The city was loud [4][9].", (0.5, 1 / 3, 0.4, 3)),
    ("Anna left the village [3] [1]. Her brother never wrote [2]", (1.0, 2 / 3, 0.8, 3)),
    ("No citation here. None here either.", (0.0, 0.0, 0.0, 0)),
    ("Anna grew up by the sea [1][3]. Her brother left for the city [2, 3].", (1.0, 2 / 3, 0.8, 3)),
    ("", None),
    ("The city was strange [0].", (1.0, 1.0, 1.0, 1)),  # [0] is passage -1, the last, as in their indexing
]
NEEDLE = ["The secret ingredient is saffron [2].", "Saffron [1][2][3].", "Saffron [1].\nSee [2].", "Saffron."]
NIAH = [(1, 1.0, 1.0, 1), (1, 1 / 3, 0.5, 3), (0, 0, 0, 1), (0, 0, 0, 0)]
NIAH_ROUGE1_RECALL = [1.0, 0.0, 0.0, 0.0]
STARS = ['{"little_penguin": [21, 7, 93], "passage_id": [2, 4, 5]}',
         'Here: {"little_penguin": [21, 8], "passage_id": [2, 2, 3]} done', '{"little_penguin": [21]}', "no json",
         '{"little_penguin": [93, 93, 7, 1], "passage_id": [5, 4]}']
STARS_CITATION = [(1.0, 1.0, 1.0, 3), (1 / 3, 0.5, 0.4, 2), (0, 0, 0, 0), (0, 0, 0, 0), (2 / 3, 1.0, 0.8, 2)]
STARS_ACCURACY = [100.0, 100 / 3, 100 / 3, 0.0, 100.0]


class RuleNLI:
    """Entailment iff every word of four letters or more of the hypothesis is in the premise."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def entails(self, pairs):
        self.asked += pairs
        return [all(w in p.lower() for w in re.findall(r"[a-z0-9]+", h.lower()) if len(w) >= 4) for p, h in pairs]


def item(answer: str, refs: list[str] | None = None, **meta) -> JudgeInput:
    refs = refs or ["x"]
    return JudgeInput(item_id="test/0", question="", response=answer.strip(), reference=refs[0],
                      metadata={"references": refs, **meta}, raw_response=answer if answer != answer.strip() else None)


def test_citation_recall_and_precision_are_compute_autoais():
    judge = CitationJudge({"mode": "nli"}, nli=RuleNLI(), split=SPLIT)
    passages = ["Passage: " + d for d in DOCS]
    out = judge.judge([item(a, passages=passages) for a, _ in AUTOAIS])
    for j, (_, expected) in zip(out, AUTOAIS):
        if expected is None:
            assert j.score is None and j.parse_status == "missing"
            continue
        recall, precision, f1, n = expected
        assert (j.details["citation_recall"], j.details["citation_precision"], j.score, j.details["cite_num"]) == \
            pytest.approx((100 * recall, 100 * precision, 100 * f1, n))


def flat(judgments) -> list[float]:
    return [x for j in judgments for x in (j.details["citation_recall"], j.details["citation_precision"], j.score,
                                            j.details["cite_num"])]


def test_needle_and_counting_stars_citations_are_the_authors():
    niah = CitationJudge({"mode": "niah"}, nli=RuleNLI()).judge([item(a, gold_passage=1) for a in NEEDLE])
    assert flat(niah) == pytest.approx([x for r, p, f, n in NIAH for x in (100 * r, 100 * p, 100 * f, n)])
    stars = CitationJudge({"mode": "counting_stars"}, nli=RuleNLI()).judge(
        [item(a, gold_passages=[2, 4, 5]) for a in STARS])
    assert flat(stars) == pytest.approx([x for r, p, f, n in STARS_CITATION for x in (100 * r, 100 * p, 100 * f, n)])


def answer_judge(**options):
    return PLUGINS.judges["l_citeeval_answer"](JudgeContext(options=options))


def test_answer_metrics_are_eval_correct():
    cases = [("Anna left to find her brother [3].\nMore.", ["To find her brother", "to look for her brother"],
              (0.8, 2 / 3, 1.0)), ("In the city [2].", ["In the city"], (1.0, 1.0, 1.0)),
             ("Nothing.", ["In the city"], (0.0, 0.0, 0.0))]
    for value, index in (("f1", 0), ("precision", 1), ("recall", 2)):
        out = answer_judge(kind="qa", value=value).judge([item(a, refs) for a, refs, _ in cases])
        assert [j.score for j in out] == pytest.approx([100 * e[index] for *_, e in cases])
    ref = ["The report reviews housing policy and its funding."]
    summaries = ["Summary: The report reviews the housing policy [1][2].\nSecond line.",
                 "HUD set a policy and Congress funded it [1][2]. The GAO reviewed funding [3].", "Summary without colon", "[1]"]
    out = answer_judge(kind="summary").judge([item(a, ref) for a in summaries])
    assert [j.score for j in out] == pytest.approx([71.42857093877552, 39.999999520000007, 0.0, 0.0])
    out = answer_judge(kind="niah").judge([item(a, ["The secret ingredient is saffron."]) for a in NEEDLE])
    assert [j.score for j in out] == pytest.approx([100 * x for x in NIAH_ROUGE1_RECALL])
    out = answer_judge(kind="counting_stars").judge([item(a, gold_counts=[21, 7, 93]) for a in STARS])
    assert [j.score for j in out] == pytest.approx(STARS_ACCURACY)


@pytest.mark.parametrize("length,variant,task,hardness,expected", [
    (0, "Data", "hotpotqa", None, "8k"), (7999, "Data", "hotpotqa", None, "8k"), (8000, "Data", "hotpotqa", None, "16k"),
    (47999, "Data", "hotpotqa", None, "48k"), (48000, "Data", "hotpotqa", None, ">48k"),
    (45000, "Data", "multi_news", None, "48k"), (20000, "Length", "locomo", None, "32k"),
    (20000, "Hardness", "locomo", "hard", "hard")])
def test_length_bins_are_the_authors(length, variant, task, hardness, expected):
    assert bin_of(length, variant, task, hardness) == expected


def test_rows_past_the_last_bin_and_the_hardness_levels_are_in_no_length_bin():
    from lceval.engine import load_catalog

    bins = load_catalog(PLUGINS).spec("l_citeeval_narrativeqa").report.length_bins
    assert [bins.place({"bin": b}, None) for b in (">48k", ">32k", "easy", "hard")] == [None] * 4
    assert bins.place({"bin": "48k"}, None) == ("48k", 48000)  # the authors' bins: K = 1,000


@pytest.fixture
def home(tmp_path, monkeypatch, _isolated_hf):
    home = tmp_path / "home"
    monkeypatch.setenv("LCEVAL_DATA", str(home))
    lceval("data", "fetch", "l_citeeval", "--from", DATA)
    put_in_hub_cache(_isolated_hf / "hub", REPO, COMMIT,
                     {f"L-CiteEval-Data/{p.name}": p for p in (DATA / "L-CiteEval-Data").glob("*.json")})
    nltk_data = tmp_path / "nltk"
    english = nltk_data / "tokenizers" / "punkt_tab" / "english"
    english.mkdir(parents=True)
    for name in ("collocations.tab", "sent_starters.txt", "abbrev_types.txt", "ortho_context.tab"):
        (english / name).write_text("")  # punkt with nothing learnt: what the stub comparison used
    import nltk

    monkeypatch.setattr(nltk.data, "path", [str(nltk_data)])
    return home


class Echo(ScriptedModel):
    def __init__(self, text: str) -> None:
        super().__init__(window=100_000)
        self.text = text

    def generate(self, requests):
        self.calls.extend(requests)
        return [Generation(request_id=r.request_id, text=self.text, prompt_tokens=10, prefilled_tokens=10,
                           completion_tokens=5) for r in requests]


@pytest.mark.parametrize("task", ["narrativeqa", "hotpotqa", "dialsim", "gov_report", "niah", "counting_stars"])
def test_every_prompt_is_the_authors_byte_for_byte(home, tmp_path, task):
    model = Echo('{"little_penguin": [21], "passage_id": [2]}')
    run_engine(model, f"l_citeeval_{task}", home, tmp_path, judge="l_citeeval_answer")
    assert [r.messages for r in model.calls] == [[Message("user", p)] for p in EXPECTED[task]]


def tiny_nli(folder: Path, entail: bool) -> Path:
    """A randomly initialised 1-layer BERT classifier whose bias makes it always say entailment (or
    always neutral), with a word-level tokenizer: the real pipeline path, no download."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "anna", "city"]) + "\n")
    config = BertConfig(vocab_size=7, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                        max_position_embeddings=512, num_labels=3,
                        id2label={0: "entailment", 1: "neutral", 2: "contradiction"},
                        label2id={"entailment": 0, "neutral": 1, "contradiction": 2})
    torch.manual_seed(0)
    model = BertForSequenceClassification(config)
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor([5.0, 0.0, 0.0] if entail else [0.0, 5.0, 0.0]))
    model.save_pretrained(folder)
    BertTokenizer(str(folder / "vocab.txt")).save_pretrained(folder)
    return folder


def test_a_run_judges_citations_with_a_transformers_nli_model(home, tmp_path):
    nli = tiny_nli(tmp_path / "nli", entail=True)
    model = Echo("Anna left to find her brother [3]. The city was loud [4][1].")
    _, results, state = run_engine(model, "l_citeeval_narrativeqa", home, tmp_path,
                                   judge=f"l_citeeval_citation,nli_model={nli},device=cpu")
    (task,) = state.tasks
    first = task.samples[0].judgments[0]
    # every sentence cited and "entailed"; [4][1]: each alone entails, so both count
    assert first.details["citation_recall"] == 100.0 and first.details["citation_precision"] == 100.0
    assert task.samples[1].judgments[0].details["citation_recall"] == 50.0  # passage 4 of 3: out of range
    block = results["tasks"]["l_citeeval_narrativeqa"]["metrics"]
    assert set(block) >= {"score", "citation_recall", "citation_precision", "cite_num", "answer_recall"}
    assert [s.metadata["bin"] for s in task.samples] == ["8k", "24k"]
    points = results["length_bins"]["l_citeeval_narrativeqa"]["points"]  # the authors' K is 1,000: 8k is 8,000
    assert [(p["label"], p["length"], p["n"]) for p in points] == [("8k", 8000, 1), ("24k", 24000, 1)]


def test_the_nli_model_must_have_an_entailment_label(tmp_path):
    nli = tiny_nli(tmp_path / "nli", entail=False)
    judge = CitationJudge({"mode": "nli", "nli_model": str(nli), "device": "cpu", "entailment_label": "entails"},
                          split=SPLIT)
    with pytest.raises(Exception, match="no label 'entails'"):
        judge.judge([item("Anna [1].", passages=["Passage: Anna"])])
    neutral = CitationJudge({"mode": "nli", "nli_model": str(nli), "device": "cpu"}, split=SPLIT)
    (j,) = neutral.judge([item("Anna [1].", passages=["Passage: Anna"])])
    assert j.score == 0.0 and j.details["cite_num"] == 1


@pytest.mark.parametrize("argv,words", [
    (["--tasks", "l_citeeval_niah", "--set", "options.variant=Short"], "options.variant"),
    (["--tasks", "l_citeeval_hotpotqa", "--judge", "l_citeeval_citation,at_most_citations=0"], "at_most_citations"),
    (["--tasks", "l_citeeval_hotpotqa", "--set", "options.prompt_file=nowhere.json"], "options.prompt_file"),
])
def test_bad_input_exits_2_naming_the_option(home, monkeypatch, argv, words):
    serve_scripted(monkeypatch, lambda: ScriptedModel(window=4096))
    code, _, err = call("run", *argv, "--model", "scripted:x", "--limit", "1", "--dry-run")
    assert code == 2 and words in err, err
