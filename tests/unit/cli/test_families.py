"""Benchmark families: `lceval tasks` groups tasks by family, `lceval tasks --families` lists
the families with their task counts, languages, metrics and paper (issues 26 and 29)."""

from __future__ import annotations

import re

from pathlib import Path

import pytest

from lceval.engine import load_catalog, load_plugins, load_spec
from tests.cli import lceval


def test_tasks_are_listed_under_their_family() -> None:
    out = lceval("tasks")
    head = out.index("RULER (Hsieh et al., 2024): 13 tasks")
    assert out.index("  ruler_cwe") > head and out.index("  ruler_vt") > head and out.index("  ruler_qa_2") > head
    assert out.index("LongBench (Bai et al., 2024): 21 tasks") < out.index("  longbench_qasper")


def test_families_say_their_tasks_languages_metrics_and_paper() -> None:
    rows = {line.split("  ")[0].strip(): line for line in lceval("tasks", "--families").splitlines()[2:]}
    assert "21" in rows["LongBench"] and "f1" in rows["LongBench"] and "rouge_l" in rows["LongBench"]
    assert "cs" in rows["ELITR-Bench"] and "Thonet et al., 2024a" in rows["ELITR-Bench"]
    for row in rows.values():  # each metric named once, also where a spec names one twice (HELMET's ALCE)
        metrics = [m.strip() for m in re.split(r"\s{2,}", row)[3].split(",")]
        assert len(metrics) == len(set(metrics)), row
    catalog = load_catalog(load_plugins())
    assert sum(len(v) for v in catalog.by_family().values()) == len(catalog.specs)  # every task once


def test_a_spec_may_name_its_family_and_languages(tmp_path: Path) -> None:
    path = tmp_path / "mine" / "t.yaml"
    path.parent.mkdir()
    path.write_text('name: t\ndescription: "d"\ntype: documents\n')
    assert (load_spec(path).family, load_spec(path).languages) == ("mine", ["en"])  # its folder, English
    path.write_text('name: t\ndescription: "d"\ntype: documents\nfamily: longbench\nlanguage: [zh, en]\n')
    assert (load_spec(path).family, load_spec(path).languages) == ("longbench", ["zh", "en"])


def test_a_bad_language_is_refused_at_its_line(tmp_path: Path) -> None:
    from lceval.errors import UserError

    path = tmp_path / "t.yaml"
    path.write_text('name: t\ndescription: "d"\ntype: documents\nlanguage: 3\n')
    with pytest.raises(UserError) as err:
        load_spec(path)
    assert err.value.line == 4
