"""HELMET's citation metrics (eval_alce.py at princeton-nlp/HELMET commit 4526dfb, after ALCE,
Gao et al., 2023): `helmet_alce` with `metric`:

- `str_em` (ASQA): the share of the question's short-answer sets of which one answer appears in
  the answer, citations removed (`compute_str_em`);
- `qampari_rec_top5` (QAMPARI): the answer's comma-separated items against the answer sets,
  recall capped at 5 (`compute_qampari_f1`);
- `citation_rec`, `citation_prec`: each sentence (nltk's `sent_tokenize`; sentences under 5
  characters dropped; QAMPARI: question + each item) must be entailed by the documents it cites
  (at most 3), as an NLI model judges; precision asks of each cited document whether it is needed
  (`compute_autoais`). An answer with no sentence is left out of the mean (no score).

The answer's newlines become spaces and `<|im_end|>` is removed first, as eval_alce.py's main does.

The NLI model is an option: `nli_model` (default `google/t5_xxl_true_nli_mixture`, TRUE, the
authors' choice: "premise: ... hypothesis: ..." generated greedily, entailed iff the output is
"1"), `nli_kind` seq2seq (TRUE-style), classification (any transformers NLI model: entailed iff
`entailment_label` wins, as L-CiteEval's judge names its options) or python (`module:function(premise, hypothesis) -> bool`, any code).
Verdicts are cached in the process: the recall and precision metrics ask each pair once.

A citation is checked against every retrieved document, as eval_alce.py checks it against the
row's 2,000 (`docs` of the output file): one past those shown is read from the row's file
(`retrieved` in the metadata, through the data home) when an answer cites it, so the samples
keep only the documents the model saw; a citation past the retrieved ones is out of range.
"""

from __future__ import annotations

import copy
import importlib
import re
from pathlib import Path
from typing import Any, Callable

from lceval.errors import UserError
from lceval.types import JudgeInput, Judgment

from lceval_plugins.judges.metric_base import MetricJudge

from .metrics import helmet_answer
from .text import normalize_answer, remove_citations

TRUE_NLI = "google/t5_xxl_true_nli_mixture"
_NLI: dict[tuple[str, str, str, str, str], "NLI"] = {}


class NLI:
    """An entailment judge: `entails(premise, hypothesis)`, every verdict remembered."""

    def __init__(self, fn: Callable[[str, str], bool], name: str) -> None:
        self.fn, self.name = fn, name
        self.verdicts: dict[tuple[str, str], int] = {}
        self.calls = 0

    def entails(self, premise: str, hypothesis: str) -> int:
        key = (premise, hypothesis)
        if key not in self.verdicts:
            self.calls += 1
            self.verdicts[key] = 1 if self.fn(premise, hypothesis) else 0
        return self.verdicts[key]


def _device(device: str) -> str:
    import torch

    return ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device


def _seq2seq(name: str, device: str, dtype: str, label: str) -> Callable[[str, str], bool]:
    """eval_alce.py `_run_nli_autoais`: TRUE's input text, greedy, at most 10 new tokens, "1"."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(name)
    model = AutoModelForSeq2SeqLM.from_pretrained(name, dtype=getattr(torch, dtype)).to(_device(device))
    model.eval()

    def run(premise: str, hypothesis: str) -> bool:
        ids = tok("premise: {} hypothesis: {}".format(premise, hypothesis), return_tensors="pt").input_ids
        with torch.inference_mode():
            out = model.generate(ids.to(model.device), max_new_tokens=10, do_sample=False)
        return tok.decode(out[0], skip_special_tokens=True) == "1"

    return run


def _classification(name: str, device: str, dtype: str, label: str) -> Callable[[str, str], bool]:
    """Any sequence-classification NLI model (as L-CiteEval's judge takes one): the pair
    (premise, hypothesis), entailed when the label `label` (compared without case) scores highest."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(name)
    model = AutoModelForSequenceClassification.from_pretrained(name, dtype=getattr(torch, dtype)).to(_device(device))
    model.eval()
    labels = {int(i): str(n).lower() for i, n in model.config.id2label.items()}
    entail = [i for i, n in labels.items() if n == label.lower()]
    if not entail:
        raise UserError(f"the NLI model {name} has no label {label!r} (labels: {', '.join(labels.values())})",
                        field="judge.options.entailment_label")

    def run(premise: str, hypothesis: str) -> bool:
        enc = tok(premise, hypothesis, return_tensors="pt", truncation=True).to(model.device)
        with torch.inference_mode():
            logits = model(**enc).logits[0]
        return int(logits.argmax()) == entail[0]

    return run


def load_nli(name: str, kind: str, device: str = "auto", dtype: str = "bfloat16", label: str = "entailment") -> NLI:
    """The NLI judge `name` (once per process)."""
    key = (name, kind, device, dtype, label)
    if key in _NLI:
        return _NLI[key]
    if kind == "python":
        module, _, attr = name.partition(":")
        try:
            fn = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError, ValueError) as exc:
            raise UserError(f"no function {name!r} ({exc})", field="judge.options.nli_model",
                            hint="With nli_kind python, nli_model is module:function.") from None
    else:
        try:
            fn = (_seq2seq if kind == "seq2seq" else _classification)(name, device, dtype, label)
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 - the model could not be loaded: the user's setup
            raise UserError(f"cannot load the NLI model {name!r} ({type(exc).__name__}: "
                            f"{str(exc).splitlines()[0] if str(exc) else ''})", field="judge.options.nli_model",
                            hint="Download it once (HELMET's is google/t5_xxl_true_nli_mixture, 11B, bf16 on a GPU; "
                                 "it needs sentencepiece), or name another NLI model.") from None
    _NLI[key] = NLI(fn, name)
    return _NLI[key]


