"""GraphWalks: the shipped specs read rows in the dataset's real schema (openai/graphwalks
parquet files, put where huggingface_hub caches the pinned commit), send each row's `prompt` as
the one user message, byte for byte, skip a prompt past the window rather than cut its edge list,
and score with the dataset card's grader: the expected F1, precision and recall below are what
the card's own `get_list` and grading code (be6cc6ec, and its 2025 first version) give on the
same answers, computed by running that code outside this repository."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lceval.engine import check_spec, load_catalog, load_plugins
from lceval.interfaces import JudgeContext
from lceval.types import Generation, JudgeInput, Message

from tests.conftest import ScriptedModel, run_engine
from tests.plugins.documents.conftest import put_in_hub_cache

PLUGINS = load_plugins()
CATALOG = load_catalog(PLUGINS)
REPO, COMMIT = "openai/graphwalks", "be6cc6ecf9b4d495b07d1ff53d2a16598e90fed7"
G = ["1679091c5a", "c9f0f895fb", "d3d9446802"]
HEAD = ("You will be given a graph as a list of directed edges. All nodes are at least degree 1. \nYou will also "
        "get a description of an operation to perform on the graph.\n")

# (answer as the model wrote it, gold nodes) -> (be6cc6ec f1, precision, recall, parsed), card_2025 f1
CASES = [
    ("Final Answer: [1679091c5a, c9f0f895fb, d3d9446802]", G, (1.0, 1.0, 1.0, True), 0.6666666666666666),
    ("I walk the graph.\nFinal Answer: [d3d9446802, 1679091c5a]", G, (0.8, 1.0, 0.6666666666666666, True), 0.4),
    ("Final Answer: [1679091c5a, c9f0f895fb, d3d9446802, eccbc87e4b, a87ff679a2]", G,
     (0.7499999999999999, 0.6, 1.0, True), 0.5),
    ("Final Answer: [1679091c5a]", ["1679091c5a"], (1.0, 1.0, 1.0, True), 0.0),
    ("Final Answer: []", [], (1.0, 1.0, 1.0, True), 0.0),
    ("Final Answer: [c81e728d9d]", [], (0.0, 0.0, 0.0, True), 0.0),
    ("Final Answer: []", G, (0.0, 0.0, 0.0, True), 0.0),
    ("The answer is [1679091c5a]", G, (0.0, 0.0, 0.0, False), 0.0),
    ("Final Answer: [1679091c5a, c9f0f895fb]\n", G, (0.0, 0.0, 0.0, False), 0.0),
    ("**Final Answer:** [1679091c5a, c9f0f895fb, d3d9446802]", G, (1.0, 1.0, 1.0, True), 0.0),
    ("Final Answer: ['1679091c5a', 'c9f0f895fb']", G, (0.0, 0.0, 0.0, True), 0.0),
    ("Final Answer: [1679091c5a, 1679091c5a, c9f0f895fb]", G, (0.8, 1.0, 0.6666666666666666, True),
     0.6666666666666666),
    ("Final Answer: 1679091c5a, c9f0f895fb", G, (0.0, 0.0, 0.0, False), 0.0),
    ("Final Answer: [eccbc87e4b]", G, (0.0, 0.0, 0.0, True), 0.0),
]


def judge(**options):
    spec = CATALOG.spec("graphwalks_128k")
    return PLUGINS.judges["graphwalks"](JudgeContext(options={**spec.judge.options, **options}))


def item(answer: str, gold: list[str]) -> JudgeInput:
    return JudgeInput(item_id="train/0", question="", response=answer.strip(), reference=" | ".join(gold),
                      metadata={"references": gold}, raw_response=answer if answer != answer.strip() else None)


@pytest.mark.parametrize("answer,gold,expected,card_2025", CASES)
def test_the_metric_is_the_cards_grader(answer, gold, expected, card_2025):
    f1, precision, recall, parsed = expected
    (j,) = judge().judge([item(answer, gold)])
    assert j.score == pytest.approx(100 * f1, abs=1e-9) and j.parse_status == "ok"
    assert j.details["precision"] == pytest.approx(100 * precision) and j.details["recall"] == pytest.approx(100 * recall)
    assert j.details["parsed"] is parsed
    (old,) = judge(grader="card_2025").judge([item(answer, gold)])
    assert old.score == pytest.approx(100 * card_2025, abs=1e-9)


def test_strip_lets_a_trailing_newline_parse():
    (j,) = judge(strip=True).judge([item("Final Answer: [1679091c5a, c9f0f895fb]\n", G)])
    assert j.score == pytest.approx(80.0)


def rows() -> list[dict]:
    """Rows of graphwalks_128k_and_shorter.parquet (prompt, answer_nodes, prompt_chars, problem_type,
    date_added); row 2's prompt is long, its gold set empty."""
    out = []
    for i, (kind, nodes, edges) in enumerate([("parents", G, 3), ("bfs", ["c81e728d9d"], 4), ("bfs", [], 400)]):
        edge_list = "".join(f"{i:02d}{k:08x} -> {k + 1:010x}\n" for k in range(edges))
        op = "Find the parents of node 1679091c5a." if kind == "parents" else "Perform a BFS from node 00a with depth 2."
        prompt = f"{HEAD}The graph has the following edges:\n{edge_list}\nOperation:\n{op}\n"
        out.append({"prompt": prompt, "answer_nodes": nodes, "prompt_chars": len(prompt), "problem_type": kind,
                    "date_added": "02-27-2026" if i else "04-12-2025"})
    return out


