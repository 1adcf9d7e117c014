"""The `scbench` metric: every SCBench task scored as the authors score it.

Follows microsoft/MInference, commit fb56c917f618e8645f1cfc37535afd7424d78f0d:
scbench/compute_scores.py (`get_score_one` and its scorers, `Multiturnbench_to_Infinitebench`,
`compute_scores`' routing of the mixed tasks by each turn's `task`), scbench/eval_utils.py
(`get_ground_truth`: the label a scorer gets) and scbench/repo_qa_utils.py (RepoQA's pass@1
at the similarity threshold 0.8, after evalplus/repoqa). Our own code, written from theirs.

The label: the authors hand each scorer the turn's `answer` as the data holds it (a string,
an int for Math.Find, a list for variable tracking), wrapped in a list for En.QA and as
[option text, letter] for En.MultiChoice. Where a scorer loops over its label, a string is
looped over character by character, and the score depends on it (Zh.QA's F1 is the best F1
against one character of the answer; ICL.ManyShot is right when any character of the
answer is in the prediction). To score exactly as they do, the spec puts the raw `answer`
in every sample's metadata (`fields.metadata: [answer]`) and the scorer loops over it as
they do; without it, a single reference stands for the answer string and several for a list.

Answers are read as the model wrote them (the authors score the raw generated text).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Any, Callable

from lceval.errors import PackageMissing, UserError
from lceval.types import JudgeInput

from lceval_plugins.judges.metric_base import MetricJudge, metric_options
from lceval_plugins.judges.metrics_choice import infinitebench_choice

from .repoqa import repoqa_pass

TASKS = ("scbench_kv", "scbench_prefix_suffix", "scbench_vt", "scbench_repoqa", "scbench_qa_eng",
         "scbench_qa_chn", "scbench_choice_eng", "scbench_mf", "scbench_many_shot", "scbench_summary",
         "scbench_summary_with_needles", "scbench_repoqa_and_kv", "scbench_passkey")
#: the mixed tasks' turns name their own scorer (compute_scores: `pred["task"]`)
MIXED = {"scbench_summary_with_needles": ("scbench_summary", "scbench_passkey"),
         "scbench_repoqa_and_kv": ("scbench_repoqa", "scbench_kv")}
#: compute_scores.py's threshold of RepoQA's reported number (`["all"][0.8]["pass@1"]`)
REPOQA_THRESHOLD = 0.8

_CN_PUNCTUATION = ("！？｡。＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､、〃》「」『』【】〔〕〖〗〘〙〚〛〜〝〞〟〰〾〿"
                   "–—‘’‛“”„‟…‧﹏.")
_ZH_DROP = set(string.punctuation + _CN_PUNCTUATION)


# -- the authors' scorers (compute_scores.py), one item each; 0-1 -------------------------------

def kv_retrieval(pred: str, label: Any) -> float:
    """`get_score_one_kv_retrieval`: the label is a substring of the prediction (case kept)."""
    return float(label in pred)


def string_match_all(pred: str, ref: Any) -> float:
    """`string_match_all`: the share of the label's items found (case-insensitive), rounded to
    2 places; a string label is looped over by character, as there."""
    return round(sum(1.0 if r.lower() in pred.lower() else 0.0 for r in ref) / len(ref), 2)


def longdialogue_qa_eng(pred: str, label: Any) -> float:
    """`get_score_one_longdialogue_qa_eng`: any item of the label, upper-cased, is in the
    stripped, upper-cased prediction (En.QA's label is [answer]; ICL.ManyShot's the answer
    string itself, so its characters)."""
    pred = pred.strip().upper()
    return float(any(item.upper() in pred for item in label))


def normalize_zh_answer(s: str) -> str:
    """`normalize_zh_answer`: lower case, no ASCII or Chinese punctuation, no white space."""
    return "".join("".join(ch for ch in s.lower() if ch not in _ZH_DROP).split())


def _f1(prediction: list[str], ground_truth: list[str]) -> float:
    common = Counter(prediction) & Counter(ground_truth)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(prediction), same / len(ground_truth)
    return 2 * precision * recall / (precision + recall)


def qa_f1_zh(pred: str, ground_truths: Any) -> float:
    """`qa_f1_score_zh`: the best character F1 over the "ground truths"; a string label is
    looped over by character, as there."""
    best = 0.0
    for truth in ground_truths:
        best = max(best, _f1(list(normalize_zh_answer(pred)), list(normalize_zh_answer(truth))))
    return best


def math_find(pred: str, label: Any) -> float:
    """`get_score_one_math_find`: the first number of the prediction (minus signs ignored),
    `int(float(x))` against an int label, `float(x)` against a float one."""
    if isinstance(label, list):
        label = label[0]
    found = re.search(r"\d+\.\d+|\d+", pred)
    if found is None:
        return 0.0
    value = found.group(0).strip()
    if isinstance(label, bool) or not isinstance(label, (int, float)):
        raise UserError(f"Math.Find's answer must be a number, got {label!r}", field="judge.options.task")
    return float(int(float(value)) == label if isinstance(label, int) else float(value) == label)


def first_int_match(prediction: str) -> str:
    """`first_int_match`: the first run of digits ("" when none)."""
    return next((part for part in re.split("[^0-9]", prediction) if part != ""), "")


def passkey(pred: str, label: Any) -> float:
    """`get_score_one_passkey`: the label equals the prediction's first run of digits."""
    if isinstance(label, list):
        label = label[0]
    return float(label == first_int_match(pred))


