"""The `scbench` metric equals the authors' scoring on our predictions: every turn's score is
what compute_scores.py's scorer (RepoQA: repo_qa_utils.py at threshold 0.8) gives it, and the
means per task and per turn are the numbers compute_scores.py prints. The expected numbers were
computed by running their code (microsoft/MInference scbench/, commit fb56c91) on the same rows
and predictions in a scratch folder (tests/data/scbench/authors_scores.json)."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from lceval.engine import RunConfig
from lceval.errors import UserError
from lceval.interfaces import JudgeContext
from lceval.types import Generation, JudgeInput

from lceval_plugins.scbench.metrics import ScbenchJudge
from tests.conftest import ScriptedModel, execute_config, plugins_with_model
from tests.paths import TEST_DATA

from .conftest import ROWS

PREDICTIONS = json.loads((TEST_DATA / "scbench" / "predictions.json").read_text(encoding="utf-8"))
AUTHORS = json.loads((TEST_DATA / "scbench" / "authors_scores.json").read_text(encoding="utf-8"))


class Answering(ScriptedModel):
    """Answers every request with our prediction for that turn, exactly as written."""

    def __init__(self, predictions: dict[str, str]) -> None:
        super().__init__(window=100_000)
        self.predictions = predictions

    def generate(self, requests):
        out = []
        for r in requests:
            self.calls.append(r)
            text = self.predictions[r.request_id.removeprefix("test/")]
            out.append(Generation(request_id=r.request_id, text=text, prompt_tokens=self.count_tokens(r.messages),
                                  prefilled_tokens=5, completion_tokens=5))
        return out


def scores_of(name: str, tmp_path) -> dict[str, float]:
    config_name = name.removesuffix("_multi_request")
    model = Answering(PREDICTIONS[config_name])
    state = execute_config(RunConfig(tasks=name, models=["scripted:x"], progress=False), plugins_with_model(model),
                           tmp_path / "home")
    (task,) = state.tasks
    return {s.item_id.removeprefix("test/"): s.judgments[0].score for s in task.samples}


def printed(value: str) -> list[float]:
    return [float(v) for v in value.split(",")]


@pytest.mark.parametrize("config", sorted(ROWS))
@pytest.mark.parametrize("mode", ["", "_multi_request"])
def test_every_turn_scores_as_the_authors_code_scores_it(config, mode, scbench_hub, tmp_path):
    ours = scores_of(config + mode, tmp_path)
    expected = AUTHORS[config]["items"]
    assert ours.keys() == expected.keys()
    for item, value in expected.items():
        assert ours[item] == pytest.approx(100 * value, abs=1e-9), item
    tasks = {f"{r['id']}/{k}": t.get("task", config) for r in ROWS[config] for k, t in enumerate(r["multi_turns"][:5])}
    by_task: dict[str, list[float]] = defaultdict(list)
    for item, score in ours.items():
        by_task[tasks[item]].append(score)
    means = [round(sum(v) / len(v), 3) for v in by_task.values()]
    if config == "scbench_repoqa_and_kv":
        # compute_scores' multi-request branch scores this task's kv turns against the prediction record, not
        # its text (`label in pred` on a dict): 0 for every turn. Per turn, and in multi-turn mode, it scores
        # the text, as lceval does (docs/tasks/scbench.md).
        assert printed(AUTHORS[config]["compute_scores"]) == [means[0], 0.0] and means[1] == 100.0
    else:
        assert printed(AUTHORS[config]["compute_scores"]) == means
    by_turn: dict[tuple[str, int], list[float]] = defaultdict(list)
    for item, score in ours.items():
        by_turn[(tasks[item], int(item.split("/")[1]))].append(score)
    turn_means = printed(AUTHORS[config]["compute_scores_by_turn"])
    subtasks = list(dict.fromkeys(tasks.values()))
    for (task, turn), values in by_turn.items():  # compute_scores prints turn by turn (sub-task by sub-task)
        at = turn * len(subtasks) + subtasks.index(task)
        assert turn_means[at] == round(sum(values) / len(values), 3), (task, turn)


def test_the_many_shot_and_chinese_labels_are_looped_over_by_character():
    judge = ScbenchJudge(JudgeContext(options={"task": "scbench_many_shot"}))

    def score(task, answer, prediction, metadata=None):
        j = ScbenchJudge(JudgeContext(options={"task": task}))
        item = JudgeInput(item_id="i", question="q", response=prediction.strip(), reference=str(answer),
                          metadata={"references": [str(answer)], **(metadata if metadata is not None else {"answer": answer})},
                          raw_response=prediction)
        return j.judge([item])[0].score

    assert judge.name == "scbench"
    assert score("scbench_many_shot", "(B)", "(A)") == 100.0      # "(" of the answer is in the reply
    assert score("scbench_many_shot", "(B)", "(A)", metadata={}) == 100.0  # one reference stands for the string
    assert score("scbench_many_shot", "(B)", "B") == 100.0 and score("scbench_many_shot", "(B)", "A") == 0.0
    assert score("scbench_qa_chn", "老周", "老周") == pytest.approx(100 * 2 / 3)  # best F1 against one character
    assert score("scbench_vt", ["AB", "CD"], "ab only") == 50.0
    assert score("scbench_mf", 12, "12.9") == 100.0 and score("scbench_mf", 12, "-12") == 100.0


def test_a_mixed_turn_without_its_task_and_a_repoqa_turn_without_needles_are_refused():
    def judged(task, metadata):
        item = JudgeInput(item_id="i", question="q", response="x", reference="y",
                          metadata={"references": ["y"], **metadata})
        return ScbenchJudge(JudgeContext(options={"task": task})).judge([item])

    with pytest.raises(UserError, match="metadata `task`"):
        judged("scbench_summary_with_needles", {})
    with pytest.raises(UserError, match="answer_pool"):
        judged("scbench_repoqa", {"lang": "python", "name": "f"})
