"""The `l_citeeval` task type: one L-CiteEval task, asked as the authors' one-shot script asks it.

Data: the Hugging Face dataset `Jonaszky123/L-CiteEval` (Apache-2.0 card) at a pinned commit, the
raw files the authors' scripts read, `L-CiteEval-{Data,Length,Hardness}/{task}.json` (a JSON list of
rows: `id`, `question`, `answer`, `docs` (the context in chunks), `length`, and `hardness` or `role`
where they apply).

The prompt is `get_instruction_template` of `script/inference_1shot_vllm.py` (ZetangForward/L-CITEEVAL,
commit 6e493267), byte for byte: the task's demo from the authors' `prompt/<task>_default.json` (its
passages, instruction, question and answer through `demo_prompt`), `demo_sep` ("\\n\\n\\n"), then the
row the same way without its answer, `rstrip()`ped - every passage as `doc_prompt` ("Passage [k]: ...\\n",
1-based), dialsim's `<<<chatbox>>>` replaced by the demo's `demo_role` and the row's `role` - sent as one
user message. The passages of the row are the context (never cut: `context.policy: skip`), so the
text before and after them are the authors' exactly. The prompt files are not on the Hub: `lceval data
fetch l_citeeval --from <checkout of the authors' repository>` copies them into the data home.

Every sample carries what its metrics need, so `lceval score` re-judges without the data: `passages`
(each formatted as the citation metric's `_format_document` formats it; NLI-judged tasks only),
`gold_passage` (niah), `gold_passages` and `gold_counts` (counting_stars), and `length` and `bin`, the
authors' length bin named by its upper bound (8k ... 48k: `lower <= length < upper`, multi_news past
40,000 in 48k's place as the authors put it in their 40,000 bin; the Length variant's 8k, 16k, 32k;
the Hardness variant's easy, medium, hard; a row past the last bin gets `>48k`, which the authors
leave out of every bin).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from lceval.errors import DataMissing, UserError
from lceval.interfaces import TaskContext, TaskType
from lceval.io import quote, read_json_object
from lceval.needs import Need
from lceval.types import CONTEXT_SLOT, Conversation, Turn

from lceval_plugins.documents.records import iter_rows
from lceval_plugins.documents.source import open_source

__all__ = ["L_CiteEvalTaskType", "TASKS", "bin_of", "doc_prompt_text", "make_demo"]

#: task -> (the prompt file's stem, the citation metric's mode)
TASKS = {
    "narrativeqa": ("narrativeqa", "nli"), "natural_questions": ("natural_questions", "nli"),
    "hotpotqa": ("hotpotqa", "nli"), "2wikimultihopqa": ("2WikiMultihopQA", "nli"),
    "multi_news": ("multi_news", "nli"), "gov_report": ("gov_report", "nli"), "qmsum": ("qmsum", "nli"),
    "locomo": ("locomo", "nli"), "dialsim": ("dialsim", "nli"), "niah": ("niah", "niah"),
    "counting_stars": ("counting_stars", "counting_stars"),
}
VARIANTS = {"Data": (8000, 16000, 24000, 32000, 40000, 48000), "Length": (8000, 16000, 32000), "Hardness": ()}
PENGUIN = "The little penguin counted"

OPTIONS: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["task"],
    "properties": {
        "task": {"enum": list(TASKS), "description": "The L-CiteEval task."},
        "variant": {"enum": list(VARIANTS), "default": "Data",
                    "description": "L-CiteEval-Data (the benchmark), -Length (the same questions at 8k, 16k, 32k) or "
                                   "-Hardness (easy, medium, hard)."},
        "hub": {"type": "object", "additionalProperties": False, "required": ["path", "revision"],
                "default": {"path": "Jonaszky123/L-CiteEval", "revision": "23678a2c7a322cdf638c402abc06948d3ac1f0a5"},
                "properties": {"path": {"type": "string", "minLength": 1}, "revision": {"type": "string", "minLength": 1}},
                "description": "The Hub dataset and its pinned commit."},
        "prompt_file": {"type": ["string", "null"], "default": None,
                        "description": "The authors' prompt file of the task (default: "
                                       "l_citeeval/prompt/<task>_default.json in the data home)."},
    },
}


def doc_prompt_text(doc: Any, index: int, doc_prompt: str) -> str:
    """`make_doc_prompt`: a passage through `doc_prompt` ({P}, then {ID} = index + 1)."""
    if isinstance(doc, str):
        text = doc
    elif isinstance(doc, dict):
        text = str(doc.get("text", "")).strip("\n")
        title = doc.get("title")
        if title is not None and text[:len(title) + 1] == title + "\n":
            text = text[len(title) + 1:]
    else:
        raise UserError(f"a passage must be text or a {{title, text}} record, got {quote(doc)}", field="options.task")
    return doc_prompt.replace("{P}", text).replace("{ID}", str(index + 1))


def _parts(item: dict[str, Any], prompt: str, doc_prompt: str, instruction: str) -> tuple[str, str, str]:
    """(before the passages, the passages, after them) of `make_demo`'s text before `{A}` is removed."""
    if "{Q}" in prompt:
        prompt = prompt.replace("{INST}", instruction).replace("{Q}", item["question"])
    else:
        prompt = prompt.replace("{INST}", instruction)
    if "{D}" not in prompt:
        return prompt, "", ""
    before, after = prompt.split("{D}", 1)
    text = "".join(doc_prompt_text(d, i, doc_prompt) for i, d in enumerate(item["docs"][:1500]))
    return before, text, after


