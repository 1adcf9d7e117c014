"""ELITR-Bench task type: questions about hour-long meeting transcripts.

Follows Thonet et al., 2024a (ELITR-Bench, workshop version) and, where the paper leaves details open,
the authors' own code (utter-project/ELITR-Bench, `utils/common.py` and `inference/`):

- answer prompt of Fig. 4, byte for byte as `format_inference_prompt` builds it (it ends
  with a blank line);
- `prompt_role: user` (default; `inference_llama2.py`): the first user message is that
  prompt + "\n\n" + the question, later user messages are the question alone;
  `prompt_role: system` (`inference_gpt.py`): the prompt is the system message and every
  user message is the question alone;
- questions are stripped; with `qa_markers` (App. B.2) a user message reads
  "QUESTION: <question> ANSWER:";
- every question carries `qa_conv_differs`: whether its QA and Conv wordings differ (16 dev
  and 17 test2 questions; Thonet et al., 2024a, App. C.3, Fig. 1 / Thonet et al., 2024b, Fig. 3 report on them), so
  `lceval report RUNS --where qa_conv_differs=True` gives those results in one command;
- single-turn: one conversation per question; multi-turn: one conversation per meeting,
  questions in the dataset's order. In multi-turn the history holds the model's own
  answers (the paper's protocol) or, with `history: gold`, the reference answers, which
  isolates error propagation.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from lceval.errors import UserError
from lceval.interfaces import TaskContext, TaskType
from lceval.io import quote, read_json_object
from lceval.needs import Need
from lceval.types import CONTEXT_SLOT, Conversation, Message, Turn
from lceval_plugins.transcript_noise.transcripts import NOISE_OPTION_SCHEMA, apply_noise, noise_needs, read_transcript

from .questions import differing_questions

#: Thonet et al., 2024a, Figure 4 (answer prompt), exactly as the authors' `format_inference_prompt`
#: renders it; {transcript} is the meeting-specific span.
FIG4_PROMPT = (
    "The following is the transcript of a meeting with multiple participants, where utterances "
    "start with the speaker's anonymized name (for instance (PERSON4)) and may span over several "
    "lines.\n\n{transcript}\n\nAs a professional conversational assistant, your task is to answer "
    "questions about the meeting by making inferences from the provided transcript.\n\n"
)

SPLITS = ("dev", "test2")

OPTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "question_set": {"enum": ["qa", "conv"], "default": "qa",
                         "description": "qa: self-contained questions; conv: questions that refer to earlier ones."},
        "language": {"enum": ["en", "cs"], "default": "en", "description": "Question language; transcripts are English."},
        "mode": {"enum": ["single-turn", "multi-turn"], "default": "single-turn",
                 "description": "One chat per question, or one chat per meeting with its questions in order."},
        "history": {"enum": ["model", "gold"], "default": "model",
                    "description": "Multi-turn: earlier answers are the model's own, or the reference answers."},
        "qa_markers": {"type": "boolean", "default": False,
                       "description": "Ask as `QUESTION: ... ANSWER:` (Thonet et al., 2024a, App. B.2)."},
        "prompt_role": {"enum": ["user", "system"], "default": "user",
                        "description": "Message that carries the prompt and transcript."},
        "prompt": {"type": "string", "pattern": "\\{transcript\\}", "default": FIG4_PROMPT,
                   "description": "Answer prompt holding {transcript} (default: Thonet et al., 2024a, Fig. 4)."},
        "noise": NOISE_OPTION_SCHEMA,  # ASR-like noise at a target WER (Thonet et al., 2024b, App. A)
    },
}



def questions_file(root: Path, question_set: str, language: str, split: str) -> Path:
    if language == "cs":
        return root / "czech" / f"elitr-bench-czech-{question_set}_{split}.json"
    return root / "data" / f"elitr-bench-{question_set}_{split}.json"


def format_question(question: str, qa_markers: bool) -> str:
    """As the authors' inference code formats a user turn (App. B.2 markers)."""
    question = question.strip()
    return f"QUESTION: {question} ANSWER:" if qa_markers else question


