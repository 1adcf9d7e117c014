"""The `nolima` task type: NoLiMa (Modarressi et al., 2025; adobe-research/NoLiMa at commit
7532e4eebf095c5540dc256900a63968da58a9d0), a needle whose question shares almost no words with
it, placed in a book at each depth of each length, in the evaluated model's own tokens.

Built as the authors build it, our own code after theirs:

- the tests (`evaluation/run_tests.py`): for each record of the needle set, each question type
  (`onehop`, `twohop`, ...) and each test, the needle and the question with `{1}`, `{2}` ...
  replaced by the test's `input_args` (the question from its template each time, as the authors'
  loop does: only the last placeholder found in it is filled);
- the seed of a (record, book) pair: `base_seed + int(id[:4]) + book index` (books in sorted
  order: the authors' `os.listdir` order is the file system's), `np.random.seed` once per test,
  then per depth of `np.linspace(min, max, intervals)` one character drawn from `character_set`
  (`np.random.choice`) where the needle holds `{CHAR}` (it fills `{CHAR}` in the question too),
  and a distractor depth drawn (`np.random.uniform`) where the record has `distractors`
  (`evaluation/async_evaluate.py`, `evaluate`);
- the placement (`data/book_haystack.py`, `_generate_w_needle_placement`): the book's tokens
  (`add_special_tokens=False`, as lceval's `tokenize`), each decoded on its own; the positions of
  tokens whose text holds a line break (and 0); `p` the first with `(p - shift) / (L + 1) >=
  depth`; the window of L tokens starting `round(L * depth)` before `p`; its text up to and with
  token `p` cut at its last line break, then `" " + needle + "\\n"`, then the rest of the window;
- the distractor (`generate_w_needle_placement`): placed the same way at its own depth, then put
  into the needle's text after the 49 (23 below 500 tokens) characters that preceded it there;
- the prompt: the record's `task_template` or `DEFAULT_TASK_TEMPLATE` (`run_tests.py`) with the
  haystack and question, as the one user message, after the system message "You are a helpful
  assistant" (`async_api_connector.py`, every provider but Claude; `options.system: null` uses
  the record's `system_prompt` instead, as for Claude).

Each length is a split (`--split 4K`, K = 1,000), L haystack tokens without the needle; a sample
per (record, question type, test, book, depth), its gold answers the drawn character (or the
test's `gold_answers`). The data is the user's: the needle sets and books are under the Adobe
Research License (non-commercial research only) and are not shipped (docs/tasks/nolima.md).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lceval.errors import DataMissing, UserError
from lceval.interfaces import TaskContext, TaskType
from lceval.needs import Need
from lceval.types import CONTEXT_SLOT, Conversation, Message, Turn

from lceval_plugins.haystack.depths import linear_depths, spread_order
from lceval_plugins.haystack.lengths import lengths_of
from lceval_plugins.haystack.texts import read_essay_texts
from lceval_plugins.haystack.tokens import Tokens, model_tokens

__all__ = ["DEFAULT_TASK_TEMPLATE", "NolimaTaskType", "Placement", "build_tests", "depths_of", "place"]

DEFAULT_TASK_TEMPLATE = ("You will answer a question based on the following book snippet:\n\n{haystack}\n\nUse the "
                         "information provided in the book snippet to answer the question. Your answer should be short "
                         "and based on either explicitly stated facts or strong, logical inferences.\n\nQuestion: "
                         "{question}\n\n Return only the final answer with no additional explanation or reasoning.")
SYSTEM = "You are a helpful assistant"
LENGTHS = ("250", "500", "1K", "2K", "4K", "8K", "16K", "32K")

OPTIONS: dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "data": {"type": "string", "minLength": 1, "default": "nolima",
                 "description": "The folder of the authors' data (Hugging Face dataset amodaresi/NoLiMa, downloaded "
                                "by the user under its license): as given, else under the data home."},
        "needle_set": {"type": "string", "minLength": 1, "default": "needlesets/needle_set.json",
                       "description": "The needle set, a JSON list of records (relative to `data`)."},
        "haystack": {"type": "string", "minLength": 1, "default": "haystack/rand_shuffle",
                     "description": "The folder of books, one per .txt file, read in sorted order (relative to "
                                    "`data`; any folder of your own text works)."},
        "depth_min": {"type": "number", "minimum": 0, "maximum": 100, "default": 0,
                      "description": "The first depth in percent (document_depth_percent_min)."},
        "depth_max": {"type": "number", "minimum": 0, "maximum": 100, "default": 100,
                      "description": "The last depth in percent (document_depth_percent_max)."},
        "depth_intervals": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 26,
                            "description": "How many depths, np.linspace(min, max, n) (the run configs' 26)."},
        "base_seed": {"type": "integer", "default": 42, "description": "run_tests.py's base_seed."},
        "shift": {"type": "integer", "minimum": 0, "default": 0, "description": "run_tests.py's shift (tokens)."},
        "system": {"type": ["string", "null"], "default": SYSTEM,
                   "description": "The system message (the authors' for every provider but Claude); null: the "
                                  "record's system_prompt, none when it is empty."},
        "question_types": {"type": ["array", "null"], "items": {"type": "string", "minLength": 1}, "minItems": 1,
                           "uniqueItems": True, "default": None,
                           "description": "Only these question types (onehop, twohop, direct ...); null: all."},
    },
}


def depths_of(options: dict[str, Any]) -> list[float]:
    """The authors' depths in percent: `np.linspace(min, max, intervals)` (`needle_depth = i / 100`)."""
    return linear_depths(options["depth_intervals"], options["depth_min"], options["depth_max"])


