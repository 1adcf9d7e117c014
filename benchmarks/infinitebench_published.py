"""InfiniteBench's published predictions re-scored by lceval's judges, against the authors' numbers.

OpenBMB/InfiniteBench publishes every model's predictions (`results/<model>/preds_<task>.jsonl`:
gpt4, claude2, kimi, yarn-mistral, yi-6b-200k, yi-34b-200k, chatglm3). This script reads them from
a local checkout of that repository (not downloaded here: give its path), scores every row with
the judge and options of the shipped spec of its task (GPT-4's rows: the GPT-4 route,
`infinitebench_<task>`; every other model's: the open-model route, `infinitebench_<task>_open`;
the two differ in math_calc, where the authors drop GPT-4's first number), handing each answer
over as the engine does (stripped, and as written), and prints per model and task the number of
rows, lceval's mean x 100, the authors' (their src/compute_scores.py at 88b3daa, run on the same
files: AUTHORS below), and whether they agree.

    python benchmarks/infinitebench_published.py PATH/TO/InfiniteBench [--authors-items FILE] [--caps]

`--authors-items FILE`: a JSON object {"<model>/<task>": [the authors' score of each row, null
where their code raises]} (their `compute_scores.get_score_one` over the same rows, run where
their environment is); the script then counts the rows on which lceval agrees item for item.

`--caps`: GPT-4's answers measured in GPT-4's tokens (tiktoken cl100k_base, needed offline:
TIKTOKEN_CACHE_DIR): the longest answer per task (the GPT-4 route's cap is 4,096 tokens) and
GPT-4's score with its answers cut to the open route's caps (DATA_NAME_TO_MAX_NEW_TOKENS), what
the specs did before issue 31.

Labels are turned into references as the `documents` task type turns the dataset's answer field
into them (text; numbers as digits; a list of values as JSON); choice labels `[option, letter]`
become the option and its letter. Not run in CI: it needs the checkout; 236 of the rows, with the
authors' per-item scores, are re-scored in the fast suite (tests/data/infinitebench/published.json).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from lceval.engine import load_catalog, load_plugins
from lceval.interfaces import JudgeContext
from lceval.types import JudgeInput

TASKS = ["passkey", "number_string", "kv_retrieval", "longbook_sum_eng", "longbook_choice_eng", "longbook_qa_eng",
         "longbook_qa_chn", "longdialogue_qa_eng", "math_find", "math_calc", "code_run", "code_debug",
         "code_debug_step_by_step"]
#: src/eval_utils.py DATA_NAME_TO_MAX_NEW_TOKENS: the open route's caps
OPEN_CAPS = {"passkey": 6, "number_string": 12, "kv_retrieval": 50, "longbook_sum_eng": 1200, "longbook_choice_eng": 40,
             "longbook_qa_eng": 40, "longbook_qa_chn": 40, "longdialogue_qa_eng": 40, "math_find": 3,
             "math_calc": 30000, "code_run": 5, "code_debug": 5, "code_debug_step_by_step": 5}

#: The authors' src/compute_scores.py at 88b3daa on the published files of the same commit, mean
#: x 100 (yarn-mistral's longbook_qa_chn: its last line ends with stray text, which makes their
#: reader raise; read with the object alone, as here). README's table agrees to its two decimals
#: except yarn-mistral's code_debug (README "< 5%", from before commit e60e8dc stripped the
#: answer) and longbook_sum_eng (9.09). yarn-mistral's math_calc file is not in the repository
#: snapshot (over 4 MiB).
AUTHORS: dict[str, float] = {
    "gpt4/passkey": 100.0, "gpt4/number_string": 100.0, "gpt4/kv_retrieval": 89.0, "gpt4/longdialogue_qa_eng": 8.5,
    "gpt4/longbook_sum_eng": 14.728596576254033, "gpt4/longbook_choice_eng": 67.24890829694323,
    "gpt4/longbook_qa_eng": 22.44490854370862, "gpt4/longbook_qa_chn": 25.95772153588164, "gpt4/math_find": 60.0,
    "gpt4/math_calc": 0.013734248949929997, "gpt4/code_run": 23.25, "gpt4/code_debug": 37.055837563451774,
    "gpt4/code_debug_step_by_step": 15.736040609137056,
    "claude2/passkey": 97.79661016949153, "claude2/number_string": 98.13559322033898, "claude2/kv_retrieval": 65.4,
    "claude2/longdialogue_qa_eng": 46.5, "claude2/longbook_sum_eng": 14.49643286587142,
    "claude2/longbook_choice_eng": 62.882096069869, "claude2/longbook_qa_eng": 11.969466865195638,
    "claude2/longbook_qa_chn": 9.644159570939454, "claude2/math_find": 32.285714285714285,
    "claude2/math_calc": 0.0008000533368891261, "claude2/code_run": 2.5, "claude2/code_debug": 2.284263959390863,
    "kimi/passkey": 98.13559322033898, "kimi/number_string": 95.42372881355932, "kimi/kv_retrieval": 53.6,
    "kimi/longdialogue_qa_eng": 11.5, "kimi/longbook_sum_eng": 17.95960654171602,
    "kimi/longbook_choice_eng": 72.48908296943232, "kimi/longbook_qa_eng": 16.523091520236992,
    "kimi/longbook_qa_chn": 17.933780005059734, "kimi/math_find": 12.571428571428573, "kimi/math_calc": 0.0,
    "kimi/code_run": 2.0, "kimi/code_debug": 17.766497461928935,
    "yarn-mistral/passkey": 92.71186440677967, "yarn-mistral/number_string": 56.61016949152542,
    "yarn-mistral/kv_retrieval": 0.0, "yarn-mistral/longdialogue_qa_eng": 7.5,
    "yarn-mistral/longbook_sum_eng": 9.056026511005053, "yarn-mistral/longbook_choice_eng": 27.947598253275107,
    "yarn-mistral/longbook_qa_eng": 9.551657515196093, "yarn-mistral/math_find": 17.142857142857142,
    "yarn-mistral/code_run": 1.25, "yarn-mistral/code_debug": 15.48223350253807,
    "yarn-mistral/longbook_qa_chn": 15.489444732289458,
    "yi-6b-200k/passkey": 100.0, "yi-6b-200k/number_string": 94.91525423728814, "yi-6b-200k/kv_retrieval": 0.0,
    "yi-6b-200k/longdialogue_qa_eng": 3.5000000000000004, "yi-6b-200k/longbook_sum_eng": 0.9231122345027071,
    "yi-6b-200k/longbook_choice_eng": 36.681222707423586, "yi-6b-200k/longbook_qa_eng": 9.200412198158386,
    "yi-6b-200k/longbook_qa_chn": 15.073557932255282, "yi-6b-200k/math_find": 4.285714285714286,
    "yi-6b-200k/math_calc": 0.00040002666844456304, "yi-6b-200k/code_run": 0.75,
    "yi-6b-200k/code_debug": 9.137055837563452,
    "yi-34b-200k/passkey": 100.0, "yi-34b-200k/number_string": 100.0, "yi-34b-200k/kv_retrieval": 0.0,
    "yi-34b-200k/longdialogue_qa_eng": 4.5, "yi-34b-200k/longbook_sum_eng": 1.3337594763344984,
    "yi-34b-200k/longbook_choice_eng": 38.427947598253276, "yi-34b-200k/longbook_qa_eng": 12.173033182433974,
    "yi-34b-200k/longbook_qa_chn": 13.614008265164992, "yi-34b-200k/math_find": 25.71428571428571,
    "yi-34b-200k/math_calc": 0.00040002666844456304, "yi-34b-200k/code_run": 1.7500000000000002,
    "yi-34b-200k/code_debug": 13.959390862944163,
    "chatglm3/passkey": 92.20338983050847, "chatglm3/number_string": 80.67796610169492,
    "chatglm3/kv_retrieval": 0.0, "chatglm3/longdialogue_qa_eng": 2.5,
    "chatglm3/longbook_sum_eng": 0.8372138644638218, "chatglm3/longbook_choice_eng": 10.480349344978166,
    "chatglm3/longbook_qa_eng": 3.6214391523856726, "chatglm3/longbook_qa_chn": 2.498226484356853,
    "chatglm3/math_find": 7.7142857142857135, "chatglm3/math_calc": 0.00040002666844456304,
    "chatglm3/code_run": 0.0, "chatglm3/code_debug": 7.3604060913705585,
}


def read_rows(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The file's JSON objects (blank lines skipped, as the authors' `iter_jsonl`), and notes
    about lines their reader cannot parse (stray text after the object: the object is kept)."""
    rows, notes = [], []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            obj, end = json.JSONDecoder().raw_decode(line)
            rows.append(obj)
            notes.append(f"line {number}: text after the JSON object ({line[end:][:20]!r}) left out")
    return rows, notes


