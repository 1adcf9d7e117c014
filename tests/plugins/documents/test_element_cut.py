"""`truncate-middle` on a context made of a list of turns cuts between turns, never inside
one (issue 30): the documents task type hands the context policy the span of each rendered
element, the policy removes whole elements, and the sample's cut record says how many of how
many were kept. A plain-text context is still cut at any token."""

from __future__ import annotations

import json

from lceval.engine import RunConfig

from tests.conftest import ScriptedModel, execute_config, plugins_with_model

from .conftest import write_jsonl, write_spec

TURNS = [f"PERSON{i % 4 + 1}: turn {i} says {' '.join(['word'] * (5 + i % 7))} and ends here." for i in range(60)]


def _spec(tmp_path, documents: bool):
    row = {"id": "m1", "question": "Who spoke last?", "answer": "PERSON4"}
    row.update({"turns": TURNS} if documents else {"text": "\n".join(TURNS)})
    write_jsonl(tmp_path / "meetings.jsonl", [row])
    fields = {"id": "id", "question": "question", "answer": "answer", "document_key": "id"}
    fields.update({"documents": "turns", "document_separator": "\n"} if documents else {"context": "text"})
    return write_spec(tmp_path, {"source": {"data_files": "meetings.jsonl"}, "fields": fields,
                                 "prompt": {"user": "{{ context }}\n\nQuestion: {{ question }}"}},
                      name="turns_task", generation={"max_new_tokens": 8})


def _run(tmp_path, documents: bool, policy: str = "truncate-middle"):
    model = ScriptedModel(window=300)
    config = RunConfig(tasks=str(_spec(tmp_path, documents)), models=["scripted:x"], progress=False,
                       context_policy=policy)
    state = execute_config(config, plugins_with_model(model), tmp_path / "home")
    (sample,) = state.tasks[0].samples
    (request,) = model.calls
    return sample, request.messages[-1].content


def test_a_list_of_turns_is_cut_between_turns_and_the_record_says_so(tmp_path):
    sample, prompt = _run(tmp_path, documents=True)
    cut = sample.context_cut
    assert cut.action == "truncated" and cut.policy == "truncate-middle"
    assert cut.elements_total == 60 and 0 < cut.elements_kept < 60
    context = prompt.split("\n\nQuestion:")[0]
    head, mark, tail = context.partition("\n[...]\n")
    assert mark, context
    kept = head.split("\n") + tail.split("\n")
    assert all(line in TURNS for line in kept), [line for line in kept if line not in TURNS]  # whole turns only
    assert kept[0] == TURNS[0] and kept[-1] == TURNS[-1]  # the start and the end kept, the middle removed
    assert len(kept) == cut.elements_kept
    # the record in samples.jsonl's form says it too
    from dataclasses import asdict

    record = json.loads(json.dumps(asdict(cut)))
    assert record["elements_kept"] == cut.elements_kept and record["elements_total"] == 60


def test_truncate_right_keeps_the_first_whole_turns(tmp_path):
    """`truncate-right` (LongMemEval's and L-Eval's authors keep the start): whole turns from the
    start, in order, and the mark at the end where the rest was."""
    sample, prompt = _run(tmp_path, documents=True, policy="truncate-right")
    cut = sample.context_cut
    assert cut.action == "truncated" and cut.policy == "truncate-right" and 0 < cut.elements_kept < 60
    context = prompt.split("\n\nQuestion:")[0]
    assert context.endswith("\n[...]")
    kept = context.removesuffix("\n[...]").split("\n")
    assert kept == TURNS[:cut.elements_kept]


def test_a_plain_text_context_is_still_cut_at_tokens(tmp_path):
    sample, prompt = _run(tmp_path, documents=False)
    cut = sample.context_cut
    assert cut.action == "truncated" and cut.elements_total is None and cut.elements_kept is None
    assert "[...]" in prompt


def test_the_dry_run_says_where_it_cut(tmp_path, monkeypatch):
    from tests.cli import call
    from tests.conftest import serve_scripted

    serve_scripted(monkeypatch, lambda: ScriptedModel(window=300))
    code, out, err = call("run", "--tasks", _spec(tmp_path, True), "--model", "scripted:x", "--dry-run",
                          "--context-policy", "truncate-middle", "--data-home", tmp_path / "home")
    assert code == 0, err
    assert "at element boundaries:" in out and "of 60 elements kept" in out