def sentences(text: str) -> list[str]:
    """nltk's `sent_tokenize` (punkt), as eval_alce.py splits an answer."""
    import nltk

    try:
        return nltk.sent_tokenize(text)
    except LookupError:
        raise UserError("HELMET's citation metrics split answers into sentences with nltk's punkt model, which is "
                        "not installed", field="judge.options.metric",
                        hint="Run once: python -m nltk.downloader punkt_tab") from None


def _doc(doc: dict[str, Any]) -> str:
    """eval_alce.py `_format_document`."""
    return "Title: %s\n%s" % (doc["title"], doc["text"])


def citation_scores(question: str, output: str, docs: list[dict[str, Any]], nli: NLI, qampari: bool,
                    at_most: int = 3, retrieved_count: int | None = None,
                    retrieved: Callable[[], list[dict[str, Any]]] | None = None) -> dict[str, Any] | None:
    """eval_alce.py `compute_autoais` for one item: citation recall and precision (0-1), None when
    the answer has no sentence. `docs` are the documents shown, `retrieved_count` the retrieved
    ones (a citation past them is out of range), `retrieved()` all of them, asked for only when a
    citation falls past those shown."""
    count = len(docs) if retrieved_count is None else retrieved_count
    if qampari:
        sents = [question + " " + x.strip() for x in output.rstrip().rstrip(".").rstrip(",").split(",")]
    else:
        sents = [s for s in sentences(output) if len(s.strip()) >= 5]
    if not sents:
        return None
    entail = entail_prec = total = 0
    for sent in sents:
        target = remove_citations(sent).strip()
        ref = [int(r[1:]) - 1 for r in re.findall(r"\[\d+", sent)]
        if not ref or any(r >= count for r in ref):
            joint = 0
        else:
            ref = ref[:at_most]
            if any(r >= len(docs) for r in ref):
                if retrieved is None:
                    raise UserError(f"the answer cites document {max(ref) + 1} of the {count} retrieved, past the "
                                    f"{len(docs)} shown, and the sample does not say where the others are",
                                    field="judge.options.metric")
                docs = retrieved()
            total += len(ref)
            joint = nli.entails("\n".join(_doc(docs[r]) for r in ref), target)
        entail += joint
        if joint and len(ref) > 1:
            for psg in ref:
                if nli.entails(_doc(docs[psg]), target):
                    entail_prec += 1
                    continue
                rest = copy.deepcopy(ref)
                rest.remove(psg)
                if not nli.entails("\n".join(_doc(docs[r]) for r in rest), target):
                    entail_prec += 1
        else:
            entail_prec += joint
    return {"citation_rec": entail / len(sents), "citation_prec": entail_prec / total if total > 0 else 0.0,
            "sentences": len(sents), "citations": total}


def str_em(output: str, qa_pairs: list[dict[str, Any]]) -> float:
    """eval_alce.py `compute_str_em` for one item (0-1)."""
    norm = normalize_answer(output)
    hits = [any(normalize_answer(a) in norm for a in p["short_answers"]) for p in qa_pairs]
    return sum(hits) / len(hits)


def qampari_scores(output: str, answers: list[list[str]]) -> dict[str, float]:
    """eval_alce.py `compute_qampari_f1` for one item (0-1)."""
    preds = [normalize_answer(x.strip()) for x in output.rstrip().rstrip(".").rstrip(",").split(",")]
    preds = [p for p in preds if len(p) > 0]
    groups = [[normalize_answer(x) for x in a] for a in answers]
    flat = [x for g in groups for x in g]
    found = sum(any(x in preds for x in g) for g in groups)
    prec = sum(p in flat for p in preds) / len(preds) if preds else 0.0
    rec = found / len(groups)
    rec5 = min(5, found) / min(5, len(groups))
    return {"qampari_prec": prec, "qampari_rec": rec, "qampari_rec_top5": rec5, "num_preds": len(preds)}


_RETRIEVED: dict[str, Any] = {}


