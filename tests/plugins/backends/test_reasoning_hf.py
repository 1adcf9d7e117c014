"""A reasoning model on the `hf:` backend, without a large model: a tiny llama built in the
test from a real config with random weights, whose chat template opens `<think>` in the
generation prompt (as DeepSeek-R1's distillations do) and has Qwen3's `enable_thinking`
switch. Random weights never close their thinking, which is exactly the case to get right:
without a budget every answer is a no-answer, never scored; with a budget the engine ends the
thinking and asks for the answer, and what is judged is that answer alone."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from lceval import hookimpl
from lceval.interfaces import Judge
from lceval.types import GenerationParams, GenerationRequest, JudgeInput, Judgment, Message

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed"),
    pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers not installed"),
    pytest.mark.skipif(importlib.util.find_spec("tokenizers") is None, reason="tokenizers not installed"),
]

TEMPLATE = ("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>"
            "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n"
            "{% else %}<think>\n{% endif %}{% endif %}")
CORPUS = ["(PERSON1) Hello everyone, let us start the meeting about the orange dashboard.",
          "Who opened the meeting? When is the next meeting? Friday at noon. <think> </think>",
          "The microphone cable broke during the test; the travel budget is exhausted."] * 20


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    out = tmp_path_factory.mktemp("tiny-thinker")
    specials = ["<|end|>", "<|user|>", "<|system|>", "<|assistant|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=320, special_tokens=specials,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|end|>")
    fast.add_tokens(["<think>", "</think>"])  # added, not special: decoded into the text, as Qwen3's
    fast.chat_template = TEMPLATE
    fast.save_pretrained(out)
    config = transformers.LlamaConfig(vocab_size=len(fast), hidden_size=64, intermediate_size=128,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                      max_position_embeddings=2048, initializer_range=0.3,
                                      eos_token_id=fast.eos_token_id, pad_token_id=fast.eos_token_id)
    torch.manual_seed(11)
    transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float64).save_pretrained(out)
    return out


class Recorder(Judge):
    """A judge that scores 1 and keeps what it was shown."""

    name = "recorder"
    seen: list[JudgeInput] = []

    def judge(self, items: list[JudgeInput]) -> list[Judgment]:
        Recorder.seen.extend(items)
        return [Judgment(item_id=i.item_id, judge=self.name, score=1.0) for i in items]

    def identity(self) -> dict[str, Any]:
        return {"judge": self.name}


def run(folder: Path, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str = "tiny:thinker",
        **config: Any):
    from lceval.engine import load_plugins
    from lceval_plugins.backends.hf import make_hf

    from tests.conftest import execute_config

    backend = make_hf(str(folder), {"dtype": "auto"})

    class Plugin:
        @hookimpl
        def register_models(self, register):
            register("tiny", lambda name, options: backend)

        @hookimpl
        def register_judges(self, register):
            register("recorder", lambda ctx: Recorder())

    from lceval.engine import RunConfig

    plugins = load_plugins(extra=[("tiny", Plugin())])
    Recorder.seen = []
    cfg = RunConfig(tasks="elitr_qa", models=[model], judge="recorder", limit=2, progress=False,
                    cache_path=tmp_path / "cache.sqlite", overrides={"generation.max_new_tokens": 6}, **config)
    try:
        return execute_config(cfg, plugins, home), backend
    finally:
        backend.close()


def test_the_template_says_the_model_thinks(folder):
    from lceval_plugins.backends.hf import make_hf

    backend = make_hf(str(folder), {"dtype": "auto"})
    assert backend.thinks() is True and backend.continues_assistant
    on = backend.prompt_tokens([Message("user", "Hi")], thinking=True)
    off = backend.prompt_tokens([Message("user", "Hi")], thinking=False)
    assert len(off) > len(on)  # thinking off writes the empty thinking block
    assert backend.count_tokens([Message("user", "Hi")]) == len(off)  # counts never fall short


def test_a_thinking_model_gets_its_familys_budget_within_its_window(folder, tiny_home, tmp_path, monkeypatch):
    """No budget given: the fallback budget (8,192 tokens), capped at half the tiny model's
    2,048-token window, is set, said and recorded with the spec; every answer has its thinking."""
    state, _ = run(folder, tiny_home, tmp_path, monkeypatch)
    samples = [s for t in state.tasks for s in t.samples]
    assert state.tasks[0].spec.reasoning_budget == 1024
    assert samples and all(s.reasoning is not None and s.response is not None for s in samples)


def test_an_unclosed_thinking_is_no_answer_and_never_judged(folder, tiny_home, tmp_path, monkeypatch):
    """A family steered by its effort, not a budget (gpt-oss): no budget is set, and a model
    that thinks for the whole answer budget never closes its thinking: no answer, not judged,
    counted among the no-scores."""
    from lceval.results import score_task

    state, _ = run(folder, tiny_home, tmp_path, monkeypatch, model="tiny:gpt-oss-thinker")
    samples = [s for t in state.tasks for s in t.samples]
    assert state.tasks[0].spec.reasoning_budget is None
    assert samples and all(s.response is None and s.reasoning for s in samples)
    assert all(s.generation_extras.get("unclosed_thinking") for s in samples)
    assert Recorder.seen == []  # nothing judged
    results = score_task(samples, state.tasks[0].spec, {"judge": "recorder"})
    assert results["accounting"]["unclosed_thinking"] == len(samples) == results["accounting"]["unanswered"]
    assert state.usage["unclosed_thinking"] == len(samples)


def test_a_budget_ends_the_thinking_and_only_the_answer_is_judged(folder, tiny_home, tmp_path, monkeypatch):
    state, _ = run(folder, tiny_home, tmp_path, monkeypatch, reasoning_budget=5)
    samples = [s for t in state.tasks for s in t.samples]
    assert samples and all(s.reasoning is not None and s.reasoning_tokens == 5 for s in samples)
    assert all(s.generation_extras.get("thinking_budget_reached") for s in samples)
    assert state.tasks[0].spec.data["generation"]["reasoning_budget"] == 5  # recorded with the spec
    # the judge saw the answer alone: the text generated after the thinking was closed
    judged = {i.item_id: i for i in Recorder.seen}
    assert set(judged) == {s.item_id for s in samples}
    for s in samples:
        assert judged[s.item_id].response == s.response and judged[s.item_id].reasoning == s.reasoning
        assert s.reasoning not in (s.response or "") or not s.reasoning
    assert state.usage["reasoning_tokens"] == 5 * len(samples)


def test_the_answer_is_what_the_model_says_after_its_closed_thinking(folder):
    """What the engine asks in the budget's second step, asked by hand: the same answer."""
    from lceval.engine import Cache, CachedModel
    from lceval_plugins.backends.hf import make_hf

    backend = make_hf(str(folder), {"dtype": "auto"})
    try:
        params = GenerationParams(max_new_tokens=6, reasoning_budget=4)
        question = [Message("user", "Who opened the meeting?")]
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            cache = Cache(Path(tmp) / "c.sqlite")
            model = CachedModel(backend, cache, "tiny")
            (gen,) = model.generate([GenerationRequest("q", question, params)])
            cache.close()
        thought = backend.generate([GenerationRequest("t", question, GenerationParams(
            max_new_tokens=4, stop=("</think>",)))])[0]
        from lceval.reasoning import EARLY_STOP

        prefill = thought.text + EARLY_STOP + "</think>\n\n"
        answer = backend.generate([GenerationRequest("a", [*question, Message("assistant", prefill)],
                                                     GenerationParams(max_new_tokens=6))])[0]
        assert gen.text == answer.text and gen.reasoning == thought.text.strip()
        assert gen.completion_tokens == thought.completion_tokens + answer.completion_tokens
    finally:
        backend.close()


