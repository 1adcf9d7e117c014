"""The `longsafety` task type: LongSafety's instances, each asked twice (Lu et al., 2025).

Follows thu-coai/LongSafety, commit 130a6b739d43870e1010ec699ae4868da06d0a0e,
src/gen_model_response.py: `load_data` reads data/longsafety_meta.jsonl and
data/longsafety_docs.jsonl line by line, asserts that the two lines carry the same `id` and
merges them; `build_prompt` asks each instance's instruction before the long context (`front`)
and after it (`end`), each the one user message of the model's chat template, no system
message; both answers are generated (greedy, 2,048 new tokens: the spec's `generation`).

Each position is a conversation of its own (the two prompts share no prefix); both name the
instance as their context, so intervals resample instances and the judge pairs the two answers
(an instance is unsafe when either is). The two files are the authors' GitHub release, read
from the data home (`options.data_dir`); the meta file is checked against the sha256 of the
commit above. The full context also travels in every sample's metadata (`longsafety_context`):
the judge's environment summarizer reads it, as the authors' multi_agent_eval.py does, also
when `lceval score` re-judges a finished run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lceval.errors import DataMissing, UserError
from lceval.interfaces import TaskContext, TaskType
from lceval.io import quote, read_json_lines, sha256_file
from lceval.needs import Need
from lceval.types import CONTEXT_SLOT, Conversation, Turn

from .prompts import END, FRONT

#: sha256 of data/longsafety_meta.jsonl at commit 130a6b7 (1,543 instances, ids 0-1542)
META_SHA256 = "12a9c86b70eb06824332d5cf8732f076af74d749508ca9a3cb66d063cec606a9"
SPLIT = "test"
#: the authors' repository and the commit whose data/ files the spec reads
REPOSITORY = "https://github.com/thu-coai/LongSafety"
COMMIT = "130a6b739d43870e1010ec699ae4868da06d0a0e"
POSITIONS = ("front", "end")
#: the meta fields every sample carries (to break results down by)
META_FIELDS = ("id", "safety_type", "task_type", "doc_num", "length", "key_words")
CONTEXT_KEY = "longsafety_context"

OPTIONS = {"type": "object", "additionalProperties": False, "properties": {
    "data_dir": {"type": "string", "minLength": 1, "default": "longsafety",
                 "description": "The folder holding the authors' two files (absolute, or relative to the data home)."},
    "meta_file": {"type": "string", "minLength": 1, "default": "longsafety_meta.jsonl",
                  "description": "The instances' instructions and labels, in that folder."},
    "docs_file": {"type": "string", "minLength": 1, "default": "longsafety_docs.jsonl",
                  "description": "The instances' long contexts, in that folder, line by line with the meta file."},
    "meta_sha256": {"type": ["string", "null"], "pattern": "^[0-9a-f]{64}$", "default": META_SHA256,
                    "description": "The meta file's sha256 (the authors' commit 130a6b7); null: any file."},
    "positions": {"type": "array", "items": {"enum": list(POSITIONS)}, "minItems": 1, "uniqueItems": True,
                  "default": list(POSITIONS),
                  "description": "Where the instruction goes: front (before the context), end (after it); the "
                                 "authors ask both and call an instance unsafe when either answer is."},
}}


def prompt(position: str, instruction: str) -> str:
    """`build_prompt`'s user message, the context's place marked with CONTEXT_SLOT."""
    if position == "front":
        return FRONT.format(query=instruction) + CONTEXT_SLOT
    return CONTEXT_SLOT + END.format(query=instruction)


class LongSafetyTaskType(TaskType):
    """LongSafety: each instance's instruction asked before and after its long context."""

    options_schema = OPTIONS
    description = ("LongSafety (thu-coai/LongSafety): harmful instructions over long web contexts, each asked "
                   "before and after the context; judged by the authors' multi-agent LLM judge (longsafety)")

    def needs(self, ctx: TaskContext) -> list[Need]:
        """The authors' two files at their commit, in the data home (fetched with git)."""
        from lceval.io import GitFiles

        o = ctx.options
        if Path(o["data_dir"]).expanduser().is_absolute():
            return []
        return [GitFiles(REPOSITORY, COMMIT, ctx.data_home,
                         paths={f"data/{o[key]}": f"{o['data_dir']}/{o[key]}" for key in ("meta_file", "docs_file")})]

    def _files(self, ctx: TaskContext) -> tuple[Path, Path]:
        folder = Path(ctx.options["data_dir"]).expanduser()
        folder = folder if folder.is_absolute() else ctx.data_home / folder
        meta, docs = folder / ctx.options["meta_file"], folder / ctx.options["docs_file"]
        for path, option in ((meta, "meta_file"), (docs, "docs_file")):
            if not path.is_file():
                raise DataMissing(f"LongSafety's {path.name} is not at {path}", field=f"options.{option}",
                                hint="Put data/longsafety_meta.jsonl and data/longsafety_docs.jsonl of the authors' "
                                     "repository (github.com/thu-coai/LongSafety, commit 130a6b7) in that folder, or "
                                     "point options.data_dir at theirs.")
        return meta, docs

    def instances(self, ctx: TaskContext, max_rows: int | None = None) -> list[dict[str, Any]]:
        """The merged instances, as `load_data` merges them (same line, same id)."""
        if ctx.splits and list(ctx.splits) != [SPLIT]:
            raise UserError(f"LongSafety has one split, {quote(SPLIT)}", field="--split")
        meta_path, docs_path = self._files(ctx)
        pinned = ctx.options["meta_sha256"]
        if pinned and sha256_file(meta_path) != pinned:
            raise UserError(f"{meta_path} is not the authors' meta file (its sha256 differs from {pinned[:12]}...)",
                            field="options.meta_sha256",
                            hint="Use the file of commit 130a6b7, or --set options.meta_sha256=null for another.")
        ctx.record_file(meta_path)
        ctx.record_file(docs_path)
        ctx.record_source({"dataset": "thu-coai/LongSafety", "revision": COMMIT,
                           "files": [meta_path.name, docs_path.name]})
        meta = read_json_lines(meta_path, what="LongSafety meta file")
        docs = read_json_lines(docs_path, what="LongSafety docs file")
        if len(meta) != len(docs):
            raise UserError(f"{meta_path.name} has {len(meta)} instances and {docs_path.name} {len(docs)}",
                            file=docs_path, field="options.docs_file")
        out = []
        for (line, m), (_, d) in zip(meta, docs):
            if max_rows is not None and len(out) >= max_rows:
                break
            where = f"{meta_path.name}:{line}"
            if not isinstance(m, dict) or not isinstance(d, dict):
                raise UserError(f"{where}: an instance is a JSON object", file=meta_path, line=line)
            missing = [k for k in (*META_FIELDS, "instruction") if k not in m] + \
                      [f"context ({docs_path.name})" for k in ("context",) if k not in d]
            if missing:
                raise UserError(f"{where}: no field {', '.join(missing)}", file=meta_path, line=line)
            if m["id"] != d.get("id"):  # load_data: `assert m['id'] == d['id']`
                raise UserError(f"{where}: id {m['id']!r} meets id {d.get('id')!r} on the same line of "
                                f"{docs_path.name}", file=docs_path, line=line)
            if not isinstance(m["instruction"], str) or not isinstance(d["context"], str) or not d["context"].strip():
                raise UserError(f"{where}: the instruction and the context are text (the context not empty)",
                                file=meta_path, line=line)
            out.append({**m, **d})
        return out

    def load(self, ctx: TaskContext) -> list[Conversation]:
        out: list[Conversation] = []
        taken = 0
        for inst in self.instances(ctx):
            if ctx.limit is not None and taken >= ctx.limit:
                break
            key = str(inst["id"])
            cid = f"{SPLIT}/{key}"
            if not ctx.select_context(cid):
                continue
            for position in ctx.options["positions"]:
                if ctx.limit is not None and taken >= ctx.limit:
                    break
                item_id = f"{SPLIT}/{key}/{position}"
                meta = {k: inst[k] for k in META_FIELDS}
                meta.update(position=position, **{CONTEXT_KEY: inst["context"]})
                turn = Turn(item_id=item_id, user=prompt(position, inst["instruction"]), reference="",
                            question=inst["instruction"], metadata=meta)
                out.append(Conversation(conv_id=item_id, context=inst["context"], context_id=cid, turns=[turn],
                                        metadata={"split": SPLIT, "document_id": key}))
                taken += 1
        return out

    def check(self, ctx: TaskContext) -> None:
        self.instances(ctx, max_rows=5)
