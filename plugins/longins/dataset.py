"""The `longins` dataset: the authors' files, converted once into the data home.

LongIns' data is a `data.zip` on Google Drive (README of Ins-Bench/LongIns-Bench, commit cf8c59b8),
without a license or checksum: `data/{GIST,LIST}/{256,512,...,16384}.json`, each one JSON object
keyed by the Super-NaturalInstructions task (`task768_qed_text_span_selection`), whose value holds
`Categories`, `Domains`, `Lenth` (sic: the exam's tokens), `task_prompt` (GIST), `Data` (the
numbered question-answer pairs) and `error` (the numbers of the wrongly answered ones).
`lceval data fetch longins --from PATH` takes the zip, its unzipped `data/` folder or the folder
above it, checks every exam, and writes `longins/{GIST,LIST}_{length}.jsonl`, one exam a line:
`task` (the key), `category` and `domain` (the first of `Categories` / `Domains`), `tokens`
(`Lenth`), `task_prompt`, `Data` as it is, and `error` as JSON text (one reference per exam; an
empty list is an exam without wrong answers, which the authors' F1 scores 0).
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path
from typing import Any

from lceval.errors import UserError
from lceval.interfaces import Dataset
from lceval.io import loads_json, quote, read_json_object

MEMBER = re.compile(r"(?:^|/)(GIST|LIST)/(\d+)\.json$")
DESCRIPTION = ("LongIns (Gavin et al., 2024): GIST and LIST exams at 256 to 16,384 tokens; --from the authors' "
               "data.zip or its data/ folder")


def collect(source: Path) -> dict[str, Path]:
    """The authors' zip, or every `{GIST,LIST}/<length>.json` under a folder, by name."""
    source = Path(source).expanduser()
    if source.is_file() and zipfile.is_zipfile(source):
        return {source.name: source}
    found = {}
    if source.is_dir():
        for path in sorted(source.rglob("*.json")):
            m = MEMBER.search(path.relative_to(source).as_posix())
            if m:
                found[f"{m.group(1)}_{m.group(2)}.json"] = path
    if not found:
        raise UserError(f"no LongIns file ({{GIST,LIST}}/<length>.json, or the authors' data.zip) in {source}",
                        field="--from", hint="Download data.zip from the link in the LongIns-Bench README.")
    return found


def rows_of(exams: Any, where: str) -> list[dict[str, Any]]:
    """One file's exams as rows (see the module's docstring), each checked."""
    if not isinstance(exams, dict):
        raise UserError(f"{where}: a LongIns file holds one JSON object keyed by task, got {type(exams).__name__}")
    rows = []
    for task, exam in exams.items():
        at = f"{where}, task {quote(task)}"
        if not isinstance(exam, dict):
            raise UserError(f"{at}: an exam must be a JSON object, got {quote(exam)}")
        error, data = exam.get("error"), exam.get("Data")
        if not isinstance(error, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in error):
            raise UserError(f"{at}: error must be a list of question numbers, got {quote(error)}")
        if not isinstance(data, str) or not data.strip():
            raise UserError(f"{at}: Data must be the exam's text, got {quote(data)}")
        categories, domains = exam.get("Categories") or [], exam.get("Domains") or []
        rows.append({"task": task, "category": str(categories[0]) if categories else "",
                     "domain": str(domains[0]) if domains else "", "tokens": exam.get("Lenth"),
                     "task_prompt": exam.get("task_prompt") or "", "Data": data, "error": json.dumps(error)})
    return rows


def _write(rows: list[dict[str, Any]], path: Path) -> None:
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def install(archives: dict[str, Path], dest: Path) -> None:
    if not archives:
        raise UserError("no LongIns file to install", field="--from")
    for name, path in archives.items():
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                members = [(MEMBER.search(m), m) for m in z.namelist()]
                members = [(m, n) for m, n in members if m and "__MACOSX" not in n]
                if not members:
                    raise UserError("the zip holds no {GIST,LIST}/<length>.json", file=path, field="--from")
                for m, member in members:
                    text = z.read(member).decode("utf-8")
                    exams = loads_json(text, f"{path}::{member}", what="LongIns data file")
                    _write(rows_of(exams, f"{path.name}::{member}"), dest / f"{m.group(1)}_{m.group(2)}.jsonl")
            continue
        exams = read_json_object(path, what="LongIns data file", limit=2**31)
        _write(rows_of(exams, str(path)), dest / (Path(name).stem + ".jsonl"))


def longins_dataset() -> Dataset:
    return Dataset(name="longins", description=DESCRIPTION, files=[], install=install,
                   license="none stated by the authors (not redistributed)", collect=collect)
