"""Aggregation: RULER's common-words (NVIDIA/RULER
scripts/data/synthetic/common_words_extraction.py, config `cwe`: freq_cw 30, freq_ucw 3,
num_cw 10) and frequent-words extraction (freq_words_extraction.py, config `fwe`: alpha 2.0),
templates and answer prefixes in scripts/data/synthetic/constants.py.

- cwe: a numbered list in which `num_cw` words appear `freq_cw` times and every other word
  `freq_ucw` times (below 4k tokens: 6 and 1, as RULER), after one worked example; the answer
  is the common words. The length is set by how many distinct words the list holds; words come
  from the wonderwords lists RULER uses (8,168 distinct words; a list past that needs RULER's larger
  English list, which we do not ship: `options.word_list`).
- fwe: "coded" words of 6 random letters with Zipf counts (count of the k-th word
  `int(n * k^-alpha / zeta(alpha))`), the most frequent one replaced by the noise word
  "..."; the answer is the next three. The length is set by n.

Both score with `string_match` in `all` mode. A length is reached by counting each word's
tokens once (and each number's, by its digits) and choosing the list's size from those
counts, then measuring the prompt and correcting, never by re-tokenizing trial lists.
"""

from __future__ import annotations

import math
import random
import string
from pathlib import Path
from typing import Callable

from lceval.errors import UserError
from lceval.interfaces import TaskContext
from lceval.types import CONTEXT_SLOT, Conversation

from lceval_plugins.haystack.tokens import Tokens
from lceval_plugins.haystack.units import fit_to_length

from .common import Budget, SampleOut, conversation, rng_for, sample_plan, short_of, user_messages, with_prefix
from .wordlists import ADJECTIVES, NOUNS, VERBS

__all__ = ["CWE_ANSWER_PREFIX", "CWE_TEMPLATE", "FWE_ANSWER_PREFIX", "FWE_TEMPLATE", "load_cwe", "load_fwe", "zeta"]

CWE_TEMPLATE = ("Below is a numbered list of words. In these words, some appear more often than others. Memorize the "
                "ones that appear most often.\n{context}\nQuestion: What are the {num_cw} most common words in the "
                "above list?")
CWE_ANSWER_PREFIX = " Answer: The top {num_cw} words that appear most often in the list are:"
FWE_TEMPLATE = ("Read the following coded text and track the frequency of each coded word. Find the three most "
                "frequently appeared coded words. {context}\nQuestion: Do not provide any explanation. Please ignore "
                "the dots '....'. What are the three most frequently appeared words in the above coded text?")
FWE_ANSWER_PREFIX = " Answer: According to the coded text above, the three most frequently appeared words are:"


def zeta(s: float, terms: int = 1000) -> float:
    """Riemann zeta for s > 1 (scipy.special.zeta in freq_words_extraction.py): the first
    terms summed, the rest by Euler-Maclaurin (accurate to ~1e-12 here)."""
    head = math.fsum(k ** -s for k in range(1, terms))
    n = float(terms)
    return head + n ** (1 - s) / (s - 1) + 0.5 * n ** -s + s * n ** (-s - 1) / 12


# -- common words extraction ----------------------------------------------------------------

def _cwe_words(seed: int) -> list[str]:
    """common_words_extraction.py: sorted(set(nouns + adjs + verbs)), shuffled with the seed."""
    words = sorted(set(NOUNS + ADJECTIVES + VERBS))
    random.Random(f"ruler/cwe/{seed}/words").shuffle(words)
    return words


def _read_word_list(value: str, record: Callable[[Path], None]) -> list[str]:
    from lceval.io import read_text

    path = Path(value).expanduser()
    if not path.is_file():
        raise UserError(f"no file '{value}'", field="options.word_list", hint="One word per line.")
    record(path)
    words = list(dict.fromkeys(w.strip() for w in read_text(path, what="word list").splitlines() if w.strip()))
    if not words:
        raise UserError(f"word list '{value}' holds no word", field="options.word_list")
    return words


def _numbered(words: list[str]) -> str:
    return " ".join(f"{i + 1}. {w}" for i, w in enumerate(words))


