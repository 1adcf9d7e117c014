"""Does a ranking put a human summary above extractive baselines? A check of `lceval rank`
and its reference check on real ELITR-Bench data, with no model.

On every meeting that several people wrote minutes of (9 of the 18), three "systems"
summarize it:

- minutes: the first annotator's minutes (a human summary);
- lead: the first transcript lines, as many words as those minutes (the classic lead
  baseline of news summarization);
- middle: as many words from the middle of the transcript.

The reference is the *other* annotators' minutes (so the human system is never scored
against itself), judged with `keyfacts-lexical`; the pairwise ranking uses a pairwise judge
(default `cream-lexical`, the offline one). It prints the `lceval rank` report: Elo and
Bradley-Terry with intervals, the reference ranking and their agreement, position bias and
the pairwise matrix. A judge worth using should put the human minutes first on completeness.

    python benchmarks/cream_reference_check.py [--max-key-facts 16] [--data DIR] [--format table|markdown]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from lceval.interfaces import JudgeContext
from lceval.analysis import Ranking, RankOptions, collect_systems, rank
from lceval.analysis import format_ranking
from lceval.engine import RunConfig, RunRecord, TaskSpec
from lceval.results import FinishedRun
from lceval.types import ContextCut, JudgeInput, Sample
from lceval_plugins.cream.judges import make_cream_lexical, make_keyfacts_lexical
from lceval_plugins.cream.task import MINUTES_SEPARATOR

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = Path(os.environ.get("LCEVAL_SHARED_DATASETS", REPO.parent / "shared" / "datasets")) / "elitr-bench"
RANK = {"unit": "unit", "variant": "prompt", "criteria": ["completeness", "conciseness"]}


def _words_from(lines: list[str], words: int) -> str:
    out, n = [], 0
    for line in lines:
        if n >= words:
            break
        out.append(line)
        n += len(line.split())
    return "\n".join(out)


def pseudo_run(root: Path) -> FinishedRun:
    """The three systems on every meeting with two or more minutes, as a finished run whose
    samples carry the reference judgment, exactly as `lceval run` would write it."""
    reference_judge = make_keyfacts_lexical(JudgeContext())
    samples: list[Sample] = []
    for folder in sorted((root / "minutes").iterdir()):
        files = sorted(folder.glob("*.txt"))
        if len(files) < 2:
            continue
        unit = f"{folder.name.split('_')[2]}/{folder.name}"
        first = files[0].read_text(encoding="utf-8", errors="replace").strip()
        reference = MINUTES_SEPARATOR.join(f.read_text(encoding="utf-8", errors="replace").strip() for f in files[1:])
        transcript = (root / "transcripts" / f"{folder.name}.txt").read_text(encoding="utf-8")
        lines = [line for line in transcript.splitlines() if line.strip()]
        words = len(first.split())
        texts = {"minutes": first, "lead": _words_from(lines, words),
                 "middle": _words_from(lines[len(lines) // 2:], words)}
        for name, text in texts.items():
            item = f"{unit}/{name}"
            verdicts = reference_judge.judge([JudgeInput(item_id=item, question="", response=text, reference=reference)])
            samples.append(Sample(task="cream_elitr", item_id=item, conv_id=item, turn_index=0, seed=0,
                                  metadata={"unit": unit, "prompt": name, "meeting_id": folder.name},
                                  prompt_hash="", response=text, reference=reference, judgments=verdicts,
                                  context_cut=ContextCut("error", None, None)))
    return FinishedRun(path=root, results={"run_id": "human-vs-extractive", "model": "human",
                                           "tasks": {"cream_elitr": {}}},
                       record=RunRecord(config=RunConfig(models=["human"]), tasks={"cream_elitr": TaskSpec(
                           "cream_elitr", root, {"rank": RANK}, {})}),
                       samples=samples)


def check(root: Path = DEFAULT_DATA, max_key_facts: int = 16, options: RankOptions | None = None) -> Ranking:
    run = pseudo_run(root)
    systems, section = collect_systems([run], None)
    judge = make_cream_lexical(JudgeContext(options={"max_key_facts": max_key_facts}))
    return rank([run], judge, f"cream-lexical,max_key_facts={max_key_facts}", options or RankOptions(),
                systems, section)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="an elitr-bench folder")
    parser.add_argument("--max-key-facts", type=int, default=16)
    parser.add_argument("--format", choices=["table", "markdown"], default="table")
    args = parser.parse_args()
    print(format_ranking(check(args.data, args.max_key_facts), markdown=args.format == "markdown"))


if __name__ == "__main__":
    main()
