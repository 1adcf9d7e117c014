"""From a dataset's rows to documents and their questions, as the spec's `fields` say.

A row is either one question (LongBench: `context`, `input`, `answers`), one document
carrying a list of question records (`fields.questions`, as ELITR-Bench's own files do), or a
whole chat whose last user message is the question (`fields.messages`, OpenAI MRCR's `prompt`).
Questions over the same document - the same `document_key` fields, by default the same
context text - become one `Document`, whose text is kept once however many rows repeat
it, so they share a prefix (one prefill) and a cluster (intervals resample documents).

Every value is checked where it is read; a bad one is a `UserError` naming the data, the
row (its position and id) and the spec option whose field it is.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterator

from lceval.errors import UserError
from lceval.io import quote
from lceval.types import Message

from .templates import Template

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
#: metadata keys the task type sets itself; a `fields.metadata` entry may not take them
RESERVED = ("split", "document_id", "question_id", "references", "choices", "answer_letter", "step", "answer_pool")
#: rows are read from the Arrow table this many at a time (only the columns the spec uses)
BATCH = 256
SCALARS = (str, int, float, bool, type(None))


def question_fields(fields: dict[str, Any]) -> list[str]:
    """The field(s) `fields.questions` names: one holding the list of records, several holding
    parallel lists, or none."""
    names = fields.get("questions")
    return [] if not names else [names] if isinstance(names, str) else list(names)


def parse_records(value: Any) -> Any:
    """A question list given as text (LooGLE's `qa_pairs`: a Python literal with single quotes)
    read as JSON, else as a Python literal with `ast.literal_eval` (never `eval`); anything else
    as it is. Text that is neither is returned as it is, for the caller to refuse."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        pass
    try:
        return ast.literal_eval(value.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return value


def answer_words(answers: list[str]) -> int:
    """`answer_words` of a prompt template: the reference's words as `len(out.split())` counts
    them (L-Eval's length instruction, "The suggested output length is around N words")."""
    return len(answers[0].split()) if answers else 0


@dataclass
class Question:
    qid: str
    question: str
    answers: list[str]
    values: dict[str, Any]  # what the prompt templates see (the document left out)
    metadata: dict[str, Any]
    where: str  # "data row 3 (id 'x')", for messages
    answer_value: Any = None  # the answer field as the data holds it (`gold_answer: python`)


@dataclass
class Document:
    key: str
    context: str
    questions: list[Question] = field(default_factory=list)
    #: `fields.messages`: the row's chat, sent as it is (its last message, the question, apart)
    messages: list[Message] | None = None
    #: with `fields.documents`: each rendered element's [start, end) characters in `context`,
    #: so the context policy cuts between elements (whole speaker turns), never inside one
    elements: list[tuple[int, int]] | None = None


#: the roles a message of a `fields.messages` chat may have
ROLES = ("system", "user", "assistant")


class RowReader:
    """Reads rows into documents; remembers what it needs across rows (the answer's shape,
    the ids already used, the documents already built)."""

    def __init__(self, fields: dict[str, Any], label: str, document_template: Template) -> None:
        self.fields = fields
        self.label = label
        self.document_template = document_template
        self.answer_shape: tuple[str, str] | None = None  # ("list" | "text", where first seen)
        self.ids: dict[str, str] = {}
        #: with `fields.questions` and no `fields.id`: questions a document has had from earlier
        #: rows, so that a document's default ids go on counting (L-Eval's gsm100: 100 rows, one
        #: 16-shot context)
        self.positions: dict[str, int] = {}

    # -- errors ---------------------------------------------------------------------------

    def error(self, message: str, option: str, hint: str | None = None) -> UserError:
        return UserError(message, field=f"options.fields.{option}", hint=hint)

    # -- one row ------------------------------------------------------------------------------

    def context_of(self, row: dict[str, Any], where: str) -> tuple[str, list[tuple[int, int]] | None]:
        """The row's context, and with `fields.documents` the span of each rendered element in it."""
        f = self.fields
        spans: list[tuple[int, int]] | None = None
        if f["documents"]:
            items = row.get(f["documents"])
            if not isinstance(items, list):
                raise self.error(f"{where}: field {quote(f['documents'])} must be a list of documents, got "
                                 f"{quote(items)}", "documents")
            elements = self.elements(row, items, where)
            if self.document_template.text == "{{ document }}" and all(isinstance(d, (str, int)) for d, _ in elements):
                rendered = [str(d) for d, _ in elements]  # what the template renders, without a render per element
            else:
                rendered = [self.document_template.render({**extra, "document": d, "index": i},
                                                          f"{where}, document {i}")
                            for i, (d, extra) in enumerate(elements, start=1)]
            text = f["document_separator"].join(rendered)
            spans, at = [], 0
            for part in rendered:
                spans.append((at, at + len(part)))
                at += len(part) + len(f["document_separator"])
            option = "documents"
        else:
            text = row.get(f["context"])
            option = "context"
            if not isinstance(text, str):
                raise self.error(f"{where}: field {quote(f['context'])} must be text, got {quote(text)}", "context")
        if f["strip_context"]:
            lead = len(text) - len(text.lstrip())
            text = text.strip()
            if spans is not None:
                spans = [(max(0, a - lead), min(len(text), b - lead)) for a, b in spans]
        if not text.strip():
            raise self.error(f"{where}: the context is empty ({len(text)} characters): a question about nothing "
                             "would score guesses", option, hint="Remove the row, or fix the field.")
        if spans is not None:
            spans = [(a, b) for a, b in spans if b > a]
        return text, spans or None

    def messages_of(self, row: dict[str, Any], where: str) -> list[Message]:
        """`fields.messages`: the row's chat as messages, checked: a list of {role, content}
        records (or JSON text of one, as OpenAI MRCR's `prompt`) ending with a user message."""
        name = self.fields["messages"]
        value = row.get(name)
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise self.error(f"{where}: field {quote(name)} is text but not JSON of a list of messages "
                                 f"({exc.msg} at character {exc.pos})", "messages") from None
        if not isinstance(value, list) or not value:
            raise self.error(f"{where}: field {quote(name)} must be a non-empty list of messages "
                             f"({{role, content}} records), got {quote(value)}", "messages")
        out: list[Message] = []
        for i, m in enumerate(value):
            if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
                raise self.error(f"{where}: message {i} of {quote(name)} must be a record with a role ("
                                 f"{', '.join(ROLES)}) and text content, got {quote(m)}", "messages")
            out.append(Message(m["role"], m["content"]))
        if out[-1].role != "user":
            raise self.error(f"{where}: the last message of {quote(name)} is the question and must be a user "
                             f"message, not {quote(out[-1].role)}", "messages")
        return out

    def elements(self, row: dict[str, Any], items: list[Any], where: str) -> list[tuple[Any, dict[str, Any]]]:
        """The elements of `documents`, each with its values of the parallel lists
        (`document_fields`), sorted by `document_order` (stable) when it is set."""
        f = self.fields
        parallel = {}
        for name, field_name in f["document_fields"].items():
            values = row.get(field_name)
            if not isinstance(values, list) or len(values) != len(items):
                got = f"a list of {len(values)}" if isinstance(values, list) else quote(values)
                raise self.error(f"{where}: field {quote(field_name)} must be a list as long as {quote(f['documents'])} "
                                 f"({len(items)} elements), got {got}", f"document_fields.{name}")
            parallel[name] = values
        out = [(d, {name: values[i] for name, values in parallel.items()}) for i, d in enumerate(items)]
        order = f["document_order"]
        if order:
            try:
                out.sort(key=lambda element: element[1][order])
            except TypeError as exc:
                raise self.error(f"{where}: the values of {quote(order)} cannot be sorted ({exc})",
                                 "document_order") from None
        return out

    def key_of(self, row: dict[str, Any], context: str, where: str) -> str:
        names = self.fields["document_key"]
        if not names:
            return hashlib.sha256(context.encode("utf-8")).hexdigest()[:16]
        names = [names] if isinstance(names, str) else names
        parts = []
        for name in names:
            value = row.get(name)
            if not isinstance(value, (str, int)) or isinstance(value, bool) or value == "":
                raise self.error(f"{where}: document key field {quote(name)} must be a non-empty text or integer, "
                                 f"got {quote(value)}", "document_key")
            parts.append(str(value))
        return "/".join(parts)

    def question_records(self, row: dict[str, Any], where: str) -> list[dict[str, Any]]:
        names = question_fields(self.fields)
        if not names:
            return [{}]
        if len(names) > 1:
            return self.zipped_records(row, names, where)
        name = names[0]
        records = parse_records(row.get(name))
        if not isinstance(records, list) or not records:
            raise self.error(f"{where}: field {quote(name)} must be a non-empty list of question records, got "
                             f"{quote(records)}", "questions")
        for i, rec in enumerate(records):
            if not isinstance(rec, dict):
                raise self.error(f"{where}: question {i} of {quote(name)} must be a record (a mapping), got "
                                 f"{quote(rec)}", "questions")
        return records

    def zipped_records(self, row: dict[str, Any], names: list[str], where: str) -> list[dict[str, Any]]:
        """Parallel lists (L-Eval: `instructions` and `outputs`), one record per position."""
        lists = [parse_records(row.get(name)) for name in names]
        for name, value in zip(names, lists):
            if not isinstance(value, list) or not value:
                raise self.error(f"{where}: field {quote(name)} must be a non-empty list (one of the parallel lists "
                                 f"of questions), got {quote(value)}", "questions")
        if len({len(v) for v in lists}) != 1:
            sizes = ", ".join(f"{quote(n)} {len(v)}" for n, v in zip(names, lists))
            raise self.error(f"{where}: the parallel lists of questions differ in length ({sizes})", "questions")
        return [dict(zip(names, values)) for values in zip(*lists)]

    def answers_of(self, value: Any, where: str) -> list[str]:
        shape = "list" if isinstance(value, (list, tuple)) else "text"
        if self.answer_shape is None:
            self.answer_shape = (shape, where.removeprefix(f"{self.label} "))
        elif self.answer_shape[0] != shape:
            first_shape, first_where = self.answer_shape
            raise self.error(f"{where}: the answer is {'a list' if shape == 'list' else 'a single value'} "
                             f"({quote(value)}) but {first_where} has {'a list' if first_shape == 'list' else 'a single value'}: "
                             "the answer field must be one or the other in every row", "answer")
        values = list(value) if shape == "list" else [value]
        if not values and not self.fields["empty_answers"]:
            raise self.error(f"{where}: the answer list is empty (no reference to score against)", "answer",
                             hint="If an empty answer is right (an empty set), set options.fields.empty_answers: "
                                  "true.")
        out = []
        for v in values:
            if isinstance(v, str):
                out.append(v)
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                out.append(str(v))
            elif isinstance(v, (list, dict)):  # a structured answer (InfiniteBench math_calc's list of values)
                out.append(json.dumps(v, ensure_ascii=False))
            else:
                raise self.error(f"{where}: an answer must be text or a number, got {quote(v)}", "answer")
        return out

    def choices_of(self, look: Any, where: str) -> list[str] | None:
        spec = self.fields["choices"]
        if spec is None:
            return None
        if isinstance(spec, str):
            value = look(spec)
            if not isinstance(value, list) or not value:
                raise self.error(f"{where}: choices field {quote(spec)} must be a non-empty list, got {quote(value)}",
                                 "choices")
            values = value
        else:
            values = [look(name) for name in spec]
        if len(values) > len(LETTERS):
            raise self.error(f"{where}: {len(values)} choices, more than letters A-Z", "choices")
        for v in values:
            if not isinstance(v, (str, int, float)) or isinstance(v, bool):
                raise self.error(f"{where}: a choice must be text or a number, got {quote(v)}", "choices")
        return [str(v) for v in values]

    def letter_of(self, answers: list[str], choices: list[str], where: str) -> str:
        """The letter of the correct choice: the answer is that letter (LongBench v2: "B") or the
        text of one of the choices (InfiniteBench: the option itself)."""
        answer = answers[0]
        letters = LETTERS[: len(choices)]
        if re.fullmatch(r"[A-Z]", answer.strip()) and answer.strip() in letters:
            return answer.strip()
        if answer in choices:
            return letters[choices.index(answer)]
        raise self.error(f"{where}: the answer {quote(answer)} is neither a letter {letters[0]}-{letters[-1]} nor one "
                         f"of the choices {quote(choices)}", "answer")

    def read(self, index: int, row: dict[str, Any], split: str,
             needed: set[str]) -> tuple[str, str, list[Message] | None, list[tuple[int, int]] | None, list[Question]]:
        """(document key, context, the chat of `fields.messages` or None, the context's elements'
        spans or None, questions) of one row."""
        f = self.fields
        where = f"{self.label} row {index}"
        messages = None
        elements = None
        if f["messages"]:
            messages = self.messages_of(row, where)
            context = ""  # the chat is sent as it is: nothing for a context policy to cut
            key = self.key_of(row, json.dumps([[m.role, m.content] for m in messages], ensure_ascii=False), where)
        else:
            context, elements = self.context_of(row, where)
            key = self.key_of(row, context, where)
        long_fields = {f["context"], f["documents"], *question_fields(f), f["answer"], f["messages"]}
        questions = []
        records = self.question_records(row, where)
        first = self.positions.get(key, 0)
        if f["questions"]:
            self.positions[key] = first + len(records)
        for qi, rec in enumerate(records):
            qwhere = where if not f["questions"] else f"{where}, question {qi}"

            def look(name: str, rec: dict[str, Any] = rec) -> Any:
                return rec[name] if name in rec else row.get(name)

            raw_id = look(f["id"]) if f["id"] else (first + qi if f["questions"] else index)
            if not isinstance(raw_id, (str, int)) or isinstance(raw_id, bool) or raw_id == "":
                raise self.error(f"{qwhere}: id field {quote(f['id'])} must be a non-empty text or integer, "
                                 f"got {quote(raw_id)}", "id")
            qid = f"{key}/{raw_id}" if f["questions"] else str(raw_id)
            qwhere = f"{qwhere} (id {quote(str(raw_id))})"
            if qid in self.ids:
                raise self.error(f"{qwhere}: id {quote(qid)} is used twice (first by {self.ids[qid]}); every "
                                 "question needs its own id", "id")
            self.ids[qid] = qwhere
            question = look(f["question"]) if f["question"] else (messages[-1].content if messages else "")
            if question is None:
                question = ""
            if not isinstance(question, str):
                raise self.error(f"{qwhere}: question field {quote(f['question'])} must be text, got "
                                 f"{quote(question)}", "question")
            if f["answer"] not in rec and f["answer"] not in row:
                raise self.error(f"{qwhere}: no answer field {quote(f['answer'])}", "answer")
            answers = self.answers_of(look(f["answer"]), qwhere)
            choices = self.choices_of(look, qwhere)
            metadata: dict[str, Any] = {"split": split, "document_id": key, "question_id": str(raw_id),
                                        "references": answers}
            if choices is not None:
                metadata["choices"] = choices
                metadata["answer_letter"] = self.letter_of(answers, choices, qwhere)
            for name in f["metadata"]:
                if name in RESERVED:
                    raise self.error(f"metadata field {quote(name)} is one the task type sets itself "
                                     f"({', '.join(RESERVED)})", "metadata")
                value = look(name)
                if not (isinstance(value, SCALARS)
                        or (isinstance(value, list) and all(isinstance(v, SCALARS) for v in value))):
                    raise self.error(f"{qwhere}: metadata field {quote(name)} must be text, a number, a boolean "
                                     f"or a list of them (a breakdown groups by it), got {quote(value)}", "metadata")
                metadata[name] = value
            values = {k: v for k, v in row.items() if k in needed and k not in long_fields}
            values.update({k: v for k, v in rec.items() if k not in long_fields})
            values.update(question=question, choices=choices or [], split=split, answer_words=answer_words(answers))
            questions.append(Question(qid=qid, question=question, answers=answers, values=values,
                                      metadata=metadata, where=qwhere, answer_value=look(f["answer"])))
        return key, context, messages, elements, questions


def matches(row: dict[str, Any], where: dict[str, Any]) -> bool:
    """`source.where`: every named field equals its value (or one of its list of values)."""
    for name, want in where.items():
        have = row.get(name)
        if isinstance(want, list):
            if have not in want:
                return False
        elif have != want:
            return False
    return True


def iter_rows(dataset: Any, columns: list[str]) -> Iterator[dict[str, Any]]:
    """The rows of `dataset`, only `columns` decoded, a batch at a time."""
    view = dataset.select_columns(columns) if columns != list(dataset.column_names) else dataset
    for batch in view.iter(batch_size=BATCH):
        names = list(batch)
        for values in zip(*(batch[n] for n in names)):
            yield dict(zip(names, values))
