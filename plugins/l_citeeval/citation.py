"""L-CiteEval's citation quality, as `script/eval_citation.py` computes it (ZetangForward/L-CITEEVAL,
commit 6e493267), one item at a time; reported x 100: the F1 as the score, recall, precision and
the number of citations (`cite_num`, the paper's N) beside it.

`mode: nli` (QA, summarization, dialogue: `compute_autoais`, ALCE's AutoAIS adapted):

- the answer as written is split into sentences with NLTK's `sent_tokenize` (punkt); an answer
  without a sentence is left out of the mean (the authors `continue`), here a missing score;
- per sentence, its citations are the numbers after each `[` (`[3]`, `[3, 5]` gives 3 only),
  1-based; a sentence without one, or with one past the passages, is not supported; else its first
  `at_most_citations` (3) cited passages, each as `Passage: <text>` (`Title: ...\\nPassage: ...` for a
  titled one) joined by newlines, are the premise and the sentence without its citations the
  hypothesis: recall counts the sentences entailed;
- precision: a citation of an entailed sentence with several citations counts unless it alone does
  not entail the sentence *and* the others still do without it; a single citation counts when its
  sentence is entailed; divided by all citations (0 when none);
- F1 from the item's recall and precision.

`mode: niah` (`compute_niah_citation`): the first line's first `at_most_citations` citations; the
gold passage is the first that holds the answer (the task type records it): recall 1 and precision
1/n when it is cited, else 0. Where no passage holds the answer the authors reuse the previous
item's passage; here nothing is gold (0).

`mode: counting_stars` (`compute_counting_stars_citation`): the JSON object from the answer's first
`{` to its first `}`; its `passage_id` list (deduplicated) against the passages that hold "The
little penguin counted" (1-based): precision, recall, F1; no JSON or no `passage_id`: 0.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

from lceval.errors import PackageMissing, UserError
from lceval.interfaces import Judge, JudgeContext
from lceval.options import check_options
from lceval.types import JudgeInput, Judgment

from .nli import HFNLI, NLI, nli_options

_CITE = re.compile(r"\[\d+")


def remove_citations(sent: str) -> str:
    """The authors' `remove_citations`: `[<digits>` and every `]` and ` |` removed."""
    return re.sub(r"\[\d+", "", re.sub(r" \[\d+", "", sent)).replace(" |", "").replace("]", "")


def cited(sentence: str) -> list[int]:
    """The 0-based passage numbers a sentence cites (`[k` is passage k, 1-based)."""
    return [int(r[1:]) - 1 for r in _CITE.findall(sentence)]


def punkt_sentences(text: str) -> list[str]:
    """NLTK's `sent_tokenize` (English punkt), as the authors split answers."""
    try:
        from nltk import sent_tokenize
    except ImportError:
        raise PackageMissing("L-CiteEval's citation metric splits answers into sentences with NLTK, which is not "
                             "installed", field="judge.options.mode", hint="pip install nltk") from None
    try:
        return sent_tokenize(text)
    except LookupError:
        raise UserError("NLTK's English sentence splitter (punkt_tab) is not installed", field="judge.options.mode",
                        hint="Run: python -m nltk.downloader punkt_tab") from None


def autoais(answer: str, passages: list[str], nli: NLI, at_most: int | None,
            split: Callable[[str], list[str]]) -> dict[str, float] | None:
    """`compute_autoais` for one item: recall, precision, F1 (0-1) and the citations counted; None
    when the answer has no sentence."""
    sents = split(answer)
    if not sents:
        return None
    entail = entail_prec = total = 0
    for sent in sents:
        target = remove_citations(sent).strip()
        ref = cited(sent)
        if not ref or any(r >= len(passages) for r in ref):
            continue  # joint_entail 0: adds nothing to recall nor precision
        if at_most is not None:
            ref = ref[:at_most]
        total += len(ref)
        (joint,) = nli.entails([("\n".join(passages[r] for r in ref), target)])
        entail += joint
        if joint and len(ref) > 1:
            for r in ref:
                (alone,) = nli.entails([(passages[r], target)])
                if alone:
                    entail_prec += 1
                    continue
                rest = list(ref)
                rest.remove(r)
                (without,) = nli.entails([("\n".join(passages[p] for p in rest), target)])
                entail_prec += 0 if without else 1
        else:
            entail_prec += joint
    recall = entail / len(sents)
    precision = entail_prec / total if total > 0 else 0.0
    f1 = 0.0 if recall + precision == 0 else 2 * recall * precision / (recall + precision)
    return {"recall": recall, "precision": precision, "f1": f1, "cite_num": float(total)}


