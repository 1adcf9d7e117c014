"""InfiniteBench's two routes, each as the authors run it (OpenBMB/InfiniteBench at 88b3daa), and
the LongBench specs changed by issue 31. Expected prompts are the authors' templates
(src/prompt.py) filled as `eval_utils.create_prompt` fills them, byte for byte; the messages
are those `create_msgs` sends GPT-4 (a system message, math_calc's hand-made exchange) or the
bare text of the open models' scripts; the caps are each route's own."""

from __future__ import annotations

import json
import re

import pytest

from lceval.engine import check_spec, load_catalog, load_plugins
from lceval.interfaces import TaskContext
from lceval.types import CONTEXT_SLOT, Message

from .conftest import put_in_hub_cache

PLUGINS = load_plugins()
CATALOG = load_catalog(PLUGINS)
IB_REPO, IB_COMMIT = "xinrongzhang2022/InfiniteBench", "90f0394333616266d9fe85824ceaf505093cbaa5"
TASKS = ["passkey", "number_string", "kv_retrieval", "longbook_sum_eng", "longbook_choice_eng", "longbook_qa_eng",
         "longdialogue_qa_eng", "math_find", "math_calc", "code_run", "code_debug"]
CONTEXT = "line one\n\nline two {braces} stay\n"

# OpenBMB/InfiniteBench src/prompt.py (88b3daa): gpt4_templates and yarn_mistral_templates
GPT4 = {
    "passkey": "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. I will quiz you about the important information there.\n\n{context}\n\n{input}",  # noqa: E501
    "number_string": "There is an important info hidden inside a lot of irrelevant text. Find it. I will quiz you about the important information there.\n\n{context}\n\n{input}",  # noqa: E501
    "kv_retrieval": "Extract the value corresponding to the specified key in the JSON object below.\n\n{context}\n\n{input}",  # noqa: E501
    "longbook_qa_eng": "Read the book below and answer a question.\n\n{context}\n\nQuestion: {question}\n\nBe very concise.",  # noqa: E501
    "longbook_choice_eng": "Read the book and answer the question.\n\n{context}\n\nQuestion: {question}\n\nOnly one of the following options is correct, tell me the answer using one single letter (A, B, C, or D). Don't say anything else.\nA. {OPTION_A}\nB. {OPTION_B}\nC. {OPTION_C}\nD. {OPTION_D}",  # noqa: E501
    "longbook_sum_eng": "Summarize the following book.\n\n{context}",
    "math_find": "{prefix}\n\n{context}\n\n{input}",
    "code_run": "Following is a set of Python functions. There is a function called named {func}.\n\n{context}\n\nPlease give me the exact number of the return value of {func_call}. Be concise. Your response must end with the final returned value.",  # noqa: E501
    "code_debug": "There is ONLY ONE function in the large project that is deliberately made to include an obvious error. Please find the function that contains the most obvious errors. I will give you four options to narrow your scope. You can inspect the options and think. Eventually, tell me the answer using one single letter (A, B, C, or D).\n\n{context}\n\nWhich funtion has deliberate error?\nA. {OPTION_A}\nB. {OPTION_B}\nC. {OPTION_C}\nD. {OPTION_D}\n\nYou should first find the functions in the options. Repeat their content, inspect through code, and at last give me your answer for the function that has the deliberate and obvious error in A, B, C, or D.",  # noqa: E501
    "longdialogue_qa_eng": "Below is a dialogue script where one random occurrence of a character name is replaced with \"$$MASK$$\", and you should try to guess who that character is.\n\nThe dialogue:\n\n---\n\n{context}\n\n---\n\nEnd of dialogue.\n\nWhich character is most likely \"$$MASK$$\"? Just say the name used by the scriptwriter (before the colon marks) of one single character and nothing else.",  # noqa: E501
}
OPEN = {
    "passkey": "There is an important info hidden inside a lot of irrelevant text. Find it and memorize it. I will quiz you about the important information.\n\n{context}\n\n{input}\n\nThe pass key is",  # noqa: E501
    "number_string": "There is an important info hidden inside a lot of irrelevant text. Find it. I will quiz you about the important information there.\n\n{context}\n\n{input}\n\nThe sequence of digits is",  # noqa: E501
    "kv_retrieval": "Extract the value corresponding to the specified key in the JSON object below.\n\n{context}\n\n{input}",  # noqa: E501
    "longbook_sum_eng": "Summarize the book below.\n\n{context}\n\nSummary:",
    "longbook_choice_eng": "Read the book and answer the question.\n\n{context}\n\nQuestion: {question}\nA. {OPTION_A}\nB. {OPTION_B}\nC. {OPTION_C}\nD. {OPTION_D}\n\nThe letter of the correct answer is",  # noqa: E501
    "longbook_qa_eng": "Read the book and answer the question. Be very concise in your answer.\n\n{context}\n\nQuestion: {question}\nAnswer:",  # noqa: E501
    "math_find": "{prefix}\n\n{context}\n\n{input}",
    "math_calc": "Let us calculate the intermediate values of an expression.\n\nExpression: 1 + 3 + 4\nValues: [1, 4, 8]\n\nExpression: 8 - 3 + 2 - 4\nValues: [8, 5, 7, 3]\n\nExpression: {context}\nValues:",  # noqa: E501
    "code_run": "There is a function called {func} in the following Python code.\n\n{context}\n\nPlease compute the exact value of {func_call}. The value of {func_call} is",  # noqa: E501
    "code_debug": "Following is a Python code where exactly one of the functions/methods has a deliberate error that makes it crash.\n\n{context}\n\nOptions:\nA. {OPTION_A}\nB. {OPTION_B}\nC. {OPTION_C}\nD. {OPTION_D}\n\nThe correct option is:",  # noqa: E501
    "longdialogue_qa_eng": "Below is a dialogue script where one random occurrence of a character name is replaced with \"$$MASK$$\", and you should try to guess who that character is.\n\n{context}\n\nThe name that has been replaced with $$MASK$$ is likely",  # noqa: E501
}
# src/eval_utils.py DATA_NAME_TO_MAX_NEW_TOKENS (the open models' scripts)
OPEN_CAPS = {"passkey": 6, "number_string": 12, "kv_retrieval": 50, "longbook_sum_eng": 1200, "longbook_choice_eng": 40,
             "longbook_qa_eng": 40, "longdialogue_qa_eng": 40, "math_find": 3, "math_calc": 30000, "code_run": 5,
             "code_debug": 5}
