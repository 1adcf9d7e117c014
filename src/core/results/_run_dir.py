"""Reading finished run directories back: the input of `score`, `compare`, `report` and
`judge-agreement`. Every later stage starts from what a run wrote, never from memory, so a
run can be re-judged, compared or tabulated months later on another machine."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema

from lceval.engine import model_label
from lceval.errors import UserError
from lceval.io import DATA_MAX_BYTES, read_json_lines, read_json_object
from lceval.io import load_schema, validate
from lceval.types import ContextCut, FinishedRun, Judgment, Sample

#: the parts of manifest.json later stages read (score re-runs with its config; compare,
#: rank and judge-agreement read each task's resolved spec, checked on use by `task_spec`)
MANIFEST_SHAPE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "config": {"type": "object", "properties": {
            "tasks": {"type": "string"}, "model": {"type": "string"},
            "splits": {"type": ["array", "null"], "items": {"type": "string"}},
            "limit": {"type": ["integer", "null"]}, "limit_per_context": {"type": ["integer", "null"]},
            "seeds": {"type": "array", "items": {"type": "integer"}},
            "context_policy": {"type": ["string", "null"]}, "retriever": {"type": ["string", "null"]},
            "overrides": {"type": ["object", "null"]},
            "disabled_plugins": {"type": ["array", "null"], "items": {"type": "string"}}}},
        "resolved": {"type": "object", "properties": {
            "model_spec": {"type": "string"}, "model_identity": {"type": "object"},
            "tasks": {"type": "object", "additionalProperties": {
                "type": "object", "required": ["spec"],
                "properties": {"spec_path": {"type": "string"}, "spec": {"type": "object"}}}}}},
        "data_files": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}
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
    manifest = _read_json(path / "manifest.json")
    validate(manifest, MANIFEST_SHAPE, path / "manifest.json", {})
    for task, entry in ((manifest.get("resolved") or {}).get("tasks") or {}).items():
        # later stages re-score and rank with the spec recorded here: it must still be a spec
        validate(entry["spec"], load_schema("task_spec.schema.json"), path / "manifest.json", {},
                 prefix=("resolved", "tasks", task, "spec"))
    samples_path = path / "samples.jsonl"
    if not samples_path.exists():
        raise UserError("not a finished run directory (no samples.jsonl)", file=path)
    samples: list[Sample] = []
    for lineno, record in read_json_lines(samples_path, what="samples file", limit=SAMPLES_MAX_BYTES):
        if not _sample_validator().is_valid(record):
            validate(record, load_schema("sample.schema.json"), samples_path, {(): lineno})
        try:
            samples.append(sample_from_record(record))
        except TypeError as exc:
            raise UserError(f"not a sample record: {exc}", file=samples_path, line=lineno) from None
    return FinishedRun(path=path, results=results, manifest=manifest, samples=samples)


def run_model_name(run: FinishedRun) -> str:
    """A run's row label: the model as the user named it (`smollm2`, not the GGUF its alias
    resolves to), shortened like a paper's table (`replay:FILE#GPT-4` -> `GPT-4`)."""
    typed = (run.manifest.get("config") or {}).get("model")
    return model_label(str(typed or run.model))
