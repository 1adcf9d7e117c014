"""`lceval submit`: pack finished runs into one leaderboard bundle (a zip file).

A bundle holds each run's results.json, samples.jsonl (every answer, every judgment with the
judge's raw output) and manifest.json byte for byte, and a `bundle.json` index: lceval and
plugin versions, each task's judge identity and dataset, what each run cost, the sha256 of each packed file,
and every data file the run read, named by dataset and path inside the dataset
(`elitr-bench`, `data/elitr-bench-qa_dev.json`) rather than by the submitter's absolute path,
so that `lceval verify` can look for the same file in its own verified install.

Nothing in a bundle is trusted by `verify` for being in the bundle: the index only says
what to check; the numbers are recomputed, the data compared with the verifier's pinned
install, the judge (and a recorded model) asked again.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Iterator

from lceval import __version__
from lceval.io import atomic_file
from lceval.io import safe_relpath
from lceval.io import sha256_bytes
from lceval.errors import UserError
from lceval.io import read_json
from lceval.results import FinishedRun, cost_summary, load_run

FORMAT = "lceval-bundle"
VERSION = 1
RUN_FILES = ("results.json", "samples.jsonl", "manifest.json")
INDEX = "bundle.json"


def dataset_relpath(path: str, datasets: set[str]) -> tuple[str | None, str]:
    """(dataset, path inside its folder) of a data file a run read: the part after the last
    folder named like one of the run's datasets; (None, file name) when it is in none."""
    parts = PurePosixPath(Path(path).as_posix()).parts
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] in datasets:
            return parts[i], "/".join(parts[i + 1:])
    return None, parts[-1] if parts else path


def run_datasets(run: FinishedRun) -> dict[str, str | None]:
    """Each task's dataset, as its resolved spec names it."""
    return {task: (run.task_spec(task).get("dataset")) for task in (run.results.get("tasks") or {})}


def data_entries(run: FinishedRun) -> list[dict[str, Any]]:
    datasets = {d for d in run_datasets(run).values() if d}
    files = run.record.data_files
    out = []
    for path, digest in sorted(files.items()):
        name, rel = dataset_relpath(path, datasets)
        out.append({"dataset": name, "path": rel, "sha256": digest})
    return out


def _plugin_versions(plugins: Any) -> dict[str, dict[str, str]]:
    return {i.name: {"distribution": i.distribution, "version": i.version}
            for i in plugins.infos if not i.disabled and not i.error}


def run_entry(run: FinishedRun, raw: dict[str, bytes]) -> dict[str, Any]:
    datasets = run_datasets(run)
    tasks = {name: {"judge": t.get("judge"), "dataset": datasets.get(name), "n_samples": t.get("n_samples")}
             for name, t in (run.results.get("tasks") or {}).items()}
    cost = run.record.cost or cost_summary(run.record.usage, run.record.judge_usage)
    entry = {"run_id": run.run_id, "model": run.model, "tasks": tasks,
             "files": {name: sha256_bytes(data) for name, data in raw.items()}, "data": data_entries(run),
             # what the run's answers and verdicts cost (USD; the manifest holds the details per task)
             "cost": {k: cost.get(k) for k in ("total_usd", "paid_usd", "unknown")}}
    if run.record.partial:  # a cost limit stopped it: not the run's full results
        entry["partial"] = run.record.partial
    return entry


def submit(run_dirs: list[Path], output: Path, plugins: Any, name: str | None = None) -> Path:
    """Write the bundle of `run_dirs` to `output` (atomically: a failure leaves nothing)."""
    if not run_dirs:
        raise UserError("no run directories given", field="RUN_DIR")
    runs, entries, payload = [], [], {}
    for d in run_dirs:
        run = load_run(Path(d))
        if run.run_id in {r.run_id for r in runs}:
            raise UserError(f"two run directories have the run id '{run.run_id}'", file=d, field="RUN_DIR")
        raw = {f: (run.path / f).read_bytes() for f in RUN_FILES}
        runs.append(run)
        entries.append(run_entry(run, raw))
        payload.update({f"runs/{run.run_id}/{f}": data for f, data in raw.items()})
    index = {"format": FORMAT, "version": VERSION, "name": name or ", ".join(sorted({r.model for r in runs})),
             "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "lceval_version": __version__,
             "plugins": _plugin_versions(plugins), "runs": entries}
    output = Path(output)
    with atomic_file(output) as tmp, zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(INDEX, json.dumps(index, indent=1, ensure_ascii=False) + "\n")
        for member, data in payload.items():
            zf.writestr(member, data)
    return output


@dataclass
class OpenBundle:
    path: Path
    index: dict[str, Any]
    root: Path  # the unpacked members

    def run_dir(self, run_id: str) -> Path:
        return self.root / "runs" / run_id


def _check_index(index: Any, path: Path) -> dict[str, Any]:
    if not isinstance(index, dict) or index.get("format") != FORMAT:
        raise UserError(f"not an lceval bundle ({INDEX} lacks format '{FORMAT}')", file=path, field="format")
    if index.get("version") != VERSION:
        raise UserError(f"bundle format version {index.get('version')!r}; this lceval reads version {VERSION}",
                        file=path, field="version")
    runs = index.get("runs")
    if not isinstance(runs, list) or not runs or not all(isinstance(r, dict) and r.get("run_id") for r in runs):
        raise UserError("the bundle lists no runs", file=path, field="runs")
    return index


@contextmanager
def open_bundle(path: Path) -> Iterator[OpenBundle]:
    """Unpack a bundle into a scratch folder (member names checked: nothing lands outside)."""
    path = Path(path)
    if not path.is_file():
        raise UserError("bundle not found", file=path)
    scratch = Path(tempfile.mkdtemp(prefix="lceval-bundle-"))
    try:
        try:
            with zipfile.ZipFile(path) as zf:
                for info in zf.infolist():
                    if info.is_dir():
                        continue
                    out = scratch / safe_relpath(info.filename, path)
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_bytes(zf.read(info))
        except (zipfile.BadZipFile, OSError) as exc:
            raise UserError(f"not a readable bundle: {exc}", file=path) from None
        index_path = scratch / INDEX
        if not index_path.is_file():
            raise UserError(f"not an lceval bundle (no {INDEX})", file=path)
        try:
            index = read_json(index_path, what=INDEX)
        except UserError as exc:  # name the bundle the user gave, not the scratch copy
            raise UserError(exc.message, file=path, field=INDEX, line=exc.line) from None
        yield OpenBundle(path=path, index=_check_index(index, path), root=scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
