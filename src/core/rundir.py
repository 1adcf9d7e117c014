"""Reading finished run directories back: the input of `score`, `compare`, `report` and
`judge-agreement`. Every later stage starts from what a run wrote, never from memory, so a
run can be re-judged, compared or tabulated months later on another machine."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import UserError
from .types import ContextCut, Judgment, Sample


@dataclass
class FinishedRun:
    path: Path
    results: dict[str, Any]
    manifest: dict[str, Any]
    samples: list[Sample]

    @property
    def run_id(self) -> str:
        return str(self.results.get("run_id", self.path.name))

    @property
    def model(self) -> str:
        return str(self.results.get("model", "?"))

    def task_samples(self, task: str) -> list[Sample]:
        return [s for s in self.samples if s.task == task]

    def task_spec(self, task: str) -> dict[str, Any]:
        """The resolved spec the task ran with (as the manifest recorded it)."""
        try:
            return self.manifest["resolved"]["tasks"][task]["spec"]
        except (KeyError, TypeError):
            raise UserError(f"the manifest has no resolved spec for task '{task}'",
                            file=self.path / "manifest.json", field="resolved.tasks") from None


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise UserError(f"not a finished run directory (no {path.name})", file=path.parent)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UserError(f"invalid JSON: {exc.msg}", file=path, line=exc.lineno) from None
    if not isinstance(data, dict):
        raise UserError("expected a JSON object", file=path)
    return data


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
    manifest = _read_json(path / "manifest.json")
    samples_path = path / "samples.jsonl"
    if not samples_path.is_file():
        raise UserError("not a finished run directory (no samples.jsonl)", file=path)
    samples: list[Sample] = []
    with open(samples_path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                samples.append(sample_from_record(json.loads(line)))
            except (json.JSONDecodeError, TypeError, KeyError) as exc:
                raise UserError(f"not a sample record: {exc}", file=samples_path, line=lineno) from None
    return FinishedRun(path=path, results=results, manifest=manifest, samples=samples)
