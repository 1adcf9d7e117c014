"""What the HTML report's sample browser holds: every sample of every run, compact.

A question, its reference and its metadata are the same for every model that answered it,
so they are stored once per item (`items`) and each sample points at its item: nine models
on ELITR-Bench's 271 questions carry each question and reference once, not nine times. What
a sample adds is the model's answer, the judgment (judge, score, parse status, the raw
output with its feedback, further details), the context cut (policy, tokens kept of the
original, the removed span) and the tokens it took.
"""

from __future__ import annotations

import json
from typing import Any

from lceval.engine import ReportSettings, removed_span
from lceval.errors import UserError
from lceval.results import primary_score


def _cut(sample: Any) -> dict[str, Any]:
    cut = sample.context_cut
    out: dict[str, Any] = {"policy": cut.policy, "action": cut.action, "original": cut.original_tokens,
                           "kept": cut.kept_tokens}
    if cut.action == "truncated" and cut.original_tokens is not None and cut.kept_tokens is not None:
        out["removed"] = list(removed_span(cut.policy, cut.original_tokens, cut.kept_tokens, cut.head_tokens))
    return out


def _status(sample: Any) -> str:
    """The judge parse status a reader filters on: ok, parse_failure, missing, censored, or why
    there is no judgment at all."""
    if sample.response is None:
        # censored: the thinking was cut (budget or window) before any answer, not a wrong answer
        return "censored" if sample.generation_extras.get("unclosed_thinking") else "unanswered"
    return sample.judgments[0].parse_status if sample.judgments else "not judged"


def sample_data(runs: list[Any], labels: list[str]) -> dict[str, Any]:
    """`{"items": [...], "samples": [...], "models": [...], "group_fields": [...],
    "cluster_fields": [...]}` for the browser script. A sample's `item` indexes `items`;
    `model` indexes `models`; two samples with the same `key` answer the same question (same
    task, item, seed and turn): the browser puts their answers side by side."""
    items: list[dict[str, Any]] = []
    item_index: dict[tuple[str, str, str, str], int] = {}
    models = list(dict.fromkeys(labels))
    samples = []
    group_fields: list[str] = []
    cluster_fields: list[str] = []
    for run, label in zip(runs, labels):
        sections: dict[str, ReportSettings] = {}
        for s in run.samples:
            if s.task not in sections:
                try:
                    sections[s.task] = run.spec(s.task).report
                except UserError:
                    sections[s.task] = ReportSettings()
                rep = sections[s.task]
                group_fields += [rep.group_by] if rep.group_by and rep.group_by not in group_fields else []
                cluster_fields += [rep.cluster_by] if rep.cluster_by and rep.cluster_by not in cluster_fields else []
            group_by, cluster_by = sections[s.task].group_by, sections[s.task].cluster_by
            meta = json.dumps(s.metadata, sort_keys=True, ensure_ascii=False, default=str)
            key = (s.task, s.item_id, s.question or "", s.reference or "", meta)
            if key not in item_index:
                item_index[key] = len(items)
                items.append({"question": s.question, "reference": s.reference, "metadata": s.metadata})
            j = s.judgments[0] if s.judgments else None
            details = {k: v for k, v in (j.details if j else {}).items() if k != "subitems"}
            row: dict[str, Any] = {
                "task": s.task, "model": models.index(label), "run": run.run_id,
                "group": str(s.metadata.get(group_by, "")) if group_by else "",
                "cluster": str(s.metadata.get(cluster_by, s.conv_id)) if cluster_by else s.conv_id,
                "id": s.item_id, "seed": s.seed, "turn": s.turn_index, "item": item_index[key],
                "response": s.response, "score": primary_score(s), "status": _status(s),
                "judge": j.judge if j else None, "raw": j.raw if j else None, "cut": _cut(s),
                "tokens": [s.prompt_tokens, s.prefilled_tokens, s.completion_tokens],
            }
            if j and j.attempts and j.attempts > 1:
                row["attempts"] = j.attempts
            if s.reasoning is not None:  # a reasoning model's thinking, folded under its answer
                row["reasoning"] = s.reasoning
                row["reasoning_tokens"] = s.reasoning_tokens
            if details:
                row["details"] = details
            extras = {k: v for k, v in s.generation_extras.items() if k != "replay_file_sha256"}
            if extras:
                row["extras"] = extras
            samples.append(row)
    return {"models": models, "items": items, "samples": samples, "group_fields": group_fields,
            "cluster_fields": cluster_fields}


def json_script(element_id: str, data: Any) -> str:
    """JSON inside <script>, every `<` written as \\u003c: no text can close the element."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str).replace("<", "\\u003c")
    return f'<script type="application/json" id="{element_id}">{text}</script>'
