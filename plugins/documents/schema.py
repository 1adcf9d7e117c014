"""The options of a `documents` spec: where the rows come from (`source`), which fields hold
the document, the question, the answers and what to report by (`fields`), and how each
question is asked (`prompt`, `mode`, `history`).

Every section is a mapping whose keys each have a default (`section_defaults` fills them),
so `lceval tasks show NAME` prints the whole resolved spec and a spec says only what
differs from the defaults.
"""

from __future__ import annotations

import copy
from typing import Any

#: A field name (a column of the dataset, or a key of a question record).
_FIELD = {"type": "string", "minLength": 1}
_FIELD_OR_NULL = {"type": ["string", "null"], "minLength": 1}
_FIELDS = {"type": "array", "items": _FIELD, "uniqueItems": True}

#: The Jinja2 templates of the prompt: text, rendered in a sandbox.
_TEMPLATE = {"type": "string"}
_TEMPLATE_OR_NULL = {"type": ["string", "null"]}

#: The default first-turn prompt: the document, a blank line, the question.
DEFAULT_USER = "{{ context }}\n\n{{ question }}"

SOURCE: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "description": "Where the rows come from: local files, or files of a Hugging Face Hub dataset repository "
                   "at a pinned revision, read with the `datasets` library's json, parquet or csv builder.",
    "properties": {
        "path": {"type": ["string", "null"], "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$",
                 "default": None,
                 "description": "A Hugging Face Hub dataset repository (owner/name); its `data_files` are fetched "
                                "at `revision` through the Hub cache. Absent: `data_files` are local files."},
        "revision": {"type": ["string", "null"], "minLength": 1, "default": None,
                     "description": "The Hub commit to read (a 40-hex commit pins it; a branch or tag is resolved "
                                    "to its commit, which the manifest records)."},
        "name": {"type": ["string", "null"], "minLength": 1, "default": None,
                 "description": "With `path` and no `data_files`: the config whose files of `split` to read, as the "
                                "dataset card (README.md `configs:`) declares them (default: its default config)."},
        "data_files": {"anyOf": [{"type": "string", "minLength": 1},
                                 {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1}],
                       "description": "The file(s) to read (globs allowed for local files). Local paths are "
                                      "relative to the spec's folder, then the data home ($LCEVAL_DATA). "
                                      "`zip://INNER::ARCHIVE` reads one file inside an archive."},
        "builder": {"enum": ["json", "parquet", "csv", None], "default": None,
                    "description": "The `datasets` builder (default: from the file extension; .jsonl is json)."},
        "split": {"type": "string", "minLength": 1, "default": "train",
                  "description": "The split to read of a config (`name`), and the name the rows' split gets "
                                 "(`split` in every sample's metadata)."},
        "where": {"type": "object", "default": {},
                  "additionalProperties": {"type": ["string", "number", "boolean", "array"]},
                  "description": "Keep only rows whose field equals the value (or one of a list of values), "
                                 "e.g. {dataset: narrativeqa} for one task of a file holding several."},
    },
}

ANSWER_POOL: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["by"],
    "properties": {
        "by": {**_FIELD, "description": "The field whose value groups the documents (SCBench: `repo`)."},
        "keep": {**_FIELDS, "default": [],
                 "description": "Fields of each question kept beside its answer in the pool (SCBench: `name`, `task`)."},
    },
}

