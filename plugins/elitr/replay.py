"""`replay:` backend: answers with responses a model gave earlier, as published with
ELITR-Bench (`generated-responses/*.json`).

It lets the whole pipeline (judges, statistics, reports) be checked against the paper's
numbers without running a model, and lets a judge be compared with the recorded GPT-4,
Prometheus and human scores (kept in `Generation.extras["recorded_scores"]`).

Model string: `FILE#MODEL_NAME`. FILE may hold `{split}`, filled from each request's
`hints["split"]`, so one spec covers dev and test2, and `{seed}`, filled from the request's
seed, so `--seed 1,2,3` replays one recorded run per seed (Thonet et al., 2024a ran test2 with three
seeds, App. C.1). A file without `{seed}` holds one run: several `--seed` values are refused
rather than served as identical copies with a spread of zero.

For `lceval judge-agreement` and `lceval report`, `read_recorded_scores` turns a file into one
score source per recorded scorer; a file named as published (`elitr-bench-qa_dev_st_...`)
says which task it answers, so `lceval report FILE...` tabulates it like a run.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from lceval import hookimpl
from lceval.io import data_home
from lceval.errors import UserError
from lceval.interfaces import ModelBackend, PrefixCache, recomputable
from lceval.options import NO_OPTIONS, check_options
from lceval.io import decode_utf8, loads_json, quote, read_bytes
from lceval.types import Generation, GenerationRequest, ScoredItem, ScoreSource

SCHEME = "replay"
SPLIT_PLACEHOLDER = "{split}"
SEED_PLACEHOLDER = "{seed}"
#: Published file names: elitr-bench-<question set>_<split>_<st|mt>_<scorers>-eval.json
PUBLISHED_NAME = re.compile(r"elitr-bench-(qa|conv)_(dev|test2)_(st|mt)_.*\.json$")
#: (question set, mode) of a published file -> the task whose questions it answers
TASK_OF = {("qa", "st"): "elitr_qa", ("qa", "mt"): "elitr_qa_mt", ("conv", "mt"): "elitr_conv"}
_SCORE_SUFFIX = "_score"


def _normalize(text: str) -> str:
    return " ".join(str(text).split())


def _score(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def recorded_scores(response: dict[str, Any]) -> dict[str, float | None]:
    """A recorded response's `<scorer>_score` fields by scorer ("gpt-4-eval": 9.0); a value
    that is not a number (the files hold a few) is None."""
    return {key[: -len(_SCORE_SUFFIX)]: _score(value) for key, value in response.items()
            if key.endswith(_SCORE_SUFFIX)}


@dataclass
class RecordedFile:
    """One generated-responses file, indexed by (meeting id, question id)."""

    path: Path
    split: str | None
    sha256: str
    questions: dict[tuple[str, str], dict[str, Any]]
    models: list[str]

    @classmethod
    def load(cls, path: Path) -> "RecordedFile":
        what = "recorded responses file"
        raw = read_bytes(path, what=what)
        data = loads_json(decode_utf8(raw, path, what=what), path, what=what)
        if not isinstance(data, dict) or not isinstance(data.get("meetings"), list):
            raise UserError("not an ELITR-Bench generated-responses file", file=path, field="meetings")
        questions: dict[tuple[str, str], dict[str, Any]] = {}
        models: dict[str, None] = {}
        for m_index, meeting in enumerate(data["meetings"]):
            if not isinstance(meeting, dict) or "id" not in meeting:
                raise UserError(f"meeting #{m_index} has no 'id'", file=path, field="meetings")
            for q_index, question in enumerate(meeting.get("questions") or []):
                where = f"meetings[{m_index}].questions[{q_index}]"
                for key in ("id", "question", "generated-responses"):
                    if not isinstance(question, dict) or key not in question:
                        raise UserError(f"question lacks '{key}'", file=path, field=f"{where}.{key}")
                if not isinstance(question["generated-responses"], list):
                    raise UserError(f"must be a list, got {quote(question['generated-responses'])}", file=path,
                                    field=f"{where}.generated-responses")
                if not isinstance(question["question"], str):
                    raise UserError(f"must be a string, got {quote(question['question'])}", file=path,
                                    field=f"{where}.question")
                for response in question["generated-responses"]:
                    if not isinstance(response, dict) or "model" not in response \
                            or "generated-response" not in response:
                        raise UserError("response lacks 'model' or 'generated-response'", file=path,
                                        field=f"{where}.generated-responses")
                    models[str(response["model"])] = None
                questions[(str(meeting["id"]), str(question["id"]))] = question
        split = data.get("split")
        return cls(path=path, split=str(split) if split is not None else None,
                   sha256=hashlib.sha256(raw).hexdigest(), questions=questions, models=list(models))

    def check_model(self, model: str) -> None:
        if model not in self.models:
            raise UserError(f"model '{model}' has no responses in this file", file=self.path,
                            hint=f"Models in it: {', '.join(self.models) or 'none'}.")


class ReplayBackend(ModelBackend):
    """Looks answers up instead of generating them; nothing to prefill, so big batches."""

    context_window = None
    batch_size = 64
    prefix_cache = PrefixCache("none")  # no model runs: order does not matter

    def __init__(self, model: str, options: dict[str, str]) -> None:
        check_options(NO_OPTIONS, options, what=f"backend '{SCHEME}'")
        pattern, sep, name = model.rpartition("#")
        if not sep or not pattern or not name:
            file_part = pattern if sep else model
            hint = "Use replay:FILE#MODEL_NAME."
            if file_part and SPLIT_PLACEHOLDER not in file_part:
                try:
                    found = RecordedFile.load(self._resolve(file_part))
                    hint += f" Models in the file: {', '.join(found.models) or 'none'}."
                except UserError:
                    pass
            raise UserError(f"replay model '{model}' does not name a model after '#'",
                            field="--model", hint=hint)
        self.pattern = pattern
        self.model_name = name
        self._files: dict[Path, RecordedFile] = {}
        if SPLIT_PLACEHOLDER not in pattern and SEED_PLACEHOLDER not in pattern:
            self._file(None, 0)  # nothing to fill in: fail now rather than mid-run

    @staticmethod
    def _resolve(name: str) -> Path:
        """Relative paths: the current directory first (a user's own file), then the data
        home's ELITR-Bench folder (where `lceval data fetch elitr-bench` puts them)."""
        path = Path(name).expanduser()
        if path.is_absolute():
            candidates = [path]
        else:
            candidates = [Path.cwd() / path, data_home() / "elitr-bench" / path]
        for candidate in candidates:
            if candidate.is_file():
                return candidate
        raise UserError(f"replay file not found: {name} (looked in: "
                        f"{', '.join(str(c) for c in candidates)})", field="--model",
                        hint="Fetch it with: lceval data fetch elitr-bench")

    def check_seeds(self, seeds: list[int]) -> None:
        if len(set(seeds)) > 1 and SEED_PLACEHOLDER not in self.pattern:
            raise UserError(
                f"{len(set(seeds))} seeds asked of replay file '{self.pattern}', which holds one "
                "recorded run: every seed would get the same answers and the spread would be 0",
                field="--seed",
                hint="Give one --seed, or put {seed} in the file name to replay one recorded run "
                "per seed (e.g. answers_seed{seed}.json).")

    def _file(self, split: str | None, seed: int) -> RecordedFile:
        name = self.pattern.replace(SEED_PLACEHOLDER, str(seed))
        if SPLIT_PLACEHOLDER in name:
            if not split:
                raise UserError(f"replay file '{self.pattern}' needs the request's split, "
                                "but the task gave none", field="--model")
            name = name.replace(SPLIT_PLACEHOLDER, split)
        path = self._resolve(name)
        if path not in self._files:
            recorded = RecordedFile.load(path)
            recorded.check_model(self.model_name)
            self._files[path] = recorded
        recorded = self._files[path]
        if split is not None and recorded.split is not None and recorded.split != split:
            raise UserError(f"the request is from split '{split}' but this file holds split "
                            f"'{recorded.split}'", file=path, field="split",
                            hint="Put {split} in the file name to follow the task's splits.")
        return recorded

    def identity(self) -> dict[str, Any]:
        # version 2: answers cached before seeds were checked may be copies across seeds
        return {"scheme": SCHEME, "file": Path(self.pattern).name, "model": self.model_name, "version": 2}

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        return [self._answer(r) for r in requests]

    def _answer(self, request: GenerationRequest) -> Generation:
        hints = request.hints
        missing = [k for k in ("meeting_id", "question_id") if hints.get(k) in (None, "")]
        if missing:
            raise UserError(f"request '{request.request_id}' lacks hint(s) {', '.join(missing)}: "
                            "the replay backend only answers ELITR-Bench questions", field="--model")
        split = hints.get("split")
        recorded = self._file(str(split) if split is not None else None, request.params.seed)
        meeting, qid = str(hints["meeting_id"]), str(hints["question_id"])
        question = recorded.questions.get((meeting, qid))
        if question is None:
            raise UserError(f"no recorded question {qid} of meeting {meeting}", file=recorded.path,
                            field="meetings")
        asked = hints.get("question")
        if asked is not None and _normalize(asked) != _normalize(question["question"]):
            raise UserError(
                f"meeting {meeting}, question {qid}: the task asks {asked!r} but the file "
                f"recorded answers to {question['question']!r}", file=recorded.path, field="question",
                hint="Wrong question set? QA and Conv files word some questions differently.")
        response = next((r for r in question["generated-responses"]
                         if str(r["model"]) == self.model_name), None)
        if response is None:
            raise UserError(f"model '{self.model_name}' has no response to question {qid} of "
                            f"meeting {meeting}", file=recorded.path, field="generated-responses")
        return Generation(
            request_id=request.request_id,
            text=str(response["generated-response"]).strip(),
            prefilled_tokens=0,  # nothing runs: no prompt is read, nothing is prefilled
            finish_reason="stop",
            extras={"recorded_scores": recorded_scores(response), "replay_file_sha256": recorded.sha256,
                    "replay_file": recorded.path.name},
        )


@recomputable  # answers are the recorded file's, which the data home verifies: `lceval verify` asks again
def make_replay(model: str, options: dict[str, str]) -> ReplayBackend:
    return ReplayBackend(model, options)


@hookimpl
def register_models(register: Callable[[str, Any], None]) -> None:
    register(SCHEME, make_replay, options_schema=NO_OPTIONS)


#: What each recorded score field is (Thonet et al., 2024a, Section 5 and App. D).
SOURCE_NOTES = {
    "gpt-4-eval": "GPT-4 judge, 10-point rubric (Figs. 5-6)",
    "prometheus-eval": "Prometheus judge, 5-point rubric recorded x2 (Figs. 7-8)",
    "gold-human-eval": "expert annotators (organizers), 10-point rubric",
    "silver-human-eval": "crowd annotators (Prolific), 10-point rubric, mean of annotators",
}


def _sibling_differs(recorded: RecordedFile, split: str | None) -> set[tuple[str, str]] | None:
    """The QA/Conv differing questions, from a published file of the other question set of
    the same split in the same folder (their questions are the data's); None without one."""
    path = recorded.path
    match = PUBLISHED_NAME.search(path.name)
    if not match or not split:
        return None
    from .questions import differing_questions

    other = "conv" if match.group(1) == "qa" else "qa"
    # this file's questions as read already, in the shape differing_questions reads
    this = {"meetings": [{"id": m, "questions": [q]} for (m, _), q in recorded.questions.items()]}
    for candidate in sorted(path.parent.glob(f"elitr-bench-{other}_{split}_*.json")):
        try:
            data = json.loads(candidate.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            continue
        qa, conv = (this, data) if other == "conv" else (data, this)
        return differing_questions(qa, conv)
    return None


def read_recorded_scores(path: Path) -> list[ScoreSource] | None:
    """Every `<scorer>_score` field of an ELITR-Bench generated-responses file as one score
    source, for `lceval judge-agreement` and `lceval report`; None if the file is not in that
    format. Items carry what the `elitr` task type puts in a sample's metadata, and a file
    named as published names its task, so the report scores it like a run of that task."""
    try:
        recorded = RecordedFile.load(path)
    except UserError:
        return None
    match = PUBLISHED_NAME.search(path.name)
    task = TASK_OF.get((match.group(1), match.group(3))) if match else None
    split = recorded.split or (match.group(2) if match else None)
    differs = _sibling_differs(recorded, split)
    sources: dict[str, list[ScoredItem]] = {}
    for (meeting, qid), question in recorded.questions.items():
        item_id = f"{split}/{meeting}/{qid}" if split else f"{meeting}/{qid}"
        metadata = {"split": split, "meeting_id": meeting, "question_id": qid,
                    "question_type": question.get("question-type"),
                    "answer_position": question.get("answer-position"),
                    "question_set": match.group(1) if match else None}
        if differs is not None:
            metadata["qa_conv_differs"] = (meeting, qid) in differs
        metadata = {k: v for k, v in metadata.items() if v is not None}
        for response in question["generated-responses"]:
            for name, score in recorded_scores(response).items():
                sources.setdefault(name, []).append(ScoredItem(
                    item_id=item_id, system=str(response["model"]), score=score, cluster=meeting,
                    response=str(response["generated-response"]).strip(), metadata=metadata))
    if not sources:
        return None
    return [ScoreSource(name=name, items=items, origin=str(path), note=SOURCE_NOTES.get(name, ""), task=task)
            for name, items in sources.items()]


@hookimpl
def register_score_sources(register: Callable[[str, Any], None]) -> None:
    register("elitr-generated-responses", read_recorded_scores)
