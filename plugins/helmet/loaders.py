"""HELMET's loaders for its prepared files (data.tar.gz of the Hub dataset princeton-nlp/HELMET):
synthetic recall (JSON KV, the authors' RULER needle files), RAG over KILT passages (NQ,
TriviaQA, HotpotQA, PopQA), MS MARCO re-ranking and ALCE citation (ASQA, QAMPARI).

Each follows the loader of the authors' data.py (princeton-nlp/HELMET at commit 4526dfb, cited
per function): which rows are scored (their seeded sampling, reproduced exactly: Python's
`random` and `datasets`' NumPy permutations), which demonstrations each row gets (their hashed
per-question seeds) and the fields the templates are filled with. The templates themselves are
in the specs, byte for byte.
"""

from __future__ import annotations

import math
import random
from typing import Any

from lceval.errors import UserError

from .items import Inputs, Item, need
from .text import fill, flat_answers, hashed_seed, permutation

PASSAGE = "Document (Title: {title}): {text}"  # data.py load_qa passage_template
KILT_DEMO = "{documents}\n\nQuestion: {question}\nAnswer: {answer}"  # data.py load_qa demo_template


def shuffled_sample(rows: list[dict[str, Any]], seed: int, limit: int | None) -> list[tuple[int, dict[str, Any]]]:
    """`data.shuffle(seed).select(range(min(limit, len)))` with each row's index in the file."""
    if limit is None:
        return list(enumerate(rows))
    order = permutation(len(rows), seed)[:min(limit, len(rows))]
    return [(i, rows[i]) for i in order]


def copy_metadata(row: dict[str, Any], names: list[str]) -> dict[str, Any]:
    return {n: row[n] for n in names if n in row and isinstance(row[n], (str, int, float, bool))}


# -- recall ----------------------------------------------------------------------------------------


def load_json_kv(inp: Inputs) -> list[Item]:
    """data.py `load_json_kv`: each row's first `shots` demo pairs as "Key: ...\\nCorresponding
    value: ..." blocks; 100 rows of `shuffle(seed=42)`."""
    opts, out = inp.options, []
    shots = opts["shots"]
    for index, row in shuffled_sample(inp.rows, opts["seed"], opts["max_test_samples"]):
        need(row, ["context", "question", "answer", "demos"], inp.label, index)
        demos = "\n\n".join(f"Key: {key}\nCorresponding value: {value}" for key, value in row["demos"][:shots])
        demos += "\n\n" if shots > 0 else ""
        values = {**row, "demos": demos, "k": row.get("num_kvs", "")}
        out.append(Item(key=str(index), context=row["context"], values=values, answers=[str(row["answer"])],
                        question=str(row["question"]), metadata=copy_metadata(row, opts["metadata"])))
    return out


def load_ruler(inp: Inputs) -> list[Item]:
    """data.py `load_ruler` over the authors' RULER files (validation_<length>.jsonl): `question`
    is the row's query, `example` its example (none for the needle tasks), the answers its
    `answer` or `outputs`; 100 rows of `shuffle(seed=42)`."""
    opts, out = inp.options, []
    for index, row in shuffled_sample(inp.rows, opts["seed"], opts["max_test_samples"]):
        need(row, ["context"], inp.label, index)
        question = row.get("query", row.get("question", ""))
        example = row["example"] + "\n\n" if row.get("example") else ""
        answers = row["answer"] if "answer" in row else row.get("outputs")
        if answers is None:
            raise UserError(f"{inp.label} row {index} has neither 'answer' nor 'outputs'",
                            field="options.source.data_files")
        values = {**row, "question": question, "example": example}
        out.append(Item(key=str(index), context=row["context"], values=values, answers=flat_answers(answers),
                        question=str(question), metadata=copy_metadata(row, opts["metadata"])))
    return out


# -- RAG -------------------------------------------------------------------------------------------


def _popular(rows: list[dict[str, Any]], threshold: float | None) -> list[dict[str, Any]]:
    """data.py load_qa: PopQA rows with log10(s_pop) < threshold."""
    if threshold is None:
        return rows
    return [r for r in rows if math.log10(r["s_pop"]) < threshold]


def _first_per_key(rows: list[dict[str, Any]], order: list[int], key: str, n: int) -> list[dict[str, Any]]:
    """data.py `drop_duplicates(demos.shuffle(seed=h), key).select(range(n))`."""
    seen, out = set(), []
    for i in order:
        if rows[i][key] in seen:
            continue
        seen.add(rows[i][key])
        out.append(rows[i])
        if len(out) == n:
            break
    return out