def niah_citation(answer: str, gold: int | None, at_most: int | None) -> dict[str, float]:
    line = answer.strip().split("\n")[0]
    ref = cited(line)[:at_most]
    if gold is not None and gold >= 0 and gold in ref:
        precision = 1 / len(ref)
        return {"recall": 1.0, "precision": precision, "f1": 2 * precision / (1 + precision), "cite_num": float(len(ref))}
    return {"recall": 0.0, "precision": 0.0, "f1": 0.0, "cite_num": float(len(ref))}


def first_json_object(answer: str) -> Any:
    """The authors' parse: `json.loads` of the text from the first `{` to the first `}`; None if it fails."""
    text = answer.strip()
    try:
        return json.loads(text[text.index("{"):text.index("}") + 1])
    except ValueError:
        return None


def counting_stars_citation(answer: str, gold: list[int]) -> dict[str, float]:
    zero = {"recall": 0.0, "precision": 0.0, "f1": 0.0, "cite_num": 0.0}
    parsed = first_json_object(answer)
    if not isinstance(parsed, dict) or "passage_id" not in parsed or not isinstance(parsed["passage_id"], list):
        return zero
    try:
        ids = list(set(parsed["passage_id"]))
    except TypeError:  # an unhashable id (a list) makes the authors' set() raise
        return zero
    if not ids:
        return zero  # the authors divide by zero here
    right = sum(1 for i in ids if i in gold)
    precision, recall = right / len(ids), right / len(gold) if gold else 0.0
    f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
    return {"recall": recall, "precision": precision, "f1": f1, "cite_num": float(len(ids))}


class CitationJudge(Judge):
    """L-CiteEval citation F1 x 100 (recall, precision and citations per answer in the details)."""

    name = "l_citeeval_citation"
    scale = (0.0, 100.0)
    version = 1
    OPTIONS = {"type": "object", "additionalProperties": False, "properties": {
        "mode": {"enum": ["nli", "niah", "counting_stars"], "default": "nli",
                 "description": "nli: each sentence's citations judged by the NLI model (QA, summaries, dialogue); "
                                "niah: the needle's passage cited; counting_stars: the cited passage ids."},
        "at_most_citations": {"type": ["integer", "null"], "minimum": 1, "default": 3,
                              "description": "Citations of a sentence taken (the authors' --at_most_citations)."},
        **nli_options(),
    }}

    @staticmethod
    def needs(options: dict[str, Any]) -> list[Any]:
        """The NLI model the nli mode loads (`lceval data fetch` / `pack` get it)."""
        from lceval_plugins.documents.needs import model_need

        return model_need(options["nli_model"]) if options["mode"] == "nli" else []

    def __init__(self, options: "JudgeContext | dict[str, Any]", nli: NLI | None = None,
                 split: Callable[[str], list[str]] | None = None) -> None:
        """`nli` and `split` replace the NLI model and the sentence splitter (tests)."""
        if isinstance(options, JudgeContext):
            options = options.options
        self.options = check_options(self.OPTIONS, options, what=f"judge '{self.name}'", field_prefix="judge.options.")
        o = self.options
        self.nli = nli or HFNLI(o["nli_model"], o["entailment_label"], o["device"], o["batch_size"])
        self.split = split or punkt_sentences

    def identity(self) -> dict[str, Any]:
        o = dict(self.options)
        if o["mode"] != "nli":  # the model does not take part
            for key in ("nli_model", "entailment_label", "device", "batch_size"):
                o.pop(key)
        o.pop("device", None)
        o.pop("batch_size", None)
        return {"judge": self.name, "version": self.version, **o}

    def scores(self, item: JudgeInput) -> dict[str, float] | None:
        answer = item.raw_response if item.raw_response is not None else item.response
        meta, at_most = item.metadata, self.options["at_most_citations"]
        mode = self.options["mode"]
        if mode == "niah":
            return niah_citation(answer, meta.get("gold_passage"), at_most)
        if mode == "counting_stars":
            return counting_stars_citation(answer, list(meta.get("gold_passages") or []))
        passages = meta.get("passages")
        if not isinstance(passages, list):
            raise UserError(f"sample {item.item_id} has no passages in its metadata: the nli mode judges the "
                            "l_citeeval task type's samples", field="judge.options.mode")
        return autoais(answer, passages, self.nli, at_most, self.split)

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        out = []
        for item in items:
            s = self.scores(item)
            if s is None:
                out.append(Judgment(item_id=item.item_id, judge=self.name, score=None, parse_status="missing",
                                    raw="no sentence in the answer: left out, as the authors' compute_autoais does",
                                    details={}))
                continue
            details = {"citation_recall": 100.0 * s["recall"], "citation_precision": 100.0 * s["precision"],
                       "citation_f1": 100.0 * s["f1"], "cite_num": s["cite_num"]}
            out.append(Judgment(item_id=item.item_id, judge=self.name, score=100.0 * s["f1"],
                                raw=json.dumps(details), details=details))
        return out
