"""Task specs are data: schema errors name file, field and line; no tag can run code."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lceval.cli import main
from lceval.errors import UserError
from lceval.engine import check_spec, load_plugins, load_spec

GOOD = """\
name: my_task
description: a copy of elitr_qa
type: elitr
options:
  question_set: qa
  mode: single-turn
generation:
  max_new_tokens: 64
"""


def write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_good_spec_gets_defaults(tmp_path):
    spec = load_spec(write(tmp_path, GOOD))
    assert spec.name == "my_task"
    assert spec.data["generation"]["max_new_tokens"] == 64
    assert spec.data["generation"]["temperature"] == 0.0
    assert spec.data["context"]["policy"] == "error"


def test_wrong_type_names_field_and_line(tmp_path):
    path = write(tmp_path, GOOD.replace("max_new_tokens: 64", "max_new_tokens: lots"))
    with pytest.raises(UserError) as err:
        load_spec(path)
    e = err.value
    assert e.file == str(path) and e.field == "generation.max_new_tokens" and e.line == 8
    assert "'lots' is not of type 'integer'" in e.message


def test_missing_required_field(tmp_path):
    path = write(tmp_path, GOOD.replace("type: elitr\n", ""))
    with pytest.raises(UserError, match="'type' is a required property"):
        load_spec(path)


def test_unknown_field_lists_allowed_ones(tmp_path):
    path = write(tmp_path, GOOD + "prompts: oops\n")
    with pytest.raises(UserError) as err:
        load_spec(path)
    assert "prompts" in err.value.message and "allowed:" in err.value.message


@pytest.mark.parametrize("payload", [
    "description: !function utils.doc_to_text\n",
    "description: !!python/object/apply:os.system ['echo pwned']\n",
    "description: !!python/name:os.system\n",
])
def test_tags_cannot_execute_code(tmp_path, payload):
    text = GOOD.replace("description: a copy of elitr_qa\n", payload)
    with pytest.raises(UserError) as err:
        load_spec(write(tmp_path, text))
    assert "not allowed" in err.value.message and err.value.line == 2


def test_duplicate_keys_are_rejected(tmp_path):
    with pytest.raises(UserError, match="duplicate key 'name'") as err:
        load_spec(write(tmp_path, GOOD + "name: again\n"))
    assert err.value.line == 9


def test_task_type_options_are_checked_with_line(tmp_path):
    path = write(tmp_path, GOOD.replace("mode: single-turn", "mode: both"))
    spec = load_spec(path)
    with pytest.raises(UserError) as err:
        check_spec(spec, load_plugins())  # its task type's options, against the type's schema
    assert err.value.field == "options.mode" and err.value.line == 6


def test_validate_cli_exit_2_without_traceback(tmp_path, capsys, tiny_home, monkeypatch):
    bad = write(tmp_path, GOOD.replace("max_new_tokens: 64", "max_new_tokens: -3"), "bad.yaml")
    good = write(tmp_path, GOOD, "good.yaml")
    assert main(["validate", str(good)]) == 4  # valid, its dataset not installed yet
    assert "valid; data not installed: " in capsys.readouterr().out
    monkeypatch.setenv("LCEVAL_DATA", str(tiny_home))
    assert main(["validate", str(good)]) == 0
    assert main(["validate", str(good), str(bad)]) == 2
    out = capsys.readouterr().out
    assert f"{bad}:8" in out and "generation.max_new_tokens" in out


def test_run_with_malformed_spec_exits_2(tmp_path):
    bad = write(tmp_path, "name: x\ndescription: d\ntype: elitr\ngeneration: [1, 2]\n", "bad.yaml")
    proc = subprocess.run([sys.executable, "-m", "lceval", "run", "--tasks", str(bad), "--model", "smollm2"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert f"{bad}:4" in proc.stderr and "field 'generation'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_invalid_yaml_syntax_reports_line(tmp_path):
    with pytest.raises(UserError) as err:
        load_spec(write(tmp_path, "name: x\ndescription: [unclosed\ntype: elitr\n"))
    assert err.value.line is not None and "invalid YAML" in err.value.message


def test_task_type_defaults_are_filled_and_change_nothing(tmp_path, tiny_home, capsys):
    """The type's declared defaults go into the resolved spec (shown and recorded), and the
    conversations are the ones the task type builds from a spec that names none of them."""

    from lceval.interfaces import TaskContext
    from lceval.options import defaults
    from lceval_plugins.elitr.task import FIG4_PROMPT, OPTIONS_SCHEMA, ElitrTaskType

    spec = load_spec(write(tmp_path, GOOD))
    assert isinstance(check_spec(spec, load_plugins()), ElitrTaskType)  # the elitr type's schema: OPTIONS_SCHEMA
    opts = spec.data["options"]
    assert opts["question_set"] == "qa" and opts["history"] == "model" and opts["prompt"] == FIG4_PROMPT

    # every option the schema declares a default for is in the resolved spec: a task type
    # reads ctx.options as they are and merges no defaults of its own
    assert set(defaults(OPTIONS_SCHEMA)) <= set(opts)
    ctx = TaskContext(spec={"options": opts}, spec_path=spec.path, data_home=tiny_home, splits=None,
                      limit=None, record_file=lambda path: None)
    assert [c.turns[0].user for c in ElitrTaskType().load(ctx)][0].startswith(FIG4_PROMPT.split("{transcript}")[0])
    assert main(["tasks", "show", "elitr_qa_mt"]) == 0
    shown = capsys.readouterr().out
    assert "mode: multi-turn" in shown and "history: model" in shown and "qa_markers: false" in shown