@dataclass
class Test:
    """One test of `run_tests.py`: a record's question type and test, filled."""

    index: int
    exp_id: str
    test_id: str
    question_type: str
    needle: str
    question: str
    distractor: str | None
    gold: list[str]
    characters: list[str]
    system_prompt: str
    template: str
    reasoning_type: str | None
    seed_base: int

    @property
    def name(self) -> str:
        return f"{self.exp_id}_{self.test_id}_{self.question_type}"


def build_tests(records: Any, base_seed: int, where: Path, question_types: list[str] | None = None) -> list[Test]:
    """run_tests.py's list of tests from a needle set, checked."""
    if not isinstance(records, list) or not records:
        raise UserError("a needle set is a non-empty JSON list of records", file=where, field="options.needle_set")
    tests: list[Test] = []
    for r, rec in enumerate(records):
        what = f"record {r}"
        if not isinstance(rec, dict):
            raise UserError(f"{what} is not an object", file=where, field="options.needle_set")
        for key, kind in (("id", str), ("needle", str), ("questions", dict), ("tests", dict)):
            if not isinstance(rec.get(key), kind):
                raise UserError(f"{what} has no {key} ({kind.__name__})", file=where, field="options.needle_set")
        exp_id = rec["id"]
        if not exp_id[:4].isdigit():
            raise UserError(f"{what}: id {exp_id!r} does not start with 4 digits (its seed)", file=where,
                            field="options.needle_set")
        distractors = rec.get("distractors")
        for qtype, question in rec["questions"].items():
            if question_types is not None and qtype not in question_types:
                continue
            for test_id, test in rec["tests"].items():
                args = test.get("input_args") if isinstance(test, dict) else None
                if not isinstance(args, list):
                    raise UserError(f"{what} test {test_id} has no input_args list", file=where,
                                    field="options.needle_set")
                needle, full_question, full_distractor = rec["needle"], question, None
                for arg_no, arg in enumerate(args):
                    holder = "{" + str(arg_no + 1) + "}"
                    if holder in question:
                        full_question = question.replace(holder, arg)  # from the template, as the authors
                    if holder in needle:
                        needle = needle.replace(holder, arg)
                    if distractors is not None and holder in distractors[qtype]:
                        full_distractor = distractors[qtype].replace(holder, arg)
                gold = test.get("gold_answers", [])
                chars = rec.get("character_set") or []
                if "{CHAR}" in needle and not chars:
                    raise UserError(f"{what}: the needle holds {{CHAR}} and there is no character_set", file=where,
                                    field="options.needle_set")
                if "{CHAR}" not in needle and not gold:
                    raise UserError(f"{what} test {test_id}: no {{CHAR}} in the needle and no gold_answers",
                                    file=where, field="options.needle_set")
                tests.append(Test(len(tests), exp_id, str(test_id), qtype, needle, full_question, full_distractor,
                                  [gold] if isinstance(gold, str) else [str(g) for g in gold],
                                  [str(c) for c in chars], str(rec.get("system_prompt") or ""),
                                  rec.get("task_template") or DEFAULT_TASK_TEMPLATE, rec.get("reasoning_type"),
                                  base_seed + int(exp_id[:4])))
    if not tests:
        raise UserError("the needle set has no test of the chosen question types", file=where,
                        field="options.question_types")
    return tests


