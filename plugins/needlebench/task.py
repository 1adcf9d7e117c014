"""The `needlebench` task type: NeedleBench V1 (Li et al., 2024; open-compass/opencompass at
commit a5acc4bba3b658f151617a3b393602110fb7a740, opencompass/datasets/needlebench/ and the
configs in opencompass/configs/datasets/needlebench/), our own code after theirs.

Kinds (`options.kind`), each at the lengths of a config (splits, in GPT-4's tokens: the configs'
`tokenizer_model: 'gpt-4'`, tiktoken's cl100k_base, whatever model is tested):

- `single` (origin.py): per repeat k, the haystack file's records shuffled (`random.seed(k)`,
  cumulatively over the repeats), the needle of the language drawn with `random.seed(k)`; the
  records' tokens (each record encoded on its own) up to `length - length_buffer - needle tokens`,
  the needle ("\\n" + needle + "\\n") inserted at `int(tokens x depth / 100)`, decoded;
- `multi_retrieval` (parallel.py): as many distinct needles as depths (`get_unique_entries`:
  the needle file's lines shuffled, unseeded there, `random.Random(seed)` here), reshuffled per
  repeat with `random.seed(k)`, needle i at depth i (positions on the haystack before insertion,
  shifted by the tokens already inserted); the questions joined with "、";
- `multi_reasoning` (multi.py): a record of `multi_needle_reasoning_{en,zh}.json` with
  `derivation_count` = the needle count, drawn with `random.seed(k)`; the first needle at the
  depth, each next one `diff`% of the haystack after the previous (their arithmetic, its
  double shift included);
- `atc` (atc.py, the ancestral-trace challenge): no haystack; `num_needles` names (`random.sample`,
  unseeded there, `random.Random(seed + 1000 x needles + language)` here), a chain of kinship
  sentences shuffled (or in order: `atc_ordered`), and the question; the answer is the eldest.

The prompts are prompts.py's; the answer's reference is kept for the `needlebench` judge:
`needle` and `keyword` (single, atc), `keywords` (multi_retrieval), `answer` (multi_reasoning).
The haystacks and needles are the Hub dataset `opencompass/NeedleBench` (MIT) at a pinned
revision, read from the Hugging Face cache (or `options.data`, a folder with the same files).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from lceval.errors import UserError
from lceval.interfaces import TaskContext, TaskType
from lceval.needs import Need
from lceval.types import CONTEXT_SLOT, Conversation, Turn

from lceval_plugins.haystack.depths import spread_order
from lceval_plugins.haystack.lengths import lengths_of
from lceval_plugins.haystack.needles import insert_at_depth, insert_chain, insert_parallel
from lceval_plugins.haystack.tokens import Encoder, encoder_for

from .prompts import ATC_QUESTION, RELATIONS, WRAPPERS, guide_question, parallel_question

__all__ = ["NeedlebenchTaskType"]

LANGUAGE = {"en": "English", "zh": "Chinese"}
_HUB = {"type": "object", "additionalProperties": False, "required": ["path", "revision"], "properties": {
    "path": {"type": "string", "minLength": 3}, "revision": {"type": "string", "minLength": 1}}}
_PER_LANGUAGE = {"type": "object", "additionalProperties": False,
                 "properties": {"en": {"type": "integer", "minimum": 0}, "zh": {"type": "integer", "minimum": 0}}}

OPTIONS: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["kind"],
    "properties": {
        "kind": {"enum": ["single", "multi_retrieval", "multi_reasoning", "atc"],
                 "description": "single-needle retrieval, multi-needle retrieval, multi-needle reasoning, or the "
                                "ancestral-trace challenge."},
        "languages": {"type": "array", "items": {"enum": ["en", "zh"]}, "minItems": 1, "uniqueItems": True,
                      "default": ["en", "zh"], "description": "English (Paul Graham's essays) and Chinese (zh_finance)."},
        "depths": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 100}, "minItems": 1,
                   "default": [0, 10, 21, 31, 42, 52, 63, 73, 84, 94, 100],
                   "description": "Needle depths in percent (the configs' depths_list; 4k/8k: 20 linear)."},
        "length_buffer": {**_PER_LANGUAGE, "default": {"en": 3000, "zh": 200},
                          "description": "Tokens of a length left out of the haystack, per language (length_buffer)."},
        "repeats": {"type": "integer", "minimum": 1, "default": 10,
                    "description": "Samples per length and depth (num_repeats_per_file; atc: repeats)."},
        "needle_counts": {"type": "array", "items": {"type": "integer", "minimum": 2}, "minItems": 1,
                          "default": [2, 3, 4, 5], "description": "multi_reasoning: needles per sample; atc: names."},
        "diff": {"type": "integer", "minimum": 0, "maximum": 100, "default": 10,
                 "description": "multi_reasoning: percent of the haystack between needles."},
        "atc_ordered": {"type": "boolean", "default": False,
                        "description": "atc: the kinship sentences in chain order (NeedleBenchATCOrderedDataset)."},
        "tokenizer": {"enum": ["gpt-4", "model"], "default": "gpt-4",
                      "description": "gpt-4: lengths in cl100k_base tokens (tiktoken), as the authors count for every "
                                     "model; model: in the evaluated model's tokens (not the authors')."},
        "seed": {"type": "integer", "default": 0,
                 "description": "Seeds the draws the authors leave unseeded (multi_retrieval's needles, atc's names)."},
        "data": {"type": ["string", "null"], "default": None,
                 "description": "A folder holding the dataset's files (null: the Hub dataset below, from the cache)."},
        "hub": {**_HUB, "default": {"path": "opencompass/NeedleBench",
                                    "revision": "bb30238fea08590e7b9b8021a40b51d44b105e55"},
                "description": "The Hub dataset and its pinned commit."},
    },
}
HAYSTACK = {"en": "PaulGrahamEssays.jsonl", "zh": "zh_finance.jsonl"}
REASONING = {"en": "multi_needle_reasoning_en.json", "zh": "multi_needle_reasoning_zh.json"}


class _Data:
    """The dataset's files, from the Hub cache or a folder (each recorded)."""

    def __init__(self, ctx: TaskContext) -> None:
        self.ctx = ctx
        self.folder = None
        if ctx.options["data"] is not None:
            folder = Path(ctx.options["data"]).expanduser()
            self.folder = folder if folder.is_dir() else ctx.data_home / folder
            if not self.folder.is_dir():
                raise UserError(f"no folder '{ctx.options['data']}'", field="options.data")

    def path(self, name: str) -> Path:
        if self.folder is not None:
            path = self.folder / name
            if not path.is_file():
                raise UserError(f"{self.folder} has no {name}", field="options.data")
        else:
            from lceval_plugins.documents.hub import hub_file

            hub = self.ctx.options["hub"]
            path = hub_file(hub["path"], hub["revision"], name)
        self.ctx.record_file(path)
        return path

    def lines(self, name: str) -> list[str]:
        with open(self.path(name), encoding="utf-8") as f:  # as the authors read it: readlines()
            return f.readlines()

    def jsonl(self, name: str) -> list[dict[str, Any]]:
        try:
            return [json.loads(line.strip()) for line in self.lines(name) if line.strip()]
        except ValueError as exc:
            raise UserError(f"{name} is not JSON Lines: {exc}", field="options.data") from None


