"""Re-judging the authors' human-annotated summaries (Laban et al., 2024, §4.2, Table 1).

The SummHay authors published 200 summaries (40 systems: summarizer x retriever) with a
professional annotator's verdict for each reference insight and the verdicts of six automatic
evaluators (eval_benchmark_data.json). To measure how well ANY coverage judge agrees with the
annotators, lceval runs that judge on exactly those summaries:

    lceval run --tasks summhay_annotated --model summhay-replay:annotated --judge J
    lceval judge-agreement RUN_DIR eval_benchmark_data.json

- The `summhay` task type with `source: annotated` makes one sample per annotated summary
  (item_id `<subtopic_id>/<summkey>`), the stored summary in the turn metadata, which the
  engine passes to the backend as a request hint, and the summary's reference insights as the
  `insights` metadata every coverage judge reads.
- The `summhay-replay:annotated` backend answers each request with that stored summary, its
  lines joined by newlines: `split_bullets` gives back exactly the authors' lines, so the
  judges' 1-based bullet ids are the evaluators' `bullet_id` and the annotators'
  `candidate_id + 1` (annotations.py).
- The judge's per-insight verdicts (details["subitems"]) become agreement items
  `<subtopic_id>/<summkey>/<insight_id>` of system `summhay-replay:annotated` (the run's
  model), which is how annotations.py names the recorded ones.

The eval file gives no gold document ids, so citation scores of such a run are not meaningful
(gold is empty); only coverage and the linked bullet are compared.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from lceval.io import sha256_text
from lceval.errors import UserError
from lceval.interfaces import ModelBackend, PrefixCache
from lceval.options import NO_OPTIONS, check_options
from lceval.io import read_json
from lceval.types import Conversation, Generation, GenerationRequest, Turn

#: scheme and only model of the stored-summary backend; also the `system` of every item the
#: annotation reader yields, so that a run of that model lines up with the recorded verdicts
SCHEME = "summhay-replay"
MODEL = "annotated"
SYSTEM = f"{SCHEME}:{MODEL}"
ANNOTATIONS_FILE = "eval_benchmark_data.json"
HINT = "summhay_stored_summary"
REQUIRED = ("subtopic_id", "subtopic", "summkey", "summary", "reference_insights")


def annotated_domain(record: dict[str, Any]) -> str:
    """News or conversation. The file states no domain; its records of conversational topics
    (doctor-patient meetings, sales calls) name their haystack file in `topic_fn`
    (data/topic_*.json), while its news records (the Foot Locker topic) carry a `topic_id`
    instead: 114 conversation and 86 news summaries. A `domain` field, if given, wins."""
    if record.get("domain") in ("news", "conversation"):
        return str(record["domain"])
    return "conversation" if record.get("topic_fn") else "news"


def summary_text(summary: Any) -> str:
    """The stored summary (a list of lines) as one text whose non-empty lines are those lines."""
    if isinstance(summary, str):
        return summary
    return "\n".join(" ".join(str(line).split()) or "-" for line in summary)


def read_annotated_file(path: Path) -> list[dict[str, Any]]:
    if not Path(path).exists():
        raise UserError("annotated summaries file not found", file=path, field="options.annotations",
                        hint=f"The authors' {ANNOTATIONS_FILE} (salesforce/summary-of-a-haystack); put it "
                        "in the data home's summhay/ or pass --set options.annotations=FILE.")
    data = read_json(Path(path), what="annotated summaries file")
    if not isinstance(data, list) or not data:
        raise UserError("expected a non-empty JSON list of annotated summaries", file=path)
    for n, x in enumerate(data):
        missing = [k for k in REQUIRED if not isinstance(x, dict) or k not in x]
        if missing:
            raise UserError(f"annotated summary lacks {', '.join(missing)}", file=path, field=f"[{n}]")
        if not isinstance(x["reference_insights"], list) or not x["reference_insights"]:
            raise UserError("'reference_insights' must be a non-empty list", file=path,
                            field=f"[{n}].reference_insights")
    return data


def annotated_conversations(path: Path, limit: int | None = None,
                            select: Callable[[str], bool] = lambda context_id: True) -> list[Conversation]:
    """One single-turn conversation per annotated summary, in the file's order; its context
    id (`--contexts`) is its item id, `SUBTOPIC_ID/SUMMKEY`."""
    out: list[Conversation] = []
    for n, x in enumerate(read_annotated_file(path)):
        if not select(f"{x['subtopic_id']}/{x['summkey']}"):
            continue
        if limit is not None and len(out) >= limit:
            break
        text = summary_text(x["summary"])
        try:
            insights = [{"insight_id": str(i["insight_id"]), "insight": str(i["insight"]), "gold": []}
                        for i in x["reference_insights"]]
        except (TypeError, KeyError):
            raise UserError("each reference insight needs insight_id and insight", file=path,
                            field=f"[{n}].reference_insights") from None
        item_id = f"{x['subtopic_id']}/{x['summkey']}"
        digest = sha256_text(text)
        # what the request is keyed on in the cache: the summary's identity, not a prompt a
        # model reads (the stored summary travels as a hint)
        user = (f"Replay the stored SummHay summary '{x['summkey']}' of subtopic {x['subtopic_id']} "
                f"({x['subtopic']}), sha256 {digest}.")
        domain = annotated_domain(x)
        metadata = {"subtopic_id": str(x["subtopic_id"]), "summkey": str(x["summkey"]),
                    "topic": str(x.get("topic", "")), "domain": domain, "source": "annotated",
                    "insights": insights, HINT: text}
        reference = "\n".join(f"- {i['insight']}" for i in insights)
        out.append(Conversation(
            conv_id=item_id, context="", context_id=item_id,
            turns=[Turn(item_id=item_id, user=user, reference=reference, question=str(x["subtopic"]),
                        metadata=metadata)],
            metadata={"subtopic_id": str(x["subtopic_id"]), "domain": domain}))
    return out


class StoredSummaryBackend(ModelBackend):
    """Answers a `source: annotated` request with the summary the task stored in its hints."""

    prefix_cache = PrefixCache("none")  # no model runs: order does not matter

    def identity(self) -> dict[str, Any]:
        return {"scheme": SCHEME, "model": MODEL, "version": 1}

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        out = []
        for r in requests:
            text = r.hints.get(HINT)
            if not isinstance(text, str):
                raise UserError(f"request '{r.request_id}' carries no stored summary: {SYSTEM} only answers "
                                "the summhay task with `source: annotated` (task summhay_annotated)",
                                field="--model")
            out.append(Generation(request_id=r.request_id, text=text, prefilled_tokens=0, finish_reason="stop"))
        return out


def make_backend(model: str, options: dict[str, str]) -> StoredSummaryBackend:
    check_options(NO_OPTIONS, options, what=f"backend '{SCHEME}'")
    if model != MODEL:
        raise UserError(f"unknown model '{SCHEME}:{model}' (the only one is {SYSTEM})",
                        field="--model", hint="Use with --tasks summhay_annotated.")
    return StoredSummaryBackend()


def register(register_model: Callable[..., None]) -> None:
    register_model(SCHEME, make_backend, options_schema=NO_OPTIONS)
