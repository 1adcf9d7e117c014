"""The `l_citeeval` dataset: the authors' prompt files (their one-shot demos), copied into the data home.

L-CiteEval's rows are on the Hugging Face Hub (read by the task type at a pinned commit); the
instructions and one-shot demos its prompts need are `prompt/<task>_default.json` of the authors'
GitHub repository (ZetangForward/L-CITEEVAL, commit 6e493267; no license file), which lceval does not
ship. `lceval data fetch l_citeeval --from <checkout>` checks each file's keys and copies it to
`l_citeeval/prompt/`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from lceval.errors import UserError
from lceval.interfaces import Dataset
from lceval.io import read_json_object

KEYS = ("instruction", "demo_sep", "demo_prompt", "doc_prompt", "demos")


def collect(source: Path) -> dict[str, Path]:
    source = Path(source).expanduser()
    folder = source / "prompt" if (source / "prompt").is_dir() else source
    found = {p.name: p for p in sorted(folder.glob("*_default.json"))} if folder.is_dir() else {}
    if not found:
        raise UserError(f"no L-CiteEval prompt file (prompt/<task>_default.json) in {source}", field="--from",
                        hint="Clone https://github.com/ZetangForward/L-CITEEVAL and give its folder.")
    for path in found.values():
        prompt = read_json_object(path, what="L-CiteEval prompt file")
        missing = [k for k in KEYS if k not in prompt]
        if missing or not isinstance(prompt.get("demos"), list) or not prompt["demos"]:
            raise UserError(f"not an L-CiteEval prompt file: no {', '.join(missing) or 'demo'}", file=path)
    return found


def install(archives: dict[str, Path], dest: Path) -> None:
    (dest / "prompt").mkdir()
    for name, path in archives.items():
        shutil.copyfile(path, dest / "prompt" / name)


def l_citeeval_dataset() -> Dataset:
    return Dataset(name="l_citeeval", description="L-CiteEval (Tang et al., 2024): the authors' one-shot prompt "
                   "files; --from a checkout of ZetangForward/L-CITEEVAL (the rows come from the Hub)",
                   files=[], install=install, license="no license file (not redistributed)", collect=collect)
