"""CLongEval's metrics (Qiu et al., 2024): zexuanqiu/CLongEval metrics.py and eval.py (commit
81ba789), function for function; the judge's `metric` option names the function eval.py's
dataset2metric gives the task:

- `qa_f1_zh_score` (long_story_qa, long_conversation_memory): the answer stripped, its first
  line, cut before "问题：" (models that go on asking themselves questions), then token F1 over
  jieba's words, each lower-cased and stripped of punctuation and white space, empty ones dropped;
- `rouge_zh_score` (long_story_summarization): an empty answer 0, else both texts cut into
  jieba's words joined by spaces and the `rouge` package's rouge-l f (punctuation stays: it is a
  word there), under eval.py's recursion limit of 10,000;
- `news_labeling_zh_score` (stacked_news_labeling): the (news, label) pairs the answer's lines
  match, the share of the reference's pairs (`新闻 N：label` per line) among them;
- `typo_detection_zh_score` (stacked_typo_detection): the (paragraph, typo) pairs parsed from the
  answer, the share of the reference's lines among them;
- `retrieval_zh_edit_score` (key_passage_retrieval): the answer cut before "键：", punctuation
  removed from both, 1 - Levenshtein distance / the longer length, over characters;
- `table_querying_match_score` (table_querying): 1 when the reference, punctuation removed, is a
  substring of the answer, punctuation removed.

The typo reference: the Hub rows hold `id，correct，typo` per line, and eval.py rewrites the
reference for every model but gpt4-turbo-128k (whose prediction files hold the references in
`id，typo，correct` order) with `split("，")` of the whole multi-line text, keeping
"parts[0]，parts[2]，parts[0]": the first line becomes (id, typo) and the rest of the lines are
lost, so the denominator is 2 and a right answer scores 0.5 at most. That is how the README's
numbers of every model but GPT-4 Turbo were computed, and the default here (`typo_reference:
eval_py`); `typo_reference: every_line` rewrites each line to (id, typo), the evident intent.

The answer is read as the model wrote it (the authors store the decoded text unstripped; the
F1 strips it itself).
"""

from __future__ import annotations

import re
import sys
from typing import Any, Callable

from lceval.errors import PackageMissing, UserError
from lceval.types import JudgeInput

from lceval_plugins.judges.chinese_words import jieba_cut, remove_zh_punctuation, zh_word_tokens
from lceval_plugins.judges.metric_base import MetricJudge, metric_options
from lceval_plugins.judges.metrics_text import levenshtein, token_f1

from .parsers import news_labeling_pattern_match, typo_detection_pattern_match

_FIELD = "judge.options.metric"
#: eval.py: sys.setrecursionlimit(10000) - the rouge package's LCS recurses once per word
RECURSION_LIMIT = 10000
_NEWS_REFERENCE = re.compile(r"新闻\s(\d+)[：](\w+)")
_ROUGE: Any = None


def qa_f1_zh_score(prediction: str, ground_truth: str) -> float:
    prediction = prediction.strip()
    if "\n" in prediction:
        prediction = prediction.split("\n")[0]
    if "问题：" in prediction:
        prediction = prediction[:prediction.find("问题：")]
    return token_f1(zh_word_tokens(prediction, _FIELD), zh_word_tokens(ground_truth, _FIELD))


def rouge_zh_score(prediction: str, ground_truth: str) -> float:
    """An empty answer 0; the authors' script stops on any other exception of the rouge package
    (an answer of punctuation the package cannot split): 0 here."""
    global _ROUGE
    if prediction == "":
        return 0.0
    if _ROUGE is None:
        try:
            from rouge import Rouge
        except ImportError:
            raise PackageMissing("CLongEval's summaries are scored with the rouge package, which is not installed",
                                 field=_FIELD, hint="pip install 'lceval[documents]'") from None
        _ROUGE = Rouge()
    prediction = " ".join(jieba_cut(prediction, _FIELD))
    ground_truth = " ".join(jieba_cut(ground_truth, _FIELD))
    # eval.py's own setting (process-wide in its process); here for this call only, so that
    # LongBench's ROUGE, in the same process, keeps Python's default as its authors' script has it
    before = sys.getrecursionlimit()
    if before < RECURSION_LIMIT:
        sys.setrecursionlimit(RECURSION_LIMIT)
    try:
        return float(_ROUGE.get_scores(prediction, ground_truth)[0]["rouge-l"]["f"])
    except (ValueError, RecursionError):
        return 0.0
    finally:
        sys.setrecursionlimit(before)


