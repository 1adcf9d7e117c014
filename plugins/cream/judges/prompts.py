"""The prompts of the CREAM judges (Gong et al., 2024, Sec. 4.1.2), in our own words.

The paper prints no prompt. What it fixes, and these follow:
- Sec. 4 / Fig. 1: the key facts are extracted from the two summaries *concatenated*, and
  must be concise and non-redundant; then each summary's support of each fact is checked by
  identifying the supporting summary sentences by their line numbers (Sec. 4.1.2, steps 1-2);
- Sec. 4.1.2 "Chain-of-Thought Reasoning": a reasoning step comes before the answer;
- Sec. 4.1.2 "One-Shot Learning": one worked example, from *another* domain (out-of-domain
  examples beat in-domain ones, the paper reports); ours are a football match and a product
  launch. (The same section opens with "CoT zero-shot prompting", then reports the one-shot
  experiment; we take the one-shot variant, the one it recommends.)
- Sec. 4.1.2 "Maximum Number of Key Facts": a cap K on the facts (16 or 30 in the paper);
- Sec. 3.1 footnote 1 (after FineSurE, ref. [10], and REALSumm, ref. [16]): a key fact is a
  concise sentence conveying a single key information with at most 2-3 entities.
The layout follows FineSurE (ref. [10], "precedent literature"): summary sentences numbered
"[1] ...", the answer a JSON list with one object per key fact.

The reference check (`keyfacts`, the "Human Summary" column of Table 1 and the gold ranking of
Table 5) uses FineSurE's two separate steps: key facts from the reference minutes alone
(identical for every system, so the request cache asks it once per meeting), then their
alignment to one summary's sentences.

Every template is a constant: its sha256 is part of the judge's identity and pinned in a test,
so a change of wording is always deliberate. Slots are filled in one pass (`fill`), so a
summary that itself contains "{summary_b}" is never expanded.
"""

from __future__ import annotations

import json
import re

from .sentences import number_sentences, split_sentences

#: Where the JSON answer starts; the reasoning comes before it.
ANSWER_MARKER = "ANSWER:"
REASONING_MARKER = "REASONING:"

KEY_FACT_DEFINITION = (
    "A key fact is a short, self-contained sentence that states one single piece of key "
    "information and names at most two or three entities (people, organisations, places, dates, "
    "numbers or things)."
)

# -- the one-shot example of the pairwise prompt: a football match ---------------------------

EXAMPLE_SUMMARY_A = (
    "Riverside FC beat Northgate United 2-1 on Saturday. Maya Lind scored both goals for Riverside.\n"
    "The weather was cold and windy."
)
EXAMPLE_SUMMARY_B = (
    "- Northgate United lost 2-1 at home to Riverside FC.\n"
    "- Northgate's only goal came from a penalty by Tom Ruiz.\n"
    "- Riverside's coach praised the defence after the match."
)
EXAMPLE_PAIR_REASONING = (
    "Both summaries give the result, Riverside FC 2, Northgate United 1: one key fact, supported "
    "by A [1] and B [1]. Only Summary A gives the day of the match (A [1]) and says that Maya Lind "
    "scored both Riverside goals (A [2]). Only Summary B says the match was played at Northgate's "
    "ground (B [1]), that Tom Ruiz scored Northgate's goal from a penalty (B [2]) and that the "
    "Riverside coach praised the defence (B [3]). The weather (A [3]) is an incidental remark, not "
    "a key fact of the match. That gives six key facts, within the limit."
)
EXAMPLE_PAIR_ANSWER: list[dict[str, object]] = [
    {"key fact": "Riverside FC beat Northgate United 2-1.", "summary A lines": [1], "summary B lines": [1]},
    {"key fact": "The match was played on Saturday.", "summary A lines": [1], "summary B lines": []},
    {"key fact": "The match was played at Northgate United's home ground.", "summary A lines": [],
     "summary B lines": [1]},
    {"key fact": "Maya Lind scored both goals of Riverside FC.", "summary A lines": [2], "summary B lines": []},
    {"key fact": "Tom Ruiz scored Northgate United's goal from a penalty.", "summary A lines": [],
     "summary B lines": [2]},
    {"key fact": "Riverside FC's coach praised the defence after the match.", "summary A lines": [],
     "summary B lines": [3]},
]


