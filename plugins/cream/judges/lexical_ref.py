"""`keyfacts-lexical`: an offline, model-free stand-in for the `keyfacts` reference check.

The human minutes of ELITR-Bench are bullet lists, one point a line, so their lines serve as
key facts directly: no model extracts them. A summary sentence supports a fact when it holds
at least `threshold` (default 0.5) of the fact's content words (lower-cased, stop words
removed, number words as digits, de-identified names such as [PERSON3] kept whole: the
`lexical` judge's `content_words`, plus a light suffix stemming so "prepare", "prepared",
"preparing" meet). Scores and details have the `keyfacts` shape: score = completeness,
details.conciseness = share of the summary's sentences supporting some fact.

This is a cheap, transparent baseline, not the paper's judge: word overlap misses paraphrase
("postponed" vs "moved to a later date"), credits a sentence that reuses the words to say
something else, and a minutes line is not always one fact (some hold two, some are section
headings without a colon, which we cannot tell from a short fact). Use it to smoke-test the
pipeline offline and as a floor to compare the model judges against.

Which lines are facts (checked on every minutes file of ELITR-Bench dev and test2):
- each non-empty line, stripped of its list markers ("-", "--", "*", "•", "–", "1.", "2)",
  "a)", tabs) and of a trailing ":";
- dropped: the file's first line when it is a title (no list marker, at most 12 words:
  "[PROJECT5] Remote Meeting", "Test session 20200506-1100"); header lines whose label is
  metadata or a heading ("Date:", "Attendees:", "Purpose of meeting:", "Agenda:", "Minutes
  submitted by:", "Summary of meeting:" ... see HEADER_LABELS) whatever follows the colon;
  lines that end with ":" (they introduce the points below them: "Status of plan A
  [PERSON1]:", "Advantages:"); annotator comments starting with "#" ("#LB it is rather ...");
  lines with fewer than 2 content words once dates, times and numbers are set aside
  ("Thur, the 6th of June 2020", "40 min", "In front of 423");
- minutes of several annotators (joined by a "---" line) all give facts; a fact identical to
  an earlier one (the same set of stemmed content words, so case, punctuation and markers do
  not matter) is kept once.
"""

from __future__ import annotations

import re
from typing import Any

from lceval.errors import UserError
from lceval.interfaces import Judge, JudgeContext
from lceval.types import JudgeInput, Judgment
from lceval_plugins.judges.lexical import content_words
from lceval.options import check_options

from .parse import Side
from .reference import reference_details
from .sentences import split_sentences

VERSION = 1

HEADER_LABELS = frozenset(label.strip() for label in
    """date|date of the meeting|meeting date|time|time and place|place|location|venue|attendees|
    attendance|participants|participants of the meeting|meeting participants|present|
    present at the meeting|absent|apologies|organisation|organization|organisations|
    organizations|meeting name|name of the meeting|meeting topic|topic|meeting title|title|
    purpose|the purpose|purpose of meeting|purpose of the meeting|meeting creator|
    meeting head speaker/moderator|moderator|chair|minutes submitted by|submitted by|
    minutes taken by|agenda|summary|summary of meeting|summary of the meeting|
    main points of discussion|mentioned|there was discussed|it was discussed at the meeting"""
    .replace("\n", "").split("|")
)

_MARKER = re.compile(r"^(?:[-–—*•●○◦▪■►+>·\s]+|\(?\d{1,3}[.)]\s+|\(?[a-zA-Z]\)\s+)")
_PLACEHOLDER = re.compile(r"^(person|organization|organisation|project|location|other|annotator|url)\d*$")
_LABEL = re.compile(r"^([^:]{1,40}):(.*)$")
_DATE_WORDS = frozenset(
    """january february march april may june july august september october november december jan feb
    mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday saturday sunday
    mon tue tues wed thu thur thurs thru fri sat sun am pm min mins minute minutes hour hours h
    today tomorrow yesterday time place""".split()
)
_DATEISH = re.compile(r"^\d+(st|nd|rd|th|h)?$")
SEPARATOR = re.compile(r"^\s*---\s*$", re.M)