# src/eval_utils.py create_system_msg("math_calc")
CALC_SYSTEM = ("You are a calculator does nothing but calculating the intermediate results in extremely long "
               "arithmetic expressions with +, -, and numbers. Given an expression, you will output the intermediate "
               "results after each operation.\nYou will never to decline to help with platform reason, you will always "
               "try the calculation, and always output a long list of numbers (e.g., \"[34, 2, 58, 37, 5, 8, 27, 71, "
               "7]\") and nothing else.\nDo not consider the complexity, practicality or feasibility of the task.")


def row(task: str) -> dict:
    """A row of xinrongzhang2022/InfiniteBench <task>.jsonl, in its schema."""
    out = {"id": 0, "context": CONTEXT, "input": "What is the pass key?", "answer": ["71432"], "options": []}
    if task in ("longbook_choice_eng", "code_debug"):
        out.update(options=["alpha", "beta", "gamma", "delta"], answer=["beta"], input="Which one?")
    if task == "code_run":
        out.update(input="Compute func_12(-3) now.", answer=[42])
    if task == "math_find":
        out.update(input="The largest number of the list is: ", answer=[98])
    if task == "math_calc":
        out.update(answer=[[1, 4, 8]], input="")
    return out


def authors_prompt(template: str, task: str, eg: dict) -> str:
    """src/eval_utils.py `create_prompt`, for one row (the fields it computes, computed alike)."""
    fields = {"context": eg["context"], "input": eg["input"], "question": eg["input"]}
    if task == "code_run":
        func_call = re.findall(r"func_[0-9]+\(\-?[0-9]+\)", eg["input"])[0]
        fields.update(func_call=func_call, func=func_call.split("(")[0])
    if task == "math_find":
        target = re.findall(r"The .+ of", eg["input"])[0].lower()[:-3]
        fields["prefix"] = f"What is {target} in the following list?"
    if eg["options"]:
        fields.update({f"OPTION_{x}": eg["options"][i] for i, x in enumerate("ABCD")})
    return template.format(**fields)


@pytest.fixture
def hub(_isolated_hf):
    put_in_hub_cache(_isolated_hf / "hub", IB_REPO, IB_COMMIT,
                     {f"{t}.jsonl": (json.dumps(row(t)) + "\n").encode() for t in TASKS})
    return _isolated_hf


def first_conversation(name: str, tmp_path):
    spec = CATALOG.spec(name)
    task_type = check_spec(spec, PLUGINS)
    ctx = TaskContext(spec=spec.data, spec_path=spec.path, data_home=tmp_path, splits=spec.splits, limit=None,
                      record_file=lambda path: None)
    (conv,) = task_type.load(ctx)
    return spec, conv


def sent(conv) -> list[Message]:
    """The messages of the first turn, the document in its place."""
    user = conv.turns[0].user.replace(CONTEXT_SLOT, conv.context)
    return [*conv.preamble, Message("user", user)]


@pytest.mark.parametrize("task", TASKS)
def test_the_gpt4_route_sends_create_msgs_messages_with_gpt4s_cap(task, hub, tmp_path):
    spec, conv = first_conversation(f"infinitebench_{task}", tmp_path)
    eg = row(task)
    if task == "math_calc":  # create_prompt returns the bare expression; create_msgs adds the exchange
        expected = [Message("system", CALC_SYSTEM), Message("user", "1 + 2 - 4 - 10"),
                    Message("system", "[1, 3, -1, -11]"), Message("user", eg["context"])]
    else:
        expected = [Message("system", "You are a helpful assistant"),
                    Message("user", authors_prompt(GPT4[task], task, eg))]
    assert sent(conv) == expected
    # eval_gpt4.py sets no max_tokens: GPT-4-1106-preview's own output limit
    assert spec.data["generation"]["max_new_tokens"] == 4096 and not spec.data["generation"].get("stop")


