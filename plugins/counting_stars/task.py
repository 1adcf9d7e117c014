"""The `counting_stars` task type: Counting-Stars (Song et al., 2024; nick7nlp/Counting-Stars at
commit 32e16f2c2d2be9f38d710e782236315e0821a038), 32 sentences about a little penguin counting
stars spread evenly through a haystack, and the model asked for every count.

Each row is built as the authors' `gen_test_data.ipynb` builds it (our own code after theirs):

- the haystack (`get_context`): EN, the text of every file of `PaulGrahamEssays/` with its line
  breaks made spaces, concatenated (files in sorted order; the authors' `glob` order is the file
  system's); ZH, `The_Story_of_the_Stone.txt`, each line stripped with "------------" made a space
  and every space removed, then ASCII punctuation and Latin letters removed;
- a length (a split: 4K ... 128K, K = 1,000, the notebook's `range(4000, 128001, 4000)`) is a
  haystack of `int(length * scalar)` words (EN, scalar 0.8: the first words of the text split at
  spaces) or characters (ZH, 0.7);
- star t (t = 0 ... m-1) is inserted after `(t+1) * int(j/m)` units, offset by the units of the
  stars already in (`len(star.split(" ")) * t` words, or `len(star) * t` characters), the star
  sentence of the task: searching ("The little penguin counted {a} ★") or reasoning (a wrong count
  {r}, then the right one {a}), with the counts of the authors' `a_stars.txt` / `r_stars.txt`;
- the prompt is the row's `question`: the haystack and the task's question, as the one user
  message, no system message, no template.

The data (the essays, the novel, the star counts) is the user's copy of the authors'
`context_data/` (`options.context_data`): nothing of it is shipped.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lceval.errors import DataMissing, UserError
from lceval.interfaces import TaskContext, TaskType
from lceval.needs import Need
from lceval.types import CONTEXT_SLOT, Conversation, Turn

from lceval_plugins.haystack.lengths import lengths_of

#: the authors' repository and the commit of the context_data the specs read
REPOSITORY = "https://github.com/nick7nlp/Counting-Stars"
COMMIT = "32e16f2c2d2be9f38d710e782236315e0821a038"

__all__ = ["QUESTIONS", "CountingStarsTaskType", "haystack_text", "read_stars", "sprinkle", "star_sentence"]

SEARCHING, REASONING = "searching", "reasoning"
QUESTIONS = {
    ("EN", SEARCHING): "\n\n\n\n" + "On this moonlit and misty night, the little penguin is looking up at the sky and "
    "concentrating on counting ★. Please help the little penguin collect the number of ★, for example: "
    "{\"little_penguin\": [x, x, x,...]}. The summation is not required, and the numbers in [x, x, x,...] represent "
    "the counted number of ★ by the little penguin. Only output the results in JSON format without any explanation.",
    ("EN", REASONING): "\n\n\n\n" + "On this moonlit and misty night, the little penguin is looking up at the sky and "
    "concentrating on counting ★. Please help the little penguin collect the correct number of ★, for example: "
    "{\"little_penguin\": [x, x, x,...]}. The summation is not required, and the numbers in [x, x, x,...] represent "
    "the correctly counted number of ★ by the little penguin. Only output the results in JSON format without any "
    "explanation.",
    ("ZH", SEARCHING): "\n\n\n\n在这个月光皎洁、云雾缭绕的夜晚，小企鹅正望向天空，全神贯注地数★。请帮助小企鹅收集所数★的颗数，按照如下格式："
    "{\"小企鹅\":[x,x,x,...]}，不要求和，[x,x,x,...]中数字为小企鹅每次数★的颗数，仅以JSON格式输出结果，不需要输出任何解释。",
    ("ZH", REASONING): "\n\n\n\n在这个月光皎洁、云雾缭绕的夜晚，小企鹅正望向天空，全神贯注地数★。请帮助小企鹅收集所数★的正确颗数，按照如下格式："
    "{\"小企鹅\":[x,x,x,...]}，不要求和，[x,x,x,...]中数字为小企鹅正确数★的颗数，仅以JSON格式输出结果，不需要输出任何解释。",
}
LENGTHS = tuple(f"{k}K" for k in range(4, 129, 4))
_PUNCTUATION = '!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~'

OPTIONS: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["language", "task"],
    "properties": {
        "language": {"enum": ["EN", "ZH"], "description": "EN: Paul Graham's essays; ZH: The Story of the Stone."},
        "task": {"enum": [SEARCHING, REASONING],
                 "description": "searching (multi-evidence acquisition) or reasoning (a wrong count, then the right one)."},
        "context_data": {"type": "string", "minLength": 1, "default": "Counting-Stars/context_data",
                         "description": "The authors' context_data folder (PaulGrahamEssays/, The_Story_of_the_Stone.txt, "
                                        "a_stars.txt, r_stars.txt) of your copy of nick7nlp/Counting-Stars: as given, "
                                        "else under the data home."},
        "stars": {"type": "integer", "minimum": 1, "default": 32,
                  "description": "How many stars (m; the key of a_stars.txt: 32 in the paper)."},
        "scalar": {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": 1, "default": None,
                   "description": "Haystack words (EN) or characters (ZH) per unit of nominal length (null: 0.8 EN, 0.7 ZH)."},
    },
}


def star_sentence(language: str, task: str, a: int, r: int) -> str:
    """`sentence_with_star` of the notebook."""
    if language == "ZH":
        if task == SEARCHING:
            return f"\n小企鹅数了{a}颗★\n"
        return f"\n小企鹅数了{r}颗★，但发现数错了，于是又数了一遍，这次数对了，是{a}颗★\n"
    if task == SEARCHING:
        return f"\nThe little penguin counted {a} ★\n"
    return (f"\nThe little penguin counted {r} ★, but found that a mistake had been made, so the counting was done "
            f"again, and this time {a} ★ was counted correctly.\n")


def haystack_text(language: str, folder: Path, record) -> str:
    """`get_context` of the notebook (EN files in sorted order)."""
    if language == "EN":
        essays = folder / "PaulGrahamEssays"
        paths = sorted(essays.glob("*.txt")) if essays.is_dir() else []
        if not paths:
            raise UserError(f"{essays} holds no .txt file", field="options.context_data",
                            hint="Point options.context_data at the context_data folder of nick7nlp/Counting-Stars.")
        context = ""
        for p in paths:
            record(p)
            context += p.read_text(encoding="utf-8").replace("\n", " ")
        return context
    path = folder / "The_Story_of_the_Stone.txt"
    if not path.is_file():
        raise UserError(f"no {path}", field="options.context_data",
                        hint="Point options.context_data at the context_data folder of nick7nlp/Counting-Stars.")
    record(path)
    context = ""
    with open(path, encoding="utf-8") as f:
        for line in f.readlines():
            context += line.strip().replace("------------", " ").replace("\n", " ").replace(" ", "")
    context = re.sub("[{}]".format(_PUNCTUATION), "", context)
    return re.sub("[a-zA-Z]", "", context)


def read_stars(path: Path, m: int, record) -> list[int]:
    """The counts of key `m` in a_stars.txt / r_stars.txt (one line: a Python dict literal)."""
    if not path.is_file():
        raise UserError(f"no {path}", field="options.context_data")
    record(path)
    try:
        table = ast.literal_eval(path.read_text(encoding="utf-8").splitlines()[0])
        counts = table[str(m)]
    except (ValueError, SyntaxError, IndexError, KeyError, TypeError):
        raise UserError(f"{path.name} has no list of {m} counts under key '{m}'", file=path,
                        field="options.stars") from None
    if not isinstance(counts, list) or len(counts) < m or not all(isinstance(c, int) for c in counts):
        raise UserError(f"{path.name}['{m}'] is not a list of {m} integers", file=path, field="options.stars")
    return counts[:m]


def sprinkle(context: str, j: int, m: int, language: str, task: str, a: list[int], r: list[int]) -> str:
    """The notebook's loop over `range(0, j, int(j / m))`: m stars into the first j units."""
    step = int(j / m)
    if step <= 0:
        raise UserError(f"a haystack of {j} units cannot hold {m} stars", field="--split")
    text = " ".join(context.split(" ")[:j]) if language == "EN" else context[:j]
    for indicator, k in enumerate(range(0, j, step)):
        star = star_sentence(language, task, a[indicator], r[indicator])
        if language == "ZH":
            at = k + step + len(star) * indicator
            text = text[:at] + star + text[at:]
        else:
            words = text.split(" ")
            at = len(star.split(" ")) * indicator + k + step
            text = " ".join(words[:at]) + star + " ".join(words[at:])
        if indicator + 1 == m:
            break
    return text


