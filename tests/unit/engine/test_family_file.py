"""A spec folder's family file (`_family.yaml`, issue 38): the family's fidelity record against its
authors' code, written once. Its departures reach the `report.differs_from_paper` of the tasks
they name (so results.json and every table mark those numbers), the catalog lists no task from
it, a bad one names its file, field and line, and every shipped family has one whose patterns
each name a task."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest
import yaml

from lceval.engine import family_file, load_catalog, load_plugins, load_spec
from lceval.errors import UserError

PLUGINS = load_plugins()
CATALOG = load_catalog(PLUGINS)
TASKS = Path(__file__).resolve().parents[3] / "tasks"

RECORD = {"checked_against": {"repository": "someone/bench", "commit": "abcdef1"},
          "identical": {"prompts": "byte for byte (a test)"}, "published": "none"}


def _folder(tmp_path: Path, fidelity: dict) -> Path:
    (tmp_path / "_family.yaml").write_text(yaml.safe_dump({"fidelity": fidelity}), encoding="utf-8")
    for name, report in (("bench_a", {"differs_from_paper": "Own reason"}), ("bench_b", None)):
        spec = {"name": name, "description": "d", "type": "documents", **({"report": report} if report else {})}
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    return tmp_path


def test_a_departure_reaches_the_differs_from_paper_of_the_tasks_it_names(tmp_path):
    folder = _folder(tmp_path, {**RECORD, "differs": [
        {"what": "Everywhere", "effect": "small"},
        {"tasks": ["bench_b*"], "what": "Only b", "effect": "1.5 points on the published answers"}]})
    a, b = load_spec(folder / "bench_a.yaml"), load_spec(folder / "bench_b.yaml")
    assert a.report.differs_from_paper == "Own reason. Everywhere; effect: small."
    assert b.report.differs_from_paper == ("Everywhere; effect: small. Only b; effect: 1.5 points on the "
                                           "published answers.")
    record = family_file(folder).fidelity
    assert (record.repository, record.commit, [d.tasks for d in record.departures_of("bench_a")]) == \
        ("someone/bench", "abcdef1", [()])


def test_a_family_file_without_departures_changes_no_spec(tmp_path):
    folder = _folder(tmp_path, RECORD)
    assert load_spec(folder / "bench_a.yaml").report.differs_from_paper == "Own reason"
    assert load_spec(folder / "bench_b.yaml").report.differs_from_paper is None


@pytest.mark.parametrize("fidelity,field", [
    ({**RECORD, "identical": {"prompt": "x"}}, "fidelity.identical"),
    ({**RECORD, "differs": [{"what": "no effect given"}]}, "fidelity.differs.0"),
    ({**RECORD, "checked_against": {"commit": "abcdef1"}}, "fidelity.checked_against"),
])
def test_a_bad_family_file_names_its_file_and_field(tmp_path, fidelity, field):
    folder = _folder(tmp_path, fidelity)
    with pytest.raises(UserError) as err:
        load_spec(folder / "bench_a.yaml")
    assert err.value.file is not None and Path(err.value.file).name == "_family.yaml"
    assert (err.value.field or "").startswith(field) and err.value.line


def test_every_shipped_family_has_a_record_and_every_pattern_names_a_task():
    by_folder: dict[str, list[str]] = {}
    for name, path in CATALOG.specs.items():
        by_folder.setdefault(Path(path).parent.name, []).append(name)
    assert "_family" not in {Path(p).stem for p in CATALOG.specs.values()}
    for folder, names in by_folder.items():
        record = family_file(TASKS / folder)
        assert record is not None and record.fidelity is not None, folder
        for departure in record.fidelity.departures:
            for pattern in departure.tasks:
                assert fnmatch.filter(names, pattern), (folder, pattern)


@pytest.mark.parametrize("task,words", [
    ("counting_stars_reasoning_zh", "stops the authors' notebook"),
    ("loogle_shortdep_qa", "PYTHONHASHSEED"),
    ("loogle_shortdep_cloze", "get_partial_match raise"),
    ("lveval_multifieldqa_zh_mixup_256k", "normalise to nothing"),
    ("ada_leval_tsort", "'Answer: null'"),
    ("longmemeval_m", "max_len - 1,800"),
    ("helmet_banking77", "plain completion"),
    ("helmet_narrativeqa", "seed of the document's id"),
])
def test_the_departures_issue_38_found_are_declared_in_the_specs(task, words):
    assert words in (CATALOG.spec(task).report.differs_from_paper or "")