@dataclass
class Book:
    """One book, tokenized once: its tokens and where the line breaks are."""

    name: str
    ids: list[int]
    valid: Any  # numpy array of token positions whose text holds "\n" (and 0)
    spans: dict[tuple[int, float, int], tuple[str, str]] = field(default_factory=dict)


def read_book(tokens: Tokens, text: str, name: str) -> Book:
    import numpy as np

    key = ("nolima", hashlib.sha256(text.encode()).hexdigest())
    if key not in tokens.sources:
        ids = tokens.ids(text)
        pieces: dict[int, bool] = {}
        valid = [0]
        for i, t in enumerate(ids):
            if t not in pieces:
                pieces[t] = "\n" in tokens.backend.detokenize([t])
            if pieces[t]:
                valid.append(i)
        tokens.sources[key] = Book(name, ids, np.array(valid))
    return tokens.sources[key]


def _span(book: Book, tokens: Tokens, length: int, depth: float, shift: int) -> tuple[str, str]:
    """(pre, post) of `_generate_w_needle_placement` with static_depth -1: the text is
    pre + " " + needle + "\\n" + post."""
    import numpy as np

    key = (length, depth, shift)
    if key not in book.spans:
        delta = (book.valid - shift) / (length + 1) - depth
        delta[delta < 0] = np.inf
        arg = int(np.argmin(delta))
        point = int(book.valid[arg])
        start = point - int(np.round(length * depth))
        end = start + length
        if start < 0 or end > len(book.ids) or not np.isfinite(delta[arg]):
            raise UserError(f"book {book.name} ({len(book.ids):,} tokens) is too short for {length:,} tokens at depth "
                            f"{100 * depth:g}%", field="options.haystack", hint="Use longer books or shorter lengths.")
        pre = tokens.backend.detokenize(book.ids[start:point + 1])
        pre = pre[:max(pre.rfind("\n"), 0)]
        book.spans[key] = (pre, tokens.backend.detokenize(book.ids[point + 1:end]))
    return book.spans[key]


@dataclass
class Placement:
    text: str
    distractor_depth: float | None = None