def load_kilt(inp: Inputs) -> list[Item]:
    """data.py `load_qa`: PopQA filtered by popularity; 100 questions drawn by
    `random.seed(42); random.sample(sorted(keys), 100)` (`id`, else the question, is the key),
    every depth copy of a drawn question kept in file order; 2 demos per question from the demo
    file (k=3 passages each), shuffled with the question's sha256 seed, first one per key (PopQA:
    the question itself left out of its demo pool)."""
    opts = inp.options
    threshold = opts["popularity_threshold"]
    rows = _popular(inp.rows, threshold)
    if not rows:
        raise UserError(f"no row of {inp.label} is left to score", field="options.source.data_files")
    key = "id" if "id" in rows[0] else "question"
    if opts["max_test_samples"] is not None:
        keys = sorted({r[key] for r in rows})
        chosen = set(random.Random(opts["seed"]).sample(keys, min(opts["max_test_samples"], len(keys))))
        picked = [(i, r) for i, r in enumerate(rows) if r[key] in chosen]
    else:
        picked = list(enumerate(rows))
    demos: list[dict[str, Any]] = []
    if opts["shots"] > 0:
        demos, _ = inp.open_rows("demo_source")
        demos = _popular(demos, threshold)
    per_pool = opts["demo_pool"] == "others"
    out = []
    for index, row in picked:
        need(row, ["question", "answers", "ctxs"], inp.label, index)
        demo_text = ""
        if opts["shots"] > 0:
            pool = [d for d in demos if d[key] != row[key]] if per_pool else demos
            chosen_demos = _first_per_key(pool, permutation(len(pool), hashed_seed(str(row[key]))), key, opts["shots"])
            demo_text = "\n\n".join(
                fill(KILT_DEMO, {**d, "documents": "\n\n".join(fill(PASSAGE, c, "passage") for c in d["ctxs"]),
                                 "answer": d["answers"][0]}, "demo") for d in chosen_demos) + "\n\n"
        context = "\n\n".join(fill(PASSAGE, c, "passage") for c in row["ctxs"]) if row["ctxs"] else ""
        meta = {**copy_metadata(row, opts["metadata"]), "question_key": str(row[key])}
        out.append(Item(key=str(index), context=context, values={**row, "demos": demo_text},
                        answers=flat_answers(row["answers"]), question=str(row["question"]), metadata=meta))
    return out


# -- re-ranking ------------------------------------------------------------------------------------


def _ranking(ctxs: list[dict[str, Any]]) -> str:
    """The gold ranking: ids by label, highest first (Python's stable sort)."""
    return " > ".join(str(c["id"]) for c in sorted(ctxs, key=lambda c: c["label"], reverse=True))


def load_msmarco(inp: Inputs) -> list[Item]:
    """data.py `load_msmarco_rerank`: 100 qids by `random.seed(42); random.sample(sorted(qids))`,
    every row of a drawn qid kept; passages as `[ID: id] Document: text` (with `(Title: ...)`
    when the row's passages have titles); 2 demos from the k=10 file, other queries only
    (the test qids left out of the pool once when it is over twice the test rows, else each
    row's own qid), shuffled by the qid's sha256 seed, first one per qid, each with its gold
    ranking. The row's graded labels are its qrels (`metadata.qrels`)."""
    opts = inp.options
    rows = inp.rows
    if opts["max_test_samples"] is not None:
        key = "qid" if "qid" in rows[0] else "query"
        keys = sorted({r[key] for r in rows})
        chosen = set(random.Random(opts["seed"]).sample(keys, min(opts["max_test_samples"], len(keys))))
        picked = [(i, r) for i, r in enumerate(rows) if r[key] in chosen]
    else:
        picked = list(enumerate(rows))
    demos: list[dict[str, Any]] = []
    filtered = False
    if opts["shots"] > 0:
        demos, _ = inp.open_rows("demo_source")
        if len(demos) > 2 * len(picked):
            qids = {r["qid"] for _, r in picked}
            demos = [d for d in demos if d["qid"] not in qids]
            filtered = True
    out = []
    for index, row in picked:
        need(row, ["qid", "query", "ctxs"], inp.label, index)
        template = "[ID: {id}] Document (Title: {title}): {text}" if "title" in row["ctxs"][0] else \
            "[ID: {id}] Document: {text}"
        context = "\n\n".join(fill(template, c, "passage") for c in row["ctxs"])
        demo_text = ""
        if opts["shots"] > 0:
            pool = demos if filtered else [d for d in demos if d["qid"] != row["qid"]]
            for d in _first_per_key(pool, permutation(len(pool), hashed_seed(str(row["qid"]))), "qid", opts["shots"]):
                demo_text += ("\n\n".join(fill(template, c, "passage") for c in d["ctxs"])
                              + f"\n\nQuery: {d['query']}\nRanking: {_ranking(d['ctxs'])}" + "\n\n")
        qrels = {str(c["id"]): int(c["label"]) for c in row["ctxs"]}
        meta = {**copy_metadata(row, opts["metadata"]), "qid": str(row["qid"]), "qrels": qrels,
                "question_key": str(row["qid"])}
        values = {**row, "question": row["query"], "demos": demo_text}
        out.append(Item(key=str(index), context=context, values=values, answers=[_ranking(row["ctxs"])],
                        question=str(row["query"]), metadata=meta))
    return out


