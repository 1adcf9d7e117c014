"""`lceval ruler report RUN_DIR... [--threshold T] [--format table|markdown|json]`: score
against length per ruler task and averaged, the effective length, and the needle depth x
length table (report.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lceval.errors import UserError
from lceval.interfaces import Command


def _threshold(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"'{text}' is not a score (0-100)", field="--threshold") from None
    if not 0 <= value <= 100:
        raise UserError(f"{value:g} is not a score between 0 and 100", field="--threshold")
    return value


class RulerCommand(Command):
    help = "RULER sweeps: score against length, effective length, needle depth x length table"

    def add_arguments(self, parser: Any) -> None:
        sub = parser.add_subparsers(dest="ruler_command", required=True)
        r = sub.add_parser("report", help="score by length per ruler task and averaged, the effective length, "
                                          "and the depth x length table of needle tasks")
        r.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories of `lceval run --tasks ruler "
                                                                      "--context-lengths ...`")
        r.add_argument("--threshold", help="score the effective length must keep (default: the spec's "
                                           "report.effective_length_threshold, RULER's 85.6)")
        r.add_argument("--format", choices=["table", "markdown", "json"], default="table")

    def run(self, args: Any) -> str:
        from .report import format_report, ruler_report

        threshold = None if args.threshold is None else _threshold(args.threshold)
        return format_report(ruler_report([Path(p) for p in args.run_dirs], threshold), args.format)
