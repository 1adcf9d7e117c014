"""The `helmet` task type: one HELMET dataset (Yen et al., 2025; princeton-nlp/HELMET at commit
4526dfb) at each of its input lengths, asked and cut as the authors' code asks and cuts.

A length is a split of the task (`splits: [8k, 16k, 32k, 64k, 128k]`, `--split 128k` chooses one);
`options.lengths` gives each its size parameter `k` (passages, key-value pairs, documents, shots
or Llama-2 tokens, the suffix of the authors' file or dataset names), substituted for `{k}` in
the source's file names. The loader (`options.loader`) reads the rows and does what the
authors' data.py does for that dataset (loaders.py, icl.py, longdoc.py); the prompt is their
`user_template` filled with the row's fields (Python format strings, byte for byte in the specs).

How it is sent (`options.style`):
- `chat` (default): the filled `user_template` is the one user message, no system message, through
  the model's chat template - the authors' `use_chat_template: True`, which they use for every
  dataset of an API model and for Cite, LongQA and Summ of an open instruction-tuned one;
- `completion`: `user_template` + separator + `system_template` (the answer prefix, e.g.
  "Answer:"), and the metrics see the prefix prepended to the answer (eval.py does) - the
  authors' `use_chat_template: False` for Recall, RAG, Re-rank and ICL of open models, faithful
  with a backend given a pass-through chat template (docs/tasks/helmet.md).

The cut (model_utils.py `tokenize`): when the prompt has more than the length less the answer's
`max_new_tokens` tokens of the evaluated model, the context loses its last tokens, no marker, so
that it fits; instructions, demos and question are never cut. Done here with the model's own
tokenizer (`ctx.model_tokenizer()`), once per context; questions sharing a document share the
smallest cut. A model whose window is below the length is not cut: the engine skips it
(`context.policy: skip`), as the authors never run a length past a model's window.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from lceval.errors import UserError
from lceval.interfaces import ModelBackend, TaskContext, TaskType
from lceval.needs import Need
from lceval.tokens import SAFETY_MARGIN
from lceval.types import CONTEXT_SLOT, Conversation, Message, Turn

from lceval_plugins.documents.records import iter_rows
from lceval_plugins.documents.schema import SOURCE
from lceval_plugins.documents.source import open_source

from .icl import load_icl
from .items import Inputs, Item
from .loaders import load_alce, load_json_kv, load_kilt, load_msmarco, load_ruler
from .longdoc import load_infbench, load_multi_lexsum, load_narrativeqa
from .text import fill

__all__ = ["LENGTHS", "LOADERS", "HelmetTaskType", "tokens_of"]

#: scripts/generate_configs.py `lengths_mapping`
LENGTHS = {"4k": 4096, "8k": 8192, "16k": 16384, "32k": 32768, "64k": 65536, "128k": 131072}

LOADERS: dict[str, Callable[[Inputs], list[Item]]] = {
    "json_kv": load_json_kv, "ruler": load_ruler, "kilt": load_kilt, "msmarco": load_msmarco,
    "alce": load_alce, "icl": load_icl, "narrativeqa": load_narrativeqa, "infbench": load_infbench,
    "multi_lexsum": load_multi_lexsum,
}

_SOURCE_OR_NULL = {"anyOf": [{**SOURCE, "required": ["data_files"]}, {"type": "null"}], "default": None}

OPTIONS: dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "required": ["loader", "source", "lengths", "user_template", "system_template"],
    "properties": {
        "loader": {"enum": list(LOADERS), "description": "Which of the authors' data.py loaders the rows go through."},
        "source": {**SOURCE, "required": ["data_files"],
                   "description": "The test rows (a documents source; `{k}` in data_files is the length's k)."},
        "lengths": {"type": "object", "minProperties": 1, "propertyNames": {"enum": list(LENGTHS)},
                    "additionalProperties": {"type": "integer", "minimum": 1},
                    "description": "Each length (a split: 4k ... 128k) and its size k: passages, key-value pairs, "
                                   "documents, shots or Llama-2 tokens, as the authors' configs name it."},
        "user_template": {"type": "string", "description": "data.py's user_template (a Python format string)."},
        "system_template": {"type": "string", "description": "data.py's system_template: the answer prefix."},
        "separator": {"type": "string", "default": "\n",
                      "description": "Between the two in completion style (data.py: \\n, or \\n\\n for ALCE, "
                                     "InfiniteBench and Multi-LexSum)."},
        "style": {"enum": ["chat", "completion"], "default": "chat",
                  "description": "chat: the user template as the one user message (the authors' use_chat_template "
                                 "True); completion: user template + separator + answer prefix, the prefix then "
                                 "prepended to the answer for the metrics (use_chat_template False)."},
        "shots": {"type": "integer", "minimum": 0, "default": 2, "description": "Demos per row (the configs' shots)."},
        "max_test_samples": {"type": ["integer", "null"], "minimum": 1, "default": 100,
                             "description": "Rows (or questions) scored, drawn as the authors draw them (null: all)."},
        "seed": {"type": "integer", "default": 42, "description": "The authors' seed (arguments.py --seed)."},
        "metadata": {"type": "array", "items": {"type": "string"}, "default": [],
                     "description": "Row fields copied into every sample's metadata when present (e.g. depth)."},
        "demo_source": {**_SOURCE_OR_NULL, "description": "Rows the demos are drawn from (RAG, MS MARCO, NarrativeQA, "
                                                          "Multi-LexSum)."},
        "demo_pool": {"enum": ["all", "others"], "default": "all",
                      "description": "others: a question's own rows left out of its demo pool (PopQA: one split)."},
        "demo_file": {"type": ["string", "null"], "default": None,
                      "description": "ALCE's prompt file (prompts/*_revised.json of the authors' code): instruction, "
                                     "demo_prompt, doc_prompt, demos."},
        "popularity_threshold": {"type": ["number", "null"], "default": None,
                                 "description": "PopQA: keep rows with log10(s_pop) below it (kilt_popqa_3: 3)."},
        "train_source": {**_SOURCE_OR_NULL, "description": "ICL: the labelled examples the demos are drawn from."},
        "test_split": {"type": ["number", "null"], "exclusiveMinimum": 0, "exclusiveMaximum": 1, "default": None,
                       "description": "ICL with one split (NLU): the share held out as the test set (0.1)."},
        "text_field": {"type": "string", "default": "text", "description": "ICL: the text's field."},
        "label_field": {"type": "string", "default": "label", "description": "ICL: the label's field (an integer)."},
        "num_labels": {"type": ["integer", "null"], "minimum": 2, "default": None, "description": "ICL: labels."},
        "variant": {"enum": ["qa", "choice", "sum", None], "default": None, "description": "InfiniteBench: the set."},
        "keypoints_source": {**_SOURCE_OR_NULL,
                             "description": "InfiniteBench En.Sum: the key points by id (longbook_sum_eng_keypoints.jsonl)."},
        "pretruncate_tokenizer": {"type": "string", "default": "meta-llama/Llama-2-7b-hf",
                                  "description": "LongQA and Summ: the tokenizer documents are measured and cut with "
                                                 "(the authors' Llama-2; a copy with the same vocabulary or a folder)."},
        "min_tokens": {"type": "integer", "minimum": 0, "default": 65536,
                       "description": "LongQA and Summ: documents shorter than this (Llama-2 tokens) are dropped "
                                      "(NarrativeQA: more than 131,072 required)."},
    },
}


def tokens_of(length: str) -> int:
    return LENGTHS[length]


class HelmetTaskType(TaskType):
    """One HELMET dataset at its lengths (the spec's splits)."""

    options_schema = OPTIONS
    description = ("HELMET (princeton-nlp/HELMET): one dataset at its input lengths (8k-128k), the authors' "
                   "prompts, demos, sampling and end-of-context cut")

    def lengths(self, ctx: TaskContext) -> list[str]:
        lengths = list(ctx.splits or ctx.spec.get("splits") or list(ctx.options["lengths"]))
        for length in lengths:
            if length not in ctx.options["lengths"]:
                raise UserError(f"{length!r} is no length of this task (lengths: {', '.join(ctx.options['lengths'])})",
                                field="--split")
        return lengths

    def load(self, ctx: TaskContext, max_rows: int | None = None) -> list[Conversation]:
        out: list[Conversation] = []
        backend = None if max_rows is not None else ctx.model_tokenizer()
        for length in self.lengths(ctx):
            items = self._items(ctx, length)
            limit = max_rows if max_rows is not None else ctx.limit
            convs = []
            for item in items:
                if limit is not None and len(convs) >= limit:
                    break
                conv = self._conversation(ctx, item, length)
                if ctx.select_context(conv.context_id):
                    convs.append(conv)
            if backend is not None:
                convs = fit(convs, backend, LENGTHS[length], int(ctx.spec["generation"]["max_new_tokens"]))
            out += convs
        return out

    def check(self, ctx: TaskContext) -> None:
        """The spec against its first length's rows (every template filled), before any model loads."""
        first = self.lengths(ctx)[:1]
        for length in first:
            for item in self._items(ctx, length)[:5]:
                self._conversation(ctx, item, length)

    def needs(self, ctx: TaskContext) -> list[Need]:
        """Every length's rows, demos and key points (Hub files or data-home files), ALCE's prompt
        file, and the tokenizer LongQA and Summ cut documents with."""
        from lceval.io import DataHomePath
        from lceval_plugins.documents.needs import TOKENIZER_FILES, model_need, source_needs

        opts = ctx.options
        complete = {key: prop.get("default") for key, prop in SOURCE["properties"].items() if "default" in prop}
        out: list[Need] = []
        for length in self.lengths(ctx):
            k = str(opts["lengths"][length])
            for option in ("source", "demo_source", "train_source", "keypoints_source"):
                source = opts.get(option)
                if source:
                    files = source["data_files"]
                    files = [f.replace("{k}", k) for f in ([files] if isinstance(files, str) else files)]
                    out += source_needs({**complete, **source, "data_files": files}, ctx)
        name = opts.get("demo_file")
        if name and not Path(name).expanduser().is_absolute() and not (ctx.spec_path.parent / name).is_file():
            out.append(DataHomePath(name, ctx.data_home, "the authors' prompts/*.json (docs/tasks/helmet.md)"))
        if opts["loader"] in ("narrativeqa", "infbench", "multi_lexsum"):
            out += model_need(opts["pretruncate_tokenizer"], only=TOKENIZER_FILES)
        return out

    # -- reading ---------------------------------------------------------------------------------

    def _items(self, ctx: TaskContext, length: str) -> list[Item]:
        opts = ctx.options
        k = opts["lengths"][length]
        rows, label, where = _rows(ctx, opts["source"], k, length, "options.source")

        def open_rows(option: str) -> tuple[list[dict[str, Any]], str]:
            source = opts.get(option)
            if source is None:
                raise UserError(f"this {opts['loader']} spec needs options.{option}", field=f"options.{option}")
            return _rows(ctx, source, k, length, f"options.{option}")[:2]

        def read_json(option: str) -> Any:
            name = opts.get(option)
            if not name:
                raise UserError(f"this {opts['loader']} spec needs options.{option}", field=f"options.{option}")
            return _read_json(ctx, name, f"options.{option}")

        inputs = Inputs(rows=rows, label=label, options=opts, k=k, length=length, open_rows=open_rows,
                        read_json=read_json, where=where)
        items = LOADERS[opts["loader"]](inputs)
        if not items:
            raise UserError(f"no row of {label} is left to score at {length}", field="options.source")
        return items

    def _conversation(self, ctx: TaskContext, item: Item, length: str) -> Conversation:
        opts = ctx.options
        values = {**item.values, "context": CONTEXT_SLOT}
        user = fill(opts["user_template"], values, "options.user_template")
        prefix = fill(opts["system_template"], values, "options.system_template")
        if user.count(CONTEXT_SLOT) != 1:
            raise UserError("the user template places {context} " + f"{user.count(CONTEXT_SLOT)} times; it goes once",
                            field="options.user_template")
        if opts["style"] == "completion":
            user = user + opts["separator"] + prefix
        item_id = f"{length}/{item.key}"
        context_id = f"{length}/{item.context_key}" if item.context_key is not None else item_id
        meta = {**item.metadata, "length": length, "split": length, "question_id": item.key,
                "document_id": context_id, "references": list(item.answers), "answer_prefix": prefix,
                "style": opts["style"]}
        reference = item.answers[0] if len(item.answers) == 1 else " | ".join(item.answers)
        turn = Turn(item_id=item_id, user=user, reference=reference, question=item.question, metadata=meta)
        return Conversation(conv_id=item_id, context=item.context, context_id=context_id, turns=[turn],
                            metadata={"split": length, "length": length})


def _rows(ctx: TaskContext, source: dict[str, Any], k: int, length: str,
          field: str) -> tuple[list[dict[str, Any]], str, dict[str, Any]]:
    """A source's rows, `{k}` in its file names replaced by the length's k, and how to read them
    again (the builder and the files, relative to the data home when they are under it)."""
    files = source["data_files"]
    files = [f.replace("{k}", str(k)) for f in ([files] if isinstance(files, str) else files)]
    complete = {key: prop.get("default") for key, prop in SOURCE["properties"].items() if "default" in prop}
    opened = open_source({**complete, **source, "data_files": files, "split": length}, ctx)
    where = {"builder": opened.record.get("builder"), "data_files": [_relative(p, ctx.data_home) for p in opened.files]}
    return list(iter_rows(opened.dataset, list(opened.dataset.column_names))), opened.label, where


def _relative(path: Path, home: Path) -> str:
    try:
        return Path(path).resolve().relative_to(Path(home).resolve()).as_posix()
    except ValueError:
        return str(path)


def _read_json(ctx: TaskContext, name: str, field: str) -> Any:
    """A JSON file relative to the spec's folder, then the data home (recorded in the manifest)."""
    path = Path(name).expanduser()
    candidates = [path] if path.is_absolute() else [ctx.spec_path.parent / path, ctx.data_home / path]
    for candidate in candidates:
        if candidate.is_file():
            ctx.record_file(candidate)
            try:
                return json.loads(candidate.read_text(encoding="utf-8"))
            except ValueError as exc:
                raise UserError(f"{candidate} is no JSON: {exc}", field=field) from None
    raise UserError(f"file {name!r} not found (looked in {ctx.spec_path.parent} and {ctx.data_home})", field=field)


def fit(convs: list[Conversation], model: ModelBackend, length: int, max_new_tokens: int) -> list[Conversation]:
    """model_utils.py `tokenize`'s cut in the evaluated model's tokens: a prompt over
    `length - max_new_tokens` (less lceval's safety margin under a window of exactly the length)
    loses the last tokens of its context; questions of one document share the smallest cut."""
    window = model.context_window
    if window is not None and window < length:
        return convs  # the engine skips what does not fit (context.policy skip)
    limit = length - max_new_tokens
    if window is not None:
        limit = min(limit, window - SAFETY_MARGIN - max_new_tokens)
    groups: dict[str, list[Conversation]] = {}
    for conv in convs:
        groups.setdefault(conv.context_id, []).append(conv)
    for group in groups.values():
        context = group[0].context
        ids = model.tokenize(context)
        if ids is None:
            return convs
        keep = len(ids)
        for conv in group:
            used = model.count_tokens([Message("user", conv.turns[0].user.replace(CONTEXT_SLOT, context, 1))])
            if used is None:
                return convs
            if used > limit:
                keep = min(keep, len(ids) - (used - limit))
        if keep >= len(ids):
            continue
        text = context
        for _ in range(4):  # detokenized text may tokenize a little longer: cut again by the excess
            keep = max(keep, 0)
            text = model.detokenize(ids[:keep])
            over = max(model.count_tokens([Message("user", c.turns[0].user.replace(CONTEXT_SLOT, text, 1))]) or 0
                       for c in group) - limit
            if over <= 0 or keep == 0:
                break
            keep -= over
        for conv in group:
            conv.context = text
            conv.turns[0].metadata["helmet_cut"] = {"original_tokens": len(ids), "kept_tokens": keep}
    return convs
