"""Bad input to a documents spec exits with 2 and one message naming the spec file, the line
of the option at fault and the value - from `lceval validate` (which checks the spec against
the data's first rows before any model loads) and from `lceval run`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lceval.cli import main

from .conftest import put_in_hub_cache, write_jsonl, write_spec

ROWS = [{"id": f"q{i}", "context": f"Document {i % 2}. " * 5, "question": f"Question {i}?", "answer": f"a{i}",
         "meta": {"kind": "x"}} for i in range(4)]


def line_of(path: Path, text: str) -> int:
    """The 1-based line of the spec where `text` first appears."""
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def option_line(path: Path, *at: str) -> int:
    """The line lceval names for an option the spec may leave to its default (its nearest
    written ancestor's)."""
    from lceval.io import line_of as engine_line, load_yaml_with_lines

    return engine_line(load_yaml_with_lines(path)[1], at)


def spec_with(tmp_path: Path, rows=ROWS, *, fields=None, prompt=None, source=None, **top) -> Path:
    write_jsonl(tmp_path / "rows.jsonl", rows)
    options = {"source": source or {"data_files": "rows.jsonl"}, "fields": {"id": "id", **(fields or {})}}
    if prompt is not None:
        options["prompt"] = prompt
    return write_spec(tmp_path, options, **top)


def validate(spec: Path, capsys) -> str:
    assert main(["validate", str(spec)]) == 2
    out = capsys.readouterr().out
    assert out.startswith("invalid ") and "Traceback" not in out
    return out


def dry_run(spec: Path, capsys) -> str:
    assert main(["run", "--tasks", str(spec), "--model", "smollm2", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lceval: error: ") and "Traceback" not in err
    return err


def test_a_good_spec_validates(tmp_path, capsys):
    spec = spec_with(tmp_path)
    assert main(["validate", str(spec)]) == 0
    assert capsys.readouterr().out.startswith(f"ok      {spec}")


def test_an_unknown_column_is_named_with_the_columns_there_are(tmp_path, capsys):
    spec = spec_with(tmp_path, fields={"context": "contxt"})
    out = validate(spec, capsys)
    assert f"{spec}:{line_of(spec, 'context: contxt')}, field 'options.fields.context'" in out
    assert "no field 'contxt'" in out and "(fields: id, context, question, answer, meta)" in out
    assert "did you mean 'context'?" in out
    err = dry_run(spec, capsys)  # the run says the same, before any model loads
    assert f"{spec}:{line_of(spec, 'context: contxt')}" in err and "did you mean 'context'?" in err


@pytest.mark.parametrize("template,needle", [
    ("{{ context }}\n\n{% if %}", "template options.prompt.user, line 3: Expected an expression"),
    ("{{ context }}\n{{ questoin }}", "template options.prompt.user, line 2: uses 'questoin', which is no field"),
    ("{{ context }}\n\n{{ meta.nope }}", "template options.prompt.user, line 3: 'dict object' has no attribute 'nope'"),
    ("{{ context }}{{ question.__class__.__mro__ }}", "sandbox violation"),
    ("{{ context }}{{ 'x' * 100000000 }}", "a repeated sequence of 100000000 items is over the limit"),
    ("{{ context }}{{ '%s' % question }}", "'%' formatting of text is not available"),
    ("{{ context }}{{ question | center(1000000000) }}", "No filter named 'center'"),
    ("{% for i in range(99999) %}{{ question }}{% endfor %}{{ context }}", "renders more than 200,000 characters"),
    ("{{ context }} and again {{ context }}", "places the document 2 times"),
    ("{{ context | upper }}", "places the document 0 times"),
    ("Question: {{ question }}", "the prompt never places the document"),
    ("{{ context }}\n{{ answer }}", "line 2: uses 'answer', which is the answer, which a prompt never shows"),
])
def test_template_errors_name_the_template_line(tmp_path, capsys, template, needle):
    spec = spec_with(tmp_path, prompt={"user": template})
    out = validate(spec, capsys)
    assert f"{spec}:{line_of(spec, 'user:')}, field 'options.prompt.user'" in out
    assert needle in out, out


def test_a_suggestion_for_a_misspelt_template_field(tmp_path, capsys):
    spec = spec_with(tmp_path, prompt={"user": "{{ context }}\n{{ questoin }}"})
    assert "did you mean 'question'?" in validate(spec, capsys)


def test_an_answer_sometimes_a_list_sometimes_a_string(tmp_path, capsys):
    rows = [dict(r) for r in ROWS]
    rows[2]["answer"] = ["a2", "also a2"]
    spec = spec_with(tmp_path, rows)
    out = validate(spec, capsys)
    assert f"{spec}:{option_line(spec, 'options', 'fields', 'answer')}, field 'options.fields.answer'" in out
    assert "rows.jsonl row 2 (id 'q2'): the answer is a list (['a2', 'also a2']) but row 0 (id 'q0') has a single " \
           "value" in out


def test_an_empty_context(tmp_path, capsys):
    rows = [dict(r) for r in ROWS] + [{**ROWS[0], "id": "q4"}, {**ROWS[0], "id": "q5", "context": " \n "}]
    spec = spec_with(tmp_path, rows)
    assert main(["validate", str(spec)]) == 0  # validate reads the first rows only
    capsys.readouterr()
    err = dry_run(spec, capsys)
    assert f"{spec}:{option_line(spec, 'options', 'fields', 'context')}, field 'options.fields.context'" in err
    assert "rows.jsonl row 5: the context is empty (3 characters)" in err


def test_a_revision_not_in_the_local_cache_while_offline(tmp_path, capsys, _isolated_hf):
    put_in_hub_cache(_isolated_hf / "hub", "someone/bench", "a" * 40, {"rows.json": json.dumps(ROWS).encode()})
    source = {"path": "someone/bench", "revision": "b" * 40, "data_files": "rows.json"}
    spec = spec_with(tmp_path, source=source)
    assert main(["validate", str(spec)]) == 4  # a valid spec whose data is not installed
    out = capsys.readouterr().out
    assert out.startswith("valid; data not installed: ")
    assert f"{spec}:{line_of(spec, 'revision:')}, field 'options.source.revision'" in out
    assert f"Install it: `lceval data fetch {spec}`" in out
    assert f"revision '{'b' * 40}' of dataset someone/bench is not in the local Hugging Face cache and the Hub is " \
           "offline" in out
    spec = spec_with(tmp_path, source={**source, "revision": "a" * 40})  # the one the cache holds
    assert main(["validate", str(spec)]) == 0


def test_a_missing_file_and_a_hub_dataset_without_a_revision(tmp_path, capsys):
    spec = spec_with(tmp_path, source={"data_files": "nope/*.jsonl"})
    assert main(["validate", str(spec)]) == 4  # valid: the data home lacks its files
    out = capsys.readouterr().out
    assert out.startswith("valid; data not installed: ")
    assert f"{spec}:{line_of(spec, 'data_files:')}" in out and "data file 'nope/*.jsonl' not found" in out
    assert f"`lceval data fetch {spec} --from FOLDER`" in out
    spec = spec_with(tmp_path, source={"path": "someone/bench", "data_files": "rows.json"})
    assert "needs a pinned revision" in validate(spec, capsys)


def test_a_metric_option_of_the_wrong_type(tmp_path, capsys):
    spec = spec_with(tmp_path, judge={"name": "f1", "options": {"first_line": "maybe"}})
    out = validate(spec, capsys)
    assert f"{spec}:{line_of(spec, 'first_line:')}, field 'judge.options.first_line'" in out
    assert "first_line=maybe: 'maybe' is not of type 'boolean'" in out


def test_options_outside_the_schema(tmp_path, capsys):
    spec = spec_with(tmp_path, fields={"contxt": "context"})
    out = validate(spec, capsys)
    assert f"{spec}:{line_of(spec, 'contxt:')}, field 'options.fields.contxt'" in out
    assert "did you mean 'context'?" in out
