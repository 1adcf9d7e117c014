"""A family's spec defaults (issue 40): the `defaults:` of a folder's `_family.yaml` are merged
under each of its specs (mappings key by key, a list or value replaced), the folder is the
spec's family, `lceval tasks show` says where each resolved value came from, a bad value names
the file it is written in (the family file for an inherited one), and a plugin's spec folder
gets the same. Every shipped spec is pinned by tests/unit/engine/test_resolved_specs.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from lceval import hookimpl
from lceval.engine import check_spec, load_catalog, load_plugins, load_spec
from lceval.errors import UserError

from tests.cli import call, lceval

PLUGINS = load_plugins()
TASKS = Path(__file__).resolve().parents[3] / "tasks"

DEFAULTS = {
    "type": "elitr",
    "citation": "Someone et al. (2024)",
    "options": {"question_set": "qa", "mode": "single-turn"},
    "generation": {"max_new_tokens": 64, "stop": ["\n\n"]},
    "report": {"table": {"name": "Our table"}, "breakdowns": ["question_type"]},
}
#: what a spec of that folder must add: the table's column
COLUMN = {"report": {"table": {"column": "A"}}}


def _folder(tmp_path: Path, defaults: dict | str, **specs: dict) -> Path:
    folder = tmp_path / "mybench"
    folder.mkdir(exist_ok=True)
    text = defaults if isinstance(defaults, str) else yaml.safe_dump({"defaults": defaults}, sort_keys=False)
    (folder / "_family.yaml").write_text(text, encoding="utf-8")
    for name, spec in specs.items():
        (folder / f"{name}.yaml").write_text(yaml.safe_dump({"name": name, "description": f"{name} task", **spec},
                                                            sort_keys=False), encoding="utf-8")
    return folder


def test_defaults_are_merged_under_each_spec_and_the_folder_is_its_family(tmp_path):
    folder = _folder(tmp_path, DEFAULTS,
                     bench_a={"report": {"table": {"column": "A"}}},
                     bench_b={"options": {"mode": "multi-turn"}, "generation": {"stop": []},
                              "report": {"table": {"column": "B"}, "breakdowns": []}})
    a, b = load_spec(folder / "bench_a.yaml"), load_spec(folder / "bench_b.yaml")
    assert a.type == b.type == "elitr" and a.family == b.family == "mybench" and a.data["family"] == "mybench"
    assert a.options == {"question_set": "qa", "mode": "single-turn"}
    assert b.options == {"question_set": "qa", "mode": "multi-turn"}          # mappings merge key by key
    assert a.data["generation"]["stop"] == ["\n\n"] and b.data["generation"]["stop"] == []   # lists are replaced
    assert a.data["generation"]["temperature"] == 0.0                          # lceval's own defaults still apply
    assert a.report.table == {"name": "Our table", "column": "A"} and b.report.breakdowns == ()
    assert a.citation == "Someone et al. (2024)"


def test_tasks_show_says_where_each_value_came_from(tmp_path):
    folder = _folder(tmp_path, DEFAULTS, bench_a={**COLUMN, "options": {"mode": "multi-turn"}})
    out = lceval("tasks", "show", folder / "bench_a.yaml")
    spec, _, sources = out.partition("# where each value came from:\n")
    assert yaml.safe_load(spec)["options"]["mode"] == "multi-turn"              # the output is still a spec
    listed = sources.replace("\n#     ", " ")
    rows = {line.split(":")[0].strip("# "): line for line in listed.splitlines()}
    assert "options.mode" in rows["the spec (mybench/bench_a.yaml)"]
    assert "name, description" in rows["the spec (mybench/bench_a.yaml)"]
    family_row = rows["the family's defaults (mybench/_family.yaml)"]
    assert "options.question_set" in family_row and "type" in family_row and "generation.{max_new_tokens, stop}" in family_row
    assert rows["the folder"].endswith(": family")
    assert "generation.{temperature, top_p, repeat_penalty}" in rows["lceval's default"]
    assert "options." in rows["the elitr task type's default"] and "prompt_role" in rows["the elitr task type's default"]
    # every value of the resolved spec has one source
    assert listed.count("options.mode") == 1 and listed.count("question_set") == 1


@pytest.mark.parametrize("defaults,field,words", [
    ({"generation": {"max_new_tokens": "many"}}, "defaults.generation.max_new_tokens", "'many' is not of type 'integer'"),
    ({"context": {"policy": "truncat"}}, "defaults.context.policy", "'truncat' is not one of"),
    ({"generaton": {}}, "defaults.generaton", "unknown field 'generaton'; did you mean 'generation'?"),
    ({"name": "x"}, "defaults.name", "each spec names itself"),
    ({"family": "x"}, "defaults.family", "the folder is the family"),
])
def test_a_bad_defaults_file_names_its_file_field_and_value(tmp_path, defaults, field, words):
    folder = _folder(tmp_path, {**DEFAULTS, **defaults}, bench_a=COLUMN)
    with pytest.raises(UserError) as err:
        load_spec(folder / "bench_a.yaml")
    assert err.value.file.endswith("_family.yaml") and err.value.field == field and words in err.value.message
    assert err.value.line is not None
    code, out, err = call("validate", folder / "bench_a.yaml")
    assert code == 2 and "_family.yaml" in out + err and field in out + err and "Traceback" not in out + err


def test_an_inherited_bad_option_or_judge_names_the_family_file(tmp_path):
    folder = _folder(tmp_path, {**DEFAULTS, "options": {"mode": "sideways"}}, bench_a=COLUMN)
    with pytest.raises(UserError) as err:
        check_spec(load_spec(folder / "bench_a.yaml"), PLUGINS)
    assert err.value.file.endswith("_family.yaml") and err.value.field == "defaults.options.mode"
    lines = (folder / "_family.yaml").read_text().splitlines()
    assert "'sideways'" in err.value.message and lines[err.value.line - 1].strip() == "mode: sideways"
    folder = _folder(tmp_path, {**DEFAULTS, "judge": {"name": "rubrik"}}, bench_a=COLUMN)
    with pytest.raises(UserError) as err:
        check_spec(load_spec(folder / "bench_a.yaml"), PLUGINS)
    assert err.value.file.endswith("_family.yaml") and err.value.field == "defaults.judge.name"
    # the spec's own bad value names the spec
    folder = _folder(tmp_path, DEFAULTS, bench_a={**COLUMN, "options": {"mode": "sideways"}})
    with pytest.raises(UserError) as err:
        check_spec(load_spec(folder / "bench_a.yaml"), PLUGINS)
    assert err.value.file.endswith("bench_a.yaml") and err.value.field == "options.mode"


def test_what_neither_gives_is_missing_from_the_spec(tmp_path):
    folder = _folder(tmp_path, {"citation": "x"}, bench_a={})
    with pytest.raises(UserError, match="'type' is a required property") as err:
        load_spec(folder / "bench_a.yaml")
    assert err.value.file.endswith("bench_a.yaml")


def test_a_plugins_spec_folder_has_defaults_too(tmp_path):
    folder = _folder(tmp_path, DEFAULTS, plugin_task={"report": {"table": {"column": "P"}}})

    class Specs:
        @hookimpl
        def register_spec_dirs(self, register):
            register(folder)

    plugins = load_plugins(extra=[("specs", Specs())])
    spec = load_catalog(plugins).spec("plugin_task")
    check_spec(spec, plugins)
    assert spec.type == "elitr" and spec.family == "mybench" and spec.options["question_set"] == "qa"
    assert spec.sources()[("options", "question_set")] == "the family's defaults (mybench/_family.yaml)"


def test_no_shipped_spec_writes_its_family():
    """The folder is the family: a spec writes `family` only when it is kept elsewhere."""
    writing = [p.name for p in TASKS.glob("*/*.yaml")
               if not p.name.startswith("_") and "family" in (yaml.safe_load(p.read_text(encoding="utf-8")) or {})]
    assert writing == []
