"""HELMET's long-document QA and summarization loaders (data.py at princeton-nlp/HELMET commit
4526dfb): NarrativeQA (`load_narrativeqa`), InfiniteBench En.QA, En.MC and En.Sum
(`load_infbench`) and Multi-LexSum (`load_multi_lexsum`).

Every length reads truncations of the same long documents: documents shorter than a floor in
Llama-2 tokens are dropped (NarrativeQA > 131,072, the others >= 65,536), then each document is
cut to the length's number of Llama-2 tokens (the dataset name's suffix, e.g. 130772 at 128k)
with the marker " ... [the rest of the text is omitted]" (`truncate_llama2`), so every model
sees the same text; the run-time cut in the model's own tokens then rarely triggers.

Departures, said in docs/tasks/helmet.md: NarrativeQA's and Multi-LexSum's two demos are
`train.shuffle()` without a seed in the authors' code (different and unrecorded per row); here
they are drawn from the demo rows with a seed of the document's id, so a document's questions
share one prompt prefix and are prefilled once.
"""

from __future__ import annotations

from typing import Any

from lceval.errors import UserError

from .items import Inputs, Item, need
from .text import hashed_seed, permutation

POSTFIX = " ... [the rest of the text is omitted]"

_TOKENIZERS: dict[str, Any] = {}


def llama2(name: str) -> Any:
    """The tokenizer the authors measure and cut documents with (a fast tokenizer, for its
    offsets), from the local Hugging Face cache or a folder."""
    if name not in _TOKENIZERS:
        try:
            from transformers import AutoTokenizer

            _TOKENIZERS[name] = AutoTokenizer.from_pretrained(name)
        except Exception as exc:  # noqa: BLE001 - any failure to load is the user's setup
            raise UserError(f"cannot load the tokenizer {name!r} that HELMET measures documents with "
                            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})",
                            field="options.pretruncate_tokenizer",
                            hint="HELMET uses meta-llama/Llama-2-7b-hf (gated: accept its license and download it "
                                 "once, or name a copy with the same vocabulary or a local folder).") from None
    return _TOKENIZERS[name]


class Pretruncate:
    """data.py `filter_length` and `truncate_llama2` with one tokenizer, each document measured once."""

    def __init__(self, name: str, postfix: str = POSTFIX) -> None:
        self.tok = llama2(name)
        self.postfix = postfix
        self.sep = len(self.tok(postfix)["input_ids"])
        self._lengths: dict[str, int] = {}

    def length(self, text: str) -> int:
        """`len(tokenizer(text)["input_ids"])` (special tokens included, as the authors count)."""
        if text not in self._lengths:
            self._lengths[text] = len(self.tok(text)["input_ids"])
        return self._lengths[text]

    def cut(self, text: str, max_length: int) -> str:
        """`truncate_llama2`: a document over `max_length` tokens keeps the text up to the end of
        token `max_length - len(marker tokens)` (the BOS token counted), then the marker."""
        if self.length(text) <= max_length:
            return text
        offsets = self.tok(text, return_offsets_mapping=True)["offset_mapping"]
        return text[:offsets[max_length - self.sep][1]] + self.postfix