def news_labeling_zh_score(prediction: str, ground_truth: str) -> float:
    predicted = news_labeling_pattern_match(prediction.strip())
    if not predicted:
        return 0.0
    reference = []
    for line in ground_truth.split("\n"):
        match = _NEWS_REFERENCE.search(line)
        if match is None:  # the authors' script raises AttributeError here
            raise UserError(f"a stacked_news_labeling reference line is not '新闻 N：label': {line!r}", field=_FIELD)
        reference.append("，".join([match.group(1), match.group(2)]))
    same = len(set(predicted) & set(reference))
    return 0.0 if same == 0 else same / len(reference)


def typo_detection_zh_score(prediction: str, ground_truth: str) -> float:
    predicted = typo_detection_pattern_match(prediction.strip())
    if not predicted:
        return 0.0
    predicted = ["".join(p.split("，")[0:2]) for p in predicted]
    reference = ["".join(line.split("，")[0:2]) for line in ground_truth.strip().split("\n")]
    same = len(set(predicted) & set(reference))
    return 0.0 if same == 0 else same / len(reference)


def retrieval_zh_edit_score(prediction: str, ground_truth: str) -> float:
    """Two texts empty after punctuation removal divide by zero there; equal, they score 1 here."""
    if "键：" in prediction:
        prediction = prediction[:prediction.find("键：")]
    prediction, ground_truth = remove_zh_punctuation(prediction), remove_zh_punctuation(ground_truth)
    longest = max(len(prediction), len(ground_truth))
    if longest == 0:
        return 1.0
    return 1.0 - float(levenshtein(prediction, ground_truth)) / longest


def table_querying_match_score(prediction: str, ground_truth: str) -> float:
    return 1.0 if remove_zh_punctuation(str(ground_truth)) in remove_zh_punctuation(prediction) else 0.0


METRICS: dict[str, Callable[[str, str], float]] = {
    "qa_f1_zh_score": qa_f1_zh_score, "rouge_zh_score": rouge_zh_score,
    "news_labeling_zh_score": news_labeling_zh_score, "typo_detection_zh_score": typo_detection_zh_score,
    "retrieval_zh_edit_score": retrieval_zh_edit_score, "table_querying_match_score": table_querying_match_score,
}


def eval_py_typo_reference(answer: str) -> str:
    """eval.py's rewrite of a typo reference (every model but gpt4-turbo-128k)."""
    parts = answer.split("，")
    if len(parts) < 3:  # the authors' script raises IndexError here
        raise UserError(f"a stacked_typo_detection reference is not 'id，correct，typo' lines: {answer!r}",
                        field="judge.options.typo_reference")
    return "，".join([parts[0], parts[2], parts[0]])


def every_line_typo_reference(answer: str) -> str:
    """Each `id，correct，typo` line as `id，typo`."""
    lines = []
    for line in answer.strip().split("\n"):
        parts = line.split("，")
        if len(parts) < 3:
            raise UserError(f"a stacked_typo_detection reference line is not 'id，correct，typo': {line!r}",
                            field="judge.options.typo_reference")
        lines.append("，".join([parts[0], parts[2]]))
    return "\n".join(lines)


class CLongEvalJudge(MetricJudge):
    """One of CLongEval's metrics (`metric`: the function of the authors' metrics.py)."""

    name = "clongeval"
    version = 1
    AS_WRITTEN = True
    OPTIONS = metric_options({
        "metric": {"enum": sorted(METRICS),
                   "description": "The function of CLongEval's metrics.py that eval.py gives the task: "
                                  "qa_f1_zh_score (long_story_qa, long_conversation_memory), rouge_zh_score "
                                  "(long_story_summarization), news_labeling_zh_score, typo_detection_zh_score, "
                                  "retrieval_zh_edit_score (key_passage_retrieval), table_querying_match_score."},
        "typo_reference": {"enum": ["eval_py", "every_line", "as_is"], "default": "eval_py",
                           "description": "typo_detection_zh_score's reference: eval_py, eval.py's rewrite for every "
                                          "model but GPT-4 Turbo (the first line's id and typo, the rest lost); "
                                          "every_line: each line's id and typo; as_is: the reference unchanged "
                                          "(references already in id，typo，correct order)."},
    })
    OPTIONS["required"] = ["metric"]

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        function = METRICS[self.options["metric"]]
        if function is typo_detection_zh_score:
            rewrite = {"eval_py": eval_py_typo_reference, "every_line": every_line_typo_reference,
                       "as_is": lambda a: a}[self.options["typo_reference"]]
            references = [rewrite(r) for r in references]
        scores = [function(prediction, r) for r in references]
        best = max(range(len(scores)), key=lambda i: scores[i])
        return scores[best], {"best_reference": best}
