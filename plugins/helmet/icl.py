"""HELMET's many-shot in-context learning (data.py `load_icl`, princeton-nlp/HELMET at commit
4526dfb): TREC coarse and fine, NLU, BANKING77 and CLINC150, each test text classified after
thousands of labelled examples.

What the authors' code does, reproduced exactly:
- the test set: `test.shuffle(seed=42)` then `balance_labels(test, 500, 42)` (NLU first splits its
  one train split 90/10 with `train_test_split(test_size=0.1, seed=42)`);
- each test text gets its own demos, `balance_labels(train, shots, local_seed)` with
  `local_seed = (int(sha256(text)) + 42) % 2**31`: rounds of one example per label, each round in
  a random order, cut at `shots`;
- and its own label names: the labels are mapped to integers by a random permutation
  (`random.seed(local_seed); random.shuffle(list(range(num_labels)))`), so the model must learn
  the mapping from the demos (the names never appear);
- the demos are `{text}\\nlabel: {label}` blocks joined by blank lines: the context.
"""

from __future__ import annotations

import math
import random
from typing import Any

from lceval.errors import UserError

from .items import Inputs, Item, need
from .text import hashed_seed, permutation


def balance_labels(rows: list[dict[str, Any]], label_field: str, shots: int, seed: int) -> list[dict[str, Any]]:
    """data.py `balance_labels`: `ceil(shots / labels)` rounds, each label's examples drawn
    without replacement (with replacement across rounds once a label runs out), each round
    shuffled, the rounds concatenated and cut at `shots`."""
    rand = random.Random(seed)
    by_label: dict[Any, list[dict[str, Any]]] = {}
    for x in rows:
        by_label.setdefault(x[label_field], []).append(x)
    rounds = math.ceil(shots / len(by_label))
    new: list[list[dict[str, Any]]] = [[] for _ in range(rounds)]
    for samples in by_label.values():
        indices = rand.sample(range(len(samples)), rounds % len(samples))
        while len(indices) < rounds:
            indices += rand.sample(range(len(samples)), min(rounds - len(indices), len(samples)))
        for i, idx in enumerate(indices):
            new[i].append(samples[idx])
    for group in new:
        rand.shuffle(group)
    return [item for group in new for item in group][:shots]


def train_test_split(rows: list[dict[str, Any]], test_size: float, seed: int) -> tuple[list, list]:
    """`datasets.Dataset.train_test_split(test_size, seed)`: a permutation, its first
    ceil(test_size * n) rows the test split, the rest the train split."""
    n_test = math.ceil(test_size * len(rows))
    order = permutation(len(rows), seed)
    return [rows[i] for i in order[n_test:]], [rows[i] for i in order[:n_test]]


def load_icl(inp: Inputs) -> list[Item]:
    """The test items of one ICL dataset at `k` shots (the length's size)."""
    opts, shots = inp.options, inp.k
    text_field, label_field, num_labels, seed = opts["text_field"], opts["label_field"], opts["num_labels"], opts["seed"]
    if num_labels is None:
        raise UserError("an icl spec names its number of labels (options.num_labels)", field="options.num_labels")
    train, _ = inp.open_rows("train_source")
    if opts["test_split"] is not None:
        train, test = train_test_split(train, opts["test_split"], seed)
    else:
        test = inp.rows
    for name, rows in (("train", train), ("test", test)):
        for index, row in enumerate(rows[:1]):
            need(row, [text_field, label_field], f"the {name} rows", index)
    limit = opts["max_test_samples"]
    if limit is not None and len(test) > limit:
        test = [test[i] for i in permutation(len(test), seed)]
        test = balance_labels(test, label_field, limit, seed)
    out = []
    for position, row in enumerate(test):
        text = row[text_field]
        local_seed = hashed_seed(text, seed)
        demos = balance_labels(train, label_field, shots, local_seed)
        mapping = list(range(num_labels))
        random.Random(local_seed).shuffle(mapping)
        context = "\n\n".join(f"{d[text_field]}\nlabel: {mapping[int(d[label_field])]}" for d in demos)
        answer = str(mapping[int(row[label_field])])
        meta = {"label": int(row[label_field]), "question_key": str(position)}
        out.append(Item(key=str(position), context=context, values={"question": text}, answers=[answer],
                        question=text, metadata=meta))
    return out
