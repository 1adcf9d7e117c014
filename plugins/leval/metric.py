"""L-Eval's scoring (An et al., 2024): the closed-ended tasks' answer extraction and exact match
(`leval_exam`), the open-ended summaries' ROUGE-1/2/L (`leval_rouge`), and the GPT-4 judge that
compares an answer with the authors' turbo-16k-0613 answer against the reference (`leval_llm`).

Follows OpenLMLab/LEval (commit cd34b05), Evaluation/auto_eval.py, em.py, rouge.py and
llm_eval.py, function for function. auto_eval.py picks the extraction by the prediction file's
name; here the judge's `task` option names it (the file names: tpo, quality, coursera, gsm100,
codeU, topic_retrieval_longchat, sci_fi):

- tpo, quality: `process_output_mc` (the first of A-D anywhere in the answer, "Answer: B" is
  A) against `process_gt_mc` (the letters of the reference's first word), then em.py's
  `exact_match_score`: 1 for the same letters, 0.25 when the answer's letters are a subset of
  the reference's (Coursera's several correct options);
- coursera: `process_output_mc`'s several-letter branch (sorted distinct leading letters, else
  option letters before ")", "." or a space, else a run of A-D, else "A": a guess);
- gsm100: `process_math` on both (the digits of the word after "The answer is", up to a ".";
  else of the last word holding a digit before the first blank line), compared as numbers;
- codeU: `process_output_code` (the last len(reference words)+3 words, or the first ones after
  "the final output", once "is", "will be" ... are removed everywhere) against `process_gt_code`;
- topic_retrieval_longchat: the reference contained in the answer (lower case, no spaces);
  auto_eval.py scores the first, second and third question of each document apart and reports
  their mean (the documents' `question_id` breakdown here);
- sci_fi: two steps of one question, the answer in the document's world (`step: answer`,
  the loyalty) and in the real world (`step: fact`); `process_output_judge` takes the first
  word holding "true" or "false" of each, `process_gt_judge` the two parts of "True [fact:
  False]"; auto_eval.py reports the mean of the two accuracies (the spec's `group_by: step`).

em.py's normalisation does not lower-case (its articles regex is lower case only), and a
float comparison is tried before the substring test; both kept.
"""

from __future__ import annotations

import json
import re
import string
from pathlib import Path
from typing import Any, Hashable

from lceval.errors import PackageMissing, UserError
from lceval.interfaces import Judge, JudgeContext
from lceval.io import quote
from lceval.judging import SampledJudge, require_model, sampling_options, sha256_text
from lceval.options import check_options
from lceval.types import GenerationParams, GenerationRequest, JudgeInput, Judgment, Message