def _demo_rows(inp: Inputs, shots: int, doc_id: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`shots` demo rows drawn with the document's seed (see the module's docstring)."""
    return [rows[i] for i in permutation(len(rows), hashed_seed(doc_id))[:shots]]


def load_narrativeqa(inp: Inputs) -> list[Item]:
    """`load_narrativeqa`: the test rows in `shuffle(seed=42)` order, those whose story has over
    131,072 Llama-2 tokens, the story cut to k tokens with the marker, the first 100."""
    opts, shots = inp.options, inp.options["shots"]
    pre = Pretruncate(opts["pretruncate_tokenizer"])
    train = inp.open_rows("demo_source")[0] if shots > 0 else []
    out: list[Item] = []
    for index in permutation(len(inp.rows), opts["seed"]):
        row = inp.rows[index]
        need(row, ["document", "question", "answers"], inp.label, index)
        text, doc_id = row["document"]["text"], str(row["document"].get("id", hashed_seed(row["document"]["text"])))
        if pre.length(text) <= opts["min_tokens"]:
            continue
        demo = ""
        if shots > 0:
            pairs = [f"Question: {d['question']['text']}\nAnswer: {d['answers'][0]['text']}"
                     for d in _demo_rows(inp, shots, doc_id, train)]
            demo = ("For example:\n\n" + "\n\n".join(pairs)
                    + "\n\nNow, use the following story to answer the question:\n\n")
        question = row["question"]["text"]
        answers = [a["text"] for a in row["answers"]]
        out.append(Item(key=str(index), context=pre.cut(text, inp.k), values={"question": question, "demo": demo},
                        answers=answers, question=question, context_key=doc_id,
                        metadata={"question_key": str(index), "document": doc_id}))
        if opts["max_test_samples"] is not None and len(out) >= opts["max_test_samples"]:
            break
    return out


def _infbench_row(row: dict[str, Any], kind: str) -> dict[str, Any]:
    """`load_infbench` `process_example`: the question; for choice, the options as
    "A. ...\\nB. ..." and the answer as [letter, "letter. text"]."""
    out = {**row, "question": row["input"], "demo": ""}
    if kind == "choice":
        options = row["options"]
        letter = chr(ord("A") + options.index(row["answer"][0]))
        out["options"] = "A. {}\nB. {}\nC. {}\nD. {}".format(*options)
        out["answer"] = [letter, f"{letter}. {row['answer'][0]}"]
    return out


def load_infbench(inp: Inputs) -> list[Item]:
    """`load_infbench` (qa_eng, choice_eng, sum_eng by `options.variant`): each row's demos are
    `shots` other rows of the set (`filter(id != row id).shuffle(seed=42)`, the story replaced by
    "[story text]"); rows with >= 65,536 Llama-2 tokens, cut to k tokens with the marker, 100 of
    `shuffle(seed=42)`. Summaries also carry their key points (`keypoints_source`, by id) for
    the judge."""
    opts, shots, kind = inp.options, inp.options["shots"], inp.options["variant"]
    if kind not in ("qa", "choice", "sum"):
        raise UserError("an infbench spec's options.variant is qa, choice or sum", field="options.variant")
    pre = Pretruncate(opts["pretruncate_tokenizer"])
    rows = [_infbench_row(r, kind) for r in inp.rows]
    keypoints: dict[Any, Any] = {}
    if kind == "sum" and opts["keypoints_source"] is not None:
        keypoints = {r["id"]: r["keypoints"] for r in inp.open_rows("keypoints_source")[0]}
    kept = []
    for index, row in enumerate(rows):
        need(row, ["id", "context", "input", "answer"], inp.label, index)
        demo = ""
        if shots > 0:
            others = [x for x in rows if x["id"] != row["id"]]
            chosen = [others[i] for i in permutation(len(others), opts["seed"])[:shots]]
            if kind == "qa":
                blocks = [f"[story text]\nQuestion: {x['question']}\nAnswer: {x['answer'][0]}" for x in chosen]
            elif kind == "choice":
                blocks = [f"[story text]\nQuestion: {x['question']}\nOptions:\n{x['options']}\nAnswer: {x['answer'][0]}"
                          for x in chosen]
            else:
                blocks = [f"[story text]\nSummary: {x['answer'][0].strip()}" for x in chosen]
            demo = "For example:\n\n" + "\n\n".join(blocks) + "\n\nNow, read the following story:\n\n"
        if pre.length(row["context"]) < opts["min_tokens"]:
            continue
        kept.append((index, {**row, "demo": demo}))
    if opts["max_test_samples"] is not None:
        kept = [kept[i] for i in permutation(len(kept), opts["seed"])[:min(opts["max_test_samples"], len(kept))]]
    out = []
    for index, row in kept:
        meta: dict[str, Any] = {"question_key": str(row["id"]), "id": row["id"]}
        if kind == "sum":
            meta["expert_summary"] = row["answer"][0]
            if keypoints:
                if row["id"] not in keypoints:
                    raise UserError(f"no key points for row id {row['id']!r}", field="options.keypoints_source")
                meta["keypoints"] = list(keypoints[row["id"]])
        values = {k: v for k, v in row.items() if k != "context"}
        out.append(Item(key=str(row["id"]), context=pre.cut(row["context"], inp.k), values=values,
                        answers=[str(a) for a in row["answer"]], question=str(row["question"]),
                        context_key=str(hashed_seed(row["context"])), metadata=meta))
    return out


def load_multi_lexsum(inp: Inputs) -> list[Item]:
    """`load_multi_lexsum`: validation cases with a short summary and >= 65,536 Llama-2 tokens of
    sources (joined by blank lines), cut to k tokens with the marker; 100 of `shuffle(seed=42)`
    when more. Its key points (`summary/short_keypoints`) and long summary go to the judge."""
    opts, shots = inp.options, inp.options["shots"]
    pre = Pretruncate(opts["pretruncate_tokenizer"])
    train = [r for r in inp.open_rows("demo_source")[0] if r.get("summary/short") is not None] if shots > 0 else []
    kept = []
    for index, row in enumerate(inp.rows):
        need(row, ["id", "sources", "summary/short"], inp.label, index)
        if row["summary/short"] is None:
            continue
        context = "\n\n".join(row["sources"])
        if pre.length(context) < opts["min_tokens"]:
            continue
        kept.append((index, row, context))
    if opts["max_test_samples"] is not None and len(kept) > opts["max_test_samples"]:
        kept = [kept[i] for i in permutation(len(kept), opts["seed"])[:opts["max_test_samples"]]]
    out = []
    for index, row, context in kept:
        demo = ""
        if shots > 0:
            summaries = "\n\n".join("Summary: {}".format(d["summary/short"])
                                    for d in _demo_rows(inp, shots, str(row["id"]), train))
            demo = ("Example summaries:\n\n" + summaries
                    + "\n\nNow, write a summary of the following legal documents.\n")
        meta: dict[str, Any] = {"question_key": str(row["id"]), "id": row["id"]}
        if row.get("summary/long") is not None:
            meta["expert_summary"] = row["summary/long"]
        if row.get("summary/short_keypoints") is not None:
            meta["keypoints"] = list(row["summary/short_keypoints"])
        out.append(Item(key=str(row["id"]), context=pre.cut(context, inp.k),
                        values={"demo": demo, "question": ""}, answers=[row["summary/short"]], question="",
                        metadata=meta))
    return out
