"""The `babilong` task type: one bAbI task of BABILong at each length, asked as the authors ask.

Data (Kuratov et al., 2024; booydar/babilong `scripts/run_model_on_babilong.py`:
`datasets.load_dataset(dataset_name, length)[task]`, a config per length, a split per task):
- `RMT-team/babilong-1k-samples` (about 1,000 rows per task and length): `<length>/<task>-00000-of-00001.parquet`,
  qa1-qa20 at 0k, qa1-qa5 from 1k to 128k;
- `RMT-team/babilong` (100 rows): `data/<task>/<length>.json`, qa1-qa20 at 0k, qa1-qa10 from 1k to 1M.
The authors' scripts read the 1k-sample set up to 32k and the 100-sample set from 64k
(`scripts/run_Meta-Llama-3.1-8B-Instruct_32k.sh`, `..._64-128k_vllm.sh`): `samples: authors`
does the same wherever the 1k-sample set has the task, else reads the 100-sample set.

A length is a split of the task (the spec's `splits`, chosen with `--split 4k`), so `--limit N`
takes the first N rows of each length. Every row is asked on its own, greedy, as the authors'
`get_formatted_input` (babilong/prompts.py, last changed in ffa075f) builds it:

    '{instruction}\\n\\n{examples}\\n\\n{post_prompt}\\n\\n<context>\\n{context.strip()}\\n</context>\\n\\nQuestion: {question}'.strip()

with the task's `DEFAULT_PROMPTS` parts (in each spec's options, byte for byte; an empty part is
the authors' `use_instruction` / `use_examples` / `use_post_prompt` switched off), sent as the one
user message (`--use_chat_template`, no system message). The row's text is the context, never
cut (context.policy skip: the authors do not run a model at lengths past its window).
"""

from __future__ import annotations

from typing import Any

from lceval.errors import UserError
from lceval.interfaces import TaskContext, TaskType
from lceval.needs import Need
from lceval.types import CONTEXT_SLOT, Conversation, Turn

from lceval_plugins.documents.records import iter_rows
from lceval_plugins.documents.source import open_source

__all__ = ["LENGTHS", "BabilongTaskType", "prompt_parts", "source_of"]

#: every length of the 100-sample set, in order
LENGTHS = ("0k", "1k", "2k", "4k", "8k", "16k", "32k", "64k", "128k", "256k", "512k", "1M")
TASKS = tuple(f"qa{i}" for i in range(1, 21))
#: lengths the authors' scripts read from the 1k-sample set
AUTHORS_1K = ("0k", "1k", "2k", "4k", "8k", "16k", "32k")
_HUB = {"type": "object", "additionalProperties": False, "required": ["path", "revision"], "properties": {
    "path": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$"},
    "revision": {"type": "string", "minLength": 1}}}

OPTIONS: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["task"],
    "properties": {
        "task": {"enum": list(TASKS), "description": "The bAbI task (qa1 ... qa20)."},
        "samples": {"enum": ["authors", "1k", "100"], "default": "authors",
                    "description": "Which set a length is read from: authors (the 1k-sample set up to 32k where it has "
                                   "the task, else the 100-sample set, as the authors' scripts), 1k or 100."},
        "instruction": {"type": "string", "default": "",
                        "description": "The task's instruction (babilong/prompts.py DEFAULT_PROMPTS; '' for none)."},
        "examples": {"type": "string", "default": "", "description": "The task's in-context examples ('' for none)."},
        "post_prompt": {"type": "string", "default": "",
                        "description": "The instructions after the examples ('' for none)."},
        "hub_1k": {**_HUB, "default": {"path": "RMT-team/babilong-1k-samples",
                                       "revision": "fc4d1a584dfc498c37578753bee4cdd91b987ae2"},
                   "description": "The 1k-sample set: Hub dataset and pinned commit."},
        "hub_100": {**_HUB, "default": {"path": "RMT-team/babilong",
                                        "revision": "ee0d588794c7ac098062ee0d247c733d62e94fe2"},
                    "description": "The 100-sample set: Hub dataset and pinned commit."},
    },
}


def available(task: str, length: str, which: str) -> bool:
    """Whether a set holds the task at the length."""
    n = int(task[2:])
    if which == "1k":
        return length == "0k" or (n <= 5 and length in LENGTHS[:9])
    return length == "0k" or (n <= 10 and length in LENGTHS)


