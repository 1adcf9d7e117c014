"""SummHay's figures in `lceval report --format html` (the `register_report_panels` hook).

The engine plots each task on its own; what it cannot know is that SummHay's tasks are one
experiment along two axes that live in the spec options: the retriever and its token
budget (Laban et al., 2024, Table 2: Full vs the RAG columns) and the order of the documents
(§5.4, Table 3: Random / Top / Bottom and the Position Sensitivity). These panels put the
runs' tasks of this type side by side along those axes, with the results' intervals.
"""

from __future__ import annotations

from typing import Any

from lceval.errors import UserError
from lceval.interfaces import ReportContext, ReportFigure
from lceval.report import Series, charts, figure, metric_point
from lceval.results import run_model_name

from .scoring import position_sensitivity
from .task import DEFAULT_OPTIONS

TASK_TYPE = "summhay"
SECTION = "SummHay (Laban et al., 2024)"
METRICS = (("coverage", "Coverage"), ("citation_f1", "Citation F1"), ("score", "Joint"))
POSITION_ORDERS = ("random", "top", "bottom")


def _options(run: Any, task: str) -> dict[str, Any] | None:
    try:
        spec = run.task_spec(task)
    except UserError:
        return None
    return {**DEFAULT_OPTIONS, **(spec.get("options") or {})}


def _setting(opts: dict[str, Any]) -> tuple[str, str] | None:
    """("retrieval", label) for Full / RAG / no-document tasks, ("position", order) for the
    §5.4 orders; None for what neither panel shows (the annotated summaries)."""
    if opts.get("source", "haystack") != "haystack":
        return None
    if opts.get("no_document"):
        return "retrieval", "no documents"
    if opts["retriever"] == "full":
        if opts["order"] in POSITION_ORDERS:
            return "position", opts["order"]
        return "retrieval", "full"
    return "retrieval", f"{opts['retriever']} @{opts['budget_tokens']}"


def _collect(ctx: ReportContext) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
    """axis -> setting -> model -> the task's metrics block (results.json). One model's runs
    at several budgets are one series; the run's own label tells two runs of one setting apart."""
    found: dict[str, dict[str, dict[str, dict[str, Any]]]] = {"retrieval": {}, "position": {}}
    for run, label in zip(ctx.runs, ctx.labels):
        for task, result in (run.results.get("tasks") or {}).items():
            if result.get("type") != TASK_TYPE:
                continue
            opts = _options(run, task)
            setting = _setting(opts) if opts is not None else None
            if setting is not None:
                per_model = found[setting[0]].setdefault(setting[1], {})
                name = run_model_name(run)
                per_model[label if name in per_model else name] = result.get("metrics") or {}
    return found


def _settings_order(settings: list[str]) -> list[str]:
    """Full first, then each retriever by budget, no documents last (Table 2's columns)."""
    def key(name: str) -> tuple[int, str, int]:
        if name == "full":
            return (0, "", 0)
        if name == "no documents":
            return (2, "", 0)
        retriever, _, budget = name.partition(" @")
        return (1, retriever, int(budget) if budget.isdigit() else 0)
    return sorted(settings, key=key)


def _chart(cats: list[str], by_setting: dict[str, dict[str, dict[str, Any]]], metric: str, y_label: str,
           colors: dict[str, str], x_title: str) -> Any:
    """Grouped bars with whiskers on SummHay's 0-100 scale, one colour per model (the page's)."""
    labels = list(dict.fromkeys(lab for per in by_setting.values() for lab in per))
    series = [Series(lab, [metric_point((by_setting[c].get(lab) or {}).get(metric), c, unit="topic") for c in cats])
              for lab in labels]
    return charts.intervals(cats, series, y_title=y_label, x_title=x_title, y_domain=(0, 100), colors=colors,
                            description=f"SummHay {y_label} by {x_title}, per model")


def summhay_panels(ctx: ReportContext) -> list[ReportFigure]:
    found = _collect(ctx)
    # the colour each model has elsewhere on the page (a series is named by the model, or by
    # the run's label when one model has two runs of a setting)
    colors = {**charts.palette([run_model_name(r) for r in ctx.runs]), **charts.palette(ctx.labels)}
    out: list[ReportFigure] = []
    retrieval = found["retrieval"]
    if retrieval:
        cats = _settings_order(list(retrieval))
        for metric, name in METRICS:
            out.append(figure(_chart(cats, retrieval, metric, name, colors, "retriever @ budget (tokens)"),
                              f"{name} by retriever and budget",
                              "Full context and each retriever at its token budget (Laban et al., 2024, Table 2); "
                              "whiskers: 95% intervals resampling topics.", SECTION))
    position = found["position"]
    if position:
        cats = [o for o in POSITION_ORDERS if o in position]
        notes = []
        if len(cats) == 3:
            for lab in dict.fromkeys(lab for per in position.values() for lab in per):
                joint = {o: ((position[o].get(lab) or {}).get("score") or {}).get("value") for o in cats}
                if all(v is not None for v in joint.values()):
                    notes.append(f"{lab}: {position_sensitivity(joint):.1f}")
        caption = ("Joint score with the documents in Random order, or those holding the subtopic's insights "
                   "at the Top or Bottom (§5.4, Table 3).")
        if notes:
            caption += " Position sensitivity max(|R−T|, |R−B|): " + "; ".join(notes) + "."
        out.append(figure(_chart(cats, position, "score", "Joint", colors, "document order"), "Position sensitivity",
                          caption, SECTION))
    return out
