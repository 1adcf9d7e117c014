"""Chinese words as the benchmarks' metrics cut them: jieba's precise mode with its default
dictionary (`list(jieba.cut(text, cut_all=False))`), as THUDM/LongBench LongBench/metrics.py
(`qa_f1_zh_score`, `rouge_zh_score`) and zexuanqiu/CLongEval metrics.py call it. Scores depend
on jieba's version (its dictionary decides the words): the `chinese` extra pins 0.42.1, the
version the authors' requirements leave unpinned and their numbers were computed with.
"""

from __future__ import annotations

import logging
import string
from typing import Any

from lceval.errors import PackageMissing, UserError

#: THUDM/LongBench LongBench/metrics.py `normalize_zh_answer`'s punctuation (CLongEval's
#: metrics.py copies it): ASCII and Chinese
ZH_PUNCTUATION = frozenset(string.punctuation + "！？｡。＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､、〃》「」"
                           "『』【】〔〕〖〗〘〙〚〛〜〝〞〟〰〾〿–—‘’‛“”„‟…‧﹏.")

_JIEBA: Any = None


def jieba_cut(text: str, field: str = "judge.options") -> list[str]:
    """`list(jieba.cut(text, cut_all=False))`; a UserError naming `field` when jieba is missing."""
    global _JIEBA
    if _JIEBA is None:
        try:
            import jieba
        except ImportError:
            raise PackageMissing("this Chinese metric cuts words with jieba, which is not installed", field=field,
                                 hint="pip install 'lceval[chinese]'") from None
        jieba.setLogLevel(logging.WARNING)  # no "Building prefix dict" on every run
        _JIEBA = jieba
    return list(_JIEBA.cut(text, cut_all=False))


def remove_zh_punctuation(text: str) -> str:
    """The `remove_punc` of LongBench's `normalize_zh_answer` (and CLongEval's metrics)."""
    return "".join(ch for ch in text if ch not in ZH_PUNCTUATION)


def normalize_zh_answer(text: str) -> str:
    """LongBench/metrics.py `normalize_zh_answer`: lower case, punctuation removed, every white
    space removed."""
    return "".join(remove_zh_punctuation(text.lower()).split())


def zh_word_tokens(text: str, field: str = "judge.options") -> list[str]:
    """The tokens of LongBench's `qa_f1_zh_score`: jieba words, each normalised, empty ones dropped."""
    return [t for t in (normalize_zh_answer(w) for w in jieba_cut(text, field)) if len(t) > 0]
