"""Noisy transcripts at a target word error rate (Thonet et al., 2024b, Sec. 3 and App. A).

The paper made its noisy transcripts with an adaptation of the ASR error simulator
pe-trik/asr-errors-simulator (`rewrite2.py`); it prints no formula. Two calibrations of the
target are offered, both driven by the rules' corpus (S substitutions, D deletions,
I insertions, C correct words):

- `simulator` (default, the paper's): the simulator's own scaling. With the corpus rates
  pi = I/(C+S+D+I), pd = D/(C+S+D+I) and ps = S/(S+C), it solves
  pd*ps*k^2 + (pi+pd+ps)*k = T for k, scales the three rates by k, and then, word by word,
  inserts words with probability pi/(1+pi) (repeatedly), keeps the word with probability
  (1-pi-pd)/(1-pi) (else deletes it) and substitutes a kept word with probability ps. That
  formula is not the expected number of edits: at T = 1 it plans far fewer (79 edits per 100
  words with our espeak-ng/pocketsphinx rules, see README), which is the main reason the
  paper's effective WER (Table 5: 71.13% at a 100% target) falls short of the target.
- `exact`: the expected number of edits is T times the words: each editable word is corrupted
  with probability q = lambda*(S+D)/E (E = S+D+I; the replacement, `""` included, comes from
  its rule) and preceded by a geometric number of insertions with mean lambda*I/E, past q = 1
  the excess going to insertions.

In both, the target is for the whole transcript, tags included: speaker tags, placeholders
and annotations are never touched (unless `protect` is off), so the rate on the other words is
raised by words / editable words (lambda = T * words / editable; the simulator solves for
that goal). A substituted word draws its replacement from its rule; a word without a rule is
replaced by a word drawn uniformly from the rules' vocabulary, as the simulator does for
out-of-vocabulary words (`exact` deletes it instead with the corpus's share of deletions).
A replacement keeps the punctuation around the word and its initial capital; line breaks and
spacing are kept, so at T = 0 the transcript comes back byte for byte.

The measured (effective) WER is lower still than the edits applied: WER counts the *minimum*
number of edits between clean and noisy text, and an insertion beside a deletion is one
substitution to it, a replacement may equal a neighbouring word, and so on. These
coincidences need edits side by side, so they grow with the rate. `facts["applied"]` and
`facts["measured"]` record both for every transcript.

Everything random comes from one generator seeded by sha256(algorithm, transcript, rules,
level, seed, options): the same inputs give the same bytes on any machine.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, field
from typing import Any

from lceval.errors import PackageMissing, UserError

from .rules import Rules
from .text import is_protected, normalize, split_token, words

ALGORITHM = "lceval-noise-1"
_SPACES = re.compile(r"(\s+)")


@dataclass
class Injection:
    text: str
    words: int  # normalised words of the clean transcript
    editable: int  # of which noise may touch
    applied: dict[str, int] = field(default_factory=dict)

    @property
    def applied_rate(self) -> float | None:
        edits = self.applied["substitutions"] + self.applied["deletions"] + self.applied["insertions"]
        return edits / self.words if self.words else None


def derived_seed(text: str, rules: Rules, target: float, seed: int, protect: bool, calibration: str) -> int:
    key = "|".join([ALGORITHM, hashlib.sha256(text.encode()).hexdigest(), rules.sha256, repr(float(target)),
                    str(int(seed)), str(bool(protect)), calibration])
    return int(hashlib.sha256(key.encode()).hexdigest()[:16], 16)


def _editable(token: str, protect: bool) -> bool:
    return bool(normalize(token)) and not (protect and is_protected(token))


CALIBRATIONS = ("simulator", "exact")


@dataclass(frozen=True)
class Plan:
    """Per editable word: insert with probability `p_insert` (repeatedly), delete with
    `p_delete`, else substitute with `p_substitute`. `exact` corrupts with `p_substitute`
    instead and lets the rule choose deletion (`p_delete` unused)."""

    calibration: str
    p_insert: float
    p_delete: float
    p_substitute: float
    p_delete_unknown: float  # exact: share of deletions for words without a rule


NO_NOISE = Plan("none", 0.0, 0.0, 0.0, 0.0)


def plan(rules: Rules, target: float, words_all: int, editable: int, calibration: str) -> Plan:
    """The per-word probabilities that put `target` on the whole transcript (module docstring)."""
    c = rules.counts
    subs, dels, ins = c["substitutions"], c["deletions"], c["insertions"]
    correct = c["reference_words"] - subs - dels
    if target <= 0 or editable == 0:
        return NO_NOISE
    if subs + dels + ins == 0:
        raise UserError("the rules hold no recognition error, so they cannot make noise", file=rules.path,
                        field="counts")
    goal = target * words_all / editable
    if calibration == "exact":
        q = goal * (subs + dels) / (subs + dels + ins)
        r = goal * ins / (subs + dels + ins)
        if q > 1.0:
            r, q = r + q - 1.0, 1.0
        return Plan("exact", r / (1.0 + r), 0.0, q, dels / (subs + dels) if subs + dels else 0.0)
    total = correct + subs + dels + ins
    pi, pd = ins / total, dels / total
    ps = subs / (subs + correct) if subs + correct else 0.0
    a, b = pd * ps, pi + pd + ps  # the simulator's quadratic: a*k^2 + b*k = goal
    k = goal / b if a == 0 else (-b + (b * b + 4 * a * goal) ** 0.5) / (2 * a)
    pi, pd, ps = pi * k, pd * k, ps * k
    keep = (1 - pi - pd) / (1 - pi) if pi < 1 else 0.0
    return Plan("simulator", pi / (1 + pi), 1.0 - keep, ps, 0.0)


def _replacement(key: str, rules: Rules, rng: random.Random, table: dict, p_delete_unknown: float
                 ) -> tuple[str, bool]:
    """(replacement, whether the word had no rule)."""
    choice = table.get(key)
    if choice:
        return choice.draw(rng.random()), False
    if (p_delete_unknown and rng.random() < p_delete_unknown) or not rules.vocabulary:
        return "", True
    vocab = rules.vocabulary
    i = int(rng.random() * len(vocab))
    if vocab[i] == key and len(vocab) > 1:  # a stand-in equal to the word would be no error
        i = (i + 1) % len(vocab)
    return vocab[i], True


def _edit(key: str, rules: Rules, rng: random.Random, p: Plan) -> tuple[str | None, bool]:
    """What becomes of one editable word: None = kept, "" = deleted, else its replacement."""
    if p.calibration == "exact":
        if rng.random() >= p.p_substitute:
            return None, False
        return _replacement(key, rules, rng, rules.table, p.p_delete_unknown)
    if rng.random() < p.p_delete:
        return "", False
    if rng.random() >= p.p_substitute:
        return None, False
    return _replacement(key, rules, rng, rules.substitutes, 0.0)


def _styled(original: str, word: str) -> str:
    lead, core, trail = split_token(original)
    if core[:1].isupper():
        word = word[:1].upper() + word[1:]
    return lead + word + trail


def inject(text: str, rules: Rules, target: float, seed: int, protect: bool = True,
           calibration: str = "simulator") -> Injection:
    """The transcript with noise at `target` (a rate, 0.2 = 20% WER)."""
    if calibration not in CALIBRATIONS:
        raise UserError(f"unknown calibration '{calibration}' (known: {', '.join(CALIBRATIONS)})",
                        field="options.noise.calibration")
    tokens_all = text.split()
    words_all = sum(1 for t in tokens_all if normalize(t))
    editable = sum(1 for t in tokens_all if _editable(t, protect))
    p = plan(rules, target, words_all, editable, calibration)
    applied = {"substitutions": 0, "deletions": 0, "insertions": 0, "unknown_words": 0}
    if p is NO_NOISE:
        return Injection(text=text, words=words_all, editable=editable, applied=applied)
    rng = random.Random(derived_seed(text, rules, target, seed, protect, calibration))
    out_lines = []
    for line in text.split("\n"):
        parts = _SPACES.split(line)  # token, space, token, ..., token ('' at the ends)
        lead = parts[0] == ""
        out: list[list[str]] = []  # [token, following space]
        prefix = parts[1] if lead and len(parts) > 1 else ""
        start = 2 if lead and len(parts) > 1 else 0
        for k in range(start, len(parts), 2):
            token, space = parts[k], parts[k + 1] if k + 1 < len(parts) else ""
            if not token:
                if out:
                    out[-1][1] += space
                else:
                    prefix += space
                continue
            if not _editable(token, protect):
                out.append([token, space])
                continue
            while rng.random() < p.p_insert:
                out.append([rules.insertions.draw(rng.random()), " "])
                applied["insertions"] += 1
            word, unknown = _edit(normalize(token), rules, rng, p)
            applied["unknown_words"] += unknown
            if word is None:
                out.append([token, space])
            elif word:
                applied["substitutions"] += 1
                out.append([_styled(token, word), space])
            else:
                applied["deletions"] += 1
                last = k + 2 >= len(parts) or (k + 2 == len(parts) - 1 and parts[-1] == "")
                if out and last:  # the line ends here: no space left dangling before its end
                    out[-1][1] = space
        out_lines.append(prefix + "".join(t + s for t, s in out))
    return Injection(text="\n".join(out_lines), words=words_all, editable=editable, applied=applied)


def measure(clean: str, noisy: str) -> dict[str, Any]:
    """Effective WER of `noisy` against `clean`, line by line, with jiwer (the words both
    sides normalised as in `text.words`)."""
    try:
        import jiwer
    except ImportError:
        raise PackageMissing("measuring the effective WER needs jiwer", field="options.noise",
                             hint="pip install 'lceval[noise]'") from None
    ref_lines, hyp_lines = clean.split("\n"), noisy.split("\n")
    if len(ref_lines) != len(hyp_lines):
        raise ValueError("noise changed the number of lines")
    refs, hyps = [], []
    for r, h in zip(ref_lines, hyp_lines):
        rw, hw = words(r), words(h)
        if rw:
            refs.append(" ".join(rw))
            hyps.append(" ".join(hw))
        elif hw:
            raise ValueError(f"noise added words to a line without words: {h!r}")
    if not refs:
        return {"wer": None, "substitutions": 0, "deletions": 0, "insertions": 0, "hits": 0}
    out = jiwer.process_words(refs, hyps)
    return {"wer": float(out.wer), "substitutions": int(out.substitutions), "deletions": int(out.deletions),
            "insertions": int(out.insertions), "hits": int(out.hits)}