def predictions_and_labels(rows: list[dict[str, Any]]) -> tuple[list[str], list[Any]]:
    """compute_scores.py `get_preds` (per row: `prediction`, else `pred`) and `get_labels` (the
    first of `ground_truth`, `label` that the FIRST row has, for every row)."""
    key = next(k for k in ("ground_truth", "label") if k in rows[0])
    preds = [r["prediction"] if "prediction" in r else r["pred"] for r in rows]
    return preds, [r.get(key, "XXXXXXXXXX") for r in rows]


def references(value: Any) -> list[str]:
    """plugins/documents/records.py `answers_of`: text as is, numbers as digits, lists as JSON."""
    values = value if isinstance(value, list) else [value]
    return [v if isinstance(v, str) else json.dumps(v) if isinstance(v, (list, dict)) else str(v) for v in values]


def judge_input(task: str, prediction: str, label: Any, i: int) -> JudgeInput:
    metadata: dict[str, Any] = {}
    if task.startswith("code_debug") or task == "longbook_choice_eng":  # [option text, letter]
        refs, metadata["answer_letter"] = [str(label[0])], label[1]
    else:
        refs = references(label)
    metadata["references"] = refs
    stripped = prediction.strip()
    return JudgeInput(item_id=str(i), question="", response=stripped, reference=refs[0], metadata=metadata,
                      raw_response=prediction if prediction != stripped else None)