class Answering(ScriptedModel):
    """Answers each prompt with a chosen text (the rest like the scripted model)."""

    def __init__(self, answers: dict[str, str], window: int) -> None:
        super().__init__(window=window)
        self.answers = answers

    def generate(self, requests):
        out = []
        for r in requests:
            self.calls.append(r)
            text = next(a for k, a in self.answers.items() if k in r.messages[-1].content)
            out.append(Generation(request_id=r.request_id, text=text, prompt_tokens=10, prefilled_tokens=10,
                                  completion_tokens=5))
        return out


def test_the_spec_sends_each_prompt_alone_and_skips_one_past_the_window(_isolated_hf, tmp_path):
    data = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows()), data)
    put_in_hub_cache(_isolated_hf / "hub", REPO, COMMIT, {"graphwalks_128k_and_shorter.parquet": data.getvalue()})
    spec = CATALOG.spec("graphwalks_128k")
    check_spec(spec, PLUGINS, data=True)
    model = Answering({"parents of node": "The parents are these.\nFinal Answer: [1679091c5a, d3d9446802]\n",
                       "depth 2": "Final Answer: [c81e728d9d]"}, window=16384 + 600)  # answers reserve 16384
    _, results, state = run_engine(model, "graphwalks_128k", tmp_path / "home", tmp_path)
    assert [r.messages for r in model.calls] == [[Message("user", row["prompt"])] for row in rows()[:2]]
    (task,) = state.tasks
    by_id = {s.item_id: s for s in task.samples}
    assert by_id["train/2"].context_cut.action == "skipped"            # 400 edges: past the window, not cut
    assert by_id["train/0"].judgments[0].score == 0.0                  # the trailing newline: no last line
    assert by_id["train/1"].judgments[0].score == 100.0
    assert by_id["train/0"].metadata["problem_type"] == "parents" and by_id["train/1"].metadata["references"] == ["c81e728d9d"]
    metrics = results["tasks"]["graphwalks_128k"]["metrics"]
    assert metrics["score"]["breakdowns"]["problem_type"]["bfs"]["value"] == 100.0
    assert metrics["recall"]["value"] == 50.0 and results["tasks"]["graphwalks_128k"]["accounting"]["skipped"] == 1
    curve = results["length_bins"]["graphwalks_128k"]  # the rows give characters: each prompt counted in tokens
    assert curve["field"] == "tokens" and [(p["label"], p["n"]) for p in curve["points"]] == [("0-8k", 2)]


def test_the_card_text_the_grader_follows_is_named_in_the_spec_and_the_ledger():
    """The card changed after the 2026-02-27 fix: the specs say which text the grader follows
    (be6cc6ec's) and why; `lceval tasks show` carries it (report.differs_from_paper)."""
    from lceval.engine import family_file
    from tests.cli import call

    for name in ("graphwalks_128k", "graphwalks_1m"):
        why = CATALOG.spec(name).report.differs_from_paper
        assert why and "be6cc6ec" in why and "2026-02-27" in why and "no node in common" in why
    record = family_file(Path(CATALOG.specs["graphwalks_128k"]).parent)  # the ledger's source
    assert record is not None and any("2026-02-27" in d.what for d in record.fidelity.departures_of("graphwalks_1m"))
    code, out, _ = call("tasks", "show", "graphwalks_128k")
    assert code == 0 and "differs_from_paper" in out
    # where the two texts differ, this grader's scores: no gold node 0, a right one-node answer 100
    (none,), (one,) = judge().judge([item("Final Answer: [eccbc87e4b]", G)]), \
        judge().judge([item("Final Answer: [1679091c5a]", ["1679091c5a"])])
    assert (none.score, one.score) == (0.0, 100.0)