#: a meeting id names its transcript file: a plain name, never a path
MEETING_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
QUESTION_FIELDS = ("question", "groundtruth-answer", "question-type", "answer-position")


def _read_json(path: Path, ctx: TaskContext) -> dict[str, Any]:
    if not path.exists():
        raise UserError("ELITR-Bench questions file not found", file=path,
                        hint="Run: lceval data fetch elitr-bench [--from DIR]")
    data = read_json_object(path, what="ELITR-Bench questions file")
    ctx.record_file(path)
    if not isinstance(data.get("meetings"), list):
        raise UserError(f"expected a 'meetings' list, got {quote(data.get('meetings'))}", file=path, field="meetings")
    return data


def _meeting_id(meeting: Any, index: int, path: Path) -> str:
    where = f"meetings[{index}]"
    if not isinstance(meeting, dict):
        raise UserError(f"a meeting must be an object, got {quote(meeting)}", file=path, field=where)
    if "id" not in meeting:
        raise UserError("meeting lacks 'id'", file=path, field=f"{where}.id")
    mid = meeting["id"]
    if not isinstance(mid, str) or not MEETING_ID.fullmatch(mid):
        raise UserError(f"meeting id must be a plain name (letters, digits, _ . -), got {quote(mid)}",
                        file=path, field=f"{where}.id")
    if not isinstance(meeting.get("questions"), list):
        raise UserError(f"expected a 'questions' list, got {quote(meeting.get('questions'))}", file=path,
                        field=f"{where}.questions")
    return mid


def _turn(q: Any, split: str, meeting: str, path: Path, opts: dict[str, Any], where: str) -> Turn:
    if not isinstance(q, dict):
        raise UserError(f"a question must be an object, got {quote(q)}", file=path, field=where)
    if "id" not in q:
        raise UserError(f"question of meeting {meeting} lacks 'id'", file=path, field=f"{where}.id")
    if not isinstance(q["id"], (str, int)) or isinstance(q["id"], bool):
        raise UserError(f"question id must be a string or an integer, got {quote(q['id'])}", file=path,
                        field=f"{where}.id")
    for key in QUESTION_FIELDS:
        if key not in q:
            raise UserError(f"question of meeting {meeting} lacks '{key}'", file=path, field=f"{where}.{key}")
        if not isinstance(q[key], str):
            raise UserError(f"'{key}' must be a string, got {quote(q[key])}", file=path, field=f"{where}.{key}")
    qid = str(q["id"])
    return Turn(
        item_id=f"{split}/{meeting}/{qid}",
        user=format_question(q["question"], opts["qa_markers"]),
        reference=q["groundtruth-answer"],
        question=q["question"],
        metadata={
            "split": split,
            "meeting_id": meeting,
            "question_id": qid,
            "question_type": q["question-type"],
            "answer_position": q["answer-position"],
            "question_set": opts["question_set"],
            "language": opts["language"],
        },
    )


def context_id(split: str, meeting: str) -> str:
    """A meeting's context id (`--contexts`, shards): `dev/meeting_en_dev_001`."""
    return f"{split}/{meeting}"


def spread(n: int, k: int) -> list[int]:
    """k indices of range(n), evenly spaced, first and last included."""
    if k >= n:
        return list(range(n))
    if k == 1:
        return [0]
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})


def per_meeting(turns: list[Turn], k: int | None, mode: str) -> list[Turn]:
    """`--limit-per-context k`: single-turn takes k questions spread evenly over the meeting's
    list, which runs roughly in transcript order, so beginning, middle and end answers are all
    asked and the lost-in-the-middle test has both sides; multi-turn takes the first k, since
    later questions may refer to earlier ones (Conv, Thonet et al., 2024a, footnote 7)."""
    if k is None:
        return turns
    if mode == "multi-turn":
        return turns[:k]
    return [turns[i] for i in spread(len(turns), k)]