class _Haystack:
    """A language's records, shuffled per repeat as the authors shuffle them (cumulatively), and
    their tokens concatenated (each record encoded on its own) as far as a length needs."""

    def __init__(self, records: list[dict[str, Any]], enc: Encoder) -> None:
        self.records, self.enc = records, enc
        self.orders: list[list[int]] = []
        self.tokens: dict[int, list[int]] = {}
        self.used: dict[int, int] = {}

    def order(self, k: int) -> list[int]:
        order = list(range(len(self.records))) if not self.orders else list(self.orders[-1])
        while len(self.orders) <= k:
            random.Random(len(self.orders)).shuffle(order)
            self.orders.append(list(order))
        return self.orders[k]

    def take(self, k: int, target: int) -> list[int]:
        have = self.tokens.setdefault(k, [])
        order = self.order(k)
        used = self.used.get(k, 0)
        while len(have) < target and used < len(order):
            text = self.records[order[used]].get("text")
            if not isinstance(text, str):
                raise UserError("a haystack record has no text field", field="options.data")
            have.extend(self.enc.ids(text))
            used += 1
        self.used[k] = used
        return have[:target]


class NeedlebenchTaskType(TaskType):
    """NeedleBench V1: needles in a haystack of GPT-4 tokens at each length (a split)."""

    options_schema = OPTIONS
    description = ("NeedleBench V1 (Li et al., 2024; OpenCompass): single- and multi-needle retrieval, multi-needle "
                   "reasoning and the ancestral-trace challenge; lengths (GPT-4 tokens) are splits")

    def needs(self, ctx: TaskContext) -> list[Need]:
        """The dataset's files it reads (from the Hub at the pinned revision, or the folder
        options.data names in the data home) and, counting in GPT-4's tokens, cl100k_base."""
        from lceval.io import DataHomePath
        from lceval_plugins.documents.needs import HubFile, TiktokenEncoding

        o = ctx.options
        if o["kind"] == "atc":
            names = ["names.json"]
        else:
            names = [HAYSTACK[lang] for lang in o["languages"]]
            names += [REASONING[lang] for lang in o["languages"]] if o["kind"] == "multi_reasoning" else ["needles.jsonl"]
        out: list[Need] = []
        if o["data"] is None:
            out += [HubFile(o["hub"]["path"], o["hub"]["revision"], name) for name in names]
        elif not Path(o["data"]).expanduser().is_absolute():
            out.append(DataHomePath(str(o["data"]), ctx.data_home, "the NeedleBench data folder options.data names"))
        if o["kind"] != "atc" and o["tokenizer"] == "gpt-4":
            out.append(TiktokenEncoding("cl100k_base"))
        return out

    def load(self, ctx: TaskContext) -> list[Conversation]:
        o = ctx.options
        data = _Data(ctx)
        if o["kind"] == "atc":
            return self._atc(ctx, data)
        lengths = lengths_of(ctx)
        enc = encoder_for(ctx, o["tokenizer"])
        out: list[Conversation] = []
        for language in o["languages"]:
            hay = _Haystack(data.jsonl(HAYSTACK[language]), enc)
            units = self._units(ctx, data, language)
            for label, length in lengths:
                plan = [(u, k) for k in range(o["repeats"]) for u in range(len(units))]
                chosen = [p for p in plan if ctx.select_context(self._id(label, language, units[p[0]][0], p[1]))]
                if ctx.limit is not None:
                    chosen = chosen[:ctx.limit]
                for u, k in sorted(chosen, key=lambda p: (p[1], p[0])):
                    out.append(self._sample(ctx, enc, hay, data, language, label, length, units[u], k))
        return out

    def _units(self, ctx: TaskContext, data: _Data, language: str) -> list[tuple[str, dict[str, Any]]]:
        """The (name, facts) of each sample of a repeat, in the order --limit takes them:
        depths spread (ends and middle first), then needle counts."""
        o = ctx.options
        depths = [o["depths"][i] for i in spread_order(len(o["depths"]))]
        if o["kind"] == "single":
            return [(f"d{d}", {"depth": d}) for d in depths]
        if o["kind"] == "multi_reasoning":
            return [(f"n{n}/d{d}", {"depth": d, "num_needles": n}) for d in depths for n in o["needle_counts"]]
        return [("all", {})]

    @staticmethod
    def _id(label: str, language: str, unit: str, k: int) -> str:
        return f"{label}/{language}/{unit}/r{k}"

    def _sample(self, ctx: TaskContext, enc: Encoder, hay: _Haystack, data: _Data, language: str, label: str,
                length: int, unit: tuple[str, dict[str, Any]], k: int) -> Conversation:
        o = ctx.options
        kind = o["kind"]
        name, facts = unit
        meta: dict[str, Any] = {"length": label, "language": language, "repeat": k, **facts}
        budget = length - int(o["length_buffer"].get(language, 0))
        if kind == "single":
            needle, question, keyword = self._needle(data, language, k)
            ids = enc.ids(needle)
            haystack = hay.take(k, max(budget - len(ids), 0))
            context = enc.decode(insert_at_depth(haystack, ids, facts["depth"])[0])
            meta.update(needle=needle, keyword=keyword, references=[keyword])
            reference = keyword
        elif kind == "multi_reasoning":
            rec = self._reasoning(data, language, facts["num_needles"], k)
            needles = ["\n" + d + "\n" for d in rec["derivations"]]
            ids = [enc.ids(n) for n in needles]
            haystack = hay.take(k, max(budget - sum(len(x) for x in ids), 0))
            context = enc.decode(insert_chain(haystack, facts["depth"], ids, int(o["diff"])))
            question = rec["question"]
            meta.update(answer=rec["answer"], references=[rec["answer"]])
            reference = rec["answer"]
        else:
            chosen = self._parallel(ctx, data, language, k)
            needles = ["\n" + e["needle"] + "\n" for e in chosen]
            ids = [enc.ids(n) for n in needles]
            haystack = hay.take(k, max(budget - sum(len(x) for x in ids), 0))
            context = enc.decode(insert_parallel(haystack, list(o["depths"]), ids))
            question = parallel_question(language, [e["retrieval_question"] for e in chosen])
            keywords = [e["arg2"] for e in chosen]
            meta.update(keywords=keywords, depths=list(o["depths"]), references=keywords)
            reference = "*".join(keywords)
        try:
            asked = guide_question(kind, language, question)
        except ValueError as exc:
            raise UserError(f"a {LANGUAGE[language]} question of the needle file: {exc}", field="options.data") from None
        item_id = self._id(label, language, name, k)
        user = WRAPPERS[(kind, language)].replace("{question}", asked)
        turn = Turn(item_id=item_id, user=user, reference=reference, question=asked, metadata=meta)
        return Conversation(conv_id=item_id, context=context, context_id=item_id, turns=[turn],
                            metadata={"length": label, "language": language})

    def _needle(self, data: _Data, language: str, k: int) -> tuple[str, str, str]:
        """origin.py `get_random_line_by_language(k, ...)`: (needle with its newlines, question, keyword)."""
        lines = [r for r in self._needles(data) if r.get("language") == LANGUAGE[language]]
        if not lines:
            raise UserError(f"needles.jsonl has no {LANGUAGE[language]} needle", field="options.data")
        pick = random.Random(k).choice(lines)
        return "\n" + pick["needle"] + "\n", pick["retrieval_question"], pick["arg2"]

    def _needles(self, data: _Data) -> list[dict[str, Any]]:
        if not hasattr(self, "_needle_cache") or self._needle_cache[0] is not data:
            self._needle_cache = (data, data.jsonl("needles.jsonl"))
        return self._needle_cache[1]

    def _reasoning(self, data: _Data, language: str, n: int, k: int) -> dict[str, Any]:
        """multi.py `get_random_needles(k, ..., n)`."""
        cache = self.__dict__.setdefault("_reasoning_cache", {})
        key = (id(data), language)
        if key not in cache:
            try:
                cache[key] = json.loads(data.path(REASONING[language]).read_text(encoding="utf-8"))
            except ValueError as exc:
                raise UserError(f"{REASONING[language]} is not JSON: {exc}", field="options.data") from None
        matching = [r for r in cache[key] if r.get("derivation_count") == n]
        if not matching:
            raise UserError(f"{REASONING[language]} has no record of {n} needles", field="options.needle_counts")
        return random.Random(k).choice(matching)

    def _parallel(self, ctx: TaskContext, data: _Data, language: str, k: int) -> list[dict[str, Any]]:
        """parallel.py: `get_unique_entries(len(depths))` once, reshuffled with `random.seed(k)`."""
        cache = self.__dict__.setdefault("_parallel_cache", {})
        key = (id(data), language, ctx.options["seed"], len(ctx.options["depths"]))
        if key not in cache:
            lines = data.lines("needles.jsonl")
            random.Random(ctx.options["seed"]).shuffle(lines)
            seen1, seen2, seen12, found = set(), set(), set(), []
            for line in lines:
                try:
                    entry = json.loads(line.strip())
                except ValueError:
                    continue
                if entry.get("language") != LANGUAGE[language]:
                    continue
                a1, a2 = entry.get("arg1", ""), entry.get("arg2", "")
                if a1 not in seen1 and a2 not in seen2 and (a1, a2) not in seen12:
                    seen1.add(a1), seen2.add(a2), seen12.add((a1, a2))
                    found.append(entry)
                if len(found) == len(ctx.options["depths"]):
                    break
            if len(found) < len(ctx.options["depths"]):
                raise UserError(f"needles.jsonl has {len(found)} distinct {LANGUAGE[language]} needles for "
                                f"{len(ctx.options['depths'])} depths", field="options.depths")
            cache[key] = found
        chosen = list(cache[key])
        random.Random(k).shuffle(chosen)
        return chosen

    def _atc(self, ctx: TaskContext, data: _Data) -> list[Conversation]:
        """atc.py: one sample per repeat of each needle count and language."""
        o = ctx.options
        if ctx.splits:
            raise UserError("the ancestral-trace challenge has no lengths (splits)", field="--split")
        try:
            names_by = json.loads(data.path("names.json").read_text(encoding="utf-8"))
        except ValueError as exc:
            raise UserError(f"names.json is not JSON: {exc}", field="options.data") from None
        out = []
        for language in o["languages"]:
            names_all = names_by[LANGUAGE[language]].split(",")
            terms, templates = RELATIONS[language]
            for n in o["needle_counts"]:
                if n > len(names_all):
                    raise UserError(f"names.json has {len(names_all)} {LANGUAGE[language]} names for {n} needles",
                                    field="options.needle_counts")
                rng = random.Random(o["seed"] + 1000 * n + (1 if language == "zh" else 0))
                for k in range(o["repeats"]):
                    names = rng.sample(names_all, n)
                    story = ""
                    for i in range(len(names) - 1):
                        template, term = rng.choice(templates), rng.choice(terms)
                        story += template.format(A=names[i], B=names[i + 1], relationship=term) + "*"
                    fragments = story.split("*")
                    if not o["atc_ordered"]:
                        rng.shuffle(fragments)
                    item_id = f"{language}/n{n}/r{k}"
                    if not ctx.select_context(item_id):
                        continue
                    question = ATC_QUESTION[language].replace("{last}", names[-1])
                    meta = {"language": language, "num_needles": n, "repeat": k, "needle": names[0],
                            "keyword": names[0], "references": [names[0]]}
                    turn = Turn(item_id=item_id, user=CONTEXT_SLOT + " " + question, reference=names[0],
                                question=question.strip(), metadata=meta)
                    out.append(Conversation(conv_id=item_id, context="".join(fragments), context_id=item_id,
                                            turns=[turn], metadata={"language": language}))
        if ctx.limit is not None:
            out = [c for c in out if c.turns[0].metadata["repeat"] < ctx.limit]
        return out
