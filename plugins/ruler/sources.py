"""The haystack a spec's options name, tokenized once per model and kept for every length
and every task of the run (the sources hang on the model's `Tokens`).

The essay text (`options.essay`): `auto` (the default) is RULER's own essays when
`lceval data fetch ruler-essays` has installed them in the data home (essays.py), else the
ELITR-Bench transcripts; `ruler-essays` and `elitr` ask for one of them; anything else is the
user's file or folder (lceval_plugins.haystack.texts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lceval.errors import DataMissing, UserError
from lceval.interfaces import TaskContext
from lceval.io import CHECKSUMS, DataHomePath, DatasetNeed, sha256_text
from lceval.needs import Need

from lceval_plugins.haystack.texts import essay_needs, read_essay_texts, split_sentences
from lceval_plugins.haystack.tokens import Tokens
from lceval_plugins.haystack.units import EssaySource, NoiseSource

from .common import Budget, NOISE
from .essays import ESSAYS_FILE, ESSAYS_NAME, ruler_essays

__all__ = ["ESSAY_FETCH", "EssayText", "essay_choice", "essay_needs_of", "haystack_source", "too_short"]

ESSAY_FETCH = f"lceval data fetch {ESSAYS_NAME}"


def essay_choice(value: str, home: Path) -> str:
    """`auto` made `ruler-essays` (installed) or `elitr`; any other value as given."""
    if value != "auto":
        return value
    return ESSAYS_NAME if (home / ESSAYS_NAME / ESSAYS_FILE).is_file() else "elitr"


class EssayText(Need):
    """`essay: auto`: RULER's essays when installed, else the ELITR-Bench transcripts. One need
    whichever is there (its key does not change with the data home), so a pack made where the
    essays are installed unpacks where they are not; a fetch gets RULER's essays."""

    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self.essays = DatasetNeed(ruler_essays(), self.home)
        self.transcripts = DataHomePath("elitr-bench/transcripts", self.home, "the ELITR-Bench transcripts")
        self.key = "ruler:essay-text"
        self.label = "the essay haystack's text (RULER's essays, else the ELITR-Bench transcripts)"
        self.command = ESSAY_FETCH

    def root(self) -> Path:
        return self.home

    def _essays_here(self) -> bool:
        return (self.home / ESSAYS_NAME / ESSAYS_FILE).is_file()

    def missing(self) -> str | None:
        if self._essays_here() or self.transcripts.missing() is None:
            return None
        return (f"neither RULER's essays (`{ESSAY_FETCH}`) nor the ELITR-Bench transcripts (`lceval data fetch "
                f"elitr-bench`) are in the data home {self.home}")

    def fetch(self, source: Path | None) -> None:
        self.essays.fetch(source)

    def files(self) -> list[str]:
        if self._essays_here():
            return self.essays.files()
        found = DataHomePath("elitr-bench", self.home, "ELITR-Bench").files()  # the dataset, as its own need packs it
        marker = f"elitr-bench/{CHECKSUMS}"
        return [f for f in found if f != marker] + ([marker] if marker in found else [])


def essay_needs_of(options: dict[str, Any], ctx: TaskContext) -> list[Any]:
    """What the essay haystack reads from the data home (RULER's essays, or the transcripts)."""
    choice = str(options.get("essay"))
    if choice == "auto":
        return [EssayText(ctx.data_home)]
    if choice == ESSAYS_NAME:
        return [DatasetNeed(ruler_essays(), ctx.data_home)]
    return essay_needs(options, ctx)


def haystack_source(ctx: TaskContext, tokens: Tokens, kind: str) -> NoiseSource | EssaySource:
    """`noise` (RULER's repeated block) or `essay` (options.essay, every file read recorded;
    repeated to the length where options.essay_repeat says so)."""
    if kind == "noise":
        key: tuple[str, ...] = ("noise",)
        if key not in tokens.sources:
            tokens.sources[key] = NoiseSource(tokens, NOISE)
        return tokens.sources[key]
    choice = essay_choice(str(ctx.options["essay"]), ctx.data_home)
    if choice == ESSAYS_NAME:
        path = ctx.data_home / ESSAYS_NAME / ESSAYS_FILE
        if not path.is_file():
            raise DataMissing(f"essay '{ESSAYS_NAME}' reads RULER's essays, and {path} is not there",
                              field="options.essay", command=ESSAY_FETCH, hint=f"Run: {ESSAY_FETCH} [--from DIR]")
        texts, _ = read_essay_texts(str(path), "text", ctx.data_home, ctx.record_file)
        name = f"RULER's essays ({ESSAYS_NAME})"
    else:
        try:
            texts, name = read_essay_texts(choice, str(ctx.options["essay_field"]), ctx.data_home, ctx.record_file)
        except DataMissing as exc:
            if ctx.options["essay"] != "auto":
                raise
            raise DataMissing(f"essay 'auto' reads RULER's essays, which are not installed, else {exc.message}",
                              field="options.essay", command=ESSAY_FETCH,
                              hint=f"Run: {ESSAY_FETCH} (RULER's essays), or lceval data fetch elitr-bench "
                                   "[--from DIR]; or point options.essay at a file or folder of text.") from None
    repeat = bool(ctx.options.get("essay_repeat", False))
    joined = " ".join(texts)
    key = ("essay", sha256_text(joined), str(repeat))
    if key not in tokens.sources:
        tokens.sources[key] = EssaySource(tokens, split_sentences(joined), name, repeat=repeat)
    return tokens.sources[key]


def too_short(budget: Budget, source: Any, needed: int, ctx: TaskContext) -> UserError:
    """The essay text holds fewer tokens than a sample needs: the error names what gets more
    (RULER's essays, when they are not what was read)."""
    have = source.available(needed + budget.tolerance)
    choice = essay_choice(str(ctx.options["essay"]), ctx.data_home)
    more = [] if choice == ESSAYS_NAME else [f"run `{ESSAY_FETCH}` for RULER's essays"
                                              + (" (the default essay once installed)" if ctx.options["essay"] ==
                                                 "auto" else " and set options.essay: ruler-essays")]
    if "essay_repeat" in ctx.options:
        more.append("set options.essay_repeat: true (RULER repeats the text)")
    more += ["point options.essay at more text", "give a shorter length"]
    hint = "; ".join(more) + "."
    return UserError(f"the haystack ({source.name}) holds {have:,} of the model's tokens, fewer than the {needed:,} "
                     f"a sample needs at {budget.describe()}", field="options.essay", hint=hint[0].upper() + hint[1:])