class Judges:
    """The shipped specs' judges, one per (task, route)."""

    def __init__(self) -> None:
        self.plugins = load_plugins()
        self.catalog = load_catalog(self.plugins)
        self._made: dict[str, Any] = {}

    def of(self, model: str, task: str) -> Any:
        if task == "longbook_qa_chn":  # no shipped spec (English tasks only): the metric itself
            name, options = "f1", {"normalize": "infinitebench_zh"}
        else:
            spec_task = "code_debug" if task == "code_debug_step_by_step" else task
            spec = self.catalog.spec(f"infinitebench_{spec_task}" + ("" if model == "gpt4" else "_open"))
            name, options = spec.judge.name, spec.judge.options
        key = json.dumps([name, options], sort_keys=True)
        if key not in self._made:
            self._made[key] = self.plugins.judges[name](JudgeContext(options=options))
        return self._made[key]


def score(judges: Judges, model: str, task: str, preds: list[str], labels: list[Any]) -> list[float]:
    judged = judges.of(model, task).judge([judge_input(task, p, l, i) for i, (p, l) in enumerate(zip(preds, labels))])
    return [j.score / 100 for j in judged]


def cut_to_tokens(texts: list[str], caps: int) -> list[str]:
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base")
    return [enc.decode(enc.encode(t, disallowed_special=())[:caps]) for t in texts]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkout", type=Path, help="a local checkout of OpenBMB/InfiniteBench (its results/ folder)")
    ap.add_argument("--authors-items", type=Path, help="the authors' per-row scores, {model/task: [score|null]}")
    ap.add_argument("--caps", action="store_true", help="GPT-4's answers in tokens, and cut to the open caps")
    args = ap.parse_args()
    results = args.checkout / "results"
    if not results.is_dir():
        print(f"{results} is no folder: give a checkout of OpenBMB/InfiniteBench", file=sys.stderr)
        return 2
    items = json.loads(args.authors_items.read_text()) if args.authors_items else {}
    judges = Judges()
    print(f"{'model/task':<38} {'n':>5} {'lceval':>9} {'authors':>9} {'agree':>6}  items")
    total = agree = rows_total = rows_agree = 0
    for model_dir in sorted(p for p in results.iterdir() if p.is_dir()):
        model = model_dir.name
        for task in TASKS:
            path = model_dir / f"preds_{task}.jsonl"
            key = f"{model}/{task}"
            if not path.exists():
                if key in AUTHORS or (model != "gpt4" and task != "code_debug_step_by_step"):
                    print(f"{key:<38}  (no file)")
                continue
            rows, notes = read_rows(path)
            preds, labels = predictions_and_labels(rows)
            ours = score(judges, model, task, preds, labels)
            mean = 100 * sum(ours) / len(ours)
            theirs_items = items.get(key)
            authors = AUTHORS.get(key)
            if authors is None and theirs_items is not None:
                authors = 100 * sum(x or 0.0 for x in theirs_items) / len(theirs_items)
            same = authors is not None and abs(mean - authors) < 1e-9
            line = f"{key:<38} {len(ours):>5} {mean:>9.4f} " + (f"{authors:>9.4f} {'yes' if same else 'NO':>6}"
                                                                   if authors is not None else f"{'':>9} {'':>6}")
            if theirs_items is not None:
                matches = sum(1 for a, b in zip(ours, theirs_items) if abs(a - (b or 0.0)) < 1e-12)
                raised = sum(1 for b in theirs_items if b is None)
                line += f"  {matches}/{len(ours)}" + (f" ({raised} raise there)" if raised else "")
                rows_total += len(ours)
                rows_agree += matches
            total += authors is not None
            agree += same
            print(line + "".join(f"\n    {n}" for n in notes))
    print(f"\n{agree} of {total} task means agree with the authors' to 1e-9"
          + (f"; {rows_agree} of {rows_total} rows item for item" if rows_total else ""))
    if args.caps:
        print("\nGPT-4's answers in GPT-4 tokens (cl100k_base), and GPT-4 cut to the open route's caps")
        print(f"{'task':<26} {'longest':>8} {'> 4096':>7} {'whole':>9} {'cut':>9} {'cap':>6}")
        for task in TASKS:
            path = results / "gpt4" / f"preds_{task}.jsonl"
            if not path.exists():
                continue
            import tiktoken

            enc = tiktoken.get_encoding("cl100k_base")
            preds, labels = predictions_and_labels(read_rows(path)[0])
            lengths = [len(enc.encode(p, disallowed_special=())) for p in preds]
            whole = 100 * sum(score(judges, "gpt4", task, preds, labels)) / len(preds)
            cut = 100 * sum(score(judges, "gpt4", task, cut_to_tokens(preds, OPEN_CAPS[task]), labels)) / len(preds)
            print(f"{task:<26} {max(lengths):>8} {sum(n > 4096 for n in lengths):>7} {whole:>9.2f} {cut:>9.2f} "
                  f"{OPEN_CAPS[task]:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
