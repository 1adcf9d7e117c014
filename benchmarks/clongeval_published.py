"""CLongEval's published predictions re-scored by lceval's `clongeval` judge, against the authors'
numbers.

zexuanqiu/CLongEval publishes the answers behind its README's tables
(`inference_results/<model>/<task>/<size>.jsonl`: gpt4-turbo-128k on the small and medium sets,
moonshot-v1 on all three, rows {id, query, answer, response_<model>}). This script reads them from
a local checkout of that repository (not downloaded here: give its path), keeps the rows eval.py
keeps (no "HTTP_ERROR" / "UNKNOW_ERROR" answer), scores each with the judge of the shipped spec
of its task (`clongeval_<task>_<size>`), handing the answer over as the engine does (stripped, and
as written), with the typo references as eval.py reads them (as stored for gpt4-turbo-128k, whose
files hold them in id，typo，correct order; eval.py's rewrite for the others), and prints per file
the rows, lceval's mean x 100, the authors' (their eval.py at commit 81ba789 run on the same
files, unrounded: AUTHORS below) and whether they agree.

    python benchmarks/clongeval_published.py PATH/TO/CLongEval

Measured (2 shared CPU cores, jieba 0.42.1, rouge 1.0.1): 12,421 answers in 35 files, every file's
mean equal to the authors' to 1e-12 (six minutes, most of it the typo and summary files). The
README's numbers are these rounded, except GPT-4 Turbo's medium KpRet (22.34 printed, 22.39906
computed by eval.py on the published file). Not run in CI: it needs the checkout; 194 of the rows,
with the authors' per-item scores, are re-scored in the fast suite (tests/data/clongeval/published.json).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lceval.engine import load_catalog, load_plugins
from lceval.interfaces import JudgeContext
from lceval.types import JudgeInput

#: file -> (the rows eval.py scores, its score x 100 unrounded), eval.py run on the published files
AUTHORS = {
    "gpt4-turbo-128k/key_passage_retrieval/small": (397, 84.2449676757),
    "gpt4-turbo-128k/key_passage_retrieval/medium": (399, 22.3990559424),
    "gpt4-turbo-128k/long_conversation_memory/small": (358, 63.4159852319),
    "gpt4-turbo-128k/long_conversation_memory/medium": (352, 54.1789995989),
    "gpt4-turbo-128k/long_story_qa/small": (284, 66.1865970631),
    "gpt4-turbo-128k/long_story_qa/medium": (384, 52.6277289434),
    "gpt4-turbo-128k/long_story_summarization/small": (300, 21.9603086446),
    "gpt4-turbo-128k/long_story_summarization/medium": (390, 17.3813948113),
    "gpt4-turbo-128k/stacked_news_labeling/small": (303, 79.6981865865),
    "gpt4-turbo-128k/stacked_news_labeling/medium": (368, 37.4025764016),
    "gpt4-turbo-128k/stacked_typo_detection/small": (545, 38.3469934455),
    "gpt4-turbo-128k/stacked_typo_detection/medium": (290, 9.3246055544),
    "gpt4-turbo-128k/table_querying/small": (391, 82.3529411765),
    "gpt4-turbo-128k/table_querying/medium": (398, 52.7638190955),
    "moonshot-v1/key_passage_retrieval/small": (400, 86.7405267514),
    "moonshot-v1/key_passage_retrieval/medium": (399, 78.6371881256),
    "moonshot-v1/key_passage_retrieval/large": (300, 51.5035233088),
    "moonshot-v1/long_conversation_memory/small": (358, 51.7623196645),
    "moonshot-v1/long_conversation_memory/medium": (353, 38.2871055852),
    "moonshot-v1/long_conversation_memory/large": (356, 32.5933254519),
    "moonshot-v1/long_story_qa/small": (294, 60.2126751937),
    "moonshot-v1/long_story_qa/medium": (398, 51.2047177727),
    "moonshot-v1/long_story_qa/large": (299, 41.5197577718),
    "moonshot-v1/long_story_summarization/small": (300, 21.5576557164),
    "moonshot-v1/long_story_summarization/medium": (400, 18.8053248566),
    "moonshot-v1/long_story_summarization/large": (300, 16.3762429222),
    "moonshot-v1/stacked_news_labeling/small": (303, 89.0119007462),
    "moonshot-v1/stacked_news_labeling/medium": (402, 86.2969596439),
    "moonshot-v1/stacked_news_labeling/large": (300, 78.4809669830),
    "moonshot-v1/stacked_typo_detection/small": (550, 25.3636363636),
    "moonshot-v1/stacked_typo_detection/medium": (300, 11.3333333333),
    "moonshot-v1/stacked_typo_detection/large": (150, 4.3333333333),
    "moonshot-v1/table_querying/small": (400, 66.5000000000),
    "moonshot-v1/table_querying/medium": (400, 66.5000000000),
    "moonshot-v1/table_querying/large": (300, 52.0000000000),
}


def score_file(path: Path, model: str, task: str, size: str, plugins, catalog) -> tuple[int, float]:
    spec = catalog.spec(f"clongeval_{task}_{size}")
    options = dict(spec.judge.options)
    if task == "stacked_typo_detection" and model == "gpt4-turbo-128k":
        options["typo_reference"] = "as_is"  # eval.py leaves GPT-4 Turbo's references as stored
    judge = plugins.judges[spec.judge.name](JudgeContext(options=options))
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [r for r in rows if "HTTP_ERROR" not in r[f"response_{model}"] and "UNKNOW_ERROR" not in r[f"response_{model}"]]
    items = []
    for i, r in enumerate(rows):
        raw = r[f"response_{model}"]
        items.append(JudgeInput(item_id=str(i), question=r.get("query") or "", response=raw.strip(),
                                reference=str(r["answer"]), metadata={"references": [str(r["answer"])]},
                                raw_response=raw if raw != raw.strip() else None))
    scores = [j.score for j in judge.judge(items)]
    return len(scores), sum(scores) / len(scores)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", type=Path, help="a checkout of zexuanqiu/CLongEval")
    args = parser.parse_args(argv)
    plugins = load_plugins()
    catalog = load_catalog(plugins)
    bad = 0
    print(f"{'file':60s} {'rows':>5s} {'lceval':>10s} {'authors':>10s}")
    for key, (n_authors, authors) in AUTHORS.items():
        model, task, size = key.split("/")
        path = args.checkout / "inference_results" / model / task / f"{size}.jsonl"
        if not path.exists():
            print(f"{key:60s} missing {path}")
            bad += 1
            continue
        n, ours = score_file(path, model, task, size, plugins, catalog)
        same = n == n_authors and abs(ours - authors) < 1e-8
        bad += not same
        print(f"{key:60s} {n:5d} {ours:10.5f} {authors:10.5f} {'same' if same else 'DIFFERENT'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