def retrieved_docs(where: dict[str, Any]) -> list[dict[str, Any]]:
    """Every retrieved document of one row (`metadata.retrieved`: the rows' builder and files,
    relative to the data home, and the row's index), the files opened once per process."""
    from lceval.io import data_home

    files = [str(data_home() / f) if not Path(f).is_absolute() else f for f in where["data_files"]]
    key = repr((where.get("builder"), files))
    if key not in _RETRIEVED:
        missing = [f for f in files if not Path(f).is_file()]
        if missing:
            raise UserError(f"the citation check reads the retrieved documents of {missing[0]}, which is not there",
                            field="judge.options.metric", hint="Install HELMET's data where the run read it "
                            "(docs/tasks/helmet.md), or score where it is.")
        import datasets

        _RETRIEVED[key] = datasets.load_dataset(where.get("builder") or "json", data_files=files, split="train")
    return [{"title": d.get("title", ""), "text": d.get("text", "")} for d in _RETRIEVED[key][int(where["row"])]["docs"]]


class HelmetAlceJudge(MetricJudge):
    """One of eval_alce.py's metrics of an ALCE answer."""

    name = "helmet_alce"
    AS_WRITTEN = True
    OPTIONS = {"type": "object", "additionalProperties": False, "properties": {
        "metric": {"enum": ["str_em", "qampari_rec_top5", "citation_rec", "citation_prec"], "default": "str_em",
                   "description": "str_em (ASQA), qampari_rec_top5 (QAMPARI), citation_rec or citation_prec (both)."},
        "nli_model": {"type": "string", "default": TRUE_NLI,
                      "description": "The NLI model of the citation metrics: a Hub id or folder (seq2seq, "
                                     "classification), or module:function (python)."},
        "nli_kind": {"enum": ["seq2seq", "classification", "python"], "default": "seq2seq",
                     "description": "seq2seq: TRUE's 'premise: ... hypothesis: ...' -> '1'; classification: an "
                                    "entailment label; python: a function(premise, hypothesis) -> bool."},
        "entailment_label": {"type": "string", "minLength": 1, "default": "entailment",
                             "description": "classification: the model's label meaning entailment (compared without case)."},
        "device": {"type": "string", "minLength": 1, "default": "auto",
                   "description": "Where the NLI model runs: auto (cuda when there is one), cpu, cuda, cuda:1 ..."},
        "nli_dtype": {"enum": ["bfloat16", "float16", "float32"], "default": "bfloat16",
                      "description": "The NLI model's weights (the authors: bfloat16)."},
        "at_most_citations": {"type": "integer", "minimum": 1, "default": 3,
                              "description": "Citations of a sentence checked (eval_alce.py --at_most_citations)."},
    }}

    @staticmethod
    def needs(options: dict[str, Any]) -> list[Any]:
        """The NLI model the citation metrics load (`lceval data fetch` / `pack` get it)."""
        from lceval_plugins.documents.needs import model_need

        cites = options["metric"] in ("citation_rec", "citation_prec") and options["nli_kind"] != "python"
        return model_need(options["nli_model"]) if cites else []

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        out = []
        for item in items:
            value, details = self.score_item(item)
            if value is None:
                out.append(Judgment(item_id=item.item_id, judge=self.name, score=None, parse_status="missing",
                                    raw="no sentence in the answer: left out of the mean (eval_alce.py)",
                                    details=details))
            else:
                out.append(Judgment(item_id=item.item_id, judge=self.name, score=100.0 * value,
                                    raw=str(details)[:2000], details=details))
        return out

    def score_item(self, item: JudgeInput) -> tuple[float | None, dict[str, Any]]:
        metric = self.options["metric"]
        output = re.sub(r"\n+", " ", helmet_answer(item)).replace("<|im_end|>", "")
        meta = item.metadata
        if metric == "str_em":
            pairs = meta.get("qa_pairs")
            if not pairs:
                raise UserError("str_em needs the ASQA rows' qa_pairs", field="judge.options.metric")
            return str_em(remove_citations(output), pairs), {}
        if metric == "qampari_rec_top5":
            groups = meta.get("answer_groups")
            if not groups:
                raise UserError("qampari_rec_top5 needs the QAMPARI rows' answers", field="judge.options.metric")
            scores = qampari_scores(remove_citations(output), groups)
            return scores["qampari_rec_top5"], scores
        nli = load_nli(self.options["nli_model"], self.options["nli_kind"], self.options["device"],
                       self.options["nli_dtype"], self.options["entailment_label"])
        qampari = "answer_groups" in meta and "qa_pairs" not in meta
        shown = meta.get("docs") or []
        where = meta.get("retrieved")
        scores = citation_scores(item.question, output, shown, nli, qampari, self.options["at_most_citations"],
                                 retrieved_count=int(meta.get("docs_total") or len(shown)),
                                 retrieved=(lambda: retrieved_docs(where)) if where else None)
        if scores is None:
            return None, {"sentences": 0}
        return scores[metric], scores
