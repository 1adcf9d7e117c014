"""HELMET's metrics equal the authors' code on the same answers: tests/data/helmet/authors_metrics.json
holds our answers (`inputs`) and the values the authors' functions gave for them (princeton-nlp/HELMET
at 4526dfb, run outside this repository): data.py's post-processing closures (default, JSON KV,
RULER, ICL), InfiniteBench's choice rule, MS MARCO's NDCG@10 through pytrec_eval, and eval_alce.py's
str_em, qampari_rec_top5 and compute_autoais with a stub NLI (tests/plugins/helmet/nli_stub.py) and
an untrained punkt sentence splitter on both sides."""

from __future__ import annotations

import json

import pytest

from lceval.interfaces import JudgeContext
from lceval.types import JudgeInput

from tests.paths import TEST_DATA

from .helpers import HOME, PLUGINS, load

EXPECTED = json.loads((TEST_DATA / "helmet" / "authors_metrics.json").read_text())
INPUTS = EXPECTED["inputs"]


def judge(name: str, **options):
    return PLUGINS.judges[name](JudgeContext(options=options))


def item(answer: str, refs: list[str], **meta) -> JudgeInput:
    return JudgeInput(item_id="8k/0", question=meta.pop("question", "q"), response=answer.strip(),
                      reference=refs[0] if refs else "", metadata={"references": refs, **meta},
                      raw_response=answer if answer != answer.strip() else None)


def scores(name: str, cases, **options) -> list[float]:
    j = judge(name, **options)
    return [s.score for s in j.judge([item(p, a if isinstance(a, list) else [a]) for p, a in cases])]


@pytest.mark.parametrize("metric", ["substring_exact_match", "exact_match", "f1", "rougeL_f1", "rougeL_recall"])
def test_default_post_process(metric):
    got = scores("helmet_qa", INPUTS["qa"], metric=metric)
    assert got == pytest.approx([100 * float(e[metric]) for e in EXPECTED["default"]], abs=1e-9)


def test_json_kv():
    got = scores("helmet_qa", INPUTS["kv"], metric="substring_exact_match", prefix="corresponding value:")
    assert got == pytest.approx([100 * float(e["substring_exact_match"]) for e in EXPECTED["json_kv"]])


def test_ruler_recall():
    got = scores("helmet_qa", INPUTS["ruler"], metric="ruler_recall", parse="raw")
    assert got == pytest.approx([100 * e["ruler_recall"] for e in EXPECTED["ruler"]])


def test_icl_exact_match_of_the_parse():
    got = scores("helmet_qa", INPUTS["icl"], metric="exact_match", parse="parsed", prefix="label:")
    assert got == pytest.approx([100 * float(e["exact_match"]) for e in EXPECTED["icl"]])


def test_infinitebench_choice():
    got = scores("helmet_qa", INPUTS["choice"], metric="exact_match", choice=True)
    assert got == pytest.approx([100 * float(e["exact_match"]) for e in EXPECTED["choice"]])


def test_completion_style_prepends_the_prefix_before_scoring():
    j = judge("helmet_qa", metric="exact_match", parse="parsed", prefix="label:")
    (chat,) = j.judge([item(" 3", ["3"], style="chat", answer_prefix="label:")])
    (completion,) = j.judge([item(" 3\nlabel: 4", ["3"], style="completion", answer_prefix="label:")])
    assert chat.score == 100.0 and completion.score == 100.0  # "label: 3\nlabel: 4": the first label


def test_rerank_ndcg_at_10_is_pytrec_evals():
    rows = [json.loads(line) for line in (HOME / "helmet/data/msmarco/test_reranking_data_k50_dep3.jsonl").open()]
    qrels = {c["id"]: c["label"] for c in rows[0]["ctxs"]}
    j = judge("helmet_rerank", k=10)
    got = [s.score for s in j.judge([item(p, ["x"], qrels=qrels) for p in INPUTS["rerank"]])]
    assert got == pytest.approx([100 * v for v in EXPECTED["rerank"]], abs=1e-9)


@pytest.fixture
def punkt(tmp_path, monkeypatch):
    """An untrained English punkt model (empty parameter files): nltk's splitter without a download."""
    import nltk

    folder = tmp_path / "nltk" / "tokenizers" / "punkt_tab" / "english"
    folder.mkdir(parents=True)
    for name in ("collocations.tab", "sentence_starters.txt", "sent_starters.txt", "abbrev_types.txt",
                 "ortho_context.tab"):
        (folder / name).write_text("")
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "nltk")] + list(nltk.data.path))
    _forget_punkt()
    yield
    _forget_punkt()


