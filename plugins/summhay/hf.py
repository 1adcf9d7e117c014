"""The published haystacks from the Hugging Face dataset `Salesforce/summary-of-a-haystack`
(the authors' README: `load_dataset("Salesforce/summary-of-a-haystack")['train']`, one row per
haystack, 10 rows: 5 conversation, 5 news).

`lceval summhay from-hf OUT_DIR` writes each row as one haystack JSON file in the official
schema (checked by haystack.py before anything is written), which `lceval data fetch summhay
--from OUT_DIR` installs or `--set options.haystack=OUT_DIR` reads. Files rather than a
direct load so that a run records the sha256 of what it read, like any other data file.

`datasets` is imported only here, only when asked (pip install 'lceval[summhay-hf]'). Rows
are taken as the hub serves them; the parquet conversion may give a nested field as a JSON
string or fill the absent keys of a struct with None, both undone here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from lceval.errors import PackageMissing, UserError

from .haystack import parse_haystack

HF_DATASET = "Salesforce/summary-of-a-haystack"
NESTED = ("topic_metadata", "subtopics", "documents")


def _load_dataset(name: str, split: str, revision: str | None) -> Any:
    try:
        import datasets
    except ImportError:
        raise PackageMissing("reading the Hugging Face dataset needs the `datasets` package", field="--dataset",
                             hint="pip install 'lceval[summhay-hf]' (or pip install datasets).") from None
    try:
        return datasets.load_dataset(name, split=split, revision=revision)
    except Exception as exc:  # offline, unknown name, hub error: all a user-side problem here
        raise UserError(f"could not load Hugging Face dataset '{name}' (split {split}): "
                        f"{type(exc).__name__}: {str(exc)[:300]}", field="--dataset",
                        hint="This needs the Hugging Face hub (or its local cache with HF_DATASETS_OFFLINE=1). "
                        "Offline, copy the authors' data/topic_*.json files and use "
                        "`lceval data fetch summhay --from FOLDER`.") from None


def _drop_nulls(value: Any) -> Any:
    """Parquet structs list every key any row has; a key absent from this row comes as None."""
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def row_to_haystack(row: dict[str, Any], index: int) -> dict[str, Any]:
    data = dict(row)
    for key in NESTED:
        if isinstance(data.get(key), str):
            try:
                data[key] = json.loads(data[key])
            except json.JSONDecodeError:
                raise UserError(f"row {index}: '{key}' is a string but not JSON", field=f"train[{index}].{key}") \
                    from None
    data = _drop_nulls(data)
    parse_haystack(data, Path(f"{HF_DATASET}/train[{index}]"))  # the official schema, or a clear error
    return data


def file_name(data: dict[str, Any], index: int) -> str:
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(data.get("topic_id") or f"row{index}"))
    return f"topic_{stem}.json"


def export_hf(out_dir: Path, name: str = HF_DATASET, split: str = "train",
              revision: str | None = None) -> list[Path]:
    """Write every haystack of the dataset as `OUT_DIR/topic_<topic_id>.json`."""
    rows = _load_dataset(name, split, revision)
    haystacks = [row_to_haystack(dict(row), i) for i, row in enumerate(rows)]
    if not haystacks:
        raise UserError(f"dataset '{name}' split {split} has no rows", field="--dataset")
    names = [file_name(h, i) for i, h in enumerate(haystacks)]
    if len(set(names)) != len(names):
        raise UserError("two haystacks share a topic_id", field="--dataset")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fname, data in zip(names, haystacks):
        path = out_dir / fname
        path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        paths.append(path)
    return paths