def source_of(options: dict[str, Any], length: str) -> tuple[str, dict[str, Any]]:
    """("1k" or "100", the documents source that reads the task at `length`)."""
    task, want = options["task"], options["samples"]
    which = want if want != "authors" else ("1k" if length in AUTHORS_1K and available(task, length, "1k") else "100")
    if not available(task, length, which):
        have = [x for x in LENGTHS if available(task, x, which)]
        raise UserError(f"BABILong's {'1k' if which == '1k' else '100'}-sample set has no {task} at {length} "
                        f"(it has {task} at {', '.join(have)})", field="--split",
                        hint="Choose lengths it has (--split), or options.samples.")
    hub = options["hub_1k"] if which == "1k" else options["hub_100"]
    name = f"{length}/{task}-00000-of-00001.parquet" if which == "1k" else f"data/{task}/{length}.json"
    return which, {"path": hub["path"], "revision": hub["revision"], "data_files": name, "split": length}


def prompt_parts(options: dict[str, Any], question: str) -> tuple[str, str]:
    """(the text before the context, the text after it) of the authors' prompt: DEFAULT_TEMPLATE
    with the context left out, stripped at both ends as `get_formatted_input` strips it."""
    head = f"{options['instruction']}\n\n{options['examples']}\n\n{options['post_prompt']}\n\n<context>\n"
    tail = f"\n</context>\n\nQuestion: {question}"
    return head.lstrip(), tail.rstrip()


class BabilongTaskType(TaskType):
    """One BABILong task at the spec's lengths (its `splits`)."""

    options_schema = OPTIONS
    description = ("BABILong (booydar/babilong): a bAbI task hidden in PG-19 text at each length (a split), "
                   "the authors' prompt and answer matching")

    def lengths(self, ctx: TaskContext) -> list[str]:
        lengths = list(ctx.splits or ctx.spec.get("splits") or [])
        if not lengths:
            raise UserError("name the lengths to read as the spec's splits (e.g. [0k, 1k, 4k]) or with --split",
                            field="splits")
        for length in lengths:
            if length not in LENGTHS:
                raise UserError(f"{length!r} is no BABILong length (lengths: {', '.join(LENGTHS)})", field="--split")
        return lengths

    def needs(self, ctx: TaskContext) -> list[Need]:
        """The Hub files of each length at the pinned revision."""
        from lceval_plugins.documents.needs import source_needs

        return [need for length in self.lengths(ctx) for need in source_needs(source_of(ctx.options, length)[1], ctx)]

    def load(self, ctx: TaskContext, max_rows: int | None = None, lengths: int | None = None) -> list[Conversation]:
        """The task's rows at each length (`lengths`: only the first that many lengths)."""
        options = ctx.options
        sources = [(length, *source_of(options, length)) for length in self.lengths(ctx)]  # all checked first
        out: list[Conversation] = []
        for length, which, source in sources[:lengths]:
            opened = open_source(source, ctx)
            missing = {"input", "question", "target"} - set(opened.dataset.column_names)
            if missing:
                raise UserError(f"{opened.label} lacks the field(s) {', '.join(sorted(missing))} of BABILong's rows "
                                "(input, question, target)", field="options.samples")
            taken = 0
            for index, row in enumerate(iter_rows(opened.dataset, ["input", "question", "target"])):
                limit = max_rows if max_rows is not None else ctx.limit
                if limit is not None and taken >= limit:
                    break
                item_id = f"{length}/{index:04d}"
                if not ctx.select_context(item_id):
                    continue
                out.append(self._conversation(options, row, item_id, length, which, index, opened.label))
                taken += 1
        return out

    def _conversation(self, options: dict[str, Any], row: dict[str, Any], item_id: str, length: str, which: str,
                      index: int, label: str) -> Conversation:
        context, question, target = row["input"], row["question"], row["target"]
        if not all(isinstance(v, str) for v in (context, question, target)) or not context.strip():
            raise UserError(f"{label} row {index}: input, question and target must be text and the input non-empty, "
                            f"got {context!r:.60}, {question!r:.60}, {target!r:.60}", field="options.samples")
        head, tail = prompt_parts(options, question)
        meta = {"task": options["task"], "length": length, "split": length, "samples": which,
                "question_id": str(index), "document_id": item_id, "references": [target]}
        turn = Turn(item_id=item_id, user=head + CONTEXT_SLOT + tail, reference=target, question=question,
                    metadata=meta)
        return Conversation(conv_id=item_id, context=context.strip(), context_id=item_id, turns=[turn],
                            metadata={"split": length, "task": options["task"]})

    def check(self, ctx: TaskContext) -> None:
        """The spec against its lengths (each one a set has) and its first length's first rows."""
        self.load(ctx, max_rows=5, lengths=1)
