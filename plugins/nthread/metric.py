"""Needle Threading's answer check, as the authors' only published code defines it.

jonathan-roberts1/needle-threading, commit 006f8f57310cad9f84d5a8104c939abc86c96fa8, README.md,
"Single Needle example inference using Gemini 1.5 Flash":

    model_response.strip()                      # result discarded: no effect
    model_response = literal_eval(model_response)
    answer = item['values']
    model_answer = model_response[0:len(str(answer))]
    correct = model_answer == str(answer)
    ...
    accuracy = output_df["Correct?"].mean()     # printed x 100

So the reply, as the model wrote it, is read as a Python literal (the model is expected to answer
with a quoted string), and it is right when its first len(answer) characters are the answer. A
reply that is no literal (an unquoted UUID) makes `literal_eval` raise and the README's loop
stop; here it is wrong (0), as is a literal that cannot be sliced or compared.

The repository has no code for the tasks whose answer is a list (Multiple_Needles,
Conditional_Needles, Multi_Threads; the paper describes their scoring, which could not be read
for this port). `answer: list` extends the README rule to them: the gold `values` text is read
as a Python literal list, the reply must be a list (or tuple) literal, and a gold value is found
when an element of the reply starts with it (the README's prefix rule, per element, in any
order). `lists: all` (default) scores 1 when every gold value is found - one boolean per
question, as the README's `Correct?` column; `lists: share` scores the share found. Neither is
verified against the paper: docs/tasks/nthread.md says so.

`parse: uuids` is lceval's lenient reading, not the authors': the UUIDs written anywhere in the
reply, in order (a bare UUID, a list without quotes).
"""

from __future__ import annotations

import ast
import re
from typing import Any

from lceval.errors import UserError
from lceval.types import JudgeInput

from lceval_plugins.judges.metric_base import MetricJudge, as_written

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_ERRORS = (ValueError, SyntaxError, TypeError, MemoryError, RecursionError)

_MISSING = object()


def literal(text: str) -> Any:
    """`ast.literal_eval(text)` (never `eval`), or _MISSING where it raises."""
    try:
        return ast.literal_eval(text)
    except _ERRORS:
        return _MISSING


def readme_correct(reply: Any, answer: str) -> bool:
    """The README's check of a parsed reply: `reply[0:len(str(answer))] == str(answer)`; a
    reply that cannot be sliced or compared is wrong."""
    try:
        return bool(reply[0:len(str(answer))] == str(answer))
    except _ERRORS:
        return False


def gold_list(text: str) -> list[str]:
    """A list task's `values` text (a Python literal list) as its values."""
    value = literal(text)
    if not isinstance(value, (list, tuple)):
        raise UserError(f"the gold values {text[:80]!r} are no Python list (answer: list)",
                        field="judge.options.answer", hint="Use answer: value for a task with one value.")
    return [str(v) for v in value]


class NeedleThreadingJudge(MetricJudge):
    """The README's literal-and-prefix check (x 100), one value or a list."""

    name = "needle_threading"
    version = 1
    AS_WRITTEN = True  # literal_eval reads the reply as the model wrote it
    OPTIONS = {"type": "object", "additionalProperties": False, "properties": {
        "answer": {"enum": ["value", "list"], "default": "value",
                   "description": "value: the gold `values` is one value (Single_Needle, Single_Threads); list: "
                                  "it is the text of a Python list (Multiple_Needles, Conditional_Needles, "
                                  "Multi_Threads)."},
        "lists": {"enum": ["all", "share"], "default": "all",
                  "description": "With answer: list, all: right when every gold value is found; share: the share "
                                 "found."},
        "parse": {"enum": ["python_literal", "uuids"], "default": "python_literal",
                  "description": "python_literal: the reply read with ast.literal_eval, as the authors' README; "
                                 "uuids: the UUIDs anywhere in the reply (lceval's lenient reading, not the "
                                 "authors')."},
    }}

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        gold = references[0]
        lenient = self.options["parse"] == "uuids"
        if self.options["answer"] == "value":
            if lenient:
                found = _UUID.findall(prediction)
                right = bool(found) and found[0] == gold
                return float(right), {"parsed": bool(found), "correct": right}
            reply = literal(prediction)
            right = reply is not _MISSING and readme_correct(reply, gold)
            return float(right), {"parsed": reply is not _MISSING, "correct": right}
        values = gold_list(gold)
        if lenient:
            elements: Any = _UUID.findall(prediction)
            parsed = True
        else:
            elements = literal(prediction)
            parsed = isinstance(elements, (list, tuple))
            if not parsed:
                elements = []
        found = sum(1 for v in values if any(readme_correct(e, v) for e in elements if isinstance(e, str)))
        share = found / len(values) if values else float(not elements)
        value = share if self.options["lists"] == "share" else float(share == 1.0)
        return value, {"parsed": parsed, "found": found, "gold": len(values)}

    def answer_of(self, item: JudgeInput) -> str:
        return as_written(item)