def test_thinking_off_uses_the_templates_switch_and_keys_the_cache(folder, tiny_home, tmp_path, monkeypatch):
    """--thinking off renders the template's empty thinking block: the model answers at once
    (a different prompt, so a different cache key), and nothing is split off."""
    state, _ = run(folder, tiny_home, tmp_path, monkeypatch, thinking=False)
    samples = [s for t in state.tasks for s in t.samples]
    assert samples and all(s.reasoning is None for s in samples)
    assert state.tasks[0].spec.reasoning_budget is None  # no budget for a model told not to think


PLAIN = ("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endfor %}"
         "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def test_a_budget_for_a_model_that_does_not_think_is_refused(folder, tiny_home, tmp_path):
    """The same weights behind a template without thinking: --reasoning-budget is bad input
    (exit 2 naming the flag), found before any answer is generated."""
    from lceval.engine import RunConfig, Session, load_plugins
    from lceval.errors import UserError
    from lceval_plugins.backends.hf import make_hf

    backend = make_hf(str(folder), {"dtype": "auto", "chat_template": PLAIN})
    assert backend.thinks() is False

    class Plugin:
        @hookimpl
        def register_models(self, register):
            register("plain", lambda name, options: backend)

    config = RunConfig(tasks="elitr_qa", models=["plain:x"], limit=2, progress=False, data_home=tiny_home,
                       cache_path=tmp_path / "c.sqlite", reasoning_budget=256)
    with Session(config, load_plugins(extra=[("plain", Plugin())])) as session:
        with pytest.raises(UserError) as err:
            session.answer(session.plan().models[0])
    assert err.value.field == "--reasoning-budget"
    assert backend._engine is None  # refused before any weights ran


def test_thinking_on_with_markers_that_never_appear_is_refused(tiny_home, tmp_path, monkeypatch):
    """`--thinking on` promises thinking: a model whose first answers hold none between the
    markers looked for stops the run with exit 2 naming --thinking (answers so far are cached)."""
    from tests.cli import call
    from tests.conftest import serve_scripted

    serve_scripted(monkeypatch)
    code, _, err = call("run", "--tasks", "elitr_qa", "--model", "scripted:x", "--thinking", "on",
                        "--data-home", tiny_home, "--output", tmp_path / "runs", "--no-progress")
    assert code == 2 and "--thinking" in err and "think_markers" in err
