"""LV-Eval's metrics (Yuan et al., 2024): token F1 gated by the recall of the answer's keywords,
with the authors' word blacklists, and the blacklisted Chinese ROUGE-L of dureader_mixup.

Follows infinigence/LVEval (commit 63e7ae9; metrics.py, config.py and evaluation.py unchanged
since 25aebcb, "v0.1"), function for function; the judge's `metric` option names the function
of metrics.py that config.py's DATASET_METRIC gives the dataset:

- `qa_f1_score_with_gold_ans` (English keyword datasets: hotpotwikiqa, loogle_SD/CR/MIR,
  multifieldqa_en): SQuAD normalisation and word tokens; when the row has answer keywords,
  the share of keyword tokens found in the answer - blacklisted words (ABANDON_WORDS_EN) left
  out of the matches but not of the count - must reach 0.2, else the score is 0; then plain
  token F1 against the answer (the blacklist plays no part in the F1, whatever the README says);
- `qa_f1_zh_score_with_gold_ans` (cmrc, lic, multifieldqa_zh): jieba words, each lower-cased
  and stripped of punctuation and white space, empty ones dropped; the keywords are the answer
  itself when the row has none; the gate is 0.4 with ABANDON_WORDS_ZH;
- `qa_f1_score`, `qa_f1_zh_score` (factrecall_en, factrecall_zh): the same F1s, no gate;
- `rouge_zh_score_blacklist` (dureader_mixup): jieba words joined by spaces, cut again,
  normalised, blacklisted words dropped (empty ones kept), joined, and the `rouge` package's
  rouge-l f of that, 0 on any exception (an empty answer).

evaluation.py's `scorer` reads the first reference only (`for ground_truth in ground_truths:
... break`), so this judge's `references` option defaults to `first`. The keywords are the
row's `answer_keywords` (prediction.py saves them as `gold_ans`), read from the sample's
metadata (`keywords_field`). The answer is read as the model wrote it (prediction.py keeps the
decoded text unstripped; only the ROUGE of dureader can tell the difference).
"""

from __future__ import annotations

import logging
import re
import string
from collections import Counter
from typing import Any, Callable

from lceval.errors import PackageMissing, UserError
from lceval.types import JudgeInput

from lceval_plugins.judges.metric_base import REFERENCES, MetricJudge, metric_options
from lceval_plugins.judges.metrics_text import longbench_rouge_score, token_f1

#: infinigence/LVEval metrics.py ABANDON_WORDS_EN, verbatim
ABANDON_WORDS_EN = frozenset([
    'and', 'to', 'of', 'in', 'her', 'was', 'with', 'for', 'it', 'from', 'is', 'that', 'his', 'he', 'by', 'she',
    'they', 'or', 'at', 'because', 'be', 'on', 'are', 'their', 'what', 'as', 'had', 'were', 'about', 'being',
    'this', 'who', 'but', 'have', 'has', 'when', 'which', 'does'])
#: infinigence/LVEval metrics.py ABANDON_WORDS_ZH, verbatim
ABANDON_WORDS_ZH = frozenset([
    '的', '和', '是', '等', '在', '年', '可以', '为', '与', '‰', '了', '或', '一种', '月', 'c', '至', '日', '有', '进行',
    '于', '不', '中', '×', '根据', '小', '由', '亩', '也', '要', '指', '法', '会', '元', '主要', '以及', '通过', '首先', '对',
    '然后', '号', '以', '所', '后', '丁', '包括', '无', '将', '用', '能', '形', '方面', '因素', '位于', '而', '从', '到',
    '一定', '用于', '但', '使用', '让', '具有', '并', '亿元', '万元', '上', '类', '基于', '才', '来', '地', '片', '其他', '个',
    '或者', '变得', '时', '给', '你', '使', '条', '受', '已经', '带', '度'])

