"""The `documents` task type: a long-document benchmark defined by its YAML spec alone.

The spec's `options` say where the rows are (`source`), which fields hold the document,
the question, the answer(s), the choices and what to report by (`fields`), and how a
question is asked (`prompt`: Jinja2 templates in a sandbox; `mode`: one conversation per
question, or one per document with its questions in order; `followups`: further turns
such as LongBench v2's chain of thought then answer). The type turns them into
`Conversation`s whose long text is the document, placed by `{{ context }}`, so the context
policy cuts the document alone and the engine prefills it once for all its questions.

`check` (run by `lceval validate SPEC`) reads the first rows only: an unknown column is
named with the columns there are, a template that uses an undefined field fails - before
any model loads.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from lceval.errors import UserError
from lceval.interfaces import TaskContext, TaskType
from lceval.io import quote
from lceval.needs import Need
from lceval.types import CONTEXT_SLOT, Conversation, Message, Turn

from .needs import source_needs
from .records import Document, Question, RowReader, iter_rows, matches, parse_records, question_fields
from .schema import OPTIONS_SCHEMA, section_defaults
from .source import Opened, open_source
from .templates import CONTEXT_MARKER, PROVIDED, Template, compile_template, first_line_of, unknown_names

#: rows `lceval validate` reads to check a spec against its data
CHECK_ROWS = 5


def _did_you_mean(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    return f"; did you mean {quote(close[0])}?" if close else ""


@dataclass
class Prompts:
    """The spec's compiled templates."""

    system: Template | None
    user: Template
    next: Template
    followups: list[tuple[str, Template]]
    document: Template
    answer_prefix: Template
    next_answer_prefix: Template | None

    def all(self) -> list[Template]:
        out = [t for t in (self.system, self.user, self.next, self.document, self.answer_prefix,
                           self.next_answer_prefix) if t is not None]
        return out + [t for _, t in self.followups]


def compile_prompts(opts: dict[str, Any]) -> Prompts:
    """The spec's templates, compiled; a prompt that never places the document is refused
    (unless the rows are whole chats, `fields.messages`, which place nothing)."""
    p, f = opts["prompt"], opts["fields"]
    limit = p["max_chars"]
    system = compile_template(p["system"], "options.prompt.system", limit) if p["system"] is not None else None
    user = compile_template(p["user"], "options.prompt.user", limit)
    nxt = compile_template(p["next"], "options.prompt.next", limit)
    followups = [(step["name"], compile_template(step["user"], f"options.prompt.followups.{i}.user", limit))
                 for i, step in enumerate(p["followups"])]
    names = [p["step"]] + [name for name, _ in followups]
    if len(set(names)) != len(names):
        raise UserError(f"step names must differ (prompt.step and the followups' names: {', '.join(names)})",
                        field="options.prompt.followups")
    document = compile_template(f["document_template"], "options.fields.document_template", limit)
    prefix = compile_template(p["answer_prefix"], "options.prompt.answer_prefix", limit)
    next_prefix = (compile_template(p["next_answer_prefix"], "options.prompt.next_answer_prefix", limit)
                   if p["next_answer_prefix"] is not None else None)
    if not f["messages"] and not any("context" in t.names for t in (system, user) if t is not None):
        raise UserError("the prompt never places the document: put {{ context }} once in prompt.user (or "
                        "prompt.system)", field="options.prompt.user",
                        hint="LongBench-style {context} (single braces) is plain text to Jinja2: write {{ context }}.")
    for i, shot in enumerate(p["shots"]):
        if CONTEXT_SLOT in shot["content"]:
            raise UserError(f"prompt.shots[{i}] holds the text {CONTEXT_SLOT}, where lceval would put the document; "
                            "the document goes in prompt.user (or prompt.system) as {{ context }}",
                            field=f"options.prompt.shots.{i}.content")
    for t in [nxt, prefix] + [t for _, t in followups] + ([next_prefix] if next_prefix else []):
        if "context" in t.names:
            raise UserError(f"{t.field} places the document again: it goes once, in the first turn "
                            "(later turns of the conversation see it already)", field=t.field)
    return Prompts(system=system, user=user, next=nxt, followups=followups, document=document,
                   answer_prefix=prefix, next_answer_prefix=next_prefix)


