"""The `summhay` dataset: haystack JSON files in the official schema, under the data home's
`summhay/` folder (one haystack per file, as the authors' `data/topic_*.json`).

The 10 published haystacks (salesforce/summary-of-a-haystack `data/`, also the Hugging Face
dataset Salesforce/summary-of-a-haystack) have no checksums we could pin offline, so this
dataset is not verified by sha256 but by content: `collect(source)` takes a folder (or one
file) of haystack JSON files and checks every one against the schema (haystack.py) before
anything is installed; the engine then records the sha256 of each installed file, and the
task type records it again in every run's manifest.

The Dataset's `files` is therefore empty and its `collect` set: `lceval data fetch summhay
--from FOLDER` calls `collect(FOLDER)` instead of verifying archives.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from lceval.errors import UserError
from lceval.interfaces import Dataset

from .haystack import haystack_files, load_haystack

DESCRIPTION = ("Summary of a Haystack: haystacks of ~100 documents with subtopics, insights and the "
               "insight->document map (official schema; --from a folder of haystack JSON files)")


def collect(source: Path) -> dict[str, Path]:
    """Every haystack JSON file of `source`, each checked against the official schema."""
    files = haystack_files(Path(source).expanduser())
    topics: dict[str, Path] = {}
    for path in files:
        hay = load_haystack(path)
        if hay.topic_id in topics:
            raise UserError(f"topic_id {hay.topic_id} is also in {topics[hay.topic_id].name}", file=path,
                            field="topic_id")
        topics[hay.topic_id] = path
    return {p.name: p for p in topics.values()}


def install(archives: dict[str, Path], dest: Path) -> None:
    """Copy the checked haystack files into the data home's summhay/ folder."""
    if not archives:
        raise UserError("no haystack JSON file to install", field="--from")
    for name, path in archives.items():
        shutil.copyfile(path, dest / name)


def summhay_dataset() -> Dataset:
    return Dataset(name="summhay", description=DESCRIPTION, files=[], install=install,
                   license="Apache-2.0", collect=collect)
