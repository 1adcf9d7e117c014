"""`cream` task type: one summary per meeting and prompt, for comparison-based ranking.

CREAM (Gong et al., 2024) ranks *systems*, where a system is a model plus a summarization prompt
(Sec. 4.1.1: "fine-grained comparisons across different summary generation prompts"; Table 4
compares a short and a long summary prompt). So a spec lists its prompts as options and one
run generates, for every meeting, one summary per prompt; `lceval rank` then splits the run
into one system per prompt (the spec's `rank.variant`) and compares the systems meeting by
meeting (`rank.unit`).

The meetings are ELITR-Bench's (Thonet et al., 2024a): the transcripts the QA tasks use, and the human
minutes of each meeting, which become the sample's reference. Several people wrote minutes of
some meetings; all of them are kept, joined by a `---` line, so a reference judge sees every
annotator's account rather than an arbitrary one.

The paper prints no summarization prompt. The two built in here are ours and say so: both
open with ELITR-Bench's description of a transcript (Thonet et al., 2024a, Fig. 4) so that they share the
transcript as a prefix (a backend with a KV cache prefills each transcript once for both), then
ask for a short summary or detailed minutes (the short/long contrast of Table 4).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lceval.errors import UserError
from lceval.interfaces import TaskContext, TaskType
from lceval.io import read_text
from lceval.types import CONTEXT_SLOT, Conversation, Message, Turn
from lceval_plugins.transcript_noise.transcripts import NOISE_OPTION_SCHEMA, apply_noise, read_transcript


#: Thonet et al., 2024a, Fig. 4's description of a transcript, then the transcript (shared prefix).
TRANSCRIPT_INTRO = (
    "The following is the transcript of a meeting with multiple participants, where utterances "
    "start with the speaker's anonymized name (for instance (PERSON4)) and may span over several "
    "lines.\n\n{transcript}\n\n"
)

DEFAULT_PROMPTS: dict[str, str] = {
    "short": TRANSCRIPT_INTRO + (
        "As a professional meeting assistant, write a short summary of this meeting in at most "
        "five sentences: its purpose, the main decisions and the action items."
    ),
    "long": TRANSCRIPT_INTRO + (
        "As a professional meeting assistant, write detailed minutes of this meeting as a "
        "bulleted list: the purpose of the meeting, every topic discussed with its outcome, the "
        "decisions taken, and the action items with the person responsible for each."
    ),
}

SPLITS = ("dev", "test2")
MINUTES_SEPARATOR = "\n\n---\n\n"

OPTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "prompts": {
            "type": "object",
            "minProperties": 1,
            "propertyNames": {"pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]*$"},
            "additionalProperties": {"type": "string", "pattern": "\\{transcript\\}"},
            "default": DEFAULT_PROMPTS,
            "description": "name -> summarization prompt holding {transcript}; one system per prompt.",
        },
        "use_prompts": {"type": "array", "items": {"type": "string"}, "minItems": 1, "uniqueItems": True,
                        "description": "Only these prompts (default: all, in the order given)."},
        "prompt_role": {"enum": ["user", "system"], "default": "user",
                        "description": "Message that carries the prompt and transcript."},
        "meetings": {"type": "array", "items": {"type": "string"}, "minItems": 1, "uniqueItems": True,
                     "description": "Only these meeting ids (e.g. meeting_en_test2_001)."},
        "noise": NOISE_OPTION_SCHEMA,  # summaries of noisy transcripts; the minutes stay clean
    },
}



def read_minutes(root: Path, meeting: str, ctx: TaskContext) -> str:
    """Every annotator's minutes of a meeting, in file-name order, joined by a `---` line."""
    folder = root / "minutes" / meeting
    files = sorted(p for p in folder.glob("*.txt") if p.is_file()) if folder.is_dir() else []
    if not files:
        raise UserError(f"no human minutes for {meeting}", file=folder,
                        hint="Run: lceval data fetch elitr-bench [--from DIR]")
    texts = []
    for path in files:
        texts.append(read_text(path, what=f"minutes of {meeting}").strip())
        ctx.record_file(path)
    if not any(texts):
        raise UserError(f"the human minutes of {meeting} are empty", file=folder)
    return MINUTES_SEPARATOR.join(texts)