class Builder:
    """One load (or check) of a spec: the source opened, the rows read into documents, the
    documents turned into conversations."""

    def __init__(self, ctx: TaskContext) -> None:
        self.ctx = ctx
        self.opts = section_defaults(ctx.options)
        self.fields = self.opts["fields"]
        self.source = self.opts["source"]
        self.split = self.source["split"]
        if ctx.splits and list(ctx.splits) != [self.split]:
            raise UserError(f"this task has one split, {quote(self.split)} (options.source.split), not "
                            f"{', '.join(quote(s) for s in ctx.splits if s != self.split)}", field="--split")
        if self.opts["mode"] == "single-turn" and self.opts["history"] == "gold":
            raise UserError("history: gold puts reference answers in the history of a multi-turn conversation; "
                            "single-turn conversations have none", field="options.history")
        if self.fields["messages"]:
            self._check_messages_mode(ctx.options)
        if self.opts["mode"] == "single-turn" and self.opts["prompt"]["next_answer_prefix"] is not None:
            raise UserError("prompt.next_answer_prefix starts the later answers of a multi-turn conversation; a "
                            "single-turn conversation has one answer (prompt.answer_prefix)",
                            field="options.prompt.next_answer_prefix")
        order = self.fields["document_order"]
        if order is not None and order not in self.fields["document_fields"]:
            known = ", ".join(self.fields["document_fields"]) or "none"
            raise UserError(f"document_order {quote(order)} is no name of fields.document_fields (names: {known})",
                            field="options.fields.document_order")
        if (self.fields["document_fields"] or order) and not self.fields["documents"]:
            raise UserError("document_fields and document_order go with fields.documents (a list of documents)",
                            field="options.fields.document_fields")
        self.prompts = compile_prompts(self.opts)

    def _check_messages_mode(self, given: dict[str, Any]) -> None:
        """`fields.messages`: the row's chat is the prompt, so what would build another prompt
        is refused where the spec sets it; the question is the chat's last message unless
        `fields.question` names a field."""
        fields, prompt = given.get("fields") or {}, given.get("prompt") or {}
        for option, why in (("documents", "a chat is no list of documents"),
                            ("questions", "a chat asks one question, its last message")):
            if fields.get(option):
                raise UserError(f"options.fields.{option} and options.fields.messages exclude each other: {why}",
                                field=f"options.fields.{option}")
        for option in ("user", "next", "followups", "shots"):
            if option in prompt:
                raise UserError(f"options.prompt.{option} builds a prompt, and with options.fields.messages the "
                                "row's chat is the prompt, sent as it is", field=f"options.prompt.{option}",
                                hint="Leave it out (options.prompt.system may still add a system message).")
        if self.opts["mode"] != "single-turn":
            raise UserError("with options.fields.messages each row is one chat with one question: mode must be "
                            "single-turn", field="options.mode")
        if "question" not in fields:
            self.fields["question"] = None  # the chat's last message

    # -- the columns ----------------------------------------------------------------------

    def _question_fields(self) -> list[tuple[str, str]]:
        """(option, field name) of every field looked up per question."""
        f = self.fields
        out = [("id", f["id"]), ("question", f["question"]), ("answer", f["answer"])]
        choices = f["choices"]
        if isinstance(choices, str):
            out.append(("choices", choices))
        elif choices:
            out += [("choices", c) for c in choices]
        out += [("metadata", m) for m in f["metadata"]]
        return [(o, n) for o, n in out if n]

    def _document_fields(self) -> list[tuple[str, str]]:
        f = self.fields
        if f["messages"]:
            out = [("messages", f["messages"])]
        else:
            out = [("documents", f["documents"])] if f["documents"] else [("context", f["context"])]
        out += [("questions", name) for name in question_fields(f)]
        keys = f["document_key"]
        out += [("document_key", k) for k in ([keys] if isinstance(keys, str) else keys or [])]
        out += [(f"document_fields.{name}", column) for name, column in f["document_fields"].items()]
        return out

    def _pool_fields(self) -> list[tuple[str, str]]:
        pool = self.fields["answer_pool"]
        if not pool:
            return []
        return [("answer_pool.by", pool["by"])] + [("answer_pool.keep", k) for k in pool.get("keep", [])]

    def check_columns(self, opened: Opened) -> tuple[set[str], list[str]]:
        """Every field the spec names exists (in the columns, or in a question record); every
        name a template uses is a field. Returns (the question records' keys, the columns to read)."""
        columns = list(opened.dataset.column_names)
        record_keys: set[str] = set()
        unreadable = False  # the first row's question list is none: reading it says why
        names = question_fields(self.fields)
        if len(names) > 1:
            record_keys = set(names)  # parallel lists: each record holds one element of each
        elif names and names[0] in columns and opened.dataset.num_rows:
            first = parse_records(opened.dataset.select_columns(names)[0][names[0]])
            if isinstance(first, list):
                record_keys = {k for rec in first if isinstance(rec, dict) for k in rec}
            else:
                unreadable = True

        def unknown(option: str, name: str, known: list[str]) -> UserError:
            return UserError(f"no field {quote(name)} in {opened.label} (fields: {', '.join(known)})"
                             f"{_did_you_mean(name, known)}", field=f"options.fields.{option}")

        for option, name in self._document_fields():
            if name not in columns:
                raise unknown(option, name, columns)
        for option, name in self._question_fields() + self._pool_fields():
            if name not in columns and name not in record_keys and not unreadable:
                raise unknown(option, name, columns + sorted(record_keys - set(columns)))
        for name in self.source["where"]:
            if name not in columns:
                raise UserError(f"no field {quote(name)} in {opened.label} (fields: {', '.join(columns)})"
                                f"{_did_you_mean(name, columns)}", field=f"options.source.where.{name}")
        f = self.fields
        withheld = ({f["messages"] or f["documents"] or f["context"], *question_fields(f), f["answer"]}
                    - {None, "context"})
        available = (set(columns) | record_keys) - withheld
        doc_templates = [self.prompts.document]
        prompt_templates = [t for t in self.prompts.all() if t is not self.prompts.document]
        problems = unknown_names(prompt_templates, available)
        element_names = ["document", "index", *f["document_fields"]]
        problems += [(t, n) for t, n in unknown_names(doc_templates, set()) if n not in element_names]
        if problems:
            t, name = problems[0]
            known = sorted(available | PROVIDED) if t is not self.prompts.document else element_names
            line = f"template {t.field}" + (f", line {n}" if (n := first_line_of(t.text, name)) else "")
            if name in withheld:
                why = ("is the chat, sent as its own messages" if name == f["messages"] else
                       "is the document: {{ context }} places it, so that the context policy can cut it"
                       if name in (f["documents"], f["context"]) else
                       "is the answer, which a prompt never shows" if name == f["answer"] else
                       "is the list of questions: each question's fields are available by their names")
                raise UserError(f"{line}: uses {quote(name)}, which {why}", field=t.field)
            raise UserError(f"{line}: uses {quote(name)}, which is no field of {opened.label} (fields: "
                            f"{', '.join(known)}){_did_you_mean(name, known)}", field=t.field)
        used = {n for t in prompt_templates for n in t.names}
        needed = {n for _, n in self._document_fields()} | set(self.source["where"])
        needed |= {n for _, n in self._question_fields() + self._pool_fields() if n in columns}
        needed |= used & set(columns)
        return used, [c for c in columns if c in needed]

    # -- the rows -------------------------------------------------------------------------

    def documents(self, max_rows: int | None = None) -> list[Document]:
        """The documents of the split with their questions: `--contexts`, `--limit` and
        `--limit-per-context` applied; reading stops once `--limit` is reached."""
        ctx = self.ctx
        opened = open_source(self.source, ctx)
        used, columns = self.check_columns(opened)
        reader = RowReader(self.fields, opened.label, self.prompts.document)
        docs: dict[str, Document] = {}
        chosen: dict[str, bool] = {}
        taken = 0
        read = 0
        where = self.source["where"]
        per_document = min((n for n in (ctx.limit_per_context, self.opts["max_questions"]) if n is not None),
                           default=None)
        for index, row in enumerate(iter_rows(opened.dataset, columns)):
            if ctx.limit is not None and taken >= ctx.limit:
                break
            if max_rows is not None and read >= max_rows:
                break
            if where and not matches(row, where):
                continue
            read += 1
            key, context, messages, elements, questions = reader.read(index, row, self.split, set(columns))
            if not self.annotate(row, messages, questions):
                continue
            if key not in chosen:
                chosen[key] = ctx.select_context(f"{self.split}/{key}")
            if not chosen[key]:
                continue
            doc = docs.get(key)
            if doc is None:  # the text is kept once per document
                doc = docs[key] = Document(key=key, context=context, messages=messages, elements=elements)
            elif self.fields["document_key"] and (context != doc.context or messages != doc.messages):
                what = "chat" if messages is not None else "context"
                raise UserError(f"{questions[0].where}: document {quote(key)} has a different {what} than in an "
                                "earlier row with the same document key", field="options.fields.document_key")
            for q in questions:
                if per_document is not None and len(doc.questions) >= per_document:
                    break
                if ctx.limit is not None and taken >= ctx.limit:
                    break
                doc.questions.append(q)
                taken += 1
        if not docs and where and max_rows is None:
            raise UserError(f"no row of {opened.label} matches {quote(where)}", field="options.source.where")
        return [d for d in docs.values() if d.questions]

    def annotate(self, row: dict[str, Any], messages: list[Message] | None, questions: list[Question]) -> bool:
        """A benchmark's own type built on this one may add metadata computed from the row to
        its questions (OpenAI MRCR's token bin) or drop the row (False). Here: kept as it is."""
        return True

    # -- the conversations ---------------------------------------------------------------------

    def _chat(self, doc: Document, q: Question) -> Conversation:
        """`fields.messages`: the row's chat, every message but the last sent as it is, the last
        the question's turn. The context is empty and its slot opens the first message, so the
        engine fills nothing into the chat's own text (a literal "{context}" in it stays)."""
        assert doc.messages is not None
        system = self.prompts.system.render({**q.values}, q.where) if self.prompts.system else None
        chat = ([Message("system", system)] if system is not None else []) + list(doc.messages)
        chat[0] = Message(chat[0].role, CONTEXT_SLOT + chat[0].content)
        preamble, last = chat[:-1], chat[-1]
        (turn,) = self._turns(q, last.content, q.values, self.prompts.answer_prefix)
        cid = f"{self.split}/{doc.key}"
        return Conversation(conv_id=turn.item_id, context="", context_id=cid, turns=[turn], preamble=preamble,
                            history=self.opts["history"], metadata={"split": self.split, "document_id": doc.key})

    def _first(self, q: Question, values: dict[str, Any]) -> tuple[list[Message], str]:
        """The preamble and first user message of a conversation: the document's place
        (exactly one) turned into CONTEXT_SLOT."""
        values = {**values, "context": CONTEXT_MARKER}
        system = self.prompts.system.render(values, q.where) if self.prompts.system else None
        user = self.prompts.user.render(values, q.where)
        count = (system or "").count(CONTEXT_MARKER) + user.count(CONTEXT_MARKER)
        if count != 1:
            where = "options.prompt.system" if system and CONTEXT_MARKER in system else "options.prompt.user"
            raise UserError(f"{q.where}: the prompt places the document {count} times; it goes exactly once, as "
                            "{{ context }} (a filter on it, like {{ context | upper }}, is not allowed: the context "
                            "policy must be able to cut it)", field=where)
        if system is not None and CONTEXT_MARKER in system:
            before, field = system.split(CONTEXT_MARKER, 1)[0], "options.prompt.system"
        else:
            before, field = (system or "") + user.split(CONTEXT_MARKER, 1)[0], "options.prompt.user"
        if CONTEXT_SLOT in before:
            raise UserError(f"{q.where}: the prompt holds the text {CONTEXT_SLOT} before the document's place, "
                            "where lceval would put the document instead", field=field,
                            hint="Move the document before that text, or remove it from the template.")
        if system is not None:
            system = system.replace(CONTEXT_MARKER, CONTEXT_SLOT)
        preamble = [Message("system", system)] if system is not None else []
        preamble += [Message(shot["role"], shot["content"]) for shot in self.opts["prompt"]["shots"]]
        return preamble, user.replace(CONTEXT_MARKER, CONTEXT_SLOT)

    def _reference(self, q: Question) -> str:
        """The reference of a turn: what a gold history shows and the judges read."""
        if self.opts["gold_answer"] == "python":
            return str(q.answer_value)  # SCBench's `str(eg["multi_turns"][i - 1]["answer"])`
        return q.answers[0] if len(q.answers) == 1 else " | ".join(q.answers)

    def _turns(self, q: Question, user: str, values: dict[str, Any], prefix: Template) -> list[Turn]:
        """The question's turn and its followups' turns."""
        base = f"{self.split}/{q.qid}"
        reference = self._reference(q)
        steps = self.prompts.followups
        meta = dict(q.metadata)
        if steps:
            meta["step"] = self.opts["prompt"]["step"]
            if not self.opts["prompt"]["scored"]:
                meta["scored"] = False  # asked and kept, never judged or counted (lceval.types.Turn)
        turns = [Turn(item_id=base, user=user, reference=reference, question=q.question, metadata=meta,
                      assistant_prefix=prefix.render(values, q.where))]
        for (name, template), step in zip(steps, self.opts["prompt"]["followups"]):
            text = template.render(values, q.where)
            extra = {} if step.get("scored", True) else {"scored": False}
            turns.append(Turn(item_id=f"{base}/{name}", user=text, reference=reference, question=q.question,
                              metadata={**q.metadata, "step": name, **extra}))
        return turns

    def _answer_pools(self, docs: list[Document]) -> None:
        """`fields.answer_pool`: every question's metadata gets the answers (and the kept fields)
        of all the questions asked over the documents sharing its `by` value, in their order."""
        spec = self.fields["answer_pool"]
        if not spec:
            return
        pools: dict[str, list[dict[str, Any]]] = {}
        for doc in docs:
            for q in doc.questions:
                entry = {"answer": q.answers[0] if len(q.answers) == 1 else list(q.answers)}
                entry.update({k: q.values.get(k) for k in spec.get("keep", [])})
                pools.setdefault(str(q.values.get(spec["by"])), []).append(entry)
        for doc in docs:
            for q in doc.questions:
                q.metadata["answer_pool"] = pools[str(q.values.get(spec["by"]))]

    def conversations(self, docs: list[Document]) -> list[Conversation]:
        out: list[Conversation] = []
        history = self.opts["history"]
        self._answer_pools(docs)
        first_prefix = self.prompts.answer_prefix
        next_prefix = self.prompts.next_answer_prefix or first_prefix
        for doc in docs:
            cid = f"{self.split}/{doc.key}"
            meta = {"split": self.split, "document_id": doc.key}
            if doc.messages is not None:
                out += [self._chat(doc, q) for q in doc.questions]
                continue
            asked = [q.question for q in doc.questions]  # `document_questions`: the texts, never the answers
            if self.opts["mode"] == "single-turn":
                for q in doc.questions:
                    values = {**q.values, "document_questions": asked}
                    preamble, user = self._first(q, values)
                    turns = self._turns(q, user, values, first_prefix)
                    out.append(Conversation(conv_id=turns[0].item_id, context=doc.context, context_id=cid,
                                            turns=turns, preamble=preamble, history=history, metadata=meta,
                                            context_elements=doc.elements))
                continue
            values = {**doc.questions[0].values, "document_questions": asked}
            preamble, user = self._first(doc.questions[0], values)
            turns = self._turns(doc.questions[0], user, values, first_prefix)
            for q in doc.questions[1:]:
                values = {**q.values, "document_questions": asked}
                turns += self._turns(q, self.prompts.next.render(values, q.where), values, next_prefix)
            out.append(Conversation(conv_id=cid, context=doc.context, context_id=cid, turns=turns,
                                    preamble=preamble, history=history, metadata=meta, context_elements=doc.elements))
        return out


class DocumentsTaskType(TaskType):
    """Any benchmark of documents and questions, from its spec alone."""

    options_schema = OPTIONS_SCHEMA
    dataset = None

    def load(self, ctx: TaskContext) -> list[Conversation]:
        builder = Builder(ctx)
        return builder.conversations(builder.documents())

    def check(self, ctx: TaskContext) -> None:
        """The spec against its data's first rows: fields, templates (rendered for those rows),
        answers and choices."""
        builder = Builder(ctx)
        builder.conversations(builder.documents(max_rows=CHECK_ROWS))

    def needs(self, ctx: TaskContext) -> list[Need]:
        """The files its source reads: Hub files at the pinned revision, or data-home files."""
        return source_needs(section_defaults(ctx.options)["source"], ctx)