def _example(rng: random.Random, words: list[str], num_words: int, common_repeats: int, uncommon_repeats: int,
             common_nums: int) -> tuple[str, list[str]]:
    """common_words_extraction.py `get_example`."""
    full = rng.sample(words, num_words)
    common, uncommon = full[:common_nums], full[common_nums:]
    listed = common * common_repeats + uncommon * uncommon_repeats
    rng.shuffle(listed)
    return _numbered(listed), common


class _EntryCost:
    """Tokens of a list entry " 12. word": the number's by its digit count, the word's own."""

    def __init__(self, tokens: Tokens) -> None:
        self.tokens = tokens
        self.by_digits: dict[int, int] = {}

    def numbers(self, entries: int) -> int:
        total, digits = 0, 1
        while 10 ** (digits - 1) <= entries:
            if digits not in self.by_digits:
                self.by_digits[digits] = self.tokens.count(f" {'5' * digits}.")
            total += (min(entries, 10 ** digits - 1) - 10 ** (digits - 1) + 1) * self.by_digits[digits]
            digits += 1
        return total

    def word(self, word: str) -> int:
        return self.tokens.count(" " + word)


def load_cwe(ctx: TaskContext, budget: Budget, tokens: Tokens) -> list[Conversation]:
    o = ctx.options
    num_cw, short = int(o["num_cw"]), budget.length < 4096
    base = _cwe_words(ctx.seed)
    extra = _read_word_list(o["word_list"], ctx.record_file) if o.get("word_list") else None
    # below 4k RULER lists the common words 6 times, the others once, after a smaller example
    freq_cw, freq_ucw = (6, 1) if short else (int(o["freq_cw"]), int(o["freq_ucw"]))
    template = with_prefix(CWE_TEMPLATE, CWE_ANSWER_PREFIX, o["answer_prefix"])
    shot_template = CWE_TEMPLATE + CWE_ANSWER_PREFIX
    cost = _EntryCost(tokens)
    out: list[Conversation] = []
    for h, (index,) in sample_plan(ctx, budget.label, 1):
        rng = rng_for(ctx.seed, "cwe", index)
        shot_ctx, shot_answer = _example(rng, base, 20, 3, 1, num_cw) if short else _example(rng, base, 40, 10, 3, num_cw)
        shot = shot_template.format(num_cw=num_cw, context=shot_ctx) + " " + _numbered(shot_answer)
        body = template.format(num_cw=num_cw, context=CONTEXT_SLOT)
        user = shot + "\n" + body
        room = budget.prompt_target - tokens.prompt(user_messages(user, ""))
        # the words in the order they would be drawn: a list of n distinct words is the first n
        order = rng.sample(base, len(base))
        if extra is not None:
            known = set(order)
            order += [w for w in rng.sample(extra, len(extra)) if w not in known]
        prefix = [0]  # tokens of the first k words, each listed as often as it will be

        def list_cost(n: int) -> int:
            while len(prefix) <= n:
                k = len(prefix) - 1
                prefix.append(prefix[-1] + cost.word(order[k]) * (freq_cw if k < num_cw else freq_ucw))
            return prefix[n] + cost.numbers(num_cw * freq_cw + (n - num_cw) * freq_ucw)

        def words_for(tokens_budget: int) -> int:
            lo, hi = num_cw + 1, len(order)
            if list_cost(lo) > tokens_budget:
                return lo
            while lo < hi:  # the most words whose list fits the budget
                mid = (lo + hi + 1) // 2
                lo, hi = (mid, hi) if list_cost(mid) <= tokens_budget else (lo, mid - 1)
            return lo

        if room <= list_cost(num_cw + 1):
            raise short_of(budget, f"a list of {num_cw} common words and one more does not fit", "options.num_cw", num_cw)
        if list_cost(len(order)) < room - budget.tolerance:
            raise UserError(f"{budget.describe()} needs more distinct words than the {len(order):,} of the word list",
                            field="options.word_list",
                            hint="Give options.word_list a file of more words, one a line (RULER uses its "
                                 "json/english_words.json past the wonderwords lists).")

        def make(tokens_budget: int, index: int = index, order: list[str] = order, user: str = user
                 ) -> tuple[tuple[str, list[str], int], int]:
            n = words_for(tokens_budget)
            common, uncommon = order[:num_cw], order[num_cw:n]
            listed = common * freq_cw + uncommon * freq_ucw
            rng_for(ctx.seed, "cwe", index, f"shuffle/{n}").shuffle(listed)
            context = _numbered(listed)
            return (context, common, n), tokens.prompt(user_messages(user, context))

        fitted = fit_to_length(make, budget.prompt_target, room, budget.close)
        if fitted is None or budget.prompt_target - fitted.prompt_tokens > budget.tolerance:
            raise UserError(f"could not build a sample within 1% of {budget.describe()}", field=budget.field)
        context, common, n = fitted.value
        question = body.split(CONTEXT_SLOT, 1)[1].strip()
        sample = SampleOut(index, user, question, list(common), fitted.prompt_tokens,
                           {"distinct_words": n, "fit_rounds": fitted.rounds})
        out.append(conversation(budget, h, context, sample, "words"))
    return out


