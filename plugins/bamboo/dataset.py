"""The `bamboo` dataset: the authors' files, converted once into the data home.

BAMBOO's data is in its GitHub repository (RUCAIBox/BAMBOO, commit f230f206: `datasets/{task}_{4k,16k}.jsonl`
and `datasets/real_all_eval_v3.jsonl.gz`); its README says MIT but the repository has no license file
and the texts come from third parties, so lceval neither ships nor downloads it.
`lceval data fetch bamboo --from PATH` takes a checkout of the repository (or its `datasets/` folder
beside `private_eval/execution.py`) and writes `bamboo/{task}_{length}.jsonl`:

- every row keeps the authors' fields and gets `id`, its line in the authors' file (0-based);
- rows are read as the authors' `json.loads(line)` would, but with control characters allowed inside
  strings (`paperqa_4k` holds some, `strict=False`); a line that is no JSON at all (`paperqa_16k` line
  26 has an unescaped quote: the authors' loader stops there) is left out and listed in
  `bamboo/skipped.json`;
- senhallu / abshallu: `answer` (a JSON boolean) becomes the text `True` / `False`;
- reportsumsort / showssort: `answer` (the original order) becomes its JSON text, one reference;
- private_eval: the row gets the real-library problem the authors execute (`real_prompt`,
  `real_test`, `real_entry_point` from `real_all_eval_v3.jsonl.gz` by `task_id`), its `domain` (the
  authors' rule: `numpy` or `pandas` in the task id, else torchdata), the paraphrase table of that
  domain as JSON text (`api_keywords`: read from the `pandas_keywords`, `torchdata_keywords` and
  `numpy_keywords` literals of the checkout's `private_eval/execution.py`), and `answer`, its first
  canonical solution.
"""

from __future__ import annotations

import ast
import gzip
import json
import re
from pathlib import Path
from typing import Any

from lceval.errors import UserError
from lceval.interfaces import Dataset
from lceval.io import quote

FILE = re.compile(r"^(meetingqa|paperqa|altqa|senhallu|abshallu|meetingpred|showspred|reportsumsort|showssort|"
                  r"private_eval)_(4k|16k)\.jsonl$")
REAL = "real_all_eval_v3.jsonl.gz"
EXECUTION = "execution.py"
TABLES = {"pandas": "pandas_keywords", "torchdata": "torchdata_keywords", "numpy": "numpy_keywords"}
DESCRIPTION = ("BAMBOO (Dong et al., 2024): ten tasks at 4k and 16k tokens; --from a checkout of the authors' "
               "repository RUCAIBox/BAMBOO")


def collect(source: Path) -> dict[str, Path]:
    """The authors' task files, their real-library problems and `private_eval/execution.py`."""
    source = Path(source).expanduser()
    if not source.is_dir():
        raise UserError(f"{source} is no folder: give a checkout of RUCAIBox/BAMBOO", field="--from")
    found: dict[str, Path] = {}
    for path in sorted(source.rglob("*")):
        if path.is_file() and (FILE.match(path.name) or path.name == REAL or
                               (path.name == EXECUTION and path.parent.name == "private_eval")):
            found.setdefault(path.name, path)
    if not any(FILE.match(n) for n in found):
        raise UserError(f"no BAMBOO file ({{task}}_{{4k,16k}}.jsonl) under {source}", field="--from",
                        hint="Clone https://github.com/RUCAIBox/BAMBOO and give its folder.")
    if any(n.startswith("private_eval_") for n in found) and not (REAL in found and EXECUTION in found):
        raise UserError(f"the code task needs datasets/{REAL} and private_eval/{EXECUTION} of the checkout too",
                        field="--from")
    return found


def api_keywords(path: Path) -> dict[str, dict[str, str]]:
    """The three paraphrase tables of the authors' execution.py, read as literals (never run)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    tables: dict[str, dict[str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in TABLES.values():
                tables[name] = ast.literal_eval(node.value)
    missing = [t for t in TABLES.values() if t not in tables]
    if missing:
        raise UserError(f"no {', '.join(missing)} in the authors' execution.py", file=path)
    return {domain: tables[name] for domain, name in TABLES.items()}


def domain_of(task_id: str) -> str:
    """evaluation.py's rule."""
    lower = task_id.lower()
    return "numpy" if "numpy" in lower else "pandas" if "pandas" in lower else "torchdata"


def convert(path: Path, task: str, dest: Path, problems: dict[str, Any], tables: dict[str, Any],
            skipped: list[dict[str, Any]]) -> None:
    out = dest / path.name
    with path.open(encoding="utf-8") as f, out.open("w", encoding="utf-8") as w:
        for index, line in enumerate(f):
            if not line.strip():
                continue
            try:
                row = json.loads(line, strict=False)
            except ValueError as exc:
                skipped.append({"file": path.name, "line": index + 1, "error": str(exc)})
                continue
            if not isinstance(row, dict):
                raise UserError(f"line {index + 1} is no JSON object: {quote(row)}", file=path)
            row["id"] = index
            if task in ("senhallu", "abshallu"):
                if not isinstance(row.get("answer"), bool):
                    raise UserError(f"line {index + 1}: answer must be true or false, got {quote(row.get('answer'))}",
                                    file=path)
                row["answer"] = str(row["answer"])
            elif task in ("reportsumsort", "showssort"):
                row["answer"] = json.dumps(row.get("answer"))
            elif task == "private_eval":
                problem = problems.get(row.get("task_id"))
                if problem is None:
                    raise UserError(f"line {index + 1}: task {quote(row.get('task_id'))} is not in {REAL}", file=path)
                domain = domain_of(row["task_id"])
                solutions = row.get("canonical_solution") or [""]
                row.update(real_prompt=problem["prompt"], real_test=problem["test"],
                           real_entry_point=problem["entry_point"], domain=domain,
                           api_keywords=json.dumps(tables[domain], ensure_ascii=False), answer=solutions[0])
            w.write(json.dumps(row, ensure_ascii=False) + "\n")


def install(archives: dict[str, Path], dest: Path) -> None:
    problems: dict[str, Any] = {}
    tables: dict[str, Any] = {}
    if REAL in archives:
        with gzip.open(archives[REAL], "rt", encoding="utf-8") as f:
            problems = {p["task_id"]: p for p in (json.loads(line) for line in f if line.strip())}
    if EXECUTION in archives:
        tables = api_keywords(archives[EXECUTION])
    skipped: list[dict[str, Any]] = []
    for name, path in sorted(archives.items()):
        m = FILE.match(name)
        if m:
            convert(path, m.group(1), dest, problems, tables, skipped)
    (dest / "skipped.json").write_text(json.dumps(skipped, indent=1), encoding="utf-8")


def bamboo_dataset() -> Dataset:
    return Dataset(name="bamboo", description=DESCRIPTION, files=[], install=install,
                   license="MIT per the README, no license file; third-party texts (not redistributed)",
                   collect=collect)
