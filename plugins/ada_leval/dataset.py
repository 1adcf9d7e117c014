"""The `ada_leval` dataset: the authors' files, converted once into the data home.

Ada-LEval's data is not on the Hugging Face Hub and carries no license: the authors' `fetch_data.sh`
(open-compass/Ada-LEval, commit 2154258d) downloads `stackselect_{1k,2k,4k,6k,8k,12k,16k,32k,64k,128k}.json`
and `textsort_{1k,2k,4k,8k,16k,32k,64k,128k}.json` (each one JSON list) from their server, without
checksums. `lceval data fetch ada_leval --from FOLDER` takes a folder of those files, checks every
row against the fields `dataset.py` reads, and writes `ada_leval/<file>.jsonl` (one row a line) with
what the specs need beside the authors' fields:

- `index`: the authors' sample key, `f"{question_id}_{answer}"` (BestAnswer) and
  `f"{book_id}_{'_'.join(para_offset)}"` (TSort), the question id;
- `num_choice` (BestAnswer): `len(all_answers)`, which the answer extraction reads;
- `answer` (TSort): the order as JSON text (`"[2, 1, 4, 3]"`; the authors accept a list or its JSON
  text), so one row's answer is one reference, not four.

The rows keep their order: the authors evaluate the first 1,000 (below 32k) or 200 of each file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from lceval.errors import UserError
from lceval.interfaces import Dataset
from lceval.io import quote, read_json

FILE = re.compile(r"^(stackselect|textsort)_(\d+k)\.json$")
DESCRIPTION = ("Ada-LEval (Wang et al., 2024): BestAnswer (stackselect_*.json) and TSort (textsort_*.json) at their "
               "length levels; --from the folder the authors' fetch_data.sh writes")


def collect(source: Path) -> dict[str, Path]:
    """The authors' files in `source` (a folder, or one file), by name."""
    source = Path(source).expanduser()
    paths = [source] if source.is_file() else sorted(source.glob("*.json")) if source.is_dir() else []
    found = {p.name: p for p in paths if FILE.match(p.name)}
    if not found:
        raise UserError(f"no Ada-LEval file (stackselect_<L>.json, textsort_<L>.json) in {source}", field="--from",
                        hint="Run the authors' fetch_data.sh (open-compass/Ada-LEval) and give its data/ folder.")
    return found


def _row(kind: str, row: Any, where: str) -> dict[str, Any]:
    """One row checked and completed (see the module's docstring)."""
    if not isinstance(row, dict):
        raise UserError(f"{where}: a row must be a JSON object, got {quote(row)}")
    if kind == "stackselect":
        answers, answer = row.get("all_answers"), row.get("answer")
        if not isinstance(answers, list) or not answers or not all(isinstance(a, str) for a in answers):
            raise UserError(f"{where}: all_answers must be a non-empty list of texts, got {quote(answers)}")
        if not isinstance(answer, str) or not re.fullmatch(r"A\d+", answer) or int(answer[1:]) > len(answers):
            raise UserError(f"{where}: answer must be a designation A1..A{len(answers)}, got {quote(answer)}")
        if not isinstance(row.get("question"), str):
            raise UserError(f"{where}: question must be text, got {quote(row.get('question'))}")
        return {**row, "index": f"{row.get('question_id')}_{answer}", "num_choice": len(answers)}
    order = row.get("answer")
    if isinstance(order, str):
        try:
            order = json.loads(order)
        except ValueError:
            raise UserError(f"{where}: answer must be a list of 4 positions or its JSON text, got {quote(order)}") from None
    if not isinstance(order, list) or not order or not all(isinstance(x, int) for x in order):
        raise UserError(f"{where}: answer must be a list of positions, got {quote(row.get('answer'))}")
    if not isinstance(row.get("prompt"), str) or not isinstance(row.get("para_offset"), list):
        raise UserError(f"{where}: prompt must be text and para_offset a list")
    index = f"{row.get('book_id')}_{'_'.join(str(x) for x in row['para_offset'])}"
    return {**row, "index": index, "answer": json.dumps(order)}


def convert(path: Path, dest: Path) -> Path:
    """One of the authors' files as JSON Lines in `dest` (same name, `.jsonl`)."""
    kind = FILE.match(path.name).group(1)  # type: ignore[union-attr]
    rows = read_json(path, what="Ada-LEval data file", limit=2**31)
    if not isinstance(rows, list):
        raise UserError(f"an Ada-LEval file holds one JSON list, got {type(rows).__name__}", file=path)
    out = dest / (path.stem + ".jsonl")
    with out.open("w", encoding="utf-8") as f:
        for i, row in enumerate(rows):
            f.write(json.dumps(_row(kind, row, f"{path.name} row {i}"), ensure_ascii=False) + "\n")
    return out


def install(archives: dict[str, Path], dest: Path) -> None:
    if not archives:
        raise UserError("no Ada-LEval file to install", field="--from")
    for path in archives.values():
        convert(path, dest)


def ada_leval_dataset() -> Dataset:
    return Dataset(name="ada_leval", description=DESCRIPTION, files=[], install=install,
                   license="none stated by the authors (not redistributed)", collect=collect)
