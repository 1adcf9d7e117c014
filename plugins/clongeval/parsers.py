"""The answer parsers of CLongEval's stacked tasks: zexuanqiu/CLongEval
post_processing_for_stacked_tasks.py (commit 81ba789), `news_labeling_pattern_match` and
`typo_detection_pattern_match`, step for step - including the second one's handling of answers
split by blank lines, which matches its alternative patterns against the last line of the first
pass only and keeps what both passes found (so an answer in blocks finds at most one typo)."""

from __future__ import annotations

import re

#: "新闻1，类别名：家居", "新闻1，类别名1：时政", "新闻1，教育" / "新闻 1：教育"
NEWS_PATTERNS = [re.compile(r"新闻(\d+)，类别名：(\w+)"), re.compile(r"新闻(\d+)，类别名\d+：(\w+)"),
                 re.compile(r"新闻\s?(\d+)[，：](\w+)")]
TYPO_PATTERNS = [re.compile(r"段落ID：(\d+)[，,]错别字\d+，(\w+)[，,]正确字\d+，(\w+)"),
                 re.compile(r"段落ID：(\d+)[，,]错别字，(\w+)[，,]正确字，(\w+)"),
                 re.compile(r"段落ID：(\d+)[，,]错别字：(\w+)[，,]正确字：(\w+)"),
                 re.compile(r"段落ID：(\d+)[，,]错别字\d+，(\w+)[，,](\w+)"),
                 re.compile(r"段落ID：(\d+)[，,](\w+)[，,](\w+)"),
                 re.compile(r"(\d+)[，,](\w+)[，,](\w+)")]
TYPO_BLOCK_PATTERNS = [re.compile(r"段落ID：(\d+)\n错别字：(\w)\n正确字：(\w)"),
                       re.compile(r"段落ID：(\d+)\n错别字：(\w)，正确字：(\w)")]


def news_labeling_pattern_match(pred_answer: str) -> list[str]:
    """Each line's first pattern match, as "id，label"."""
    out = []
    for line in pred_answer.split("\n"):
        for pattern in NEWS_PATTERNS:
            match = pattern.search(line)
            if match:
                out.append("，".join([match.group(1), match.group(2)]))
                break
    return out


def typo_detection_pattern_match(pred_answer: str) -> list[str]:
    """Each line (cut at a full-width left parenthesis) as "id，typo，correct"; an answer with a
    blank line keeps only what the block patterns also find in the first pass's last line."""
    found = []
    line = ""
    for line in pred_answer.split("\n"):
        paren = line.find("（")
        if paren != -1:
            line = line[:paren]
        for pattern in TYPO_PATTERNS:
            match = pattern.search(line)
            if match:
                found.append("，".join([match.group(1), match.group(2), match.group(3)]))
                break
    if len(pred_answer.split("\n\n")) == 1:
        return found
    alternative = []
    for pattern in TYPO_BLOCK_PATTERNS:
        match = pattern.search(line)  # the authors' `cur_typo`: the last line of the loop above
        if match:
            alternative.append("，".join([match.group(1), match.group(2), match.group(3)]))
            break
    return list(set(found) & set(alternative))