def place(book: Book, tokens: Tokens, needle: str, length: int, depth: float, shift: int,
          distractor: str | None = None, dist_depth: float | None = None) -> Placement:
    """`generate_w_needle_placement` (free zone 0.2) with the distractor's depth already drawn."""
    pre, post = _span(book, tokens, length, depth, shift)
    text = pre + " " + needle + "\n" + post
    if distractor is None or dist_depth is None:
        return Placement(text)
    dpre, dpost = _span(book, tokens, length, dist_depth, shift)
    dtext = dpre + " " + distractor + "\n" + dpost
    pos = dtext.index(distractor)
    lo, hi = (max(pos - 50, 0), pos - 1) if length >= 500 else (max(pos - 25, 0), pos - 1)
    anchor = dtext[lo:hi]
    if text.count(anchor) > 1:
        raise UserError(f"book {book.name}: the text before the distractor at {length:,} tokens occurs twice "
                        "(the authors' code stops here too: IndexError)", field="options.haystack")
    loc = text.index(anchor) + (49 if length >= 500 else 23)
    return Placement(text[:loc] + " " + distractor + "\n" + text[loc:], dist_depth)


def draws(test: Test, seed: int, depths: list[float], length: int) -> list[tuple[str | None, float | None]]:
    """Per depth (in order): the character drawn and the distractor's depth, from one
    `np.random.seed(seed)` stream as `evaluate` draws them."""
    import numpy as np

    rng = np.random.RandomState(seed)
    out: list[tuple[str | None, float | None]] = []
    for d in depths:
        depth = d / 100
        char = str(rng.choice(test.characters)) if "{CHAR}" in test.needle else None
        dist = None
        if test.distractor is not None:
            left, right = max(0, depth - 0.4), max(0, 1 - (depth + 0.4))
            dist = rng.uniform(0, left + right)
            dist = depth + 0.2 + (dist - left) if dist > left else dist + 0.2
            if length < 500:
                dist = 0.7 if depth < 0.6 else 0.6 if depth > 0.75 else 0.5
        out.append((char, None if dist is None else float(dist)))
    return out


#: where the authors' data comes from (not redistributable: each user downloads it)
DATA_ADVICE = ("the authors' data under its licence (`huggingface-cli download amodaresi/NoLiMa --repo-type dataset "
               "--local-dir DIR`)")


def _path(value: str, base: Path | None, home: Path, field_: str) -> Path:
    raw = Path(value).expanduser()
    for cand in ([raw] if raw.is_absolute() else [base / raw] if base is not None else [raw, home / raw]):
        if cand.exists():
            return cand
    raise DataMissing(f"no file or folder '{value}'" + (f" in {base}" if base is not None else ""), field=field_,
                      hint=f"Download {DATA_ADVICE}, then `lceval data fetch nolima --from DIR` (or --set "
                           "options.data=DIR).")


