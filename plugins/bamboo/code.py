"""BAMBOO's code task (private_eval): the completion is run against the authors' check.

As `private_eval/evaluation.py` and `execution.py` (RUCAIBox/BAMBOO, commit f230f206) do it:

1. `convert_back`: the model completed code against a paraphrased library (`bn.numset` for
   `np.array`, `mk.KnowledgeFrame` for `pd.DataFrame` ...). Every identifier of the completion is
   found (`\\b[a-zA-Z_][a-zA-Z0-9_]*\\b`); if one is a real name that has a paraphrase (and is no
   paraphrase itself) the completion becomes `"error!"` (it used the real library: fails); else
   every paraphrase is replaced by its real name with plain `str.replace`, in the table's order
   (so a paraphrase inside a longer identifier is replaced too, as theirs).
2. The program is the real-library prompt + the converted completion + "\\n" + the test + "\\n" +
   `check()` (or `check(<entry point>)`), run with a 3-second alarm (`plugins/bamboo/sandbox.py`).
3. Right iff it ran without an exception: pass@1 x 100 (one answer per problem).

The answer is read as the model wrote it (`pred` is the decoded output, its leading space kept:
the prompt ends with `c =`). Running model-written code is off until asked for: without
`allow_execution: true` every answer stays unscored (`missing`, saying why), so a run can answer
first and `lceval score RUN --judge bamboo_code,allow_execution=true` execute later.
"""

from __future__ import annotations

import json
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from lceval.errors import UserError
from lceval.interfaces import JudgeContext
from lceval.types import JudgeInput, Judgment

from lceval_plugins.judges.metric_base import MetricJudge, as_written, metric_options

from .sandbox import Limits, run_program

_IDENTIFIER = re.compile(r"\b[a-zA-Z_][a-zA-Z0-9_]*\b")
NOT_ALLOWED = ("not executed: bamboo_code runs the model's code only when allowed (judge option "
               "allow_execution: true, e.g. lceval score RUN --judge bamboo_code,allow_execution=true)")


def convert_back(completion: str, table: dict[str, str]) -> str:
    """The completion in the real library's names, or "error!" when it used a real name that has a
    paraphrase (execution.py's `convert_back`; `table` maps real names to paraphrases, in order)."""
    real, paraphrases = set(table), set(table.values())
    if any(word in real and word not in paraphrases for word in _IDENTIFIER.findall(completion)):
        return "error!"
    for old, new in table.items():
        completion = completion.replace(new, old)
    return completion


def program_of(completion: str, metadata: dict[str, Any]) -> str:
    """The program `check_correctness` executes."""
    entry = metadata.get("real_entry_point") or "none"
    call = "check()" if entry == "none" else f"check({entry})"
    return metadata["real_prompt"] + completion + "\n" + metadata["real_test"] + "\n" + call


class CodeJudge(MetricJudge):
    """BAMBOO private_eval: pass@1 of the completion against the authors' real-library check, run in
    a limited subprocess (off unless `allow_execution: true`)."""

    name = "bamboo_code"
    AS_WRITTEN = True
    OPTIONS = metric_options({
        "allow_execution": {"type": "boolean", "default": False,
                            "description": "Run the model-written code (in a child process with the limits below). "
                                           "Off: every answer stays unscored, saying why."},
        "timeout": {"type": "number", "exclusiveMinimum": 0, "default": 3.0,
                    "description": "Seconds the program may run (the authors' alarm)."},
        "memory_mb": {"type": "integer", "minimum": 64, "default": 4096,
                      "description": "Address space of the child process in MiB (torch needs more)."},
        "python": {"type": ["string", "null"], "default": None,
                   "description": "The Python that runs the checks (default: lceval's own); it needs numpy and "
                                  "pandas, and torchdata with its DataPipes (torchdata < 0.10) for TorchDataEval."},
        "preload": {"type": "array", "items": {"type": "string"}, "default": ["numpy", "pandas"],
                    "description": "Modules imported before the alarm starts (missing ones are ignored)."},
        "workers": {"type": "integer", "minimum": 1, "default": 2, "description": "Checks run at once."},
    })

    def __init__(self, options: "JudgeContext | dict[str, Any]") -> None:
        super().__init__(options)
        o = self.options
        self.limits = Limits(timeout=o["timeout"], memory_mb=o["memory_mb"], python=o["python"] or sys.executable,
                             wall_seconds=max(60.0, 20 * o["timeout"]))

    def check(self, item: JudgeInput) -> tuple[float, dict[str, Any]]:
        meta = item.metadata
        missing = [k for k in ("real_prompt", "real_test", "api_keywords") if not isinstance(meta.get(k), str)]
        if missing:
            raise UserError(f"sample {item.item_id} lacks {', '.join(missing)} in its metadata: bamboo_code scores the "
                            "rows of the bamboo dataset's private_eval files (lceval data fetch bamboo)",
                            field="options.fields.metadata")
        completion = convert_back(as_written(item), json.loads(meta["api_keywords"]))
        outcome = run_program(program_of(completion, meta), self.limits, tuple(self.options["preload"]))
        return float(outcome["result"] == "passed"), {**outcome, "converted": completion[:500]}

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        if not self.options["allow_execution"]:
            return [Judgment(item_id=i.item_id, judge=self.name, score=None, parse_status="missing", raw=NOT_ALLOWED,
                             details={"executed": False}) for i in items]
        with ThreadPoolExecutor(max_workers=self.options["workers"]) as pool:
            outcomes = list(pool.map(self.check, items))
        return [Judgment(item_id=i.item_id, judge=self.name, score=100.0 * value,
                         raw=details["result"] + (f" [{details['error']}]" if details.get("error") else ""),
                         details=details) for i, (value, details) in zip(items, outcomes)]
