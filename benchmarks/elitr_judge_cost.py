"""What the ELITR-Bench paper's judging costs, with and without a batch API.

The protocol of Thonet et al. (2024), Sec. 3-4 and App. C.1: every response of every model is
scored by a GPT-4 judge (the gpt-4-0613 checkpoint) with the 10-point rubric of Figs. 5-6; one
seeded run on the dev set, three (2023, 2024, 2025) on test2; the QA set single-turn and
multi-turn, the Conv set multi-turn. The authors' recorded files
(`generated-responses/elitr-bench-*_gpt-4-eval.json`) hold each model's responses: 9 models in
single-turn, 8 in multi-turn (GPT-3.5's 16K window was too short).

For each recorded response the script builds the judge's request with lceval's own `rubric`
judge (the paper's prompt, asked through a model that only records it) and counts its prompt
with GPT-4's tokenizer (tiktoken's cl100k_base, bundled with litellm: no network). The
judge's answers are not recorded (only their scores), so their length is a stated estimate
(`--answer-tokens`, default 150: a feedback paragraph and the boxed score). test2's three
seeds reuse the recorded run's responses (the seeds' responses differ, their lengths hardly).
Prices are litellm's bundled map (USD per million tokens): direct, and through OpenAI's Batch
API (half).

    python benchmarks/elitr_judge_cost.py [--data-home DIR] [--answer-tokens N] [--judge gpt-4-0613 gpt-4o]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

FILES = {  # file -> (setting, split, seeds judged)
    "elitr-bench-qa_dev_st_gpt-4-eval.json": ("QA single-turn", "dev", 1),
    "elitr-bench-qa_test2_st_gpt-4-eval.json": ("QA single-turn", "test2", 3),
    "elitr-bench-qa_dev_mt_gpt-4-eval.json": ("QA multi-turn", "dev", 1),
    "elitr-bench-qa_test2_mt_gpt-4-eval.json": ("QA multi-turn", "test2", 3),
    "elitr-bench-conv_dev_mt_gpt-4-eval.json": ("Conv multi-turn", "dev", 1),
    "elitr-bench-conv_test2_mt_gpt-4-eval.json": ("Conv multi-turn", "test2", 3),
}


class Recorder:
    """A judge model that records what it is asked and answers nothing."""

    identity = {"scheme": "recorder"}

    def __init__(self) -> None:
        self.asked: list[Any] = []

    def generate(self, requests: list[Any]) -> list[Any]:
        from lceval.types import Generation

        self.asked += [r for r in requests if not r.hints.get("attempt")]
        return [Generation(request_id=r.request_id, text="") for r in requests]


def judge_prompts(path: Path) -> list[list[dict[str, str]]]:
    """The rubric judge's messages for every recorded response of the file."""
    from lceval.engine import load_plugins
    from lceval.interfaces import JudgeContext
    from lceval.types import JudgeInput

    data = json.loads(path.read_text(encoding="utf-8"))
    inputs = [JudgeInput(item_id=f"{m['id']}/{q['id']}/{r['model']}", question=q["question"],
                         response=r["generated-response"], reference=q["groundtruth-answer"])
              for m in data["meetings"] for q in m["questions"] for r in q["generated-responses"]]
    recorder = Recorder()
    judge = load_plugins().get("judge", "rubric")(JudgeContext(options={}, model=recorder, seed=2023))
    judge.judge(inputs)
    return [[{"role": m.role, "content": m.content} for m in r.messages] for r in recorder.asked]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-home", help="data home holding elitr-bench/ (default: $LCEVAL_DATA, else "
                                            "../shared/datasets beside the repository)")
    parser.add_argument("--answer-tokens", type=int, default=150, help="the judge's answer, in tokens (estimate)")
    parser.add_argument("--judge", nargs="+", default=["gpt-4-0613", "gpt-4o"], help="judge models to price")
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    home = Path(args.data_home or os.environ.get("LCEVAL_DATA")
                or Path(__file__).resolve().parents[1].parent / "shared" / "datasets")
    folder = home / "elitr-bench" / "generated-responses"
    if not folder.is_dir():
        print(f"no recorded files in {folder} (lceval data fetch elitr-bench)", file=sys.stderr)
        return 2
    rows, total_requests, total_prompt = [], 0, 0
    for name, (setting, split, seeds) in FILES.items():
        prompts = judge_prompts(folder / name)
        tokens = sum(litellm.token_counter(model="gpt-4-0613", messages=m) for m in prompts)
        rows.append((setting, split, len(prompts), seeds, tokens * seeds))
        total_requests += len(prompts) * seeds
        total_prompt += tokens * seeds
    answer = total_requests * args.answer_tokens
    print(f"ELITR-Bench judging, the paper's protocol: {total_requests:,} GPT-4 judgments, {total_prompt:,} prompt "
          f"tokens (GPT-4's tokenizer), {answer:,} answer tokens (estimate: {args.answer_tokens} each)\n")
    print(f"{'setting':<16} {'split':<6} {'responses':>9} {'seeds':>5} {'prompt tokens':>14}")
    for setting, split, n, seeds, tokens in rows:
        print(f"{setting:<16} {split:<6} {n:>9,} {seeds:>5} {tokens:>14,}")
    print(f"\n{'judge':<12} {'USD/M in':>9} {'USD/M out':>9} {'direct':>10} {'batch':>10} {'saved':>10}")
    for model in args.judge:
        info = litellm.get_model_info(model)
        pin, pout = info["input_cost_per_token"], info["output_cost_per_token"]
        bin_ = info.get("input_cost_per_token_batches") or pin / 2
        bout = info.get("output_cost_per_token_batches") or pout / 2
        direct = total_prompt * pin + answer * pout
        batch = total_prompt * bin_ + answer * bout
        print(f"{model:<12} {pin * 1e6:>9.2f} {pout * 1e6:>9.2f} {direct:>10,.2f} {batch:>10,.2f} {direct - batch:>10,.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
