"""Prompt templates of a `documents` spec: Jinja2 in Jinja's immutable sandbox.

A spec comes from whoever wrote it, so its templates get no attribute access to Python
internals (`''.__class__` is a sandbox violation), cannot change the values they are given,
cannot build huge values (`'x' * 10**9`, `10 ** 10**9`, `'%s' % ...` and the padding
filters are refused) and are stopped once their output passes `max_chars`. An undefined
name is an error (`StrictUndefined`), never an empty string. Every error is a `UserError`
naming the option and the template's own line.

The document itself never passes through a template: `{{ context }}` renders a marker that
the task type turns into `lceval.types.CONTEXT_SLOT`, so the context policy can cut the
document alone and the questions of one document share it as a prefix.
"""

from __future__ import annotations

import json
import operator
import re
import traceback
from dataclasses import dataclass
from typing import Any, Iterable

from lceval.errors import PackageMissing, UserError

#: What `{{ context }}` renders to: private-use characters that no dataset text holds, so
#: the task type can find (and count) the place of the document in the rendered message.
CONTEXT_MARKER = "\ue000lceval:context\ue001"
#: A sequence built by `*` in a template is at most this long.
MAX_REPEAT = 100_000
#: `a ** b` in a template: b at most this.
MAX_EXPONENT = 64
#: Filters that pad or wrap to a width the template chooses (a memory bomb with a huge
#: width) or format with `%` (which the sandbox cannot bound): not available to templates.
REMOVED_FILTERS = ("center", "indent", "wordwrap", "format", "truncate", "filesizeformat", "xmlattr", "urlize")

_ENV: Any = None


def _environment() -> Any:
    """One sandboxed environment per process (jinja2 imported on first use only)."""
    global _ENV
    if _ENV is not None:
        return _ENV
    try:
        from jinja2 import StrictUndefined
        from jinja2.exceptions import SecurityError
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise PackageMissing("the documents task type renders its prompts with Jinja2, which is not installed",
                             field="options.prompt", install="pip install 'lceval[documents]'") from None

    class BoundedEnvironment(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset(["*", "**", "%"])

        def call_binop(self, context: Any, op: str, left: Any, right: Any) -> Any:
            if op == "*":
                for seq, times in ((left, right), (right, left)):
                    if isinstance(seq, (str, list, tuple)) and isinstance(times, int) \
                            and len(seq) * max(times, 0) > MAX_REPEAT:
                        raise SecurityError(f"a repeated sequence of {len(seq) * times} items is over the "
                                            f"limit of {MAX_REPEAT}")
                return operator.mul(left, right)
            if op == "**":
                if isinstance(right, (int, float)) and abs(right) > MAX_EXPONENT:
                    raise SecurityError(f"an exponent of {right} is over the limit of {MAX_EXPONENT}")
                return operator.pow(left, right)
            if isinstance(left, str):  # '%' on text is printf formatting, unbounded
                raise SecurityError("'%' formatting of text is not available in templates")
            return operator.mod(left, right)

    env = BoundedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
    for name in REMOVED_FILTERS:
        env.filters.pop(name, None)
    env.filters["regex_findall"] = _regex_findall
    env.filters["json_dumps"] = _json_dumps
    _ENV = env
    return env


def _pattern(pattern: Any) -> "re.Pattern[str]":
    if not isinstance(pattern, str):
        raise TypeError(f"a regular expression must be text, got {pattern!r}")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"{pattern!r} is no regular expression: {exc}") from None


def _regex_findall(value: Any, pattern: Any) -> list[Any]:
    """`{{ input | regex_findall("func_[0-9]+\\(-?[0-9]+\\)") }}`: every match (Python's
    `re.findall`), for prompts built from a part of a field (InfiniteBench's code_run and
    math_find prompts name what their question asks about)."""
    return _pattern(pattern).findall(str(value))


def _without(value: Any, drop: frozenset[str]) -> Any:
    """`value` with the keys in `drop` left out of every mapping in it (a copy)."""
    if isinstance(value, dict):
        return {k: _without(v, drop) for k, v in value.items() if k not in drop}
    if isinstance(value, (list, tuple)):
        return [_without(v, drop) for v in value]
    return value