#: metrics.py `normalize_zh_answer`'s punctuation: ASCII and Chinese
_ZH_PUNCTUATION = set(string.punctuation + "！？｡。＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､、〃》「」"
                      "『』【】〔〕〖〗〘〙〚〛〜〝〞〟〰〾〿–—‘’‛“”„‟…‧﹏.")
_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(s: str) -> str:
    """metrics.py `normalize_answer`: lower case, punctuation removed, then articles, then white
    space collapsed (LongBench's order)."""
    s = "".join(ch for ch in s.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", s).split())


def normalize_zh_answer(s: str) -> str:
    """metrics.py `normalize_zh_answer`: lower case, ASCII and Chinese punctuation removed, every
    white space removed."""
    return "".join("".join(ch for ch in s.lower() if ch not in _ZH_PUNCTUATION).split())


_JIEBA: Any = None


def jieba_cut(text: str) -> list[str]:
    """`list(jieba.cut(text, cut_all=False))` (jieba 0.42.1, its default dictionary)."""
    global _JIEBA
    if _JIEBA is None:
        try:
            import jieba
        except ImportError:
            raise PackageMissing("LV-Eval's Chinese metrics cut words with jieba, which is not installed",
                                 field="judge.options.metric", hint="pip install 'lceval[chinese]'") from None
        jieba.setLogLevel(logging.WARNING)  # no "Building prefix dict" on every run
        _JIEBA = jieba
    return list(_JIEBA.cut(text, cut_all=False))


def _zh_tokens(text: str) -> list[str]:
    return [t for t in (normalize_zh_answer(w) for w in jieba_cut(text)) if len(t) > 0]


def _keyword_recall(prediction_tokens: list[str], keyword_tokens: list[str], blacklist: frozenset[str]) -> float:
    """The gate of the `*_with_gold_ans` functions: blacklisted words leave the matches only."""
    common = Counter(prediction_tokens) & Counter(keyword_tokens)
    num_same = sum(v for k, v in common.items() if k not in blacklist)
    return 1.0 * num_same / len(keyword_tokens)


def qa_f1_score(prediction: str, ground_truth: str, gold_ans: str | None = None) -> float:
    """metrics.py `qa_f1_score`."""
    return token_f1(normalize_answer(prediction).split(), normalize_answer(ground_truth).split())


def qa_f1_score_with_gold_ans(prediction: str, ground_truth: str, gold_ans: str | None = None) -> float:
    """metrics.py `qa_f1_score_with_gold_ans`: the English keyword gate (0.2), then F1."""
    prediction_tokens = normalize_answer(prediction).split()
    ground_truth_tokens = normalize_answer(ground_truth).split()
    if gold_ans:
        gold_ans_tokens = normalize_answer(gold_ans).split()
        # the authors divide by the keyword tokens with no guard: keywords of punctuation only
        # would raise there; here they find nothing
        if not gold_ans_tokens or _keyword_recall(prediction_tokens, gold_ans_tokens, ABANDON_WORDS_EN) < 0.2:
            return 0.0
    return token_f1(prediction_tokens, ground_truth_tokens)


def qa_f1_zh_score(prediction: str, ground_truth: str, gold_ans: str | None = None) -> float:
    """metrics.py `qa_f1_zh_score`."""
    return token_f1(_zh_tokens(prediction), _zh_tokens(ground_truth))


def qa_f1_zh_score_with_gold_ans(prediction: str, ground_truth: str, gold_ans: str | None = None) -> float:
    """metrics.py `qa_f1_zh_score_with_gold_ans`: the Chinese keyword gate (0.4; the answer is
    the keywords of a row without them), then F1."""
    prediction_tokens = _zh_tokens(prediction)
    ground_truth_tokens = _zh_tokens(ground_truth)
    if not gold_ans:
        gold_ans = ground_truth
    if gold_ans:
        gold_ans_tokens = _zh_tokens(gold_ans)
        if not gold_ans_tokens or _keyword_recall(prediction_tokens, gold_ans_tokens, ABANDON_WORDS_ZH) < 0.4:
            return 0.0
    return token_f1(prediction_tokens, ground_truth_tokens)


_ROUGE: Any = None


def rouge_zh_score_blacklist(prediction: str, ground_truth: str, gold_ans: str | None = None) -> float:
    """metrics.py `rouge_zh_score_blacklist`: cut, joined with spaces, cut again, normalised,
    blacklisted words dropped (empty words kept), joined, then `rouge_score` (the `rouge`
    package's rouge-l f, 0.0 on any exception)."""
    global _ROUGE
    if _ROUGE is None:
        try:
            from rouge import Rouge
        except ImportError:
            raise PackageMissing("LV-Eval's dureader_mixup metric needs the rouge package",
                                 field="judge.options.metric", hint="pip install 'lceval[documents]'") from None
        _ROUGE = Rouge()
    prediction = " ".join(jieba_cut(prediction))
    ground_truth = " ".join(jieba_cut(ground_truth))
    prediction_tokens = [normalize_zh_answer(t) for t in jieba_cut(prediction)]
    ground_truth_tokens = [normalize_zh_answer(t) for t in jieba_cut(ground_truth)]
    prediction = " ".join(t for t in prediction_tokens if t not in ABANDON_WORDS_ZH)
    ground_truth = " ".join(t for t in ground_truth_tokens if t not in ABANDON_WORDS_ZH)
    return longbench_rouge_score(_ROUGE, prediction, ground_truth)


#: config.py DATASET_METRIC's functions, by name
METRICS: dict[str, Callable[[str, str, str | None], float]] = {
    "qa_f1_score_with_gold_ans": qa_f1_score_with_gold_ans,
    "qa_f1_zh_score_with_gold_ans": qa_f1_zh_score_with_gold_ans,
    "qa_f1_score": qa_f1_score,
    "qa_f1_zh_score": qa_f1_zh_score,
    "rouge_zh_score_blacklist": rouge_zh_score_blacklist,
}


class LVEvalJudge(MetricJudge):
    """One of LV-Eval's metrics (`metric`: the name of the function in the authors' metrics.py),
    on the first reference, with the row's answer keywords from the metadata."""

    name = "lveval"
    version = 1
    AS_WRITTEN = True
    OPTIONS = metric_options({
        "metric": {"enum": sorted(METRICS),
                   "description": "The function of LV-Eval's metrics.py that config.py's DATASET_METRIC gives the "
                                  "dataset: qa_f1_score_with_gold_ans (English keyword datasets), "
                                  "qa_f1_zh_score_with_gold_ans (cmrc, lic, multifieldqa_zh), qa_f1_score / "
                                  "qa_f1_zh_score (factrecall), rouge_zh_score_blacklist (dureader)."},
        "keywords_field": {"type": "string", "minLength": 1, "default": "answer_keywords",
                           "description": "The metadata field holding the row's answer keywords (LV-Eval's "
                                          "answer_keywords, saved as gold_ans); absent or empty: none."},
    })
    OPTIONS["required"] = ["metric"]
    OPTIONS["properties"]["references"] = {**REFERENCES, "default": "first",
                                           "description": "first (default): the first reference only, as "
                                                          "LV-Eval's scorer (`break` after one); best: the best."}

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        keywords = item.metadata.get(self.options["keywords_field"])
        if keywords is not None and not isinstance(keywords, str):
            raise UserError(f"item {item.item_id}: the answer keywords ({self.options['keywords_field']}) must be "
                            f"text, got {keywords!r}", field="judge.options.keywords_field")
        function = METRICS[self.options["metric"]]
        scores = [function(prediction, r, keywords) for r in references]
        best = max(range(len(scores)), key=lambda i: scores[i])
        return scores[best], {"reference": best, "keywords": keywords or None}