class ElitrTaskType(TaskType):
    options_schema = OPTIONS_SCHEMA
    dataset = "elitr-bench"

    def needs(self, ctx: TaskContext) -> list[Need]:
        """Besides the elitr-bench dataset (the engine adds it): a noisy variant's rules file."""
        return noise_needs(ctx.options.get("noise"), ctx)

    def load(self, ctx: TaskContext) -> list[Conversation]:
        opts = ctx.options
        if opts["question_set"] == "conv" and opts["mode"] == "single-turn":
            raise UserError("Conv questions refer to earlier ones and cannot be asked single-turn "
                            "(Thonet et al., 2024a, footnote 7)", file=ctx.spec_path, field="options.mode")
        root = ctx.dataset_dir(self.dataset)
        splits = ctx.splits or list(SPLITS)
        for split in splits:
            if split not in SPLITS:
                raise UserError(f"unknown split '{split}' (ELITR-Bench has: {', '.join(SPLITS)})",
                                field="--split")
        prompt = opts["prompt"].replace("{transcript}", CONTEXT_SLOT)
        conversations: list[Conversation] = []
        for split in splits:
            path = questions_file(root, opts["question_set"], opts["language"], split)
            data = _read_json(path, ctx)
            differs = self._differing(root, split, ctx)
            taken = 0
            # --contexts first, so that --limit counts questions of the chosen meetings
            meetings = [(i, _meeting_id(m, i, path), m) for i, m in enumerate(data["meetings"])]
            chosen = [(i, mid, m) for i, mid, m in meetings if ctx.select_context(context_id(split, mid))]
            for m_index, mid, meeting in chosen:
                if ctx.limit is not None and taken >= ctx.limit:
                    break
                turns = [_turn(q, split, mid, path, opts, f"meetings[{m_index}].questions[{q_index}]")
                         for q_index, q in enumerate(meeting["questions"])]
                if differs is not None:
                    for t in turns:
                        t.metadata["qa_conv_differs"] = (mid, t.metadata["question_id"]) in differs
                turns = per_meeting(turns, ctx.limit_per_context, opts["mode"])
                if ctx.limit is not None:
                    turns = turns[: ctx.limit - taken]
                taken += len(turns)
                if not turns:
                    continue
                transcript, noise_meta = apply_noise(ctx, opts.get("noise"), read_transcript(root, mid, ctx),
                                                     context_id(split, mid))
                conversations.extend(self._conversations(split, mid, transcript, turns, prompt, opts, noise_meta))
        return conversations

    @staticmethod
    def _differing(root: Path, split: str, ctx: TaskContext) -> set[tuple[str, str]] | None:
        """The English QA/Conv differing questions of a split (the same for the Czech sets);
        None when either file is missing."""
        files = [questions_file(root, qset, "en", split) for qset in ("qa", "conv")]
        if not all(f.is_file() for f in files):
            return None
        qa, conv = (_read_json(f, ctx) for f in files)
        return differing_questions(qa, conv)

    @staticmethod
    def _conversations(split: str, meeting: str, transcript: str, turns: list[Turn], prompt: str,
                       opts: dict[str, Any], extra_meta: dict[str, Any]) -> list[Conversation]:
        cid = context_id(split, meeting)
        meta = {"split": split, "meeting_id": meeting, **extra_meta}
        preamble: list[Message] = []
        if opts["prompt_role"] == "system":
            preamble = [Message("system", prompt)]

        def first(turn: Turn) -> Turn:
            if preamble:
                return turn
            return Turn(item_id=turn.item_id, user=f"{prompt}\n\n{turn.user}", reference=turn.reference,
                        question=turn.question, metadata=turn.metadata)

        if opts["mode"] == "single-turn":
            return [Conversation(conv_id=t.item_id, context=transcript, context_id=cid,
                                 turns=[first(t)], preamble=preamble, history=opts["history"], metadata=meta)
                    for t in turns]
        return [Conversation(conv_id=cid, context=transcript, context_id=cid,
                             turns=[first(turns[0])] + turns[1:], preamble=preamble, history=opts["history"],
                             metadata=meta)]