# -- citation --------------------------------------------------------------------------------------


def load_alce(inp: Inputs) -> list[Item]:
    """data.py `load_alce` (+ eval.py's sampling): the first k of each question's 2,000 retrieved
    documents as `Document [i](Title: ...): ...`; each row, in file order, draws its `shots` demos
    with the global `random` seeded 42 (`random.sample(demos, shots)`: the prompt file's 4 demos,
    each with all its documents); then 100 rows of `shuffle(seed=42)`. The shown documents and
    the gold answers go to the metrics (`metadata`)."""
    opts, k = inp.options, inp.k
    prompts = inp.read_json("demo_file")
    for name in ("instruction", "demo_prompt", "doc_prompt", "demos"):
        if name not in prompts:
            raise UserError(f"the prompt file has no {name!r} (HELMET's prompts/*_revised.json have it)",
                            field="options.demo_file")
    instruction, demo_prompt, doc_prompt = prompts["instruction"], prompts["demo_prompt"], prompts["doc_prompt"]
    rng = random.Random(opts["seed"])
    prepared = []
    for index, row in enumerate(inp.rows):
        need(row, ["question", "docs"], inp.label, index)
        chosen = rng.sample(prompts["demos"], opts["shots"])
        demo_text = "\n\n\n".join(
            fill(demo_prompt, {**demo, "instruction": instruction,
                               "context": "\n\n".join(fill(doc_prompt, {**d, "ID": i + 1}, "doc_prompt")
                                                      for i, d in enumerate(demo["docs"]))}, "demo_prompt")
            for demo in chosen)
        if opts["shots"] > 0:
            demo_text += "\n\n\n"
        prepared.append((index, row, demo_text))
    if opts["max_test_samples"] is not None:
        order = permutation(len(prepared), opts["seed"])[:min(opts["max_test_samples"], len(prepared))]
        prepared = [prepared[i] for i in order]
    out = []
    for index, row, demo_text in prepared:
        shown = row["docs"][:k]
        context = "\n\n".join(fill(doc_prompt, {**d, "ID": i + 1}, "doc_prompt") for i, d in enumerate(shown))
        meta: dict[str, Any] = {**copy_metadata(row, opts["metadata"]),
                                "docs": [{"title": d.get("title", ""), "text": d.get("text", "")} for d in shown],
                                "docs_total": len(row["docs"])}
        if len(row["docs"]) > len(shown) and inp.where.get("data_files"):
            meta["retrieved"] = {**inp.where, "row": index}  # where the citation check finds the rest
        if "qa_pairs" in row and row["qa_pairs"] is not None:
            meta["qa_pairs"] = [{"short_answers": list(p["short_answers"])} for p in row["qa_pairs"]]
        if "answers" in row:
            meta["answer_groups"] = [list(a) if isinstance(a, list) else [a] for a in row["answers"]]
        if isinstance(row.get("answer"), str):
            answers = [row["answer"]]
        else:
            answers = flat_answers(row.get("answers") or [""])
        values = {**row, "demo_text": demo_text, "instruction": instruction}
        out.append(Item(key=str(index), context=context, values=values, answers=answers,
                        question=str(row["question"]), metadata=meta))
    return out
