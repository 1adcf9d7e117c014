"""Files that appear whole or not at all: written beside their final name and renamed into
place, so an interrupted build never leaves half a rules file or a truncated transcript that a
later run would take for a finished one."""

from __future__ import annotations

import os
from pathlib import Path


def write_text_atomic(path: Path, text: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        tmp.write_bytes(text.encode("utf-8"))  # bytes: no newline translation
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path
