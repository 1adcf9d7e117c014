"""The authors' truncation (issue 31, item 5): LongBench's pred.py cuts the middle of the whole
prompt's text to its length, with no marker, even when the window holds more; lceval's own cut
keeps the instructions whole and marks the cut. Both through a run (the scripted model counts
words), compared with the authors' rule applied by hand to the same words."""

from __future__ import annotations

from pathlib import Path

import pytest

from lceval.engine import RunConfig
from tests.conftest import ScriptedModel, execute_config, plugins_with_model

SPEC = """\
name: cut_check
description: "one long document, instructions of different lengths before and after it"
type: documents
options:
  source: {{data_files: rows.jsonl}}
  fields: {{id: id, context: text, question: question, answer: answer}}
  prompt:
    user: "Read the report below, word by word, and answer.\\n\\n{{{{ context }}}}\\n\\nQuestion: {{{{ question }}}}\\nAnswer:"
generation: {{max_new_tokens: 4}}
context:
  policy: truncate-middle
{context}
judge: {{name: exact_match}}
"""


def run(tmp_path: Path, context: str, window: int | None = 10_000):
    (tmp_path / "rows.jsonl").write_text(
        '{"id": "r1", "text": "' + " ".join(f"w{i}" for i in range(600)) + '", "question": "which word?", '
        '"answer": "w1"}\n')
    spec = tmp_path / "cut.yaml"
    spec.write_text(SPEC.format(context=context))
    model = ScriptedModel(window=window)
    state = execute_config(RunConfig(tasks=str(spec), models=["scripted:x"], progress=False,
                                     cache_path=tmp_path / "c.sqlite"), plugins_with_model(model), tmp_path)
    (sample,) = state.tasks[0].samples
    return model.calls[0].messages[-1].content, sample.context_cut


def authors(text: str, max_length: int) -> list[str]:
    """LongBench pred.py, with words for tokens: `decode(tokenized_prompt[:half]) +
    decode(tokenized_prompt[-half:])`, half = int(max_length/2): the two halves' texts joined
    as they are (here the last word before the cut runs into the first after it)."""
    ids = text.split()
    half = int(max_length / 2)
    if len(ids) <= max_length:
        return ids
    return (" ".join(ids[:half]) + " ".join(ids[-half:])).split()


def test_the_authors_cut_is_the_middle_of_the_prompt_to_their_length(tmp_path: Path) -> None:
    sent, cut = run(tmp_path, "  cut: prompt\n  marker: \"\"\n  max_prompt_tokens: 101")
    full = "Read the report below, word by word, and answer.\n\n" + " ".join(f"w{i}" for i in range(600)) + \
        "\n\nQuestion: which word?\nAnswer:"
    assert sent.split() == authors(full, 101)  # the same words, in the same order: no marker
    before, after = 9, 4  # words before and after the context
    assert cut.action == "truncated" and cut.kept_tokens == 100 - before - after
    assert cut.head_tokens == 50 - before  # not half of what is kept: the prompt's middle, not the context's


def test_lceval_cut_keeps_the_instructions_and_marks_the_cut(tmp_path: Path) -> None:
    sent, cut = run(tmp_path, "  max_tokens: 87", window=None)
    assert "[...]" in sent and sent.startswith("Read the report below")
    assert cut.kept_tokens == 87 and cut.head_tokens is None  # the context's middle


@pytest.mark.parametrize("context", ["  cut: prompt\n  marker: \"\"\n  max_prompt_tokens: 101"])
def test_the_authors_length_binds_even_under_the_error_policy(tmp_path: Path, context: str) -> None:
    """The spec asked for the authors' cut: a prompt longer than their length is cut even when
    the window would hold it, whatever --context-policy says."""
    sent, cut = run(tmp_path, context.replace("truncate-middle", "error"))
    assert cut.action == "truncated" and cut.kept_tokens == 100 - 9 - 4
