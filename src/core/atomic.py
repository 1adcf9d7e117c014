"""Result directories that appear whole or not at all: written under a hidden `.NAME.partial`
name and renamed into place only when everything is written, so an interrupted or failed
write never leaves half a directory where a good one was expected (runs, rankings)."""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def atomic_directory(output: Path, name: str) -> Iterator[tuple[Path, Path]]:
    """Yield (folder to write into, final path). The final path is `output/name`, or
    `name-2`, `name-3` ... when taken: an earlier result is never written over."""
    output.mkdir(parents=True, exist_ok=True)
    final = output / name
    n = 1
    while final.exists():
        n += 1
        final = output / f"{name}-{n}"
    tmp = output / f".{final.name}.partial"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        yield tmp, final
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
