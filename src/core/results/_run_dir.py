"""Reading finished run directories back: the input of `score`, `compare`, `report` and
`judge-agreement`. Every later stage starts from what a run wrote, never from memory, so a
run can be re-judged, compared or tabulated months later on another machine."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema

from lceval.engine import FinishedRun, RunRecord, model_label
from lceval.errors import UserError
from lceval.io import DATA_MAX_BYTES, read_json_lines, read_json_object
from lceval.io import load_schema, validate
from lceval.types import ContextCut, Judgment, Sample

#: samples.jsonl grows with the run (a response per line): more room than other data files
SAMPLES_MAX_BYTES = 4 * DATA_MAX_BYTES


def _read_json(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise UserError(f"not a finished run directory (no {path.name})", file=path.parent)
    return read_json_object(path, what=path.name)


@lru_cache(maxsize=None)
def _sample_validator() -> Any:
    return jsonschema.Draft202012Validator(load_schema("sample.schema.json"))


def sample_from_record(rec: dict[str, Any]) -> Sample:
    judgments = [Judgment(**j) for j in rec.get("judgments") or []]
    cut = ContextCut(**rec["context_cut"])
    fields = {k: v for k, v in rec.items() if k not in ("judgments", "context_cut", "score")}
    return Sample(**{**fields, "judgments": judgments, "context_cut": cut})


def load_run(path: Path) -> FinishedRun:
    path = Path(path)
    if not path.is_dir():
        raise UserError("run directory not found", file=path)
    results = _read_json(path / "results.json")
    # every later stage indexes into results and the manifest: a damaged one is named here
    validate(results, load_schema("results.schema.json"), path / "results.json", {})
    for task, block in results["tasks"].items():
        if "score" not in block["metrics"]:
            raise UserError("task has no 'score' metric", file=path / "results.json", field=f"tasks.{task}.metrics")
    # later stages re-score and rank with the specs recorded here: each must still be a spec
    record = RunRecord.from_manifest(_read_json(path / "manifest.json"), path, model=str(results.get("model", "?")),
                                     seeds=list(results.get("seeds") or [0]))
    samples_path = path / "samples.jsonl"
    if not samples_path.exists():
        raise UserError("not a finished run directory (no samples.jsonl)", file=path)
    samples: list[Sample] = []
    for lineno, line in read_json_lines(samples_path, what="samples file", limit=SAMPLES_MAX_BYTES):
        if not _sample_validator().is_valid(line):
            validate(line, load_schema("sample.schema.json"), samples_path, {(): lineno})
        try:
            samples.append(sample_from_record(line))
        except TypeError as exc:
            raise UserError(f"not a sample record: {exc}", file=samples_path, line=lineno) from None
    return FinishedRun(path=path, results=results, record=record, samples=samples)


def run_model_name(run: FinishedRun) -> str:
    """A run's row label: the model as the user named it (`smollm2`, not the GGUF its alias
    resolves to), shortened like a paper's table (`replay:FILE#GPT-4` -> `GPT-4`)."""
    typed = run.record.config.models[0] if run.record.config.models else ""
    return model_label(typed or run.model)
