"""The ruler task types: `ruler_niah`, `ruler_vt`, `ruler_cwe`, `ruler_fwe`, one per RULER
task script (NVIDIA/RULER scripts/data/synthetic/), their options named as RULER's arguments
(scripts/synthetic.yaml). Each builds its samples to this variant's length
(`--context-lengths`, else `options.length`) in the evaluated model's tokens."""

from __future__ import annotations

from typing import Any, Callable

from lceval.interfaces import TaskContext, TaskType
from lceval.needs import Need
from lceval.types import Conversation

from .aggregation import load_cwe, load_fwe
from lceval_plugins.haystack.tokens import Tokens, model_tokens

from .common import COMMON_OPTIONS, Budget, budget_of, check_splits
from .niah import load_niah
from .qa import DATASETS, QA_OPTIONS_EXTRA, load_qa
from .sources import essay_needs_of
from .vt import load_vt

__all__ = ["CWE_OPTIONS", "FWE_OPTIONS", "NIAH_OPTIONS", "QA_OPTIONS", "VT_OPTIONS", "RulerTaskType", "TASK_TYPES"]

_ESSAY = {
    "essay": {"type": "string", "minLength": 1, "default": "auto",
              "description": "The essay haystack's text: 'auto' (RULER's essays once `lceval data fetch ruler-essays` "
                             "installed them, else the ELITR-Bench transcripts), 'ruler-essays', 'elitr' (the "
                             "ELITR-Bench transcripts of the data home), a text file, a folder of .txt/.md files, "
                             "or a .json/.jsonl file (see essay_field)."},
    "essay_field": {"type": "string", "minLength": 1, "default": "text",
                    "description": "Field of each JSON record that holds the text (RULER's PaulGrahamEssays.json: text)."},
}
_NEEDLE_KIND = {"enum": ["words", "numbers", "uuids"]}


def _schema(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "properties": {**COMMON_OPTIONS, **properties}}


NIAH_OPTIONS = _schema({
    "haystack": {"enum": ["noise", "essay", "needle"], "default": "essay",
                 "description": "RULER's type_haystack: repeated noise sentences, essay text, or distractor needles."},
    **_ESSAY,
    "essay_repeat": {"type": "boolean", "default": True,
                     "description": "Repeat the essay text from its start when a length needs more than it holds, "
                                    "as RULER's niah.py does (samples record essay_passes); false: such a length "
                                    "is refused, naming what gets more text."},
    "type_needle_k": {**_NEEDLE_KIND, "default": "words", "description": "What keys are."},
    "type_needle_v": {**_NEEDLE_KIND, "default": "numbers", "description": "What values are."},
    "num_needle_k": {"type": "integer", "minimum": 1, "maximum": 256, "default": 1, "description": "Keys per haystack."},
    "num_needle_v": {"type": "integer", "minimum": 1, "maximum": 256, "default": 1, "description": "Values per key."},
    "num_needle_q": {"type": "integer", "minimum": 1, "maximum": 256, "default": 1,
                     "description": "Keys one question asks about (all their values must be named)."},
    "depths": {"type": "array", "minItems": 1, "uniqueItems": True,
               "items": {"type": "number", "minimum": 0, "maximum": 100},
               "default": [0, 25, 50, 75, 100],
               "description": "Needle depths in percent of the haystack (0 = start, 100 = end); the samples "
                              "take them in turn, ends and middle first (five depths: 0, 100, 50, 25, "
                              "75), so a --limit smaller than the list still spans it."},
    "queries_per_haystack": {"type": "integer", "minimum": 1, "maximum": 256, "default": 1,
                             "description": "Questions asked about one haystack, each about another key "
                                            "(one context, prefilled once); RULER asks one."},
})
VT_OPTIONS = _schema({
    "haystack": {"enum": ["noise", "essay"], "default": "noise", "description": "RULER's type_haystack."},
    **_ESSAY,
    "num_chains": {"type": "integer", "minimum": 1, "maximum": 64, "default": 1, "description": "Chains hidden."},
    "num_hops": {"type": "integer", "minimum": 1, "maximum": 64, "default": 4, "description": "Assignments per chain."},
})
CWE_OPTIONS = _schema({
    "freq_cw": {"type": "integer", "minimum": 2, "default": 30, "description": "Times each common word is listed (4k and up)."},
    "freq_ucw": {"type": "integer", "minimum": 1, "default": 3, "description": "Times each other word is listed (4k and up)."},
    "num_cw": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10, "description": "Common words to find."},
    "word_list": {"type": ["string", "null"], "default": None,
                  "description": "A file of more words, one a line, drawn from once the wonderwords lists run out."},
})
FWE_OPTIONS = _schema({
    "alpha": {"type": "number", "exclusiveMinimum": 1, "default": 2.0, "description": "Zipf exponent of the counts."},
    "coded_wordlen": {"type": "integer", "minimum": 2, "maximum": 32, "default": 6, "description": "Letters per coded word."},
    "vocab_size": {"type": ["integer", "null"], "minimum": 4, "default": None,
                   "description": "Distinct coded words (default: (length - tokens to generate) // 50, as RULER)."},
})
QA_OPTIONS = _schema(QA_OPTIONS_EXTRA)


class RulerTaskType(TaskType):
    """One RULER task: the options of its script, and the loader that builds its samples."""

    def __init__(self, options_schema: dict[str, Any],
                 loader: Callable[[TaskContext, Budget, Tokens], list[Conversation]], doc: str) -> None:
        self.options_schema = options_schema
        self._loader = loader
        self.description = doc  # what `lceval plugins` says of this type

    def needs(self, ctx: TaskContext) -> list[Need]:
        """An essay haystack's text, when it is in the data home (RULER's essays or ELITR-Bench's
        transcripts); the QA dataset of `ruler_qa`."""
        from lceval.io import DatasetNeed

        if "dataset" in self.options_schema["properties"]:
            return [DatasetNeed(DATASETS[str(ctx.options["dataset"])], ctx.data_home)]
        return essay_needs_of(ctx.options, ctx) if ctx.options.get("haystack") == "essay" else []

    def load(self, ctx: TaskContext) -> list[Conversation]:
        check_splits(ctx)
        tokens = model_tokens(ctx)
        return self._loader(ctx, budget_of(ctx, tokens), tokens)


TASK_TYPES: dict[str, Callable[[], RulerTaskType]] = {
    "ruler_niah": lambda: RulerTaskType(NIAH_OPTIONS, load_niah, "RULER needle in a haystack (NVIDIA/RULER "
                                        "scripts/data/synthetic/niah.py): single, multi-key, multi-value, multi-query."),
    "ruler_vt": lambda: RulerTaskType(VT_OPTIONS, load_vt, "RULER variable tracking (scripts/data/synthetic/"
                                      "variable_tracking.py): every variable a chain of assignments gives a value."),
    "ruler_cwe": lambda: RulerTaskType(CWE_OPTIONS, load_cwe, "RULER common words extraction (scripts/data/synthetic/"
                                       "common_words_extraction.py): the most common words of a numbered list."),
    "ruler_fwe": lambda: RulerTaskType(FWE_OPTIONS, load_fwe, "RULER frequent words extraction (scripts/data/synthetic/"
                                       "freq_words_extraction.py): the three most frequent words of a Zipf text."),
    "ruler_qa": lambda: RulerTaskType(QA_OPTIONS, load_qa, "RULER question answering (scripts/data/synthetic/qa.py): "
                                      "a SQuAD or HotpotQA question among distractor documents."),
}