def make_demo(item: dict[str, Any], prompt: str, doc_prompt: str, instruction: str) -> str:
    """`make_demo(..., test=False)`: the demo with its answer."""
    before, text, after = _parts(item, prompt, doc_prompt, instruction)
    answer = item["answer"]
    answer = "\n" + "\n".join(answer) if isinstance(answer, list) else answer
    return (before + text + after).replace("{A}", "").rstrip() + answer


def bin_of(length: Any, variant: str, task: str, hardness: Any = None) -> str:
    """The authors' bin of a row, named by its upper bound (see the module's docstring)."""
    if variant == "Hardness":
        return str(hardness)
    edges = VARIANTS[variant]
    if variant == "Data" and task == "multi_news" and length > 40000:
        return "48k"  # the authors' 40000 bin, the last one
    low = 0
    for high in edges:
        if low <= length < high:
            return f"{high // 1000}k"
        low = high
    return f">{edges[-1] // 1000}k"


def format_passage(doc: Any) -> str:
    """The citation metric's `_format_document`."""
    if isinstance(doc, dict):
        return "Title: %s\nPassage: %s" % (doc.get("title"), doc.get("text"))
    return "Passage: %s" % (doc,)


class L_CiteEvalTaskType(TaskType):  # noqa: N801 - the benchmark's name
    """One L-CiteEval task: the authors' one-shot prompt over the row's passages."""

    options_schema = OPTIONS
    description = ("L-CiteEval (ZetangForward/L-CITEEVAL): answer or summarise from numbered passages, citing them; "
                   "the authors' one-shot prompt, length bins and citation metadata")

    def prompt_file(self, ctx: TaskContext) -> dict[str, Any]:
        options = ctx.options
        name = options.get("prompt_file") or f"l_citeeval/prompt/{TASKS[options['task']][0]}_default.json"
        path = Path(name).expanduser()
        if not path.is_absolute():
            path = next((p for p in (ctx.spec_path.parent / path, ctx.data_home / path) if p.is_file()),
                        ctx.data_home / path)
        if not path.is_file():
            raise DataMissing(f"the authors' prompt file {path} is missing", field="options.prompt_file",
                              command="lceval data fetch l_citeeval --from <a checkout of ZetangForward/L-CITEEVAL>")
        prompt = read_json_object(path, what="L-CiteEval prompt file")
        for key in ("instruction", "demo_sep", "demo_prompt", "doc_prompt", "demos"):
            if key not in prompt:
                raise UserError(f"the prompt file has no {key!r}", file=path, field="options.prompt_file")
        ctx.record_file(path)
        return prompt

    def needs(self, ctx: TaskContext) -> list[Need]:
        """The rows on the Hub at the pinned commit, and the authors' prompt file (in the data
        home's l_citeeval folder, the dataset `lceval data fetch l_citeeval --from` installs)."""
        from lceval.io import DataHomePath
        from lceval_plugins.documents.needs import HubFile

        options = ctx.options
        out: list[Need] = [HubFile(options["hub"]["path"], options["hub"]["revision"],
                                   f"L-CiteEval-{options['variant']}/{options['task']}.json")]
        name = options.get("prompt_file") or f"l_citeeval/prompt/{TASKS[options['task']][0]}_default.json"
        if not Path(name).expanduser().is_absolute() and not (ctx.spec_path.parent / name).is_file():
            out.append(DataHomePath(name, ctx.data_home, "a checkout of ZetangForward/L-CITEEVAL"))
        return out

    def load(self, ctx: TaskContext, max_rows: int | None = None) -> list[Conversation]:
        options = ctx.options
        task, variant = options["task"], options["variant"]
        prompt = self.prompt_file(ctx)
        instruction = prompt["instruction"]
        demo_instruction = instruction.replace("<<<chatbox>>>", prompt.get("demo_role", "")) if task == "dialsim" \
            else instruction
        demo = make_demo(prompt["demos"][0], prompt["demo_prompt"], prompt["doc_prompt"], demo_instruction)
        source = {"path": options["hub"]["path"], "revision": options["hub"]["revision"],
                  "data_files": f"L-CiteEval-{variant}/{task}.json", "split": "test"}
        opened = open_source(source, ctx)
        columns = [c for c in ("id", "question", "answer", "docs", "length", "hardness", "role")
                   if c in opened.dataset.column_names]
        missing = {"answer", "docs", "length"} - set(columns)
        if missing:
            raise UserError(f"{opened.label} lacks the field(s) {', '.join(sorted(missing))} of L-CiteEval's rows",
                            field="options.task")
        out: list[Conversation] = []
        limit = max_rows if max_rows is not None else ctx.limit
        for index, row in enumerate(iter_rows(opened.dataset, columns)):
            if limit is not None and len(out) >= limit:
                break
            item_id = f"test/{row.get('id', index)}"
            if not ctx.select_context(item_id):
                continue
            out.append(self._conversation(row, item_id, task, variant, prompt, instruction, demo, opened.label, index))
        return out

    def _conversation(self, row: dict[str, Any], item_id: str, task: str, variant: str, prompt: dict[str, Any],
                      instruction: str, demo: str, label: str, index: int) -> Conversation:
        where = f"{label} row {index}"
        docs, answer = row.get("docs"), row.get("answer")
        if not isinstance(docs, list) or not docs:
            raise UserError(f"{where}: docs must be a non-empty list of passages, got {quote(docs)}", field="options.task")
        answers = [str(a) for a in answer] if isinstance(answer, list) else [str(answer)]
        if task == "dialsim":
            instruction = instruction.replace("<<<chatbox>>>", str(row.get("role")))
        item = {"question": row.get("question") or "", "docs": docs}
        before, text, after = _parts(item, prompt["demo_prompt"], prompt["doc_prompt"], instruction)
        before, text, after = (s.replace("{A}", "") for s in (before, text, after))
        user = demo + prompt["demo_sep"] + before + CONTEXT_SLOT + after.rstrip()
        meta: dict[str, Any] = {"task": task, "length": row.get("length"), "question_id": str(row.get("id", index)),
                                "document_id": item_id, "references": answers, "split": "test",
                                "bin": bin_of(row.get("length") or 0, variant, task, row.get("hardness"))}
        mode = TASKS[task][1]
        if mode == "nli":
            meta["passages"] = [format_passage(d) for d in docs]
        elif mode == "niah":
            meta["gold_passage"] = next((j for j, d in enumerate(docs) if isinstance(d, str) and answers[0] in d), -1)
        else:
            penguin = [(j + 1, d) for j, d in enumerate(docs) if isinstance(d, str) and PENGUIN in d]
            meta["gold_passages"] = [j for j, _ in penguin]
            counts = [re.search(r"The little penguin counted (\d+) ★", d) for _, d in penguin]
            meta["gold_counts"] = [int(m.group(1)) for m in counts if m]
        reference = answers[0] if len(answers) == 1 else " | ".join(answers)
        turn = Turn(item_id=item_id, user=user, reference=reference, question=item["question"], metadata=meta)
        return Conversation(conv_id=item_id, context=text, context_id=item_id, turns=[turn],
                            metadata={"split": "test", "task": task})

    def check(self, ctx: TaskContext) -> None:
        self.load(ctx, max_rows=5)