def _json(value: object) -> str:
    """One object per line: the layout we ask the judge for, easy to read back."""
    if isinstance(value, list):
        return "[\n" + ",\n".join("  " + json.dumps(v, ensure_ascii=False) for v in value) + "\n]"
    return json.dumps(value, ensure_ascii=False)


CREAM_TEMPLATE = (
    "You will compare two summaries of the same meeting by the key facts they contain.\n\n"
    + KEY_FACT_DEFINITION + "\n\n"
    "The sentences of each summary are numbered [1], [2], ... Work in two steps.\n\n"
    "Step 1 - Key fact extraction. Read Summary A and Summary B together, as one text, and break "
    "it down into at most {max_key_facts} key facts. The facts must not repeat one another: when "
    "both summaries state the same information, list it once. If there is more information than "
    "the limit allows, keep the most important facts.\n\n"
    "Step 2 - Key fact alignment. Compare each key fact with the sentences of Summary A, then with "
    "the sentences of Summary B. For each summary, decide whether it supports the fact (states it "
    "or clearly implies it) and, if it does, note the numbers of the sentences that support it. A "
    "summary that does not support the fact gets an empty list.\n\n"
    "First write \"" + REASONING_MARKER + "\" and think the facts through one by one. Then write \""
    + ANSWER_MARKER + "\" on its own line, followed by a JSON list with one object per key fact and "
    "exactly these keys:\n"
    "- \"key fact\": the key fact, as a string;\n"
    "- \"summary A lines\": the numbers of the sentences of Summary A that support it (a list of "
    "integers, empty if none);\n"
    "- \"summary B lines\": the same for Summary B.\n"
    "Write nothing after the JSON list.\n\n"
    "Here is a worked example on a different subject.\n\n"
    "### Example summary A\n" + number_sentences(split_sentences(EXAMPLE_SUMMARY_A)) + "\n\n"
    "### Example summary B\n" + number_sentences(split_sentences(EXAMPLE_SUMMARY_B)) + "\n\n"
    + REASONING_MARKER + "\n" + EXAMPLE_PAIR_REASONING + "\n"
    + ANSWER_MARKER + "\n" + _json(EXAMPLE_PAIR_ANSWER) + "\n\n"
    "Now do the same for the two summaries below.\n\n"
    "### Summary A\n{summary_a}\n\n"
    "### Summary B\n{summary_b}\n"
)

# -- the reference check: key facts of the minutes, then their alignment ----------------------

EXAMPLE_REFERENCE = (
    "- Lumo released its first e-bike, the Lumo One, on 3 March.\n"
    "- Price: 1,800 euros; range 90 km.\n"
    "- Pre-orders are open in Germany and France.\n"
    "\n---\n\n"
    "- The Lumo One e-bike went on sale on 3 March for 1,800 euros.\n"
    "- Shipping to Spain is planned later this year.\n"
    "- CEO Ana Berg said a battery supplier problem delayed the launch by two months."
)
EXAMPLE_EXTRACTION_REASONING = (
    "Both writers report the launch date and the price; each is listed once. The first adds that "
    "it is Lumo's first e-bike, its range and the pre-order countries; the second adds the plan "
    "for Spain and the cause and length of the delay. That gives seven key facts, within the limit."
)
EXAMPLE_KEY_FACTS: list[str] = [
    "Lumo released the Lumo One e-bike on 3 March.",
    "The Lumo One is Lumo's first e-bike.",
    "The Lumo One costs 1,800 euros.",
    "The Lumo One has a range of 90 km.",
    "Pre-orders for the Lumo One are open in Germany and France.",
    "Lumo plans to ship the Lumo One to Spain later this year.",
    "A battery supplier problem delayed the launch by two months.",
]

EXTRACTION_TEMPLATE = (
    "You will list the key facts of the minutes of a meeting.\n\n"
    + KEY_FACT_DEFINITION + "\n\n"
    "Several people may have written minutes of the same meeting; their versions are separated "
    "by a line \"---\". Read all of them as one account of the meeting and break it down into at "
    "most {max_key_facts} key facts. The facts must not repeat one another: information that "
    "several versions state is listed once. If there is more information than the limit allows, "
    "keep the most important facts. Leave out the list of attendees and the date unless the "
    "meeting decided something about them.\n\n"
    "First write \"" + REASONING_MARKER + "\" and think the text through. Then write \""
    + ANSWER_MARKER + "\" on its own line, followed by a JSON list of strings, one key fact each. "
    "Write nothing after the JSON list.\n\n"
    "Here is a worked example on a different subject.\n\n"
    "### Example text\n" + EXAMPLE_REFERENCE + "\n\n"
    + REASONING_MARKER + "\n" + EXAMPLE_EXTRACTION_REASONING + "\n"
    + ANSWER_MARKER + "\n" + _json(EXAMPLE_KEY_FACTS) + "\n\n"
    "Now do the same for the minutes below.\n\n"
    "### Minutes\n{reference}\n"
)