# -- frequent words extraction --------------------------------------------------------------

def _fwe_vocab(rng: random.Random, size: int, length: int) -> list[str]:
    """freq_words_extraction.py: `size` distinct random words of `length` letters, sorted, then
    shuffled; the first becomes the noise word '...'."""
    vocab: set[str] = set()
    while len(vocab) < size:
        vocab.add("".join(rng.choices(string.ascii_lowercase, k=length)))
    words = sorted(vocab)
    rng.shuffle(words)
    words[0] = "..."
    return words


def load_fwe(ctx: TaskContext, budget: Budget, tokens: Tokens) -> list[Conversation]:
    o = ctx.options
    alpha = float(o["alpha"])
    z = zeta(alpha)
    # freq_words_extraction.py: vocab_size = (max_seq_length - tokens_to_generate) // 50
    size = int(o["vocab_size"]) if o.get("vocab_size") else max(4, (budget.length - budget.tokens_to_generate) // 50)
    template = with_prefix(FWE_TEMPLATE, FWE_ANSWER_PREFIX, o["answer_prefix"])
    user = template.format(context=CONTEXT_SLOT)
    overhead = tokens.prompt(user_messages(user, ""))
    room = budget.prompt_target - overhead
    weights = [k ** -alpha / z for k in range(1, size + 1)]
    out: list[Conversation] = []
    for h, (index,) in sample_plan(ctx, budget.label, 1):
        rng = rng_for(ctx.seed, "fwe", index)
        vocab = _fwe_vocab(rng, size, int(o["coded_wordlen"]))
        # each word's tokens: the frequent ones counted, the rare ones (counts of 0 or 1) at their mean
        head = [tokens.count(" " + w) for w in vocab[:64]]
        mean = sum(head) / len(head)
        per_word = head + [mean] * (size - len(head))

        def counts(n: int) -> list[int]:
            return [int(n * w) for w in weights]

        def words_for(tokens_budget: int) -> int:
            lo, hi = 1, max(2, tokens_budget * 2)
            while lo < hi:
                mid = (lo + hi + 1) // 2
                cost = sum(c * t for c, t in zip(counts(mid), per_word))
                lo, hi = (mid, hi) if cost <= tokens_budget else (lo, mid - 1)
            return lo

        def make(tokens_budget: int, index: int = index, vocab: list[str] = vocab) -> tuple[tuple[str, int], int]:
            n = words_for(tokens_budget)
            sampled = [w for w, c in zip(vocab, counts(n)) for _ in range(c)]
            rng_for(ctx.seed, "fwe", index, f"shuffle/{n}").shuffle(sampled)
            context = " ".join(sampled)
            return (context, n), tokens.prompt(user_messages(user, context))

        if room <= 0 or counts(words_for(room))[3] < 1:
            raise short_of(budget, "the coded text is too short to rank three words", "options.alpha", alpha)
        fitted = fit_to_length(make, budget.prompt_target, room, budget.close)
        if fitted is None or budget.prompt_target - fitted.prompt_tokens > budget.tolerance:
            raise UserError(f"could not build a sample within 1% of {budget.describe()}", field=budget.field)
        context, n = fitted.value
        question = user.split(CONTEXT_SLOT, 1)[1].strip()
        sample = SampleOut(index, user, question, vocab[1:4], fitted.prompt_tokens,
                           {"coded_words": n, "vocab_size": size, "fit_rounds": fitted.rounds})
        out.append(conversation(budget, h, context, sample, "coded"))
    return out
