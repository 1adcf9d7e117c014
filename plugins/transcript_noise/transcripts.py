"""The ELITR-Bench transcripts the task types read (`elitr`, `cream`: `read_transcript`), and
their `options.noise`.

A noisy transcript is built once per (transcript, rules, level, seed, protect) and kept in
the data home under the hash of those inputs (`noise/transcripts/<hash>.txt` with its facts
in `<hash>.json`, both written atomically; the facts file is written last, so its presence
means a complete transcript). Later runs, other models and other tasks read it back, so every
model at a level sees the same bytes.

The task type records the rules file and the noisy transcript like any data file it reads
(sha256 in the manifest), puts the noise facts of each meeting in the manifest through
`TaskContext.record_facts`, and copies the key ones into every sample's metadata
(`noise_target_wer`, `noise_wer`, `noise_seed`, `noise_rules`), where `lceval noise report`
finds them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from lceval.io import read_text, write_text_atomic
from lceval.io import sha256_file
from lceval.errors import DataMissing, UserError
from lceval.interfaces import TaskContext


#: JSON Schema of `options.noise` (shared by every task type that reads ELITR transcripts).
NOISE_OPTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["rules", "wer"],
    "properties": {
        "rules": {"type": "string", "minLength": 1,
                  "description": "rules file (lceval noise rules); a relative name is looked up in the "
                                 "current folder, then in the data home's noise/ folder"},
        "wer": {"type": "number", "minimum": 0, "maximum": 1,
                "description": "target word error rate, 0.2 = 20% (Thonet et al., 2024b: 0.2 ... 1.0)"},
        "seed": {"type": "integer", "minimum": 0, "description": "noise seed (default 0)"},
        "protect": {"type": "boolean",
                    "description": "keep speaker tags, placeholders and annotations intact (default true)"},
        "calibration": {"enum": ["simulator", "exact"],
                        "description": "how the target sets the error rates: the ASR error simulator's formula "
                                       "as Thonet et al., 2024b used it (default), or exactly target x words edits"},
    },
}

#: Sample metadata keys the noise facts are copied to.
META_KEYS = ("noise_target_wer", "noise_wer", "noise_seed", "noise_rules")


def rules_path(name: str, data_home: Path) -> Path:
    """A rules file named in a spec: as given, else under the data home's noise/ folder."""
    path = Path(name).expanduser()
    if path.is_file() or path.is_absolute():
        return path
    return data_home / "noise" / name


def cache_key(transcript_sha: str, rules_sha: str, target: float, seed: int, protect: bool,
              calibration: str = "simulator") -> str:
    from .inject import ALGORITHM

    text = json.dumps([ALGORITHM, transcript_sha, rules_sha, float(target), int(seed), bool(protect), calibration])
    return hashlib.sha256(text.encode()).hexdigest()


def _cached(folder: Path, key: str) -> tuple[Path, dict[str, Any]] | None:
    txt, facts_path = folder / f"{key}.txt", folder / f"{key}.json"
    if not (txt.is_file() and facts_path.is_file()):
        return None
    try:
        facts = json.loads(facts_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):  # damaged: rebuild
        return None
    if not isinstance(facts, dict) or facts.get("noisy_sha256") != sha256_file(txt):  # damaged or half-replaced: rebuild
        return None
    return txt, facts