EXAMPLE_SUMMARY = (
    "Lumo launched the Lumo One, its first e-bike, on 3 March. It sells for 1,800 euros.\n"
    "The company's logo was redesigned for the occasion."
)
EXAMPLE_ALIGNMENT_REASONING = (
    "Sentence [1] states the launch, its date and that it is Lumo's first e-bike (facts 1 and 2). "
    "Sentence [2] gives the price (fact 3). Nothing in the summary mentions the range, the "
    "pre-orders, Spain or the delay (facts 4 to 7). Sentence [3], about the logo, supports no key fact."
)
EXAMPLE_ALIGNMENT_ANSWER: list[dict[str, object]] = [
    {"key fact": fact, "response": "Yes" if lines else "No", "line numbers": lines}
    for fact, lines in zip(EXAMPLE_KEY_FACTS, [[1], [1], [2], [], [], [], []])
]

ALIGNMENT_TEMPLATE = (
    "You will check which key facts a summary of a meeting supports.\n\n"
    "You get a numbered list of key facts and the summary, with its sentences numbered [1], [2], "
    "... For each key fact, decide whether the summary supports it (states it or clearly implies "
    "it) and, if it does, note the numbers of the sentences that support it.\n\n"
    "First write \"" + REASONING_MARKER + "\" and go through the key facts one by one. Then write \""
    + ANSWER_MARKER + "\" on its own line, followed by a JSON list with one object per key fact, "
    "in the order of the key facts, with exactly these keys:\n"
    "- \"key fact\": the key fact, as given;\n"
    "- \"response\": \"Yes\" if the summary supports the fact, \"No\" otherwise;\n"
    "- \"line numbers\": the numbers of the supporting sentences (a list of integers, empty if "
    "the answer is \"No\").\n"
    "Write nothing after the JSON list.\n\n"
    "Here is a worked example on a different subject.\n\n"
    "### Example key facts\n"
    + "\n".join(f"{i}. {fact}" for i, fact in enumerate(EXAMPLE_KEY_FACTS, 1)) + "\n\n"
    "### Example summary\n" + number_sentences(split_sentences(EXAMPLE_SUMMARY)) + "\n\n"
    + REASONING_MARKER + "\n" + EXAMPLE_ALIGNMENT_REASONING + "\n"
    + ANSWER_MARKER + "\n" + _json(EXAMPLE_ALIGNMENT_ANSWER) + "\n\n"
    "Now do the same for the key facts and the summary below.\n\n"
    "### Key facts\n{key_facts}\n\n"
    "### Summary\n{summary}\n"
)

_SLOT = re.compile(r"\{(max_key_facts|summary_a|summary_b|reference|key_facts|summary)\}")


def fill(template: str, **values: object) -> str:
    """Fill the template's slots in one pass; a slot it has and was not given is an error."""
    def sub(match: re.Match[str]) -> str:
        return str(values[match.group(1)])

    return _SLOT.sub(sub, template)


def cream_prompt(sentences_a: list[str], sentences_b: list[str], max_key_facts: int) -> str:
    return fill(CREAM_TEMPLATE, max_key_facts=max_key_facts, summary_a=number_sentences(sentences_a),
                summary_b=number_sentences(sentences_b))


def extraction_prompt(reference: str, max_key_facts: int) -> str:
    return fill(EXTRACTION_TEMPLATE, max_key_facts=max_key_facts, reference=reference.strip())


def alignment_prompt(key_facts: list[str], sentences: list[str]) -> str:
    facts = "\n".join(f"{i}. {fact}" for i, fact in enumerate(key_facts, 1))
    return fill(ALIGNMENT_TEMPLATE, key_facts=facts, summary=number_sentences(sentences))