FIELDS: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "description": "Which fields of a row hold the document, the question, the answers, the choices and the "
                   "values to report by.",
    "properties": {
        "id": {**_FIELD_OR_NULL, "default": None,
               "description": "The field that identifies a question (default: its position in the split)."},
        "context": {**_FIELD_OR_NULL, "default": "context",
                    "description": "The field holding the long document (a string)."},
        "documents": {**_FIELD_OR_NULL, "default": None,
                      "description": "Instead of `context`: a field holding a list of documents or speaker "
                                     "turns, each rendered with `document_template` and joined with "
                                     "`document_separator` into the context."},
        "document_template": {**_TEMPLATE, "default": "{{ document }}",
                              "description": "Jinja2 template of one element of `documents` (`document`: the "
                                             "element, `index`: its 1-based position)."},
        "document_separator": {"type": "string", "default": "\n\n",
                               "description": "Text between two rendered elements of `documents`."},
        "document_fields": {"type": "object", "default": {}, "additionalProperties": _FIELD,
                            "description": "With `documents`: NAME: FIELD pairs, each FIELD a list as long as "
                                           "`documents`; the element's template sees NAME as the value at its "
                                           "position (LongMemEval's session dates, `haystack_dates`)."},
        "document_order": {**_FIELD_OR_NULL, "default": None,
                           "description": "With `documents`: sort the elements by this name of `document_fields` "
                                          "(ascending, ties kept in the data's order) before numbering and "
                                          "joining them (LongMemEval sorts its sessions by date)."},
        "strip_context": {"type": "boolean", "default": False,
                          "description": "Strip white space around the context (LongBench v2 does)."},
        "question": {**_FIELD_OR_NULL, "default": "question",
                     "description": "The field holding the question or instruction (null: none, e.g. a summary)."},
        "answer": {**_FIELD, "default": "answer",
                   "description": "The field holding the reference answer: a string, or a list of acceptable "
                                  "answers (every sample's metadata `references`)."},
        "choices": {"anyOf": [_FIELD, {**_FIELDS, "minItems": 2}, {"type": "null"}], "default": None,
                    "description": "Multiple choice: one field holding the list of choices, or a list of fields "
                                   "(choice_A, choice_B ...). The answer is a letter or one of the choices."},
        "questions": {"anyOf": [_FIELD, {**_FIELDS, "minItems": 2}, {"type": "null"}], "default": None,
                      "description": "One record per document: the field holding its list of question records "
                                     "(or text of one, JSON or a Python literal: LooGLE's qa_pairs), or a list of "
                                     "fields holding parallel lists, zipped into records keyed by those fields' "
                                     "names (L-Eval's instructions and outputs); `id`, `question`, `answer`, "
                                     "`choices` and `metadata` are then looked up in each question record first, "
                                     "then in the document's row."},
        "document_key": {"anyOf": [_FIELD, {**_FIELDS, "minItems": 1}, {"type": "null"}], "default": None,
                         "description": "Field(s) naming the document, so that questions over one document share "
                                        "a prefix and a cluster (default: the sha256 of the context)."},
        "metadata": {**_FIELDS, "default": [],
                     "description": "Fields copied into every sample's metadata, to break results down by "
                                    "(report.breakdowns) or subset them (lceval report --where)."},
        "messages": {**_FIELD_OR_NULL, "default": None,
                     "description": "Instead of a document and a question: a field holding a whole chat, a list "
                                    "of {role, content} records (or JSON text of one), sent as those messages; "
                                    "the last one, a user message, is the question. Nothing of it is cut: a chat "
                                    "longer than the model's window is skipped (context.policy skip) or an error."},
        "empty_answers": {"type": "boolean", "default": False,
                          "description": "Accept an empty list as the answer (a set that may be empty, as "
                                         "GraphWalks' node sets): the reference is then empty text and the "
                                         "sample's `references` an empty list."},
        "answer_pool": {"anyOf": [ANSWER_POOL, {"type": "null"}], "default": None,
                        "description": "Every question's metadata gets `answer_pool`: the answers of all the "
                                       "questions asked over documents with the same `by` value, for a metric that "
                                       "scores against the other items' answers (SCBench's RepoQA needles)."},
    },
}

FOLLOWUP: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "user"],
    "properties": {
        "name": {"type": "string", "pattern": r"^[A-Za-z0-9_-]+$",
                 "description": "The step's name (`step` in the metadata; the item id ends with /NAME)."},
        "user": {**_TEMPLATE, "description": "Jinja2 template of the follow-up user message."},
        "scored": {"type": "boolean", "default": True,
                   "description": "false: asked and kept in the conversation and the samples, never judged or "
                                  "counted (a step whose answer is not the result)."},
    },
}

