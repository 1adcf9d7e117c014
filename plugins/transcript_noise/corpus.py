"""Aligned ASR corpora: pairs of a reference transcript and what a recogniser heard.

Read from a JSONL file (`{"reference": ..., "hypothesis": ...}` per line, or RED-ACE's own
`truth` / `asr_hypothesis` fields), a TSV file (`reference<TAB>hypothesis`), or, online, a
Hugging Face dataset (`hf:google/red_ace_asr_error_detection_and_correction`, the corpus of
App. A of Thonet et al., 2024b: all its splits together, as the authors combined train, dev and test).
The corpus's sha256 goes into the rules: the file's bytes, or for a hub dataset the bytes of
the canonical JSONL of the pairs read (so a re-published dataset shows up as a new hash).
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from lceval.io import sha256_file
from lceval.errors import PackageMissing, UserError
from lceval.io import read_json_lines, read_text

RED_ACE = "google/red_ace_asr_error_detection_and_correction"
HF_PREFIX = "hf:"


@dataclass
class Corpus:
    source: str  # the file or hub dataset it came from
    sha256: str
    sha256_of: str  # "file" or "canonical-jsonl"
    pairs: list[tuple[str, str]]  # (reference, hypothesis)


def _text(value: Any, path: Path, line: int, key: str) -> str:
    """A transcript field: a string, or a list of words (RED-ACE's `asr_hypothesis`)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(w, str) for w in value):
        return " ".join(value)
    raise UserError(f"'{key}' must be a string or a list of words, got {type(value).__name__}",
                    file=path, line=line, field=key)


def pair_of(record: Any, path: Path, line: int) -> tuple[str, str]:
    if not isinstance(record, dict):
        raise UserError("expected a JSON object per line", file=path, line=line)
    for ref_key, hyp_key in (("reference", "hypothesis"), ("truth", "asr_hypothesis")):
        if ref_key in record and hyp_key in record:
            return _text(record[ref_key], path, line, ref_key), _text(record[hyp_key], path, line, hyp_key)
    raise UserError("a corpus line needs 'reference' and 'hypothesis' (or RED-ACE's 'truth' and "
                    f"'asr_hypothesis'); found {', '.join(sorted(record)) or 'no keys'}", file=path, line=line)


def _read_jsonl(path: Path) -> list[tuple[str, str]]:
    return [pair_of(record, path, n) for n, record in read_json_lines(path, what="corpus file")]


def _read_tsv(path: Path) -> list[tuple[str, str]]:
    pairs = []
    # universal newlines, as open() reads text (splitlines would also cut at \x1c, \u2028 ...)
    for n, line in enumerate(io.StringIO(read_text(path, what="corpus file"), newline=None), 1):
        line = line.rstrip("\n")
        if not line.strip() or (n == 1 and line.lower() == "reference\thypothesis"):
            continue
        cells = line.split("\t")
        if len(cells) != 2:
            raise UserError(f"expected 2 tab-separated columns (reference, hypothesis), got {len(cells)}",
                            file=path, line=n)
        pairs.append((cells[0], cells[1]))
    return pairs


def canonical_sha256(pairs: Iterable[tuple[str, str]]) -> str:
    digest = hashlib.sha256()
    for ref, hyp in pairs:
        digest.update((json.dumps({"reference": ref, "hypothesis": hyp}, ensure_ascii=False) + "\n").encode())
    return digest.hexdigest()


def _read_hub(name: str) -> Corpus:
    try:
        import datasets
    except ImportError:
        raise PackageMissing("reading a corpus from the hub needs the `datasets` package", field="CORPUS",
                             hint="pip install 'lceval[summhay-hf]' (or pip install datasets), or pass a "
                             "JSONL/TSV file") from None
    dataset_name, _, split_text = name.partition(":")
    try:
        loaded = datasets.load_dataset(dataset_name)
    except Exception as exc:  # network, unknown dataset: the library's message says which
        raise UserError(f"could not load dataset {dataset_name}: {exc}", field="CORPUS") from None
    splits = [s for s in split_text.split(",") if s] or sorted(loaded.keys())
    missing = [s for s in splits if s not in loaded]
    if missing:
        raise UserError(f"dataset {dataset_name} has no split(s) {', '.join(missing)} "
                        f"(has: {', '.join(sorted(loaded.keys()))})", field="CORPUS")
    where = Path(f"{HF_PREFIX}{dataset_name}")
    pairs = [pair_of(record, where, i + 1) for split in splits for i, record in enumerate(loaded[split])]
    return Corpus(source=f"{HF_PREFIX}{name}", sha256=canonical_sha256(pairs), sha256_of="canonical-jsonl",
                  pairs=pairs)


def read_corpus(source: str) -> Corpus:
    """`hf:DATASET[:split,...]`, a `.jsonl`/`.json` file, or a `.tsv`/`.txt` file."""
    if source.startswith(HF_PREFIX):
        return _read_hub(source[len(HF_PREFIX):])
    path = Path(source)
    if not path.is_file():
        raise UserError("corpus file not found", file=path,
                        hint=f"Pass a JSONL or TSV file of reference/hypothesis pairs, or hf:{RED_ACE} online.")
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json"):
        pairs = _read_jsonl(path)
    elif suffix in (".tsv", ".txt"):
        pairs = _read_tsv(path)
    else:
        raise UserError(f"unknown corpus format '{suffix}' (use .jsonl or .tsv)", file=path)
    if not pairs:
        raise UserError("the corpus holds no reference/hypothesis pair", file=path)
    return Corpus(source=str(path), sha256=sha256_file(path), sha256_of="file", pairs=pairs)
