"""The sha256 digests lceval writes everywhere (cache keys, prompt hashes, data files in the
manifest, bundle contents), in one place so that "the same" means the same bytes hashed the
same way in every file a run or a bundle carries."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

__all__ = ["canonical_hash", "sha256_bytes", "sha256_file", "sha256_text"]


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    """Hex sha256 of a text's UTF-8 bytes (prompt templates in judge identities, prompts)."""
    return sha256_bytes(text.encode("utf-8"))


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in blocks so large archives never sit in memory."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def canonical_hash(obj: Any) -> str:
    """sha256 of a JSON value written canonically (sorted keys, no spaces, UTF-8 as is): the
    request cache's keys and the shard plan's fingerprint."""
    return sha256_text(json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":")))