SHOT: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["role", "content"],
    "properties": {
        "role": {"enum": ["system", "user", "assistant"], "description": "Who says it."},
        "content": {"type": "string", "description": "What is said: plain text, the same for every question."},
    },
}

PROMPT: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "description": "Jinja2 templates, rendered in a sandbox with each row's fields, `context` (the place of the "
                   "document: the context policy cuts only the document), `question` and `choices`.",
    "properties": {
        "system": {**_TEMPLATE_OR_NULL, "default": None, "description": "The system message (null: none)."},
        "shots": {"type": "array", "items": SHOT, "default": [],
                  "description": "Fixed messages between the system message and the first user message: a "
                                 "hand-made exchange shown before every question (InfiniteBench's GPT-4 math_calc)."},
        "user": {**_TEMPLATE, "default": DEFAULT_USER,
                 "description": "The user message of a question; it (or `system`) places {{ context }} once."},
        "next": {**_TEMPLATE, "default": "{{ question }}",
                 "description": "Multi-turn: the user message of each later question of a document."},
        "answer_prefix": {**_TEMPLATE, "default": "",
                          "description": "The start of the assistant's answer, which the model continues (empty: "
                                         "none); in multi-turn mode, of the first question only."},
        "next_answer_prefix": {**_TEMPLATE_OR_NULL, "default": None,
                               "description": "Multi-turn: the start of each later answer (null: `answer_prefix`); "
                                              "SCBench's summaries continue \"This paper\" from the second turn on."},
        "step": {"type": "string", "pattern": r"^[A-Za-z0-9_-]+$", "default": "answer",
                 "description": "With followups: the name of the first step (`step` in the metadata)."},
        "scored": {"type": "boolean", "default": True,
                   "description": "With followups: false leaves the first step unjudged and uncounted (the "
                                  "reasoning of a chain of thought; the answer step is the result)."},
        "followups": {"type": "array", "items": FOLLOWUP, "default": [],
                      "description": "Further user turns asked after each question in the same conversation, "
                                     "the model's own answers kept (e.g. chain of thought, then the answer)."},
        "max_chars": {"type": "integer", "minimum": 1, "default": 200_000,
                      "description": "Longest rendered message, the document left out: a template that "
                                     "renders more is refused."},
    },
}

OPTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["source"],
    "properties": {
        "source": SOURCE,
        "fields": {**FIELDS, "default": {}},
        "prompt": {**PROMPT, "default": {}},
        "mode": {"enum": ["single-turn", "multi-turn"], "default": "single-turn",
                 "description": "One conversation per question, or one per document with its questions in order."},
        "history": {"enum": ["model", "gold"], "default": "model",
                    "description": "Multi-turn: earlier answers are the model's own, or the references."},
        "gold_answer": {"enum": ["joined", "python"], "default": "joined",
                        "description": "How a reference is written into a gold history: its acceptable answers "
                                       "joined with ' | ', or the answer field as Python's str() prints it (a list "
                                       "as ['a', 'b']: SCBench's `str(answer)`)."},
        "max_questions": {"type": ["integer", "null"], "minimum": 1, "default": None,
                          "description": "Ask only the first N questions of each document, as the authors do "
                                         "(SCBench's --max_turns 5); --limit-per-context lowers it further."},
    },
}

SECTIONS = {"source": SOURCE, "fields": FIELDS, "prompt": PROMPT}


def section_defaults(options: dict[str, Any]) -> dict[str, Any]:
    """`options` with every key of `source`, `fields` and `prompt` present (the engine fills
    the top-level defaults only). The input is left as it is."""
    out = dict(options)
    for name, schema in SECTIONS.items():
        given = dict(out.get(name) or {})
        for key, prop in schema["properties"].items():
            if key not in given and "default" in prop:
                given[key] = copy.deepcopy(prop["default"])
        out[name] = given
    out.setdefault("mode", "single-turn")
    out.setdefault("history", "model")
    out.setdefault("gold_answer", "joined")
    out.setdefault("max_questions", None)
    return out
