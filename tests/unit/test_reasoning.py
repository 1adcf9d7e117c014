"""A reasoning model's thinking kept apart from its answer (lceval.reasoning), the run's
reasoning settings, and nothing changed for a model that does not think."""

from __future__ import annotations

import pytest

from lceval.errors import UserError
from lceval.reasoning import (KNOWN_MARKERS, ReasoningOptions, ThinkingMarkers, default_budget, parse_markers,
                              reasoning_options, split_reasoning)
from lceval.types import GenerationParams


@pytest.mark.parametrize("text, answer, reasoning, closed", [
    ("<think>\nThe meeting opened with Ana.\n</think>\n\nAna", "Ana", "The meeting opened with Ana.", True),
    ("  <think>a</think>b", "b", "a", True),
    # a template that writes <think> itself (DeepSeek-R1's distillations): the text starts inside it
    ("weighing the options...\n</think>\n\nFriday", "Friday", "weighing the options...", True),
    # never closed: no answer at all
    ("<think>\nstill thinking about the budget and the", "", "still thinking about the budget and the", False),
    # gpt-oss's harmony channels
    ("<|channel|>analysis<|message|>User asks who. Ana.<|end|><|start|>assistant<|channel|>final<|message|>Ana<|return|>",
     "Ana", "User asks who. Ana.", True),
    ("<thinking>x</thinking>y", "y", "x", True),
    # a model that does not think: its text is its answer, untouched
    ("  Ana opened the meeting.  ", "  Ana opened the meeting.  ", None, True),
    ("", "", None, True),
])
def test_split_reasoning(text, answer, reasoning, closed):
    part = split_reasoning(text)
    assert (part.answer, part.reasoning, part.closed) == (answer, reasoning, closed)


def test_other_markers_are_named_by_a_model_option():
    opts = reasoning_options({"think_markers": "[[T]]|[[/T]]", "n_ctx": "8"})
    assert opts.markers == (ThinkingMarkers("[[T]]", "[[/T]]"),) and opts.split and opts.custom
    part = split_reasoning("[[T]]hmm[[/T]] yes", opts.markers)
    assert (part.answer, part.reasoning) == ("yes", "hmm")
    assert split_reasoning("<think>a</think>b", opts.markers).reasoning is None  # only the named ones
    assert not reasoning_options({"split_reasoning": "false"}).split
    assert reasoning_options({}) == ReasoningOptions() and ReasoningOptions().markers == KNOWN_MARKERS


@pytest.mark.parametrize("options, field", [({"think_markers": "<think>"}, "think_markers"),
                                             ({"split_reasoning": "maybe"}, "--model")])
def test_bad_reasoning_options_name_the_option(options, field):
    with pytest.raises(UserError) as err:
        reasoning_options(options)
    assert field in (err.value.field or "")
    with pytest.raises(UserError):
        parse_markers("|")


def test_cache_keys_of_a_model_that_does_not_think_are_unchanged():
    """The request cache key of a run without reasoning settings is the one lceval always
    computed: no answer in anybody's cache is asked again."""
    params = GenerationParams(max_new_tokens=64, temperature=0.0, seed=3, stop=("\n",))
    assert params.as_dict() == {"max_new_tokens": 64, "temperature": 0.0, "top_p": 1.0, "repeat_penalty": 1.0,
                                "seed": 3, "stop": ["\n"]}
    assert GenerationParams(reasoning_budget=512).as_dict()["reasoning_budget"] == 512
    assert GenerationParams(thinking=False).as_dict()["thinking"] is False
    assert GenerationParams(reasoning_budget=512).as_dict() != GenerationParams(reasoning_budget=513).as_dict()


def test_default_budgets_follow_each_familys_guidance():
    assert default_budget("Qwen/Qwen3-8B") == 32768
    assert default_budget("deepseek-ai/DeepSeek-R1-Distill-Llama-8B") == 32768
    assert default_budget("openai/gpt-oss-20b") is None  # steered by its reasoning effort
    assert default_budget("my-thinking-model") == 8192


@pytest.mark.parametrize("flags, field", [
    ({"reasoning_budget": "-5"}, "--reasoning-budget"),
    ({"reasoning_budget": "lots"}, "--reasoning-budget"),
    ({"thinking": "maybe"}, "--thinking"),
    ({"reasoning_effort": "extreme"}, "--reasoning-effort"),
])
def test_bad_reasoning_flags_name_the_flag(flags, field):
    from lceval.engine import RunConfig

    with pytest.raises(UserError) as err:
        RunConfig.from_flags({"tasks": "elitr_qa", "models": ["smollm2"], **flags})
    assert err.value.field == field


def test_reasoning_flags_become_the_specs_generation_settings():
    from lceval.engine import RunConfig, Session

    config = RunConfig.from_flags({"tasks": "elitr_qa", "models": ["smollm2"], "thinking": "on",
                                   "reasoning_budget": "2048", "reasoning_effort": "low"})
    (spec,) = Session(config).plan().specs
    params = spec.generation_params(seed=0)
    assert (params.thinking, params.reasoning_budget, params.reasoning_effort) == (True, 2048, "low")
    assert spec.data["generation"]["reasoning_budget"] == 2048  # recorded with the resolved spec