@dataclass
class _Data:
    context: str
    a: list[int]
    r: list[int]


def _folder(value: str, home: Path) -> Path:
    raw = Path(value).expanduser()
    for cand in ([raw] if raw.is_absolute() else [raw, home / raw]):
        if cand.is_dir():
            return cand
    raise DataMissing(f"no folder '{value}'", field="options.context_data",
                      hint="Or git clone the authors' repository (nick7nlp/Counting-Stars) and --set "
                           "options.context_data=Counting-Stars/context_data.")


class CountingStarsTaskType(TaskType):
    """Counting-Stars: one prompt per length (a split), m star counts to collect."""

    options_schema = OPTIONS
    description = ("Counting-Stars (Song et al., 2024; nick7nlp/Counting-Stars): 32 star counts spread through "
                   "a haystack, collected as JSON; lengths 4K-128K are splits")

    def needs(self, ctx: TaskContext) -> list[Need]:
        """The authors' context_data folder at the commit the specs follow (fetched with git into
        the data home), unless options.context_data names a folder that is there already."""
        from lceval.io import GitFiles

        value = str(ctx.options["context_data"])
        if Path(value).expanduser().is_absolute() or Path(value).expanduser().is_dir():
            return []
        return [GitFiles(REPOSITORY, COMMIT, ctx.data_home, paths={"context_data": value})]

    def load(self, ctx: TaskContext) -> list[Conversation]:
        o = ctx.options
        lengths = lengths_of(ctx)
        folder = _folder(o["context_data"], ctx.data_home)
        m, language, task = int(o["stars"]), o["language"], o["task"]
        data = _Data(haystack_text(language, folder, ctx.record_file),
                     read_stars(folder / "a_stars.txt", m, ctx.record_file),
                     read_stars(folder / "r_stars.txt", m, ctx.record_file))
        scalar = o["scalar"] if o["scalar"] is not None else (0.8 if language == "EN" else 0.7)
        question = QUESTIONS[(language, task)]
        out = []
        for label, length in lengths:
            if not ctx.select_context(label):
                continue
            if ctx.limit is not None and ctx.limit < 1:
                break
            j = int(length * scalar)
            text = sprinkle(data.context, j, m, language, task, data.a, data.r)
            meta = {"length": label, "context_size": j, "stars": list(data.a), "wrong_stars": list(data.r),
                    "references": [str(data.a)]}
            turn = Turn(item_id=label, user=CONTEXT_SLOT + question, reference=str(data.a),
                        question=question.strip(), metadata=meta)
            out.append(Conversation(conv_id=label, context=text, context_id=label, turns=[turn],
                                    metadata={"length": label}))
        return out
