"""The real SmolLM2 model (llama.cpp, 2k window) on the shipped L-Eval, LooGLE and LIBRA specs, their
Hub source swapped for rows we wrote in the authors' schema (tests/data/leval, loogle, libra):
each document carries several questions and is prefilled once, so the tokens prefilled stay
within 1.1 x the floor (each document once, plus each question's own tokens), as
tests/plugins/documents/test_smollm2.py checks for the worked example."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from lceval.engine import load_catalog, load_plugins
from tests import cli as commands
from tests.paths import TEST_DATA

pytestmark = pytest.mark.slow

CATALOG = load_catalog(load_plugins())


def local_copy(name: str, data: Path, folder: Path) -> Path:
    """The shipped spec with its rows read from `data` instead of the Hub, beside a copy of its
    family's _family.yaml (the defaults it leaves out, less the Hub source) in a folder of the
    family's name."""
    shipped = CATALOG.spec(name).path
    family = folder / shipped.parent.name
    family.mkdir()
    defaults = yaml.safe_load((shipped.parent / "_family.yaml").read_text(encoding="utf-8"))
    defaults["defaults"]["options"].pop("source", None)
    (family / "_family.yaml").write_text(yaml.safe_dump(defaults, sort_keys=False, allow_unicode=True), encoding="utf-8")
    spec = yaml.safe_load(shipped.read_text(encoding="utf-8"))
    source = CATALOG.spec(name).options["source"]
    spec["options"]["source"] = {"data_files": str(data), "split": source.get("split", "test"),
                                 **({"where": source["where"]} if source.get("where") else {})}
    path = family / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def prefill_check(run_dir: Path, task: str, questions: int) -> tuple[int, int]:
    results = json.loads((run_dir / "results.json").read_text())
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == questions
    documents = {s["metadata"]["document_id"]: s["context_cut"]["kept_tokens"] for s in samples}
    own = sum(s["prompt_tokens"] - s["context_cut"]["kept_tokens"] for s in samples)
    floor = sum(documents.values()) + own
    prefilled = results["tasks"][task]["accounting"]["tokens"]["prefilled"]
    assert prefilled <= 1.1 * floor, (prefilled, floor)
    return prefilled, floor


@pytest.mark.parametrize("name, data, questions", [
    ("leval_tpo", TEST_DATA / "leval" / "tpo_sample.jsonl", 6),
    ("loogle_shortdep_qa", TEST_DATA / "loogle" / "shortdep_qa_sample.jsonl", 6),
    ("libra_matreshka_yes_no", TEST_DATA / "libra" / "matreshka_yes_no_sample.jsonl", 6),
])
def test_a_documents_questions_prefill_it_once(name, data, questions, tmp_path):
    pytest.importorskip("llama_cpp")
    spec = local_copy(name, data, tmp_path)
    ((run_dir, _table),) = commands.run(tasks=str(spec), models=["smollm2,n_ctx=2048"],
                                       overrides={"generation.max_new_tokens": 8}, output=tmp_path / "runs",
                                       progress=False)
    prefilled, floor = prefill_check(run_dir, name, questions)
    print(f"{name}: prefilled {prefilled}, floor {floor}, {prefilled / floor:.2f} x")
