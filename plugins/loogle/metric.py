"""LooGLE's scoring (Li et al., 2024): the automatic metrics of its QA and summaries (`loogle`),
the cloze's entity match (`loogle_cloze`) and its GPT-4 judge (`loogle_gpt4`).

Follows bigai-nlco/LooGLE (commit 6734382), Evaluation/automatic_metrics.py,
automatic_eval.py, llm_score.py and llm_eval.py:

- `loogle` (`metric`): `get_bleu_score`'s BLEU-1 and "BLEU-4" (nltk's `sentence_bleu` over
  whitespace words, case kept, no smoothing; "BLEU-4" is the 4-gram precision alone, weights
  (0, 0, 0, 1), and nltk gives it ~2.2e-308, not 0, when no 4-gram matches), `get_rouge_score`'s
  ROUGE-1, -2 and -L **recall** (the `rouge` package, as called there; the paper's "Rouge4"
  column is this ROUGE-2), and `get_meteor_score` (nltk's `single_meteor_score` over the two
  texts' word *sets*; needs nltk's WordNet). automatic_eval.py scores an empty answer as the
  text "None". Each is a 0-1 value of one answer, reported x 100; the authors average them the
  same way over all questions. BERTScore (roberta-large) is not offered.
- `loogle_cloze` (`mode`): `get_exact_match` / `get_partial_match`: the answer as written read as
  a Python literal dict (`ast.literal_eval`: what the authors' `eval` accepts among literals, so
  JSON's null/true/false make the answer unreadable there and here) and each mask's entity
  compared with the reference's (the same text; any shared word; a mask whose answer is no text
  stops get_partial_match there and scores 0 here, as the spec's report.differs_from_paper says). The item's score is its share of masks;
  automatic_eval.py's `get_match_score` pools masks over all questions (a micro average), which
  weights a question by its masks (the details keep matched and masks, docs/tasks/loogle.md).
- `loogle_gpt4` (`task`): llm_score.py's prompts: for QA a system instruction and the question,
  ground truth and prediction, answered 'True' or 'False' (llm_eval.py counts the replies equal
  to "True" among those equal to "True" or "False": anything else is left out, here a parse
  failure); for summaries one system message asking a 0-100 score (`int(reply)`).
"""

from __future__ import annotations

import ast
import json
from typing import Any, Hashable

from lceval.errors import PackageMissing, UserError
from lceval.interfaces import Judge, JudgeContext
from lceval.judging import SampledJudge, require_model, sampling_options, sha256_text
from lceval.options import check_options
from lceval.types import GenerationParams, GenerationRequest, JudgeInput, Judgment, Message

from lceval_plugins.judges.metric_base import MetricJudge, metric_options

METRICS = ("bleu1", "bleu4", "rouge1", "rouge2", "rougeL", "meteor")


def _words(text: str) -> list[str]:
    return text.replace("\n", " ").split()


def bleu(reference: str, hypothesis: str, n: int) -> float:
    """automatic_metrics.py `get_bleu_score`: nltk's sentence_bleu, weights (1,0,0,0) or (0,0,0,1)."""
    import warnings

    from nltk.translate.bleu_score import sentence_bleu

    weights = (1, 0, 0, 0) if n == 1 else (0, 0, 0, 1)
    with warnings.catch_warnings():  # nltk warns of "0 counts of 4-gram overlaps" and returns ~2.2e-308
        warnings.simplefilter("ignore")
        return float(sentence_bleu([_words(reference)], _words(hypothesis), weights=weights))


_ROUGE: Any = None


def rouge_recall(reference: str, hypothesis: str, key: str) -> float:
    """automatic_metrics.py `get_rouge_score`: `Rouge().get_scores(hyps=[hypothesis],
    refs=[reference])[0][key]["r"]` (the `rouge` package, 1.0.1). The authors' script stops on
    an exception (a hypothesis of white space only); here it scores 0."""
    global _ROUGE
    if _ROUGE is None:
        try:
            from rouge import Rouge
        except ImportError:
            raise PackageMissing("LooGLE's ROUGE is the rouge package's, which is not installed",
                                 field="judge.options.metric", hint="pip install 'lceval[documents]'") from None
        _ROUGE = Rouge()
    try:
        return float(_ROUGE.get_scores(hyps=[hypothesis], refs=[reference])[0][key]["r"])
    except (ValueError, RecursionError):
        return 0.0


