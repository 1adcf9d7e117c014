"""A natural-language-inference model as a judge's option: does a premise entail a hypothesis?

Citation metrics (ALCE's AutoAIS, adapted by L-CiteEval and HELMET) ask an NLI model whether the
passages a sentence cites entail it. `NLI` is that question; `HFNLI` answers it with any
Hugging Face transformers sequence-classification NLI model, the way L-CiteEval's
`script/eval_citation.py` (ZetangForward/L-CITEEVAL, commit 6e493267) does with its default,
`tasksource/deberta-base-long-nli`:

    pipe = pipeline("text-classification", model=..., device=...)
    entailed = pipe([dict(text=premise, text_pair=hypothesis)])[0]["label"] == "entailment"

one pair a call by default (`batch_size` 1: padding a batch can move a logit that sits on a tie).
The model is named by the judge option `nli_model` (a Hub name, fetched into the Hugging Face
cache on first use, or a local folder) and loaded on the first question, once per process.
Its labels must include the entailment label (`entailment`, compared without case); the model's
`id2label` is checked when it loads. Tests give a stub `NLI`, or a tiny model saved to a folder.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from lceval.errors import UserError

__all__ = ["DEFAULT_NLI_MODEL", "HFNLI", "NLI", "nli_options"]

DEFAULT_NLI_MODEL = "tasksource/deberta-base-long-nli"


class NLI(Protocol):
    """Whether each premise entails its hypothesis."""

    def entails(self, pairs: list[tuple[str, str]]) -> list[bool]: ...


def nli_options(default_model: str = DEFAULT_NLI_MODEL) -> dict[str, Any]:
    """The options every NLI-judged metric takes (a judge's `options_schema` properties)."""
    return {
        "nli_model": {"type": "string", "minLength": 1, "default": default_model,
                      "description": "The NLI model: a Hugging Face transformers sequence-classification model (Hub "
                                     "name or local folder) whose labels include the entailment label."},
        "entailment_label": {"type": "string", "minLength": 1, "default": "entailment",
                             "description": "The model's label that means the premise entails the hypothesis."},
        "device": {"type": "string", "minLength": 1, "default": "auto",
                   "description": "Where the NLI model runs: auto (cuda when there is one), cpu, cuda, cuda:1 ..."},
        "batch_size": {"type": "integer", "minimum": 1, "default": 1,
                       "description": "Pairs per call of the model (1: one at a time, as the authors)."},
    }


_MODELS: dict[tuple[str, str], Any] = {}
_LOCK = threading.Lock()


class HFNLI:
    """An NLI model through transformers' text-classification pipeline (loaded once per process)."""

    def __init__(self, model: str, entailment_label: str = "entailment", device: str = "auto",
                 batch_size: int = 1) -> None:
        self.model, self.label, self.device, self.batch_size = model, entailment_label.lower(), device, batch_size
        self.answers: dict[tuple[str, str], bool] = {}

    def pipe(self) -> Any:
        key = (self.model, self.device)
        with _LOCK:
            if key not in _MODELS:
                _MODELS[key] = self._load()
            return _MODELS[key]

    def _load(self) -> Any:
        try:
            import torch
            from transformers import pipeline
        except ImportError:
            raise UserError("an NLI judge needs torch and transformers", field="judge.options.nli_model",
                            hint="pip install 'lceval[hf]'") from None
        device = self.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        try:
            pipe = pipeline("text-classification", model=self.model, device=device)
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot load the NLI model {self.model!r}: {str(exc).splitlines()[0]}",
                            field="judge.options.nli_model",
                            hint="Name a transformers sequence-classification NLI model (a Hub name, in the Hugging "
                                 "Face cache when offline, or a local folder).") from None
        labels = [str(v) for v in (pipe.model.config.id2label or {}).values()]
        if self.label not in [lab.lower() for lab in labels]:
            raise UserError(f"the NLI model {self.model!r} has no label {self.label!r} (its labels: "
                            f"{', '.join(labels)})", field="judge.options.entailment_label")
        return pipe

    def entails(self, pairs: list[tuple[str, str]]) -> list[bool]:
        todo = [p for p in dict.fromkeys(pairs) if p not in self.answers]
        if todo:
            pipe = self.pipe()
            for start in range(0, len(todo), self.batch_size):
                chunk = todo[start:start + self.batch_size]
                out = pipe([dict(text=p, text_pair=h) for p, h in chunk], batch_size=self.batch_size)
                for pair, result in zip(chunk, out):
                    self.answers[pair] = str(result["label"]).lower() == self.label
        return [self.answers[p] for p in pairs]