_ROUGE: Any = None


def rouge_lsum(pred: str, label: str) -> float:
    """`get_score_one_longbook_sum_eng`: HF evaluate's rouge `rougeLsum` (rouge-score's
    summary-level LCS F-measure, newline-split sentences, no stemmer, its default tokenizer)."""
    global _ROUGE
    if _ROUGE is None:
        try:
            from rouge_score import rouge_scorer
        except ImportError:
            raise PackageMissing("the scbench metric scores summaries with the rouge-score package", field="--judge",
                                 hint="Run: pip install 'lceval[documents]'") from None
        _ROUGE = rouge_scorer.RougeScorer(["rougeLsum"], use_stemmer=False)
    return float(_ROUGE.score(label, pred)["rougeLsum"].fmeasure)


#: compute_scores.py's scorer of each task (`Multiturnbench_to_Infinitebench`, `get_score_one`)
SCORERS: dict[str, Callable[[str, Any], float]] = {
    "scbench_kv": kv_retrieval, "scbench_prefix_suffix": kv_retrieval, "scbench_vt": string_match_all,
    "scbench_qa_eng": longdialogue_qa_eng, "scbench_many_shot": longdialogue_qa_eng, "scbench_qa_chn": qa_f1_zh,
    "scbench_mf": math_find, "scbench_passkey": passkey, "scbench_summary": rouge_lsum,
}


def label_of(task: str, item: JudgeInput, references: list[str]) -> Any:
    """The label `get_ground_truth` hands the scorer: the answer as the data holds it
    (metadata `answer`), [answer] for En.QA; the references when the spec keeps no `answer`."""
    raw = item.metadata.get("answer", references if len(references) > 1 else references[0])
    if task == "scbench_qa_eng":
        return [raw]
    if task == "scbench_mf" and isinstance(raw, str):
        try:
            return int(raw)
        except ValueError:
            return float(raw)
    return raw


class ScbenchJudge(MetricJudge):
    """SCBench's score of one turn, 0-100: the authors' scorer of the spec's `task` (for the
    mixed tasks, of the turn's own `task`); RepoQA is pass@1 at BLEU similarity 0.8 among the
    needles of the turn's repository (`fields.answer_pool`)."""

    name = "scbench"
    AS_WRITTEN = True
    OPTIONS = metric_options({
        "task": {"enum": list(TASKS),
                 "description": "The SCBench task whose scorer to use (compute_scores.py); the mixed tasks route "
                                "each turn by its metadata `task`."},
        "threshold": {"type": "number", "minimum": 0, "maximum": 1, "default": REPOQA_THRESHOLD,
                      "description": "RepoQA: the least BLEU similarity of a retrieved function (the authors "
                                     "report 0.8)."},
    })

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        task = self.options.get("task")
        if task is None:
            raise UserError("the scbench metric needs its task (judge.options.task: scbench_kv, ...)",
                            field="judge.options.task")
        if task in MIXED:
            sub = item.metadata.get("task")
            if sub not in MIXED[task]:
                raise UserError(f"item {item.item_id}: a turn of {task} must say which of {', '.join(MIXED[task])} it "
                                f"is (metadata `task`), got {sub!r}", field="judge.options.task",
                                hint="Keep the turn's task: fields.metadata: [task].")
            task = sub
        if task == "scbench_repoqa":
            ok, details = repoqa_pass(prediction, item, self.options["threshold"])
            return (1.0 if ok else 0.0), {"task": task, **details}
        label = label_of(task, item, references)
        if task == "scbench_choice_eng":
            letter = item.metadata.get("answer_letter")
            ok = infinitebench_choice(prediction, [str(label), str(letter)])
            return (1.0 if ok else 0.0), {"task": task, "correct": letter}
        return SCORERS[task](prediction, label), {"task": task}
