"""The text a haystack is made of: the user's essays (RULER and the original needle in a haystack
ship Paul Graham's essays, which we may not redistribute), the ELITR-Bench transcripts of the
data home, a text file, a folder of text files, or a field of JSON / JSON Lines records; and
that text cut into sentences as RULER cuts it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

from lceval.errors import DataMissing, UserError

__all__ = ["read_essay_texts", "split_sentences"]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def split_sentences(text: str) -> list[str]:
    """Whitespace collapsed (niah.py: `re.sub(r'\\s+', " ", essay)`), then sentences."""
    flat = re.sub(r"\s+", " ", text).strip()
    return [s for s in _SENTENCE_END.split(flat) if s]


def essay_needs(options: dict[str, Any], ctx: Any) -> list[Any]:
    """What an essay haystack reads from the data home: `elitr` is the ELITR-Bench transcripts
    (the elitr-bench dataset); a file or folder the user names is theirs."""
    from lceval.io import DataHomePath

    if options.get("essay") != "elitr":
        return []
    return [DataHomePath("elitr-bench/transcripts", ctx.data_home, "the ELITR-Bench transcripts")]


def read_essay_texts(value: str, field: str, home: Path, record: Callable[[Path], None]) -> tuple[list[str], str]:
    """The texts an `essay` option names, and a readable name for them: ``elitr`` (the
    ELITR-Bench transcripts of the data home), a text file, a folder of ``.txt``/``.md``
    files, or a ``.json`` / ``.jsonl`` file whose records' `field` holds the text."""
    from lceval.io import read_json, read_json_lines, read_text

    if value == "elitr":
        folder = home / "elitr-bench" / "transcripts"
        paths = sorted(folder.glob("*.txt")) if folder.is_dir() else []
        if not paths:
            raise DataMissing(f"essay 'elitr' reads the ELITR-Bench transcripts, and {folder} has none",
                              field="options.essay", command="lceval data fetch elitr-bench",
                              hint="Run: lceval data fetch elitr-bench [--from DIR], or point options.essay "
                                   "at a file or folder of text.")
        name = "ELITR-Bench transcripts"
    else:
        path = Path(value).expanduser()
        if path.is_dir():
            paths = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in (".txt", ".md"))
            if not paths:
                raise UserError(f"folder '{value}' holds no .txt or .md file", field="options.essay")
        elif path.is_file():
            paths = [path]
        else:
            raise UserError(f"no file or folder '{value}'", field="options.essay",
                            hint="Give a text file, a folder of .txt/.md files, a .json/.jsonl file with "
                                 "options.essay_field, or 'elitr'.")
        name = path.name
    texts: list[str] = []
    for p in paths:
        record(p)
        if p.suffix.lower() == ".jsonl":
            texts += [_field(rec, field, p, line) for line, rec in read_json_lines(p, what="essay file")]
        elif p.suffix.lower() == ".json":
            data = read_json(p, what="essay file")
            records = data if isinstance(data, list) else [data]
            texts += [_field(rec, field, p, None) for rec in records]
        else:
            texts.append(read_text(p, what="essay file"))
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise UserError(f"essay '{value}' holds no text", field="options.essay")
    return texts, name


def _field(record: Any, field: str, path: Path, line: int | None) -> str:
    if isinstance(record, str):
        return record
    if not isinstance(record, dict) or not isinstance(record.get(field), str):
        raise UserError(f"a record has no text field '{field}'", file=path, line=line,
                        field="options.essay_field", hint="Name the field that holds the text.")
    return record[field]