def noisy_transcript(transcript: str, rules_file: Path, target: float, seed: int, protect: bool,
                     data_home: Path, calibration: str = "simulator") -> tuple[Path, dict[str, Any]]:
    """(path of the noisy transcript, its facts), built and cached on first use."""
    from .inject import ALGORITHM, inject, measure
    from .rules import load_rules

    clean_sha = hashlib.sha256(transcript.encode()).hexdigest()
    # the rules' hash keys the cache (it is what load_rules records); the rules themselves are
    # parsed only to build a transcript not built before
    key = cache_key(clean_sha, sha256_file(rules_file), target, seed, protect, calibration)
    folder = data_home / "noise" / "transcripts"
    hit = _cached(folder, key)
    if hit is not None:
        return hit
    rules = load_rules(rules_file)
    result = inject(transcript, rules, target, seed, protect, calibration)
    measured = measure(transcript, result.text)
    facts = {
        "algorithm": ALGORITHM, "rules": rules_file.name, "rules_sha256": rules.sha256,
        "target_wer": float(target), "seed": int(seed), "protect": bool(protect), "calibration": calibration,
        "transcript_sha256": clean_sha, "noisy_sha256": hashlib.sha256(result.text.encode()).hexdigest(),
        "words": result.words, "editable_words": result.editable,
        "applied": result.applied, "applied_rate": result.applied_rate,
        "effective_wer": measured["wer"], "measured": measured,
    }
    txt = write_text_atomic(folder / f"{key}.txt", result.text)
    write_text_atomic(folder / f"{key}.json", json.dumps(facts, indent=1) + "\n")
    return txt, facts


def noise_needs(noise: dict[str, Any] | None, ctx: TaskContext) -> list[Any]:
    """The rules file a noisy variant reads from the data home's noise/ folder (which the user
    builds with `lceval noise rules`; `lceval data pack` carries it)."""
    from lceval.io import DataHomePath

    if not noise or Path(str(noise["rules"])).expanduser().is_absolute() or Path(str(noise["rules"])).is_file():
        return []
    return [DataHomePath(f"noise/{noise['rules']}", ctx.data_home,
                         "a rules file built with `lceval noise corpus` and `lceval noise rules` (docs/tasks/noise.md)")]


def apply_noise(ctx: TaskContext, noise: dict[str, Any] | None, transcript: str,
                context_id: str) -> tuple[str, dict[str, Any]]:
    """The transcript a task type should use, and the metadata to add to its conversations.
    Without `options.noise` the transcript is returned untouched with no metadata."""
    if not noise:
        return transcript, {}
    path = rules_path(str(noise["rules"]), ctx.data_home)
    if not path.is_file():
        raise DataMissing(f"noise rules file '{noise['rules']}' not found (looked in the current folder and "
                          f"{ctx.data_home / 'noise'})", file=ctx.spec_path, field="options.noise.rules",
                          hint="Build one: lceval noise corpus --elitr -o corpus.jsonl && lceval noise rules "
                               f"corpus.jsonl -o {ctx.data_home / 'noise' / noise['rules']}")
    ctx.record_file(path)
    txt, facts = noisy_transcript(transcript, path, float(noise["wer"]), int(noise.get("seed", 0)),
                                  bool(noise.get("protect", True)), ctx.data_home,
                                  str(noise.get("calibration", "simulator")))
    ctx.record_file(txt)
    ctx.record_facts(context_id, {"noise": facts})
    meta = {"noise_target_wer": facts["target_wer"], "noise_wer": facts["effective_wer"],
            "noise_seed": facts["seed"], "noise_rules": facts["rules_sha256"][:12]}
    return txt.read_bytes().decode("utf-8"), meta


def read_transcript(root: Path, meeting: str, ctx: TaskContext) -> str:
    """The transcript of `meeting` in the dataset folder `root`, recorded (an empty one refused)."""
    path = root / "transcripts" / f"{meeting}.txt"
    if not path.exists():
        raise UserError(f"transcript of {meeting} not found", file=path,
                        hint="Run: lceval data fetch elitr-bench [--from DIR]")
    text = read_text(path, what=f"transcript of {meeting}")
    if not text.strip():
        # answering questions about nothing would score the model on guesses
        raise UserError(f"transcript of {meeting} is empty ({len(text.encode())} bytes)", file=path,
                        hint="Fetch the data again: lceval data fetch elitr-bench [--from DIR]")
    ctx.record_file(path)
    return text
