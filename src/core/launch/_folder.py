"""The launch folder: everything one launch of a run's shards shares between the machine
that launches and the machines that run the shards (a shared file system, as a cluster has).

    OUTPUT/launch-KEY/
      job.json          what each shard runs: the run's settings (RunConfig's manifest form),
                        N, the plan's fingerprint, the Python, the -p flags, LCEVAL_* variables
      launch.json       the launcher's record: per shard its contexts, weight and attempts
                        (job id, when submitted, started and ended, how it ended), the merged runs
      shards/I/RUN-ID/  shard I's run folder(s), one per model, written whole or not at all
      status/I.json     what shard I's process says of itself (running where, how it ended)
      answers/I-*.jsonl the answers each attempt of shard I stored, for a later attempt on
                        another node (each node keeps its own cache)
      logs/             each attempt's output

KEY hashes the run's settings, N, the plan's fingerprint and lceval's version: the same
command launched again finds the same folder and the shards already finished in it, and a
changed command (or changed data) starts a folder of its own.
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lceval
from lceval.engine import RunConfig, RunRecord
from lceval.errors import UserError
from lceval.io import canonical_hash, write_text_atomic


def launch_key(config: RunConfig, count: int, fingerprint: str) -> str:
    settings = {k: v for k, v in config.to_manifest().items() if k != "shard"}
    return canonical_hash({"config": settings, "shards": count, "fingerprint": fingerprint,
                           "lceval": lceval.__version__})[:12]


def write_json(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n")


def read_json(path: Path) -> Any:
    """A file the launcher or a shard wrote; None while it does not exist (or is being replaced)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


@dataclass
class LaunchFolder:
    path: Path

    @property
    def job_file(self) -> Path:
        return self.path / "job.json"

    @property
    def record_file(self) -> Path:
        return self.path / "launch.json"

    def shard_output(self, shard: int) -> Path:
        return self.path / "shards" / str(shard)

    def status_file(self, shard: int) -> Path:
        return self.path / "status" / f"{shard}.json"

    def log_file(self, shard: int, attempt: int) -> Path:
        return self.path / "logs" / f"shard-{shard}.attempt-{attempt}.log"

    def answers(self, shard: int) -> list[Path]:
        return sorted((self.path / "answers").glob(f"{shard}-*.jsonl.gz"))

    def answers_file(self, shard: int) -> Path:
        return self.path / "answers" / f"{shard}-{socket.gethostname()}-{time.time_ns()}.jsonl.gz"

    def status(self, shard: int) -> dict[str, Any]:
        found = read_json(self.status_file(shard))
        return found if isinstance(found, dict) else {}

    def finished_runs(self, shard: int, count: int, fingerprint: str, models: list[str]) -> list[Path] | None:
        """Shard `shard`'s finished run folder for each model (the newest when a retry wrote
        another), or None while any model's is missing. A folder counts only when its
        manifest says it is this shard of this plan, so a stale folder is never merged."""
        found: dict[str, Path] = {}
        root = self.shard_output(shard)
        for run_dir in sorted(root.iterdir()) if root.is_dir() else []:
            if run_dir.name.startswith(".") or not (run_dir / "results.json").is_file():
                continue
            try:
                record = RunRecord.read(run_dir)
            except UserError:  # being written, or not a run folder: not this shard's
                continue
            share = record.shard if isinstance(record.shard, dict) else {}
            if (share.get("index"), share.get("count"), share.get("fingerprint")) != (shard, count, fingerprint):
                continue
            model = record.config.models[0] if len(record.config.models) == 1 else None
            if model in models:
                found[model] = run_dir  # sorted by run id (a timestamp): the newest wins
        return [found[m] for m in models] if all(m in found for m in models) else None

    def is_launch_folder(self) -> bool:
        return self.job_file.is_file() or self.record_file.is_file()

    def merged_runs(self) -> tuple[list[Path], int, int]:
        """The run folders its shards were merged into (`lceval report`, `compare` read them),
        each still there; and how many shards finished of how many (while none is merged).
        A merged folder is found where it was written (`--output`, the launch folder's parent)."""
        record = read_json(self.record_file)
        record = record if isinstance(record, dict) else {}
        out = []
        for text in record.get("merged") or []:
            given = Path(str(text))
            for where in (given, self.path.parent / given.name):
                if (where / "results.json").is_file():
                    out.append(where)
                    break
        shards = record.get("shards") if isinstance(record.get("shards"), list) else []
        done = sum(1 for s in shards if isinstance(s, dict) and s.get("runs"))
        return out, done, len(shards)

    def create(self) -> None:
        try:
            for sub in ("shards", "status", "answers", "logs"):
                (self.path / sub).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"cannot create the launch folder: {exc.strerror or exc}", file=self.path,
                            field="--output") from None