class NolimaTaskType(TaskType):
    """NoLiMa: needles with minimal lexical overlap, in books, at each length (a split)."""

    options_schema = OPTIONS
    description = ("NoLiMa (Modarressi et al., 2025; adobe-research/NoLiMa): a needle sharing no words with its "
                   "question, in a book at each depth, in the model's own tokens; lengths are splits")

    def needs(self, ctx: TaskContext) -> list[Need]:
        """The needle set and the haystack in the data folder, when that is under the data home."""
        from lceval.io import DataHomePath

        o = ctx.options
        data = Path(o["data"]).expanduser()
        if data.is_absolute() or data.exists():
            return []
        return [DataHomePath(f"{o['data']}/{o[key]}", ctx.data_home, DATA_ADVICE) for key in ("needle_set", "haystack")]

    def load(self, ctx: TaskContext) -> list[Conversation]:
        o = ctx.options
        lengths = lengths_of(ctx)
        data = _path(o["data"], None, ctx.data_home, "options.data")
        set_path = _path(o["needle_set"], data, ctx.data_home, "options.needle_set")
        ctx.record_file(set_path)
        try:
            records = json.loads(set_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot read the needle set: {exc}", file=set_path, field="options.needle_set") from None
        tests = build_tests(records, int(o["base_seed"]), set_path, o["question_types"])
        hay = _path(o["haystack"], data, ctx.data_home, "options.haystack")
        names = sorted(p.name for p in hay.iterdir() if p.suffix.lower() in (".txt", ".md")) if hay.is_dir() else [hay.name]
        texts, _ = read_essay_texts(str(hay), "text", ctx.data_home, ctx.record_file)
        tokens = model_tokens(ctx)
        books = [read_book(tokens, text, name) for text, name in zip(texts, names)]
        depths = depths_of(o)
        out: list[Conversation] = []
        for label, length in lengths:
            # --limit takes a whole depth sweep of one test and book before the next
            plan = [(t, b, k) for t in range(len(tests)) for b in range(len(books)) for k in spread_order(len(depths))]
            chosen = [key for key in plan if ctx.select_context(self._id(label, tests[key[0]], key[1], key[2]))]
            if ctx.limit is not None:
                chosen = chosen[:ctx.limit]
            by_test: dict[tuple[int, int], list[Any]] = {}
            for t, b, k in sorted(chosen, key=lambda x: (x[1], x[2], x[0])):  # a book's depth together: shared prefixes
                test = tests[t]
                if (t, b) not in by_test:
                    by_test[(t, b)] = draws(test, test.seed_base + b, depths, length)
                char, dist = by_test[(t, b)][k]
                out.append(self._conversation(o, label, length, test, books[b], b, k, depths[k], char, dist, tokens))
            self._check_window(ctx, tokens, [c for c in out if c.turns[0].metadata["length"] == label], label)
        return out

    @staticmethod
    def _id(label: str, test: Test, book: int, k: int) -> str:
        return f"{label}/{test.name}/b{book}/d{k:02d}"

    def _conversation(self, o: dict[str, Any], label: str, length: int, test: Test, book: Book, b: int, k: int,
                      depth: float, char: str | None, dist: float | None, tokens: Tokens) -> Conversation:
        needle = test.needle if char is None else test.needle.replace("{CHAR}", char)
        question = test.question.replace("{CHAR}", char) if char is not None and "{CHAR}" in test.question \
            else test.question
        placed = place(book, tokens, needle, length, depth / 100, int(o["shift"]), test.distractor, dist)
        gold = [char] if char is not None else list(test.gold)
        item_id = self._id(label, test, b, k)
        system = o["system"] if o["system"] is not None else test.system_prompt
        meta: dict[str, Any] = {
            "length": label, "context_tokens_built": length, "book": book.name,
            "depth": int(depth) if float(depth).is_integer() else round(depth, 2),
            "exp_id": test.exp_id, "test_id": test.test_id, "question_type": test.question_type,
            "test": test.name, "references": gold, "needle": needle,
        }
        if test.reasoning_type:
            meta["reasoning_type"] = test.reasoning_type
        if placed.distractor_depth is not None:
            meta["distractor_depth"] = round(100 * placed.distractor_depth, 2)
        user = test.template.format(haystack=CONTEXT_SLOT, question=question)
        turn = Turn(item_id=item_id, user=user, reference=", ".join(gold), question=question, metadata=meta)
        return Conversation(conv_id=item_id, context=placed.text, context_id=item_id, turns=[turn],
                            preamble=[Message("system", system)] if system else [],
                            metadata={"length": label})

    @staticmethod
    def _check_window(ctx: TaskContext, tokens: Tokens, convs: list[Conversation], label: str) -> None:
        """A length whose prompt and answer do not fit the model's window is refused before any
        sample is asked (the authors never cut the haystack)."""
        window = tokens.backend.context_window
        if not window or not convs:
            return
        conv = convs[0]
        generate = int((ctx.spec.get("generation") or {}).get("max_new_tokens") or 0)
        prompt = tokens.prompt(conv.preamble + [Message("user", conv.turns[0].user.replace(CONTEXT_SLOT, conv.context))])
        if prompt + generate > window:
            raise UserError(f"at length {label} the prompt takes {prompt:,} tokens and the answer up to {generate}, "
                            f"past the model's window of {window:,} tokens", field="--split",
                            hint="Choose shorter lengths (--split), or a model (or n_ctx) with a larger window.")