def _forget_punkt() -> None:
    """nltk keeps the splitter it loaded (functools cache): forget it so each test loads its own."""
    import nltk.tokenize

    getattr(nltk.tokenize._get_punkt_tokenizer, "cache_clear", lambda: None)()


def alce_items(kind: str, answers: list[str]):
    convs = load(f"helmet_{kind}", ["8k"], max_test_samples=None)
    rows = {c.conv_id: c for c in convs}
    order = [rows[f"8k/{i}"] for i in (0, 1, 2, 3, 0)][:len(answers)]
    return [JudgeInput(item_id=f"8k/{i}", question=c.turns[0].question, response=a.strip(), reference="",
                       metadata=c.turns[0].metadata, raw_response=a if a != a.strip() else None)
            for i, (c, a) in enumerate(zip(order, answers))]


STUB = "tests.plugins.helmet.nli_stub:entails"


@pytest.mark.parametrize("kind,first", [("asqa", "str_em"), ("qampari", "qampari_rec_top5")])
def test_alce_metrics_are_eval_alces(kind, first, punkt):
    items = alce_items(kind, INPUTS[kind])
    for metric in (first, "citation_rec", "citation_prec"):
        got = judge("helmet_alce", metric=metric, nli_model=STUB, nli_kind="python").judge(items)
        want = [e[metric] for e in EXPECTED[kind]]
        for j, w in zip(got, want):
            if metric.startswith("citation") and j.score is None:  # no sentence: left out, as compute_autoais
                assert w == 0 and j.parse_status == "missing"
            else:
                assert j.score == pytest.approx(w, abs=1e-9), (metric, j.details)


def test_the_nli_model_is_asked_each_pair_once(punkt):
    from lceval_plugins.helmet.alce import load_nli

    items = alce_items("asqa", INPUTS["asqa"])
    nli = load_nli(STUB, "python", "auto", "bfloat16", "entailment")
    judge("helmet_alce", metric="citation_rec", nli_model=STUB, nli_kind="python").judge(items)
    calls = nli.calls
    judge("helmet_alce", metric="citation_prec", nli_model=STUB, nli_kind="python").judge(items)
    assert nli.calls == calls > 0


def test_a_missing_punkt_model_is_a_clear_error(monkeypatch, tmp_path):
    import nltk

    from lceval.errors import UserError

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    _forget_punkt()
    with pytest.raises(UserError, match="punkt"):
        judge("helmet_alce", metric="citation_rec", nli_model=STUB, nli_kind="python").judge(
            alce_items("asqa", INPUTS["asqa"][:1]))


#: eval_alce.py compute_autoais (princeton-nlp/HELMET 4526dfb, the stub NLI in place of TRUE) on row 0
#: of our asqa file with all its 40 retrieved documents (the output file's `docs`), 30 of them shown at 8k
PAST_SHOWN = [("Thing 0 is V034 [35].", 100.0, 100.0),
              ("Thing 0 is V034 [35][1]. And V00 [1].", 100.0, 200 / 3),
              ("Thing 0 is V034 [41].", 0.0, 0.0)]


@pytest.mark.parametrize("answer,rec,prec", PAST_SHOWN)
def test_a_citation_past_the_shown_documents_is_checked_against_the_retrieved_one(answer, rec, prec, punkt):
    from lceval.io import using_data_home

    from tests.plugins.helmet.helpers import HOME

    (item,) = alce_items("asqa", [answer])
    assert len(item.metadata["docs"]) == 30 and item.metadata["retrieved"]["row"] == 0
    with using_data_home(HOME):
        got = [judge("helmet_alce", metric=m, nli_model=STUB, nli_kind="python").judge([item])[0].score
               for m in ("citation_rec", "citation_prec")]
    assert got == pytest.approx([rec, prec])


def test_a_citation_past_the_shown_documents_without_their_file_is_a_clear_error(punkt, tmp_path):
    from lceval.errors import UserError
    from lceval.io import using_data_home

    (item,) = alce_items("asqa", [PAST_SHOWN[0][0]])
    with using_data_home(tmp_path), pytest.raises(UserError, match="retrieved documents"):
        judge("helmet_alce", metric="citation_rec", nli_model=STUB, nli_kind="python").judge([item])