def _json_dumps(value: Any, drop: Any = ()) -> str:
    """`{{ document | json_dumps(drop=["has_answer"]) }}`: the value as Python's `json.dumps`
    writes it with its defaults (non-ASCII as \\u escapes of four hex digits, `", "` and `": "` separators, keys in
    the data's order), the keys named in `drop` left out of every mapping first. Jinja's own
    `tojson` sorts keys and escapes HTML characters; LongMemEval's run_generation.py prints
    each session with `json.dumps`."""
    if isinstance(drop, str) or not all(isinstance(k, str) for k in drop):
        raise TypeError(f"json_dumps(drop=...) takes a list of key names, got {drop!r}")
    return json.dumps(_without(value, frozenset(drop)))


def _template_line(exc: BaseException) -> int | None:
    """The template's own line an error was raised at (Jinja puts template frames named
    `<template>` into the traceback), or the line a syntax error carries."""
    lineno = getattr(exc, "lineno", None)
    if isinstance(lineno, int):
        return lineno
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == "<template>"]
    return frames[-1].lineno if frames else None


def _where(field: str, exc: BaseException | None = None) -> str:
    line = _template_line(exc) if exc is not None else None
    return f"template {field}" + (f", line {line}" if line else "")


@dataclass
class Template:
    """One compiled template and the option it comes from (`options.prompt.user` ...)."""

    field: str
    text: str
    compiled: Any
    names: frozenset[str]  # the undeclared names it reads (the fields it needs)
    max_chars: int

    def render(self, values: dict[str, Any], what: str) -> str:
        """The rendered text; `what` names the row in errors ("row 3 (id 'x')")."""
        from jinja2.exceptions import SecurityError, TemplateError, UndefinedError

        out: list[str] = []
        size = 0
        try:
            for chunk in self.compiled.generate(values):
                size += len(chunk)
                if size > self.max_chars:
                    raise UserError(f"{_where(self.field)}: renders more than {self.max_chars:,} "
                                    f"characters for {what} (the document left out)", field=self.field,
                                    hint="Raise options.prompt.max_chars if this is meant.")
                out.append(chunk)
        except UserError:
            raise
        except SecurityError as exc:
            raise UserError(f"{_where(self.field, exc)}: sandbox violation for {what}: {exc}",
                            field=self.field) from None
        except UndefinedError as exc:
            raise UserError(f"{_where(self.field, exc)}: {exc} for {what}", field=self.field,
                            hint=f"Fields available: {', '.join(sorted(values))}.") from None
        except (TemplateError, ArithmeticError, TypeError, ValueError, LookupError, OverflowError) as exc:
            raise UserError(f"{_where(self.field, exc)}: {type(exc).__name__}: {exc} for {what}",
                            field=self.field) from None
        return "".join(out)


def compile_template(text: str, field: str, max_chars: int) -> Template:
    """Compile a spec's template; a syntax error names the option and the template's line."""
    env = _environment()  # first: without Jinja2 installed it says how to install it
    from jinja2 import meta
    from jinja2.exceptions import TemplateSyntaxError

    try:
        ast = env.parse(text)
        compiled = env.from_string(text)
    except TemplateSyntaxError as exc:
        raise UserError(f"{_where(field, exc)}: {exc.message}", field=field) from None
    return Template(field=field, text=text, compiled=compiled, names=frozenset(meta.find_undeclared_variables(ast)),
                    max_chars=max_chars)


#: A name a template may use although no column has it: what the task type provides.
PROVIDED = frozenset({"context", "question", "choices", "split", "answer_words", "document_questions"})


def unknown_names(templates: Iterable[Template], available: Iterable[str]) -> list[tuple[Template, str]]:
    """(template, name) for every name a template reads that neither a column nor the task
    type provides: found before any row is rendered."""
    known = set(available) | PROVIDED
    return [(t, name) for t in templates for name in sorted(t.names) if name not in known]


def first_line_of(text: str, name: str) -> int | None:
    """The line of the template where `name` is first used (for an unknown field)."""
    pattern = re.compile(r"\b" + re.escape(name) + r"\b")
    for i, line in enumerate(text.splitlines(), start=1):
        if ("{{" in line or "{%" in line) and pattern.search(line):
            return i
    return None