def stem(word: str) -> str:
    """A few English suffixes, enough for "prepare/prepared/preparing" to meet."""
    for suffix, keep in (("ing", 4), ("ed", 4), ("es", 4), ("e", 4)):
        if word.endswith(suffix) and len(word) - len(suffix) >= keep:
            return word[: -len(suffix)]
    return word


def fact_words(text: str) -> set[str]:
    return {stem(w) for w in content_words(text)}


def _strip_markers(line: str) -> str:
    previous = None
    line = line.strip()
    while previous != line:
        previous = line
        line = _MARKER.sub("", line, count=1).strip()
    return line


def _is_header(line: str) -> bool:
    match = _LABEL.match(line)
    return bool(match) and match.group(1).strip().lower() in HEADER_LABELS


def _substantial(line: str) -> bool:
    """At least 2 content words besides dates and times, one of them not a de-identified
    name: "[PERSON3], [PERSON10], [PERSON6]" is a speaker heading, not a fact."""
    words = [w for w in content_words(line) if w not in _DATE_WORDS and not _DATEISH.match(w)]
    return len(words) >= 2 and any(not _PLACEHOLDER.match(w) for w in words)


def minutes_facts(minutes: str) -> list[str]:
    """The key facts of one annotator's minutes, in order (see the module docstring)."""
    facts: list[str] = []
    first = True
    for raw in minutes.splitlines():
        if not raw.strip():
            continue
        is_first, first = first, False
        has_marker = bool(_MARKER.match(raw.strip())) or raw[:1] in "\t "
        line = _strip_markers(raw)
        if not line or line.startswith("#"):
            continue
        if is_first and not has_marker and len(line.split()) <= 12 and not line.endswith("."):
            continue  # the title
        if _is_header(line) or line.rstrip().endswith(":") or not _substantial(line):
            continue
        facts.append(line)
    return facts


def reference_facts(reference: str) -> list[str]:
    """Facts of every annotator's minutes (joined by "---" lines), duplicates kept once."""
    seen: set[tuple[str, ...]] = set()
    out: list[str] = []
    for part in SEPARATOR.split(reference):
        for fact in minutes_facts(part):
            key = tuple(sorted(fact_words(fact)))
            if key not in seen:
                seen.add(key)
                out.append(fact)
    return out


def align(facts: list[str], sentences: list[str], threshold: float) -> Side:
    words = [fact_words(s) for s in sentences]
    side = Side(len(sentences))
    for fact in facts:
        need = fact_words(fact)
        lines = [j for j, have in enumerate(words, 1) if need and len(need & have) / len(need) >= threshold]
        side.add(lines)
    return side


class KeyFactsLexicalJudge(Judge):
    name = "keyfacts-lexical"
    scale = (0.0, 1.0)
    uses_model = False

    def __init__(self, threshold: float = 0.5) -> None:
        self.threshold = threshold

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        out = []
        for item in items:
            facts = reference_facts(item.reference)
            if not facts:
                raise UserError(f"sample {item.item_id}: the reference minutes hold no key fact line",
                                field="judge", hint="judge 'keyfacts-lexical' needs human minutes as reference")
            sentences = split_sentences(item.response)
            side = align(facts, sentences, self.threshold)
            details = reference_details(facts, side, len(sentences))
            out.append(Judgment(item_id=item.item_id, judge=self.name, score=side.completeness(),
                                raw=f"completeness={side.completeness():.4f} conciseness={side.conciseness():.4f}",
                                details=details))
        return out

    def identity(self) -> dict[str, Any]:
        return {"judge": self.name, "version": VERSION, "threshold": self.threshold}


#: `threshold` of the lexical CREAM judges.
THRESHOLD = {"type": "number", "exclusiveMinimum": 0, "maximum": 1, "default": 0.5,
             "description": "Share of content words two texts must have in common to match "
                            "(above 0: at 0 every sentence would support every fact)."}
OPTIONS = {"type": "object", "additionalProperties": False, "properties": {"threshold": THRESHOLD}}


def make_keyfacts_lexical(ctx: JudgeContext) -> KeyFactsLexicalJudge:
    options = check_options(OPTIONS, ctx.options, what="judge 'keyfacts-lexical'", field_prefix="judge.options.")
    return KeyFactsLexicalJudge(options["threshold"])
