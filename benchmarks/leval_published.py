"""L-Eval's published predictions re-scored by lceval's judges, against the authors' numbers.

OpenLMLab/LEval publishes the answers of the models of its paper (`Predictions/exam_eval/<model>/
<task>.pred.jsonl`: gpt4-32k, turbo-16k-0613, Claude-100k on six closed-ended tasks;
`Predictions/ngram_eval/<model>/<task>.pred.jsonl`: turbo-16k-0613, llama2-13b-chat-4k and
vicuna-13b-16k on the thirteen open-ended ones). This script reads them from a local checkout of
that repository (not downloaded here: give its path), scores every row the authors score (their
`evaluation` tag f1, rouge or exam) with the judges of the shipped spec of its task
(`leval_<task>`), handing each answer over as the engine does (stripped, and as written), and
prints per model and task the rows, lceval's mean x 100, the authors' (their Evaluation/auto_eval.py,
em.py, f1.py and rouge-score at commit cd34b05, run on the same files: AUTHORS below) and whether
they agree.

    python benchmarks/leval_published.py PATH/TO/LEval

Measured (2 shared CPU cores): 2,949 closed-ended answers and 5,766 open-ended metric values,
every one equal to the authors' item for item; the task means below to the fourth decimal. Not
run in CI: it needs the checkout (GPL-3.0 files, not copied into lceval: the fast suite re-scores
rows of lceval's own with their code's scores, tests/data/leval/published.json).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lceval.engine import load_catalog, load_plugins
from lceval.interfaces import JudgeContext
from lceval.types import JudgeInput

#: the authors' task means x 100 on their published predictions (auto_eval.py; rouge-score F)
AUTHORS = {
    "Claude-100k/codeU": {"exam": 17.7778},
    "Claude-100k/coursera": {"exam": 60.0291},
    "Claude-100k/gsm100": {"exam": 88.0},
    "Claude-100k/quality": {"exam": 73.7624},
    "Claude-100k/topic_retrieval_longchat": {"exam": 70.6667},
    "Claude-100k/tpo": {"exam": 84.0149},
    "gpt4-32k/codeU": {"exam": 25.5556},
    "gpt4-32k/coursera": {"exam": 75.5814},
    "gpt4-32k/gsm100": {"exam": 96.0},
    "gpt4-32k/quality": {"exam": 82.1782},
    "gpt4-32k/topic_retrieval_longchat": {"exam": 95.3333},
    "gpt4-32k/tpo": {"exam": 84.3866},
    "turbo-16k-0613/codeU": {"exam": 12.2222},
    "turbo-16k-0613/coursera": {"exam": 63.5174},
    "turbo-16k-0613/gsm100": {"exam": 84.0},
    "turbo-16k-0613/quality": {"exam": 61.3861},
    "turbo-16k-0613/topic_retrieval_longchat": {"exam": 79.3333},
    "turbo-16k-0613/tpo": {"exam": 78.4387},
    "llama2-13b-chat-4k/financial_qa": {"f1": 38.075},
    "llama2-13b-chat-4k/gov_report_summ": {"rouge1": 46.3938, "rouge2": 16.1978, "rougeL": 24.085},
    "llama2-13b-chat-4k/legal_contract_qa": {"f1": 23.1426},
    "llama2-13b-chat-4k/meeting_summ": {"rouge1": 29.6333, "rouge2": 6.5437, "rougeL": 19.6517},
    "llama2-13b-chat-4k/multidoc_qa": {"f1": 26.1446},
    "llama2-13b-chat-4k/narrative_qa": {"f1": 16.7696},
    "llama2-13b-chat-4k/natural_question": {"f1": 35.4363},
    "llama2-13b-chat-4k/news_summ": {"rouge1": 34.9088, "rouge2": 8.1306, "rougeL": 16.3131},
    "llama2-13b-chat-4k/paper_assistant": {"rouge1": 37.2711, "rouge2": 9.7987, "rougeL": 18.4908},
    "llama2-13b-chat-4k/patent_summ": {"rouge1": 48.4991, "rouge2": 20.9965, "rougeL": 30.3574},
    "llama2-13b-chat-4k/review_summ": {"rouge1": 30.497, "rouge2": 6.6943, "rougeL": 19.2301},
    "llama2-13b-chat-4k/scientific_qa": {"f1": 27.4664},
    "llama2-13b-chat-4k/tv_show_summ": {"rouge1": 32.657, "rouge2": 6.6291, "rougeL": 17.2293},
    "turbo-16k-0613/financial_qa": {"f1": 45.3688},
    "turbo-16k-0613/gov_report_summ": {"rouge1": 45.9033, "rouge2": 15.5985, "rougeL": 23.636},
    "turbo-16k-0613/legal_contract_qa": {"f1": 24.8686},
    "turbo-16k-0613/meeting_summ": {"rouge1": 30.1985, "rouge2": 7.2158, "rougeL": 19.3135},
    "turbo-16k-0613/multidoc_qa": {"f1": 31.4452},
    "turbo-16k-0613/narrative_qa": {"f1": 18.1989},
    "turbo-16k-0613/natural_question": {"f1": 45.9044},
    "turbo-16k-0613/news_summ": {"rouge1": 35.299, "rouge2": 8.1247, "rougeL": 16.0592},
    "turbo-16k-0613/paper_assistant": {"rouge1": 39.5475, "rouge2": 10.9211, "rougeL": 18.6061},
    "turbo-16k-0613/patent_summ": {"rouge1": 45.9834, "rouge2": 20.295, "rougeL": 29.2755},
    "turbo-16k-0613/review_summ": {"rouge1": 30.1849, "rouge2": 7.1427, "rougeL": 18.6734},
    "turbo-16k-0613/scientific_qa": {"f1": 28.2501},
    "turbo-16k-0613/tv_show_summ": {"rouge1": 31.9719, "rouge2": 5.3574, "rougeL": 16.8682},
    "vicuna-13b-16k/financial_qa": {"f1": 45.5788},
    "vicuna-13b-16k/gov_report_summ": {"rouge1": 45.2507, "rouge2": 17.9676, "rougeL": 24.2902},
    "vicuna-13b-16k/legal_contract_qa": {"f1": 18.1696},
    "vicuna-13b-16k/meeting_summ": {"rouge1": 27.8217, "rouge2": 6.3968, "rougeL": 18.8385},
    "vicuna-13b-16k/multidoc_qa": {"f1": 15.8886},
    "vicuna-13b-16k/narrative_qa": {"f1": 14.0311},
    "vicuna-13b-16k/natural_question": {"f1": 37.1367},
    "vicuna-13b-16k/news_summ": {"rouge1": 31.6039, "rouge2": 6.8775, "rougeL": 15.2789},
    "vicuna-13b-16k/paper_assistant": {"rouge1": 36.3065, "rouge2": 8.6918, "rougeL": 18.204},
    "vicuna-13b-16k/patent_summ": {"rouge1": 46.1009, "rouge2": 21.8078, "rougeL": 30.051},
    "vicuna-13b-16k/review_summ": {"rouge1": 28.5996, "rouge2": 6.1565, "rougeL": 18.4995},
    "vicuna-13b-16k/scientific_qa": {"f1": 23.4079},
    "vicuna-13b-16k/tv_show_summ": {"rouge1": 28.3609, "rouge2": 3.7837, "rougeL": 16.3893},
}


def judges_of(catalog, plugins, task: str) -> dict[str, object]:
    """label -> judge of the shipped spec `leval_<task>` (its headline judge, or each of its metrics)."""
    spec = catalog.spec(f"leval_{task.lower()}")
    metrics = spec.data.get("metrics")
    if metrics:
        return {m["label"]: plugins.judges[m["name"]](JudgeContext(options=m.get("options") or {})) for m in metrics}
    label = "exam" if spec.judge.name == "leval_exam" else spec.judge.name
    return {label: plugins.judges[spec.judge.name](JudgeContext(options=dict(spec.judge.options or {})))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", type=Path, help="a checkout of OpenLMLab/LEval")
    args = parser.parse_args(argv)
    plugins = load_plugins()
    catalog = load_catalog(plugins)
    files = sorted((args.checkout / "Predictions").glob("*_eval/*/*.pred.jsonl"))
    files = [f for f in files if f.parent.parent.name in ("exam_eval", "ngram_eval")]
    if not files:
        print(f"no Predictions/exam_eval or ngram_eval files under {args.checkout}", file=sys.stderr)
        return 2
    bad = 0
    print(f"{'model/task':45s} {'metric':7s} {'rows':>5s} {'lceval':>9s} {'authors':>9s}")
    for path in files:
        task, model = path.name.split(".")[0], path.parent.name
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        rows = [r for r in rows if r.get("evaluation") in ("f1", "rouge", "exam")]
        if not rows or f"leval_{task.lower()}" not in catalog.specs:
            continue
        key = next(k for k in rows[0] if "_pred" in k)
        for label, judge in judges_of(catalog, plugins, task).items():
            items = [JudgeInput(item_id=str(i), question=r["query"], response=r[key].strip(), reference=r["gt"],
                                metadata={"references": [r["gt"]]},
                                raw_response=r[key] if r[key] != r[key].strip() else None) for i, r in enumerate(rows)]
            scores = [j.score for j in judge.judge(items)]
            ours = sum(scores) / len(scores)
            theirs = AUTHORS.get(f"{model}/{task}", {}).get(label)
            same = theirs is not None and abs(round(ours, 4) - theirs) < 1e-9
            bad += theirs is not None and not same
            print(f"{model + '/' + task:45s} {label:7s} {len(rows):5d} {ours:9.4f} "
                  f"{'' if theirs is None else f'{theirs:9.4f}'} {'' if theirs is None else 'ok' if same else 'DIFFERS'}")
    print("every mean agrees" if not bad else f"{bad} means differ")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
