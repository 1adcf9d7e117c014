"""Text-overlap metrics, each exactly as the benchmark code it cites computes it for one
answer (the task's score is their mean, x 100), with several acceptable answers scored
against the best of them as LongBench's `scorer` and InfiniteBench's `qa_f1_score` do.
"""

from __future__ import annotations

import difflib
import re
import string
import threading
from collections import Counter
from typing import Any

from lceval.errors import PackageMissing, UserError
from lceval.types import JudgeInput

from .chinese_words import jieba_cut, zh_word_tokens
from .metric_base import MetricJudge, metric_options

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def normalize_answer(s: str) -> str:
    """SQuAD v1.1's normalisation, as THUDM/LongBench LongBench/metrics.py `normalize_answer`
    and OpenBMB/InfiniteBench src/compute_scores.py `normalize_answer` copy it: lower case,
    no punctuation, no articles (a, an, the), white space collapsed."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCTUATION)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


#: OpenBMB/InfiniteBench src/compute_scores.py `normalize_zh_answer`'s Chinese punctuation
_ZH_PUNCTUATION = set(string.punctuation + "！？｡。＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､、〃》「」"
                      "『』【】〔〕〖〗〘〙〚〛〜〝〞〟〰〾〿–—‘’‛“”„‟…‧﹏.")


def normalize_zh_answer(s: str) -> str:
    """OpenBMB/InfiniteBench src/compute_scores.py `normalize_zh_answer`: lower case, ASCII and
    Chinese punctuation removed, every white space removed."""
    s = "".join(ch for ch in s.lower() if ch not in _ZH_PUNCTUATION)
    return "".join(s.split())


def token_f1(prediction: list[str], ground_truth: list[str]) -> float:
    """THUDM/LongBench LongBench/metrics.py `f1_score` (InfiniteBench's `f1_score` alike)."""
    common = Counter(prediction) & Counter(ground_truth)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = 1.0 * num_same / len(prediction)
    recall = 1.0 * num_same / len(ground_truth)
    return (2 * precision * recall) / (precision + recall)


def qa_f1_score(prediction: str, ground_truth: str) -> float:
    """THUDM/LongBench LongBench/metrics.py `qa_f1_score`: token F1 after `normalize_answer`."""
    return token_f1(normalize_answer(prediction).split(), normalize_answer(ground_truth).split())


class ExactMatchJudge(MetricJudge):
    """1 when the answer equals one of the references: after SQuAD's normalisation
    (`normalize: squad`, the `normalize_answer` of LongBench/InfiniteBench's metrics, which
    SQuAD v1.1's `exact_match_score` compares), after stripping and lower-casing (`lower`), or
    as is (`none`)."""

    name = "exact_match"
    OPTIONS = metric_options({
        "normalize": {"enum": ["squad", "lower", "none"], "default": "squad",
                      "description": "squad: lower case, no punctuation or articles (SQuAD v1.1); lower: strip "
                                     "and lower case; none: the text as it is."},
    })

    def _norm(self, text: str) -> str:
        mode = self.options["normalize"]
        return normalize_answer(text) if mode == "squad" else text.strip().lower() if mode == "lower" else text

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        pred = self._norm(prediction)
        hit = next((r for r in references if self._norm(r) == pred), None)
        return (1.0 if hit is not None else 0.0), {"matched": hit}


class F1Judge(MetricJudge):
    """Token F1, the best over the references. `normalize: squad` (the default): SQuAD-style
    normalisation and word tokens, THUDM/LongBench LongBench/metrics.py `qa_f1_score` with the
    max over ground truths of LongBench/eval.py `scorer`; OpenBMB/InfiniteBench
    src/compute_scores.py `qa_f1_score` is the same. `normalize: infinitebench_zh`: one token per
    character after `normalize_zh_answer` (InfiniteBench's `qa_f1_score_zh`, longbook_qa_chn).
    `normalize: longbench_zh`: jieba's words, each normalised so, empty ones dropped
    (THUDM/LongBench LongBench/metrics.py `qa_f1_zh_score`, multifieldqa_zh)."""

    name = "f1"
    OPTIONS = metric_options({
        "normalize": {"enum": ["squad", "infinitebench_zh", "longbench_zh"], "default": "squad",
                      "description": "squad: lower case, no punctuation or articles, word tokens; infinitebench_zh: "
                                     "InfiniteBench's Chinese rule, no punctuation or white space, character tokens; "
                                     "longbench_zh: LongBench's qa_f1_zh_score, jieba's words so normalised "
                                     "(pip install 'lceval[chinese]')."},
    })

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        if self.options["normalize"] == "infinitebench_zh":
            pred = list(normalize_zh_answer(prediction))
            scores = [token_f1(pred, list(normalize_zh_answer(r))) for r in references]
        elif self.options["normalize"] == "longbench_zh":
            pred = zh_word_tokens(prediction, "judge.options.normalize")
            scores = [token_f1(pred, zh_word_tokens(r, "judge.options.normalize")) for r in references]
        else:
            scores = [qa_f1_score(prediction, r) for r in references]
        best = max(range(len(scores)), key=lambda i: scores[i])
        return scores[best], {"best_reference": best}


class _RougeThread(threading.Thread):
    """One call of the `rouge` package as LongBench's `rouge_score` makes it, run on a thread of
    its own so that Python's recursion limit bites where it bites in the authors' script: the
    package's `_recon_lcs` recurses once per step of an LCS walk, a long sentence pair raises
    RecursionError, and the authors' bare `except:` scores it 0.0. Under `python eval.py` the
    call runs 3 frames deep (<module>, scorer, rouge_score); here too (the thread's _bootstrap,
    _bootstrap_inner, run), whatever the depth of the judge's caller: identical 990-word texts
    without a full stop score 1, 991 words 0, in both. `extra_frames` deepens the call by the
    frames the authors' caller has more (`rouge_zh_score` calls `rouge_score`: one more).
    """

    def __init__(self, rouge: Any, prediction: str, ground_truth: str, extra_frames: int = 0) -> None:
        super().__init__(name="lceval-rouge", daemon=True)
        self.rouge, self.prediction, self.ground_truth = rouge, prediction, ground_truth
        self.extra_frames = extra_frames
        self.value = 0.0

    def run(self) -> None:
        if self.extra_frames > 0:  # one frame deeper per call, as the authors' wrapper is
            self.extra_frames -= 1
            return self.run()
        try:
            scores = self.rouge.get_scores([self.prediction], [self.ground_truth], avg=True)
        except Exception:  # LongBench/metrics.py `rouge_score`: any exception scores 0.0
            self.value = 0.0
            return
        self.value = scores["rouge-l"]["f"]


def longbench_rouge_score(rouge: Any, prediction: str, ground_truth: str, extra_frames: int = 0) -> float:
    """THUDM/LongBench LongBench/metrics.py `rouge_score`: `Rouge().get_scores([prediction],
    [ground_truth], avg=True)["rouge-l"]["f"]` with the `rouge` package (1.0.1), 0.0 on any
    exception. Its rouge-l splits sentences at "." only, keeps punctuation and case on words,
    and counts DISTINCT words (sets) in a union LCS shared across the reference's sentences."""
    worker = _RougeThread(rouge, prediction, ground_truth, extra_frames)
    worker.start()
    worker.join()
    return worker.value


class RougeLJudge(MetricJudge):
    """ROUGE-L F-measure, the best over the references, computed by one of two packages.

    `implementation: rouge` is THUDM/LongBench LongBench/metrics.py `rouge_score` (gov_report,
    qmsum, multi_news, samsum): the `rouge` package (1.0.1) called exactly as there, on the
    answer as written (a trailing space after the last full stop is a sentence of its own
    there). `implementation: rouge-score` is Google's `rouge-score` package: `variant:
    rougeLsum` (newline-split summary-level LCS) with `use_stemmer: false` is
    OpenBMB/InfiniteBench src/compute_scores.py `get_score_one_longbook_sum_eng` (HF
    `evaluate`'s rouge, which calls rouge-score with these defaults). The two differ a lot on
    the same texts (sentence order, punctuation, case, repeated words): docs/tasks/longbench.md
    gives the numbers. `tokenize: jieba` first cuts both texts into jieba's words joined by
    spaces: LongBench/metrics.py `rouge_zh_score` (dureader, vcsum)."""

    name = "rouge_l"
    OPTIONS = metric_options({
        "implementation": {"enum": ["rouge-score", "rouge"], "default": "rouge-score",
                           "description": "rouge-score: Google's package (InfiniteBench, through HF evaluate); "
                                          "rouge: the `rouge` package's rouge-l f as LongBench's metrics.py calls it."},
        "variant": {"enum": ["rougeL", "rougeLsum"], "default": "rougeL",
                    "description": "rouge-score only. rougeL: one LCS over the whole text; rougeLsum: summary-level, "
                                   "sentences split at newlines (InfiniteBench's summaries)."},
        "use_stemmer": {"type": "boolean", "default": False,
                        "description": "rouge-score only: Porter-stem words before matching."},
        "tokenize": {"enum": ["none", "jieba"], "default": "none",
                     "description": "rouge only. jieba: both texts cut into jieba's words joined by spaces first "
                                    "(LongBench's rouge_zh_score; pip install 'lceval[chinese]'); none: as written."},
    })

    def __init__(self, options: Any) -> None:
        super().__init__(options)
        if self.options["implementation"] == "rouge":
            if self.options["variant"] != "rougeL" or self.options["use_stemmer"]:
                raise UserError("variant and use_stemmer are options of the rouge-score implementation; the `rouge` "
                                "package's rouge-l has neither", field="judge.options.implementation",
                                hint="Leave variant and use_stemmer out with implementation: rouge.")
            try:
                from rouge import Rouge
            except ImportError:
                raise PackageMissing("the rouge_l judge with implementation: rouge needs the rouge package",
                                     field="judge.options.implementation",
                                     hint="pip install 'lceval[documents]'") from None
            self._rouge = Rouge()
            return
        if self.options["tokenize"] != "none":
            raise UserError(f"tokenize: {self.options['tokenize']} is an option of the rouge implementation "
                            "(LongBench's rouge_zh_score), not of rouge-score",
                            field="judge.options.tokenize", hint="Add implementation: rouge.")
        try:
            from rouge_score import rouge_scorer
        except ImportError:
            raise PackageMissing("the rouge_l judge needs the rouge-score package", field="--judge",
                                 hint="pip install 'lceval[documents]'") from None
        self._scorer = rouge_scorer.RougeScorer([self.options["variant"]], use_stemmer=self.options["use_stemmer"])

    def reads_as_written(self) -> bool:
        return self.options["implementation"] == "rouge"

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        if self.options["implementation"] == "rouge" and self.options["tokenize"] == "jieba":
            # rouge_zh_score: " ".join(jieba.cut(...)) of both, then rouge_score, one frame deeper
            words = " ".join(jieba_cut(prediction, "judge.options.tokenize"))
            scores = [longbench_rouge_score(self._rouge, words, " ".join(jieba_cut(r, "judge.options.tokenize")),
                                            extra_frames=1) for r in references]
        elif self.options["implementation"] == "rouge":
            scores = [longbench_rouge_score(self._rouge, prediction, r) for r in references]
        else:
            variant = self.options["variant"]
            scores = [self._scorer.score(r, prediction)[variant].fmeasure for r in references]
        best = max(range(len(scores)), key=lambda i: scores[i])
        return scores[best], {"best_reference": best}


def levenshtein(s1: str, s2: str) -> int:
    """The two-row edit distance NeedleBench's evaluators and CLongEval's metrics.py write out
    (the same function in both)."""
    if len(s1) < len(s2):
        s1, s2 = s2, s1
    if not s2:
        return len(s1)
    previous = list(range(len(s2) + 1))
    for i, c1 in enumerate(s1):
        current = [i + 1]
        for j, c2 in enumerate(s2):
            current.append(min(previous[j + 1] + 1, current[j] + 1, previous[j] + (c1 != c2)))
        previous = current
    return previous[-1]


def fuzz_ratio(s1: str, s2: str) -> int:
    """`fuzzywuzzy.fuzz.ratio` as LongBench installs it (fuzzywuzzy without
    python-Levenshtein: difflib's SequenceMatcher): equal texts 100, an empty one 0, else
    round(100 x ratio)."""
    if s1 == s2:
        return 100
    if not s1 or not s2:
        return 0
    return int(round(100 * difflib.SequenceMatcher(None, s1, s2).ratio()))


def code_sim_score(prediction: str, ground_truth: str) -> float:
    """THUDM/LongBench LongBench/metrics.py `code_sim_score`: the first answer line that is no
    comment or code fence, compared with the reference line by fuzzy ratio."""
    all_lines = prediction.lstrip("\n").split("\n")
    prediction = ""
    for line in all_lines:
        if ("`" not in line) and ("#" not in line) and ("//" not in line):
            prediction = line
            break
    return fuzz_ratio(prediction, ground_truth) / 100


class CodeSimJudge(MetricJudge):
    """LongBench's code completion score (lcc, repobench-p): THUDM/LongBench
    LongBench/metrics.py `code_sim_score`, the best over the references."""

    name = "code_sim"
    OPTIONS = metric_options()
    #: LongBench scores the raw prediction: leading indentation counts, leading newlines are skipped
    AS_WRITTEN = True

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        return max(code_sim_score(prediction, r) for r in references), {}


def classification_score(prediction: str, ground_truth: str, all_classes: list[str]) -> float:
    """THUDM/LongBench LongBench/metrics.py `classification_score`, line for line (its
    removal from the list it iterates included, which skips the element after a removed one)."""
    em_match_list = []
    for class_name in all_classes:
        if class_name in prediction:
            em_match_list.append(class_name)
    for match_term in em_match_list:
        if match_term in ground_truth and match_term != ground_truth:
            em_match_list.remove(match_term)
    if ground_truth in em_match_list:
        return 1.0 / len(em_match_list)
    return 0.0


class ClassificationJudge(MetricJudge):
    """LongBench's few-shot classification score (trec): the classes named in the answer;
    1/k when the right one is among k named. The classes are a metadata field of the item
    (`classes_field`, LongBench's `all_classes`)."""

    name = "classification"
    OPTIONS = metric_options({
        "classes_field": {"type": "string", "minLength": 1, "default": "all_classes",
                          "description": "The metadata field holding the list of class names."},
    })

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        classes = item.metadata.get(self.options["classes_field"])
        if not isinstance(classes, (list, tuple)) or not classes:
            raise UserError(f"item {item.item_id} has no list of classes in its metadata field "
                            f"'{self.options['classes_field']}'", field="judge.options.classes_field",
                            hint="Copy the classes into the metadata (documents: fields.metadata).")
        named = [c for c in classes if c in prediction]
        return max(classification_score(prediction, r, [str(c) for c in classes]) for r in references), \
            {"named": named}
