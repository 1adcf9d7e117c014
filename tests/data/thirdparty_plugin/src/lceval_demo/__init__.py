"""A third-party lceval plugin: a backend with a character tokenizer, a judge that asks a
model through lceval.judging, a retriever, and task specs. Typed options everywhere."""

from __future__ import annotations

import re
from pathlib import Path

from lceval import hookimpl
from lceval.interfaces import Judge, JudgeContext, ModelBackend, Retriever
from lceval.judging import SampledJudge, require_model, sampling_options, sha256_text
from lceval.options import NO_OPTIONS, check_options
from lceval.types import Generation, GenerationParams, GenerationRequest, JudgeInput, Judgment, Message

# -- a backend ------------------------------------------------------------------------------

ECHO_OPTIONS = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "window": {"type": "integer", "minimum": 32, "description": "Context window in characters."},
        "role": {"enum": ["answer", "judge"], "default": "answer",
                 "description": "answer: echo the question's last words; judge: write a verdict."},
        "flaky": {"type": "boolean", "default": False,
                  "description": "As a judge, answer nonsense on a first attempt (to exercise retries)."},
    },
}


class EchoBackend(ModelBackend):
    """One token per character, so the context policy can cut anywhere."""

    def __init__(self, model: str, options: dict) -> None:
        self.model = model
        self.context_window = options.get("window")
        self.role = options["role"]
        self.flaky = options["flaky"]

    def identity(self) -> dict:
        return {"scheme": "demo-echo", "model": self.model, "window": self.context_window, "role": self.role,
                "flaky": self.flaky}

    def tokenize(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def detokenize(self, tokens: list[int]) -> str:
        return "".join(chr(t) for t in tokens)

    def count_tokens(self, messages: list[Message]) -> int:
        return sum(len(m.content) + 4 for m in messages) + 2  # 4 template tokens a message, 2 to answer

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        return [self._one(r) for r in requests]

    def _one(self, request: GenerationRequest) -> Generation:
        if self.role == "judge":
            text = "no idea" if self.flaky and request.hints.get("attempt") == 0 else "SCORE: 7"
        else:
            text = " ".join(request.messages[-1].content.split()[-6:])
        return Generation(request_id=request.request_id, text=text, prompt_tokens=self.count_tokens(request.messages),
                          completion_tokens=len(text))


def make_echo(model: str, options: dict) -> EchoBackend:
    return EchoBackend(model, options)


# -- a judge that asks a model --------------------------------------------------------------

PROMPT = "Question: {question}\nReference: {reference}\nAnswer: {response}\nReply SCORE: n, n from 1 to {scale}."
VERDICT = re.compile(r"SCORE: (\d+)")
GRADED_OPTIONS = sampling_options(
    temperature=0.7, top_p=1.0, max_new_tokens=32, max_attempts=3,
    extra={"scale": {"type": "integer", "minimum": 2, "default": 10, "description": "Highest verdict."}})


class GradedJudge(SampledJudge, Judge):
    name = "demo-graded"
    uses_model = True

    def __init__(self, ctx: JudgeContext) -> None:
        options = check_options(GRADED_OPTIONS, ctx.options, what="judge 'demo-graded'")
        self.scale_max = options["scale"]
        self.configure_sampling(require_model(ctx, self.name, "Pass --judge-model SPEC."), ctx.seed, options)

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        def request(i, params: GenerationParams, attempt: int) -> GenerationRequest:
            prompt = PROMPT.format(question=items[i].question, reference=items[i].reference,
                                   response=items[i].response, scale=self.scale_max)
            return GenerationRequest(request_id=items[i].item_id, messages=self.chat(prompt), params=params,
                                     hints={"item_id": items[i].item_id, "attempt": attempt})

        def parse(i, text: str):
            match = VERDICT.search(text)
            if match is None or not 1 <= int(match.group(1)) <= self.scale_max:
                return None, "no SCORE: n in range"
            return 1 + 9 * (int(match.group(1)) - 1) / (self.scale_max - 1), None

        rounds = self.ask(range(len(items)), request, parse)
        out = []
        for i, item in enumerate(items):
            raws = rounds.raws[i]
            if i in rounds.errors:
                out.append(Judgment(item_id=item.item_id, judge=self.name, score=None, parse_status="missing",
                                    raw="", details={"error": rounds.errors[i]}))
            elif rounds.results.get(i) is None:
                out.append(Judgment(item_id=item.item_id, judge=self.name, score=None, parse_status="parse_failure",
                                    raw=raws[-1], attempts=len(raws), details={"why": rounds.why.get(i)}))
            else:
                out.append(Judgment(item_id=item.item_id, judge=self.name, score=rounds.results[i], raw=raws[-1],
                                    attempts=len(raws), details={"attempt_seeds": self.attempt_seeds(len(raws))}))
        return out

    def identity(self) -> dict:
        return {"judge": self.name, "version": 1, "template_sha256": sha256_text(PROMPT), "scale": self.scale_max,
                **self.sampling_identity()}


class GenerousJudge(Judge):
    """Tries to take the built-in `lexical` judge's name: lceval keeps its own unless asked."""

    name = "lexical"

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        return [Judgment(item_id=i.item_id, judge="demo-generous", score=10.0, raw="always 10") for i in items]

    def identity(self) -> dict:
        return {"judge": "demo-generous"}


# -- a retriever ----------------------------------------------------------------------------

LONGEST_OPTIONS = {"type": "object", "additionalProperties": False, "properties": {
    "reverse": {"type": "boolean", "default": False, "description": "Shortest documents first."}}}


class LongestFirst(Retriever):
    name = "demo-longest"

    def __init__(self, reverse: bool) -> None:
        self.reverse = reverse

    def rank(self, query: str, documents: list[str]) -> list[int]:
        sign = 1 if self.reverse else -1
        return sorted(range(len(documents)), key=lambda i: sign * len(documents[i]))


# -- registration ---------------------------------------------------------------------------


@hookimpl
def register_models(register):
    register("demo-echo", make_echo, options_schema=ECHO_OPTIONS)


@hookimpl
def register_judges(register):
    register("demo-graded", GradedJudge, options_schema=GRADED_OPTIONS)
    register("lexical", lambda ctx: GenerousJudge(), options_schema=NO_OPTIONS)


@hookimpl
def register_retrievers(register):
    register("demo-longest", lambda options: LongestFirst(options["reverse"]), options_schema=LONGEST_OPTIONS)


@hookimpl
def register_spec_dirs(register):
    register(Path(__file__).parent / "specs")