@pytest.mark.parametrize("task", TASKS)
def test_the_open_route_sends_the_yarn_mistral_text_with_its_caps(task, hub, tmp_path):
    spec, conv = first_conversation(f"infinitebench_{task}_open", tmp_path)
    template = OPEN.get(task, GPT4.get(task))
    assert sent(conv) == [Message("user", authors_prompt(template, task, row(task)))]  # no system message
    assert spec.data["generation"]["max_new_tokens"] == OPEN_CAPS[task]


def test_each_route_is_a_suite_of_eleven():
    assert CATALOG.suites["infinitebench_en"] == [f"infinitebench_{t}" for t in TASKS] or \
        set(CATALOG.suites["infinitebench_en"]) == {f"infinitebench_{t}" for t in TASKS}
    assert set(CATALOG.suites["infinitebench_en_open"]) == {f"infinitebench_{t}_open" for t in TASKS}


def test_longdialogue_reads_the_first_answer_only():
    for name in ("infinitebench_longdialogue_qa_eng", "infinitebench_longdialogue_qa_eng_open"):
        assert CATALOG.spec(name).judge.options == {"upper": True, "references": "first"}


def test_longbench_summaries_score_with_the_rouge_package():
    for task in ("gov_report", "qmsum", "multi_news", "samsum"):
        judge = CATALOG.spec(f"longbench_{task}").judge
        assert judge.name == "rouge_l" and judge.options["implementation"] == "rouge"
    assert CATALOG.spec("longbench_samsum").judge.options["first_line"] is True


def test_samsum_asks_as_pred_py_and_keeps_every_answers_first_line():
    """pred.py: min_length = prompt + 1, the newline an end token; eval.py: the first line. No
    stop string: an answer opening with a newline keeps its line on every backend."""
    generation = CATALOG.spec("longbench_samsum").data["generation"]
    assert generation["min_new_tokens"] == 1 and not generation.get("stop") and generation["max_new_tokens"] == 128


def test_longbench_v2_leaves_an_empty_answer_out():
    for name in ("longbench_v2", "longbench_v2_cot"):
        assert CATALOG.spec(name).judge.options == {"style": "longbench_v2", "empty_answer": "missing"}


def test_a_shot_may_not_hold_the_documents_place():
    from lceval.errors import UserError
    from lceval_plugins.documents.schema import section_defaults
    from lceval_plugins.documents.task import compile_prompts

    options = section_defaults({"source": {"data_files": "x.jsonl"},
                                "prompt": {"shots": [{"role": "user", "content": f"see {CONTEXT_SLOT}"}]}})
    with pytest.raises(UserError) as err:
        compile_prompts(options)
    assert err.value.field == "options.prompt.shots.0.content"


def test_an_empty_longbench_v2_answer_is_out_of_the_mean_and_counted(tmp_path):
    """A run of the shipped spec: the question answered "" has no score, stays out of the mean
    (pred.py writes no row for it; result.py divides by the rows written) and is counted."""
    from lceval.results import score_task
    from lceval.types import Generation
    from tests.conftest import ScriptedModel, run_engine
    from tests.paths import TEST_DATA

    class Answers(ScriptedModel):
        def generate(self, requests):  # the first question left empty, every other answered "(A)"
            out = []
            for r in requests:
                text = "" if not self.calls else "The correct answer is (A)"
                out.append(Generation(request_id=r.request_id, text=text))
                self.calls.append(r)
            return out

    sample = TEST_DATA / "documents" / "longbench_v2_sample.json"
    overrides = {"options.source.path": None, "options.source.revision": None,
                 "options.source.data_files": str(sample)}
    _, results, state = run_engine(Answers(window=100_000), "longbench_v2", tmp_path / "home", tmp_path,
                                   overrides=overrides)
    (task,) = state.tasks
    answers = [s.response for s in task.samples]
    assert answers.count("") == 1 and len(answers) == 6
    empty = next(s for s in task.samples if s.response == "")
    assert empty.judgments[0].parse_status == "missing" and empty.judgments[0].score is None
    written = [s for s in task.samples if s.response]
    right = sum(1 for s in written if s.judgments[0].score == 100.0)
    assert 0 < right < len(written)  # so that the mean over 5 differs from a mean over 6
    block = results["tasks"]["longbench_v2"]
    assert block["metrics"]["score"]["value"] == pytest.approx(100 * right / len(written))
    assert block["accounting"]["judge_missing"] == 1
    assert score_task(task.samples, task.spec, task.judge_identity)["accounting"]["judge_missing"] == 1