def meteor(reference: str, hypothesis: str) -> float:
    """automatic_metrics.py `get_meteor_score`: `single_meteor_score(set(reference),
    set(hypothesis))`. The sets' order is Python's hash order there (it changes METEOR's
    fragmentation penalty from one process to the next); here the words are sorted, so a run
    repeats."""
    from nltk.translate.meteor_score import single_meteor_score

    try:
        return float(single_meteor_score(sorted(set(_words(reference))), sorted(set(_words(hypothesis)))))
    except LookupError:
        raise UserError("LooGLE's METEOR needs nltk's WordNet data, which is not installed",
                        field="judge.options.metric",
                        hint="python -c \"import nltk; nltk.download('wordnet')\" (needs the network once)") from None


class LooGLEJudge(MetricJudge):
    """One of LooGLE's automatic metrics of an answer (0-1 as the authors compute it, x 100)."""

    name = "loogle"
    version = 1
    AS_WRITTEN = True  # automatic_eval.py scores the text as the model wrote it
    OPTIONS = metric_options({
        "metric": {"enum": list(METRICS),
                   "description": "bleu1, bleu4 (nltk sentence_bleu, the 4-gram precision alone), rouge1, rouge2, "
                                  "rougeL (the rouge package's recall), meteor (nltk, needs WordNet)."},
    })
    OPTIONS["required"] = ["metric"]

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        if prediction == "":
            prediction = "None"  # automatic_eval.py `evaluation`
        metric = self.options["metric"]
        if metric in ("bleu1", "bleu4"):
            scores = [bleu(r, prediction, 1 if metric == "bleu1" else 4) for r in references]
        elif metric == "meteor":
            scores = [meteor(r, prediction) for r in references]
        else:
            key = {"rouge1": "rouge-1", "rouge2": "rouge-2", "rougeL": "rouge-l"}[metric]
            scores = [rouge_recall(r, prediction, key) for r in references]
        best = max(range(len(scores)), key=lambda i: scores[i])
        return scores[best], {"best_reference": best}


