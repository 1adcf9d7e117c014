"""The judges of CREAM (Gong et al., 2024: Comparison-based Reference-free Elo-ranked Automatic
evaluation for Meeting summarization), registered by the entry point
`cream_judges = "lceval_plugins.cream.judges"`.

- `cream` (pairwise, for `lceval rank`): the paper's judge (Sec. 4, 4.1.2). One
  chain-of-thought prompt per ordered pair of summaries: key facts from both summaries
  together, then each fact aligned to each summary's numbered sentences; scores each side's
  completeness and conciseness (the raw pairwise scores of Tables 3-4).
- `keyfacts` (reference-based): the check the paper ranks against (Table 1 "Human Summary",
  Table 5 gold): key facts of the human minutes, then their alignment to one summary
  (FineSurE's two steps). Score = completeness in [0, 1], conciseness in the details.
- `keyfacts-lexical` (offline, no model): the minutes' own lines as key facts, support by
  content-word overlap; a transparent baseline, not the paper's judge.
- `cream-lexical` (pairwise, offline): the `cream` procedure with word overlap for both steps,
  for smoke tests and as a floor; not the paper's judge.

The paper prints no prompt; ours (prompts.py) follow Sec. 4.1.2 and FineSurE's definitions in
our own words. Modules: sentences.py (numbered sentences), prompts.py, parse.py (answer
reading and scores), options.py, pairwise.py, reference.py, lexical_ref.py, lexical_pair.py.
"""

from __future__ import annotations

from lceval import hookimpl

from . import lexical_pair, lexical_ref
from .lexical_pair import CreamLexicalJudge, make_cream_lexical, pair_facts
from .lexical_ref import KeyFactsLexicalJudge, make_keyfacts_lexical, minutes_facts, reference_facts
from .options import OPTIONS
from .pairwise import CreamJudge, make_cream
from .parse import ParseError, parse_alignment, parse_facts, parse_pair
from .reference import KeyFactsJudge, make_keyfacts
from .sentences import number_sentences, split_sentences

__all__ = [
    "CreamJudge", "CreamLexicalJudge", "KeyFactsJudge", "KeyFactsLexicalJudge", "ParseError", "make_cream", "make_keyfacts",
    "make_cream_lexical", "make_keyfacts_lexical", "minutes_facts", "pair_facts", "number_sentences", "parse_alignment", "parse_facts",
    "parse_pair", "reference_facts", "split_sentences",
]


@hookimpl
def register_pairwise_judges(register):
    register("cream", make_cream, options_schema=OPTIONS)
    register("cream-lexical", make_cream_lexical, options_schema=lexical_pair.OPTIONS)


@hookimpl
def register_judges(register):
    register("keyfacts", make_keyfacts, options_schema=OPTIONS)
    register("keyfacts-lexical", make_keyfacts_lexical, options_schema=lexical_ref.OPTIONS)