from lceval_plugins.judges.metric_base import MetricJudge, metric_options

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def em_normalize(s: str) -> str:
    """em.py `normalize_answer`: punctuation, then articles (lower case only) removed, white
    space collapsed; NOT lower-cased."""
    s = "".join(ch for ch in s if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", s).split())


def exact_match_score(prediction: str, ground_truth: str) -> float:
    """em.py `exact_match_score`: option letters (1, or 0.25 for a subset), else numbers
    compared as floats, else the reference contained in the answer (lower case, no spaces)."""
    with_options = all(ch in "ABCD" for ch in em_normalize(ground_truth))
    if with_options:
        if em_normalize(prediction) == em_normalize(ground_truth):
            return 1.0
        if set(em_normalize(prediction)).issubset(set(em_normalize(ground_truth))):
            return 0.25
        return 0.0
    try:
        return float(float(prediction) == float(ground_truth))
    except ValueError:
        return float(ground_truth.lower().replace(" ", "") in prediction.lower().replace(" ", ""))


def process_output_mc(response: str, coursera: bool) -> str:
    """auto_eval.py `process_output_mc` ("coursera" in the file name: the several-letter branch)."""
    if len(response.strip()) == 0:
        return "None"
    if response in "ABCD":
        return response
    if not coursera:
        for ch in response:
            if ch in "ABCD":
                return ch
    cleaned_str = ""
    for ch in response:
        if ch in "ABCD":
            cleaned_str += ch
            response = response[1:]
        else:
            break
    if len(cleaned_str) > 1:
        return "".join(sorted(set(cleaned_str)))
    response = response.split("Question")[0]
    options = re.findall(r"\s*[A-Z](?=[\s.)])", response)
    cleaned_str += " ".join(options).strip()
    cleaned_str = re.sub(r"[^A-D]", "", cleaned_str)
    cleaned_str = "".join(sorted(set(cleaned_str)))
    if len(cleaned_str) < 1:
        has_answer = False
        for ch in response:
            if ch in "ABCD":
                cleaned_str += ch
                response = response[1:]
                has_answer = True
            elif has_answer:
                break
    if len(cleaned_str) < 1:
        cleaned_str = "A"
    return cleaned_str


def process_gt_mc(response: str) -> str:
    """auto_eval.py `process_gt_mc`: the letters A-D of the reference's first word ("A" if none)."""
    cleaned = re.sub(r"[^A-D]", "", response.split()[0]) if response.split() else ""
    return cleaned or "A"


def process_math(response: str) -> str:
    """auto_eval.py `process_math`."""
    match = re.search(r"The answer is (\S+)", response)
    if not match:
        ret = ""
        for word in response.split("\n\n")[0].split(" ")[::-1]:
            if any(ch.isdigit() for ch in word):
                ret = word
                break
    else:
        ret = match.group(1)
    out = ""
    for ch in ret:
        if ch.isdigit():
            out += ch
        if ch == ".":
            break
    return out


def process_gt_code(response: str) -> str:
    """auto_eval.py `process_gt_code`."""
    response = re.sub(r"\s+", " ", response)
    for old, new in ((",", ""), ("'", ""), ("\\", ""), (".0", ""), ("] [", "]["), ("[ [", "[["), ("] ]", "]]")):
        response = response.replace(old, new)
    return response


def process_output_code(response: str, gt: str) -> str:
    """auto_eval.py `process_output_code` ("is" removed inside words too: "this" -> "th")."""
    gt_len = len(gt.split())
    response = process_gt_code(response)
    for old in ("will be", "of the code", "is", "would be", "the value of", "the result of", "printed"):
        response = response.replace(old, "")
    if "the final output" in response:
        response = response.split("the final output")[-1]
        res = re.split(r"\s+", response)[:(gt_len + 3)]
    else:
        res = re.split(r"\s+", response)[-(gt_len + 3):]
    return " ".join(res)


def process_gt_judge(response: str) -> list[str]:
    """auto_eval.py `process_gt_judge`: "True [fact: False]" -> ["true", "false"]."""
    parts = response.lower().split("[fact:")
    if len(parts) < 2:
        raise UserError(f"an SFiction reference must read \"<True|False> [fact: <True|False>]\", got {quote(response)}",
                        field="judge.options.task")
    return [parts[0].strip(), parts[1][:-1].strip()]


def true_or_false(text: str) -> str:
    """One side of auto_eval.py `process_output_judge`: "true" or "false" from the first word
    holding either ("true" looked for first), else "<error>"."""
    for word in text.lower().split():
        if "true" in word:
            return "true"
        if "false" in word:
            return "false"
    return "<error>"


TASKS = ("tpo", "quality", "coursera", "gsm100", "codeU", "topic_retrieval_longchat", "sci_fi")


class LEvalExamJudge(MetricJudge):
    """L-Eval's closed-ended score of one answer: the task's extraction, then em.py's match."""

    name = "leval_exam"
    version = 1
    OPTIONS = metric_options({
        "task": {"enum": list(TASKS),
                 "description": "The closed-ended task, by the authors' file name, which picks auto_eval.py's "
                                "extraction: tpo, quality (first letter A-D), coursera (several letters), gsm100 "
                                "(the number after 'The answer is'), codeU, topic_retrieval_longchat (the topic "
                                "contained), sci_fi (true/false of the world in the document, step answer, and of "
                                "the real world, step fact)."},
    })
    OPTIONS["required"] = ["task"]

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        scores = [self._one(prediction, r, item) for r in references]
        best = max(range(len(scores)), key=lambda i: scores[i][0])
        return scores[best]

    def _one(self, prediction: str, reference: str, item: JudgeInput) -> tuple[float, dict[str, Any]]:
        task = self.options["task"]
        if task in ("tpo", "quality", "coursera"):
            pred, gt = process_output_mc(prediction, task == "coursera"), process_gt_mc(reference)
        elif task == "gsm100":
            pred, gt = process_math(prediction), process_math(reference)
        elif task == "codeU":
            pred, gt = process_output_code(prediction, reference), process_gt_code(reference)
        elif task == "sci_fi":
            loyalty, fact = process_gt_judge(reference)
            step = item.metadata.get("step", "answer")
            if step not in ("answer", "fact"):
                raise UserError(f"item {item.item_id}: SFiction's steps are 'answer' (the document's world) and "
                                f"'fact' (the real world), not {quote(step)}", field="options.prompt.followups")
            pred, gt = true_or_false(prediction), loyalty if step == "answer" else fact
        else:
            pred, gt = prediction, reference
        return exact_match_score(pred, gt), {"extracted": pred, "reference": gt}


class LEvalRougeJudge(MetricJudge):
    """ROUGE F x 100 as Evaluation/rouge.py computes it: rouge-score's RougeScorer without a
    stemmer, `scorer.score(reference, prediction)`, the best over the references. The texts'
    sentence split (nltk) changes rougeLsum alone, which L-Eval does not report."""

    name = "leval_rouge"
    version = 1
    OPTIONS = metric_options({
        "variant": {"enum": ["rouge1", "rouge2", "rougeL"], "default": "rougeL",
                    "description": "rouge1, rouge2 or rougeL (L-Eval reports the three; its LEval_score is their "
                                   "geometric mean, its leaderboard's ROUGE the mean rougeL)."},
    })

    def __init__(self, options: Any) -> None:
        super().__init__(options)
        try:
            from rouge_score import rouge_scorer
        except ImportError:
            raise PackageMissing("the leval_rouge judge needs the rouge-score package", field="--judge",
                                 hint="pip install 'lceval[documents]'") from None
        self._scorer = rouge_scorer.RougeScorer([self.options["variant"]], use_stemmer=False)

    def score(self, prediction: str, references: list[str], item: JudgeInput) -> tuple[float, dict[str, Any]]:
        variant = self.options["variant"]
        scores = [self._scorer.score(r, prediction)[variant].fmeasure for r in references]
        best = max(range(len(scores)), key=lambda i: scores[i])
        return scores[best], {"best_reference": best}


# -- the GPT-4 judge (Evaluation/llm_eval.py) ---------------------------------------------------

#: llm_eval.py's system prompt, verbatim (two spaces after "long document.")
PAIR_SYSTEM = (
    "Please act as an impartial judge and evaluate the quality of the responses provided by two AI assistants to "
    "the user question about the content of a long document.  You will be given a reference answer written by "
    "human, assistant A's answer, and assistant B's answer. Your job is to evaluate which assistant's answer is "
    "better. Begin your evaluation by comparing both assistants' answers with the reference answer. Additional "
    "details or information that are not mentioned in reference answer cannot be considered as advantages and do "
    "not let them sway your judgment. Your evaluation should also consider the relevance to user's question but it "
    "is more important to avoid factual errors according to the reference answer. Avoid any position biases and "
    "ensure that the order in which the responses were presented does not influence your decision. Do not allow "
    "the length of the responses to influence your evaluation. Do not favor certain names of the assistants. Be "
    "as objective as possible. After providing your explanation, output your final verdict by strictly following "
    "this format: \"[[A]]\" if assistant A is better, \"[[B]]\" if assistant B is better, and \"[[C]]\" for a tie."
)
#: llm_eval.py's user template, verbatim
PAIR_USER = (
    "[User Question]\n{question}\n\n[The Start of Reference Answer]\n{ref_answer}\n[The End of Reference Answer]"
    "\n\n[The Start of Assistant A's Answer]\n{answer_a}\n[The End of Assistant A's Answer]\n\n[The Start of "
    "Assistant B's Answer]\n{answer_b}\n[The End of Assistant B's Answer]"
)


def pair_prompt(question: str, reference: str, answer_a: str, answer_b: str) -> str:
    """PAIR_USER filled in one pass (an answer holding "{answer_b}" is never expanded)."""
    values = {"question": question, "ref_answer": reference, "answer_a": answer_a, "answer_b": answer_b}
    return re.sub(r"\{(question|ref_answer|answer_a|answer_b)\}", lambda m: values[m.group(1)], PAIR_USER)


def verdict(judgment: str) -> str:
    """llm_eval.py: "[[A]]" first, then "[[B]]", then "[[C]]" (a tie), else an error."""
    if "[[A]]" in judgment:
        return "A"
    if "[[B]]" in judgment:
        return "B"
    if "[[C]]" in judgment:
        return "tie"
    return "error"


def read_baseline(path: str, key: str | None) -> dict[tuple[str, str], str]:
    """The opponent's answers from a file in the authors' prediction format (one JSON object per
    line: query, gt, <model>_pred), keyed by (query, gt) as llm_eval.py pairs them."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise UserError(f"no baseline answers at {quote(str(file))}", field="judge.options.baseline",
                        hint="Give the authors' Predictions/llm_gpt4_eval/turbo-16k-0613.pred.jsonl (docs/tasks/leval.md).")
    out: dict[tuple[str, str], str] = {}
    for n, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise UserError(f"{file} line {n} is not JSON ({exc})", field="judge.options.baseline") from None
        name = key or next((k for k in row if k.endswith("_pred")), None)
        if not isinstance(row, dict) or name not in row or "query" not in row or "gt" not in row:
            raise UserError(f"{file} line {n} has no query, gt and {quote(name or '<model>_pred')} answer",
                            field="judge.options.baseline_key" if key else "judge.options.baseline")
        out[(str(row["query"]), str(row["gt"]))] = str(row[name])
    return out


class LEvalPairJudge(SampledJudge, Judge):
    """llm_eval.py's pairwise judge: the answer and the baseline's, judged twice (the answer as A,
    then as B) against the reference, without the document. The item's score is its win rate
    over the two verdicts, ties counting half, an unparseable verdict left out (100: both won;
    none usable: a parse failure); the authors pool the verdicts of all items the same way."""

    name = "leval_llm"
    uses_model = True
    scale = (0.0, 100.0)
    OPTIONS = sampling_options(temperature=0.0, top_p=1.0, max_new_tokens=2048, max_attempts=1,
                               system_prompt=PAIR_SYSTEM, extra={
                                   "baseline": {"type": ["string", "null"], "minLength": 1, "default": None,
                                                "description": "JSON Lines of the opponent's answers in the authors' "
                                                               "format (query, gt, <model>_pred): llm_eval.py's "
                                                               "turbo-16k-0613.pred.jsonl (required to judge)."},
                                   "baseline_key": {"type": ["string", "null"], "default": None,
                                                    "description": "The field holding the opponent's answer "
                                                                   "(default: the first ending in _pred)."}})

    def __init__(self, ctx: JudgeContext) -> None:
        options = check_options(self.OPTIONS, ctx.options, what="judge 'leval_llm'", field_prefix="judge.options.")
        model = require_model(ctx, self.name, "Pass --judge-model SPEC (the authors used gpt-4-0613: "
                                              "--judge-model litellm:openai/gpt-4-0613).")
        if options["baseline"] is None:
            raise UserError("judge 'leval_llm' compares each answer with a baseline's answers, and none was given",
                            field="judge.options.baseline",
                            hint="--set judge.options.baseline=turbo-16k-0613.pred.jsonl (the authors' "
                                 "Predictions/llm_gpt4_eval/ file; docs/tasks/leval.md).")
        self.baseline = read_baseline(options["baseline"], options["baseline_key"])
        self.baseline_file = options["baseline"]
        self.configure_sampling(model, ctx.seed, options)

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        keys: list[tuple[int, int]] = []
        prompts: dict[tuple[int, int], list[Message]] = {}
        missing: dict[int, str] = {}
        for i, item in enumerate(items):
            other = self.baseline.get((item.question, item.reference))
            if other is None:
                missing[i] = "no baseline answer for this question and reference"
                continue
            for order, (a, b) in enumerate(((item.response, other), (other, item.response))):
                keys.append((i, order))
                prompts[(i, order)] = self.chat(pair_prompt(item.question, item.reference, a, b))

        def request(key: Any, params: GenerationParams, attempt: int) -> GenerationRequest:
            i, order = key
            return GenerationRequest(request_id=f"{items[i].item_id}#{order}", messages=prompts[key], params=params,
                                     hints={"item_id": items[i].item_id, "judge": self.name, "attempt": attempt})

        def parse(_key: Hashable, text: str) -> tuple[str, str | None]:
            v = verdict(text)
            return v, ("no [[A]], [[B]] or [[C]] in the output" if v == "error" else None)

        rounds = self.ask(keys, request, parse)
        out = []
        for i, item in enumerate(items):
            if i in missing:
                out.append(Judgment(item_id=item.item_id, judge=self.name, score=None, parse_status="missing",
                                    raw=missing[i], details={"judge_error": missing[i]}))
                continue
            # the answer is A in the first ordering and B in the second
            wins = {0: "A", 1: "B"}
            points, counted, verdicts = 0.0, 0, []
            for order in (0, 1):
                v = rounds.results.get((i, order), "error")
                verdicts.append(v)
                if v == "error":
                    continue
                counted += 1
                points += 1.0 if v == wins[order] else 0.5 if v == "tie" else 0.0
            raws = [rounds.raws[(i, o)][-1] if rounds.raws[(i, o)] else "" for o in (0, 1)]
            details = {"verdicts": verdicts, "outputs": raws}
            if counted == 0:
                out.append(Judgment(item_id=item.item_id, judge=self.name, score=None, parse_status="parse_failure",
                                    raw=raws[-1], details=details))
                continue
            out.append(Judgment(item_id=item.item_id, judge=self.name, score=100.0 * points / counted, raw=raws[-1],
                                details={**details, "counted": counted}))
        return out

    def identity(self) -> dict[str, Any]:
        return {"judge": self.name, "version": 1, "template_sha256": sha256_text(PAIR_USER),
                "system_prompt_sha256": self.system_prompt_identity(),
                "baseline_sha256": sha256_text(json.dumps(sorted(self.baseline.items()), ensure_ascii=False)),
                **self.sampling_identity()}