def as_dict(text: str) -> dict[Any, Any] | None:
    """A cloze reference as a dict: the JSON the documents task type writes of the dataset's
    dict (or a Python literal); None when it is neither."""
    for parse in (json.loads, ast.literal_eval):
        try:
            value = parse(text.strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        return value if isinstance(value, dict) else None
    return None


def answer_dict(text: str) -> dict[Any, Any] | None:
    """A cloze answer as the authors read it: `eval(hypothesis)` on the text as written (an empty
    one made "None" first), kept only when it is a dict. Here `ast.literal_eval`, which accepts
    exactly Python's literals and runs nothing: JSON's null, true and false are no Python names,
    so `{"<mask-0>": "Bob", "<mask-1>": null}` is no dict for them and none here (0 masks). An
    answer that is code building a dict (`dict([('<mask-0>', 'Bob')])`) counts for them and is
    no dict here: lceval never runs a model's output (a declared departure, measured in
    tasks/loogle/_family.yaml)."""
    try:
        value = ast.literal_eval(text if text != "" else "None")
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


class LooGLEClozeJudge(MetricJudge):
    """automatic_metrics.py `get_exact_match` / `get_partial_match` of one question: the share of
    its masks whose entity the answer gives (exactly, or with a word in common)."""

    name = "loogle_cloze"
    version = 1
    AS_WRITTEN = True
    OPTIONS = metric_options({
        "mode": {"enum": ["exact", "partial"], "default": "exact",
                 "description": "exact: the same text (get_exact_match); partial: a word in common "
                                "(get_partial_match)."},
    })

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        reference = as_dict(references[0])
        if not reference:
            raise UserError(f"item {item.item_id}: a cloze reference must be a mapping of masks to entities, got "
                            f"{references[0][:80]!r}", field="options.fields.answer")
        hypothesis = answer_dict(prediction)
        matched = 0
        if hypothesis is not None:
            for key, value in reference.items():
                if key not in hypothesis:
                    continue
                if self.options["mode"] == "exact":
                    matched += int(hypothesis[key] == value)
                elif isinstance(hypothesis[key], str) and isinstance(value, str):
                    matched += int(len(set(value.split()) & set(hypothesis[key].split())) > 0)
        return matched / len(reference), {"matched": matched, "masks": len(reference),
                                          "parsed": hypothesis is not None}


# -- the GPT-4 judge (Evaluation/llm_score.py) ---------------------------------------------------

#: llm_score.py's QA instruction (the system message), verbatim
QA_SYSTEM = ("Given one question, there is a groundtruth and a predict_answer. Please decide whether they are the same "
             "or not in semantic. Please only output 'True' or 'False' .")
#: llm_score.py's summary prompt, verbatim ("goundtruth" and the space before ".Please" are theirs)
SUMMARY_PROMPT = ("There is a groundtruth summary of a arxiv paper and a auto-generated summary .Please Compare "
                  "generated summary with the goundtruth and evaluate the generated summary from the perspectives of "
                  "information completeness, consistency, fluency, and grammar by giving a score within the range of "
                  "0 to 100. \nGroundtruth = {} \nGenerated = {} \nScore = ")


def gpt4_messages(task: str, question: str, reference: str, hypothesis: str) -> list[Message]:
    """llm_score.py `get_gpt4_score`'s messages."""
    if task == "qa":
        return [Message("system", QA_SYSTEM),
                Message("user", "Question: " + question + "\n" + "groudtruth = " + reference + "\n"
                        + "predict_answer = " + hypothesis)]
    head, middle, tail = SUMMARY_PROMPT.split("{}")  # str.format of the two slots, the texts left as they are
    return [Message("system", head + reference + middle + hypothesis + tail)]


def parse_gpt4(task: str, reply: str) -> tuple[float | None, str | None]:
    """QA: "True" 100, "False" 0 (the reply exactly; llm_eval.py counts nothing else); summary:
    `int(reply)` (white space around it allowed, as int() allows it), 0-100."""
    if task == "qa":
        if reply in ("True", "False"):
            return (100.0 if reply == "True" else 0.0), None
        return None, "the reply is neither 'True' nor 'False' (llm_eval.py leaves it out)"
    try:
        value = int(reply)
    except ValueError:
        return None, "the reply is no integer (llm_score.py's int(reply) fails)"
    if not 0 <= value <= 100:
        return None, f"score {value} outside 0-100"
    return float(value), None


class LooGLEGPT4Judge(SampledJudge, Judge):
    """llm_score.py's GPT-4 judge: gpt-4, temperature 0, top_p 1, at most 10 tokens."""

    name = "loogle_gpt4"
    uses_model = True
    scale = (0.0, 100.0)
    OPTIONS = sampling_options(temperature=0.0, top_p=1.0, max_new_tokens=10, max_attempts=1, extra={
        "task": {"enum": ["qa", "summarization"], "default": "qa",
                 "description": "qa: the True/False prompt (short and long dependency QA); summarization: the "
                                "0-100 score prompt."}})
    # the prompts carry their own system message; the sampling options' one is not used
    OPTIONS["properties"].pop("system_prompt")

    def __init__(self, ctx: JudgeContext) -> None:
        options = check_options(self.OPTIONS, ctx.options, what="judge 'loogle_gpt4'", field_prefix="judge.options.")
        model = require_model(ctx, self.name, "Pass --judge-model SPEC (the authors used gpt-4: "
                                              "--judge-model litellm:openai/gpt-4-0613).")
        self.task = options["task"]
        self.configure_sampling(model, ctx.seed, {**options, "system_prompt": None})

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        def request(i: Any, params: GenerationParams, attempt: int) -> GenerationRequest:
            item = items[i]
            return GenerationRequest(request_id=item.item_id, params=params,
                                     messages=gpt4_messages(self.task, item.question, item.reference, item.response),
                                     hints={"item_id": item.item_id, "judge": self.name, "attempt": attempt})

        def parse(_key: Hashable, text: str) -> tuple[float | None, str | None]:
            return parse_gpt4(self.task, text)

        rounds = self.ask(range(len(items)), request, parse)
        out = []
        for i, item in enumerate(items):
            raws = rounds.raws[i]
            if i in rounds.errors:
                out.append(Judgment(item_id=item.item_id, judge=self.name, score=None, parse_status="missing",
                                    raw="", details={"judge_error": rounds.errors[i]}))
            elif i in rounds.why or rounds.results.get(i) is None:
                out.append(Judgment(item_id=item.item_id, judge=self.name, score=None, parse_status="parse_failure",
                                    raw=raws[-1] if raws else "", attempts=len(raws),
                                    details={"failure": rounds.why.get(i), "attempt_outputs": list(raws)}))
            else:
                out.append(Judgment(item_id=item.item_id, judge=self.name, score=rounds.results[i], raw=raws[-1],
                                    attempts=len(raws), details={"attempt_outputs": list(raws)}))
        return out

    def identity(self) -> dict[str, Any]:
        return {"judge": self.name, "version": 1, "task": self.task,
                "template_sha256": sha256_text(QA_SYSTEM if self.task == "qa" else SUMMARY_PROMPT),
                **self.sampling_identity()}