def _meetings(root: Path, split: str) -> list[str]:
    folder = root / "transcripts"
    if not folder.is_dir():
        raise UserError("ELITR-Bench transcripts not found", file=folder,
                        hint="Run: lceval data fetch elitr-bench [--from DIR]")
    return sorted(p.stem for p in folder.glob(f"meeting_en_{split}_*.txt"))


def _chosen_prompts(opts: dict[str, Any], ctx: TaskContext) -> dict[str, str]:
    prompts: dict[str, str] = opts["prompts"]
    wanted = opts.get("use_prompts") or list(prompts)
    unknown = [p for p in wanted if p not in prompts]
    if unknown:
        raise UserError(f"unknown prompt(s) {', '.join(unknown)} (known: {', '.join(prompts)})",
                        file=ctx.spec_path, field="options.use_prompts")
    return {name: prompts[name] for name in wanted}


class CreamTaskType(TaskType):
    options_schema = OPTIONS_SCHEMA
    dataset = "elitr-bench"

    def load(self, ctx: TaskContext) -> list[Conversation]:
        opts = ctx.options
        prompts = _chosen_prompts(opts, ctx)
        root = ctx.dataset_dir(self.dataset)
        splits = ctx.splits or list(SPLITS)
        for split in splits:
            if split not in SPLITS:
                raise UserError(f"unknown split '{split}' (ELITR-Bench has: {', '.join(SPLITS)})", field="--split")
        only = set(opts.get("meetings") or [])
        conversations: list[Conversation] = []
        found: set[str] = set()
        for split in splits:
            meetings = [m for m in _meetings(root, split) if not only or m in only]
            found.update(meetings)
            # --contexts before --limit, so the limit counts chosen meetings
            meetings = [m for m in meetings if ctx.select_context(f"{split}/{m}")]
            if ctx.limit is not None:
                meetings = meetings[: ctx.limit]
            for meeting in meetings:
                conversations.extend(self._meeting(root, split, meeting, prompts, opts, ctx))
        missing = sorted(only - found)
        if missing:
            raise UserError(f"meeting(s) not found in splits {', '.join(splits)}: {', '.join(missing)}",
                            file=ctx.spec_path, field="options.meetings")
        return conversations

    @staticmethod
    def _meeting(root: Path, split: str, meeting: str, prompts: dict[str, str], opts: dict[str, Any],
                 ctx: TaskContext) -> list[Conversation]:
        unit = f"{split}/{meeting}"
        transcript, noise_meta = apply_noise(ctx, opts.get("noise"), read_transcript(root, meeting, ctx), unit)
        minutes = read_minutes(root, meeting, ctx)
        out = []
        for name, prompt in prompts.items():
            text = prompt.replace("{transcript}", CONTEXT_SLOT)
            instruction = prompt.replace("{transcript}", "[transcript]")
            meta = {"split": split, "meeting_id": meeting, "unit": unit, "prompt": name, **noise_meta}
            if opts["prompt_role"] == "system":
                preamble, user = [Message("system", text)], "Summarize the meeting."
            else:
                preamble, user = [], text
            turn = Turn(item_id=f"{unit}/{name}", user=user, reference=minutes, question=instruction,
                        metadata=meta)
            # context_id is the meeting: both prompts of a meeting run back to back and share
            # the transcript prefix in a backend's KV cache
            out.append(Conversation(conv_id=turn.item_id, context=transcript, context_id=unit, turns=[turn],
                                    preamble=preamble, metadata=dict(meta)))
        return out
