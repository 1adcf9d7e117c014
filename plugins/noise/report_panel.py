"""The noise study in `lceval report --format html` (the `register_report_panels` hook).

The engine plots each noise level as a task of its own; what it cannot know is that those
tasks are one curve along the word error rate, measured per meeting. This panel draws that
curve from the same numbers as `lceval noise report` (`noise_report_of_runs`): the score at
each target WER with its meeting-level interval, the drop from the clean score with its
paired interval, every meeting's score against its effective WER, and Table 5 of Thonet et al., 2024b
(target vs effective WER).
"""

from __future__ import annotations

from lceval.errors import UserError
from lceval.interfaces import ReportContext, ReportFigure
from lceval.report import Point, Series, charts, figure

from .report import LevelRow, NoiseReport, noise_report_of_runs

SECTION = "Transcript noise (Thonet et al., 2024b, App. A)"


def _level(target: float) -> str:
    return f"{target:.0%}"


def _series(rows: list[LevelRow], value: str, low: str, high: str) -> tuple[list[str], list[Series]]:
    """One series per model and task family, one point per target level."""
    levels = sorted({r.target_wer for r in rows})
    cats = [_level(t) for t in levels]
    by_name: dict[str, dict[str, LevelRow]] = {}
    for row in rows:
        name = row.model if len({r.family for r in rows}) == 1 else f"{row.model} · {row.family}"
        by_name.setdefault(name, {})[_level(row.target_wer)] = row
    series = []
    for name, per in by_name.items():
        points = []
        for cat in cats:
            row = per.get(cat)
            eff = f"effective WER {row.effective_wer:.1%}, " if row and row.effective_wer is not None else ""
            lo, hi = (getattr(row, low), getattr(row, high)) if row else (None, None)
            points.append(Point(cat, getattr(row, value) if row else None, lo, hi, f"{eff}n={row.n}" if row else "",
                                "" if lo is not None else "fewer than 2 meetings"))
        series.append(Series(name, points))
    return cats, series


def noise_panels(ctx: ReportContext) -> list[ReportFigure]:
    try:
        report: NoiseReport = noise_report_of_runs(ctx.runs, n_boot=1000)
    except UserError:  # no run with options.noise: nothing to draw
        return []
    out: list[ReportFigure] = []
    colors = charts.palette(ctx.labels)
    cats, series = _series(report.rows, "score", "ci_low", "ci_high")
    out.append(figure(charts.intervals(cats, series, style="line", y_title="score", x_title="target WER",
                                       colors=colors, description="score by target word error rate, per model"),
                      "Score by target word error rate",
                      "Mean score at each noise level (0% = the clean transcript); band: 95% intervals "
                      "resampling meetings. Hover a point for the effective WER.", SECTION))
    noisy = [r for r in report.rows if r.drop is not None]
    if noisy:
        cats, series = _series(noisy, "drop", "drop_ci_low", "drop_ci_high")
        out.append(figure(charts.intervals(cats, series, style="dots", y_title="clean − noisy", x_title="target WER",
                                           colors=colors, description="drop from the clean score, per model"),
                          "Drop from the clean score",
                          "Clean minus noisy score over the same questions and seeds; whiskers: paired 95% "
                          "intervals resampling meetings (as `lceval compare`).", SECTION))
    points = [(p.effective_wer * 100, p.score) for r in report.rows for p in r.points
              if p.effective_wer is not None and p.score is not None]
    if points:
        out.append(figure(charts.scatter(points, x_title="effective WER (%)", y_title="meeting score", diagonal=False,
                                         description="each meeting's score against its effective WER"),
                          "Each meeting's score against its effective WER",
                          "One point per meeting, level and model: the mean score of its questions.", SECTION))
    if report.table5:
        t5 = [Point(_level(r.target_wer), None if r.effective_wer is None else r.effective_wer * 100,
                    None if r.effective_min is None else r.effective_min * 100,
                    None if r.effective_max is None else r.effective_max * 100, f"{r.meetings} meetings")
              for r in report.table5]
        out.append(figure(charts.intervals([p.category for p in t5], [Series("effective WER", t5)], style="dots",
                                           y_title="effective WER (%)", x_title="target WER",
                                           series_title="measure", interval_title="lowest and highest meeting",
                                           description="target against effective WER"),
                          "Target vs effective word error rate (Table 5)",
                          "Effective WER measured with jiwer against the clean transcript, averaged over the "
                          "meetings; whiskers: the lowest and highest meeting.", SECTION))
    return out
