"""The ruler generators with the tests' word-tokenizer model: every sample built to its length
within 1% (prompt with chat template + tokens to generate, never over), deterministic from the
seed, needles at the requested depths, RULER's templates and answers, and the bad input a user
can give (exit 2 naming the option or flag and the value)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from lceval.errors import UserError
from lceval.interfaces import TaskContext
from lceval.types import CONTEXT_SLOT
from lceval_plugins.ruler.aggregation import zeta
from lceval_plugins.ruler.common import DEPTHS, NOISE
from lceval_plugins.ruler.niah import niah_template
from lceval_plugins.ruler.task import TASK_TYPES

from tests.conftest import ScriptedModel, complete

GENERATE = {"ruler_niah": 128, "ruler_vt": 30, "ruler_cwe": 120, "ruler_fwe": 50, "ruler_qa": 32}


def essay_folder(tmp_path: Path, sentences: int = 4000) -> Path:
    folder = tmp_path / "essays"
    folder.mkdir(exist_ok=True)
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    text = " ".join(f"Sentence {i} says {words[i % 12]} and {words[(i * 7) % 12]} matter." for i in range(sentences))
    (folder / "a.txt").write_text(text[: len(text) // 2])
    (folder / "b.md").write_text(text[len(text) // 2:])
    return folder


def load(kind: str, options: dict, length: int | None = 4096, *, model=None, limit: int | None = 10, seed: int = 0,
         per_context: int | None = None, select=lambda cid: True, files: list | None = None, home: Path = Path("/nonexistent"),
         splits=None):
    task_type = TASK_TYPES[kind]()
    spec = {"name": "t", "type": kind, "options": complete(task_type, options),
            "generation": {"max_new_tokens": GENERATE[kind]}}
    model = model if model is not None else ScriptedModel(window=8192)
    ctx = TaskContext(spec=spec, spec_path=Path("t.yaml"), data_home=home, splits=splits, limit=limit,
                      record_file=(files if files is not None else []).append, seed=seed, select_context=select,
                      limit_per_context=per_context, model_tokenizer=lambda: model, context_length=length)
    return task_type.load(ctx)


def prompt_tokens(conv, model) -> int:
    from lceval.types import Message

    turn = conv.turns[0]
    messages = [Message("user", turn.user.replace(CONTEXT_SLOT, conv.context))]
    if turn.assistant_prefix:  # the answer's start, continued by the model: part of its prompt
        messages.append(Message("assistant", turn.assistant_prefix))
    return model.count_tokens(messages)


CASES = [("ruler_niah", {"haystack": "noise"}), ("ruler_niah", {"haystack": "essay"}),
         ("ruler_niah", {"haystack": "needle", "type_needle_k": "uuids", "type_needle_v": "uuids"}),
         ("ruler_niah", {"haystack": "essay", "num_needle_k": 4, "queries_per_haystack": 4}),
         ("ruler_niah", {"haystack": "essay", "num_needle_v": 4}),
         ("ruler_vt", {}), ("ruler_vt", {"haystack": "essay", "num_chains": 2}),
         ("ruler_cwe", {}), ("ruler_fwe", {})]


@pytest.mark.parametrize("kind,options", CASES)
@pytest.mark.parametrize("length", [1024, 4096, 8192])
def test_every_sample_is_built_to_its_length_within_one_percent(kind, options, length, tmp_path):
    model = ScriptedModel(window=8192)
    if options.get("haystack") == "essay":
        options = {**options, "essay": str(essay_folder(tmp_path))}
    convs = load(kind, options, length, model=model, limit=6)
    assert len(convs) == 6
    for conv in convs:
        meta = conv.turns[0].metadata
        # what was recorded is what the model's own count of the chat-templated prompt says
        assert meta["prompt_tokens_built"] == prompt_tokens(conv, model)
        assert meta["length_built"] == meta["prompt_tokens_built"] + GENERATE[kind]
        assert meta["context_length"] == length
        assert 0.99 * length <= meta["length_built"] <= length
        # at the window, the engine's context policy must take the prompt as it is
        assert meta["length_built"] + 8 <= model.context_window


def test_lengths_are_counted_with_the_chat_template():
    class Wordy(ScriptedModel):  # a chat template of 50 tokens per message
        def count_tokens(self, messages):
            return sum(len(m.content.split()) + 50 for m in messages)

    plain = load("ruler_niah", {"haystack": "noise"}, 1024, model=ScriptedModel(window=8192), limit=1)[0]
    wordy = load("ruler_niah", {"haystack": "noise"}, 1024, model=Wordy(window=8192), limit=1)[0]
    assert len(wordy.context.split()) < len(plain.context.split()) - 40
    assert abs(wordy.turns[0].metadata["length_built"] - plain.turns[0].metadata["length_built"]) <= 10


def test_samples_are_deterministic_from_the_seed_and_the_same_needle_at_every_length():
    a = load("ruler_niah", {"haystack": "noise"}, 2048)
    b = load("ruler_niah", {"haystack": "noise"}, 2048)
    assert [(c.conv_id, c.context, c.turns[0].user) for c in a] == [(c.conv_id, c.context, c.turns[0].user) for c in b]
    other = load("ruler_niah", {"haystack": "noise"}, 2048, seed=1)
    assert [c.turns[0].reference for c in other] != [c.turns[0].reference for c in a]
    longer = load("ruler_niah", {"haystack": "noise"}, 4096)
    by_index = lambda convs: {c.conv_id.split("/")[1]: c.turns[0] for c in convs}  # noqa: E731
    short, long_ = by_index(a), by_index(longer)
    assert all(short[i].reference == long_[i].reference and short[i].metadata["depth"] == long_[i].metadata["depth"]
               for i in short)


def test_depths_are_spread_evenly_and_the_needle_sits_there(tmp_path):
    depths = [0, 10, 50, 90, 100]
    convs = load("ruler_niah", {"haystack": "essay", "essay": str(essay_folder(tmp_path)), "depths": depths}, 4096,
                 limit=20)
    assert Counter(c.turns[0].metadata["depth"] for c in convs) == {d: 4 for d in depths}
    for conv in convs:
        meta = conv.turns[0].metadata
        (value,) = meta["references"]
        at = conv.context.index(f"is: {value}.")
        share = 100 * len(conv.context[:at].split()) / len(conv.context.split())
        assert abs(meta["depth_achieved"] - meta["depth"]) <= 2, meta
        assert abs(share - meta["depth"]) <= 3, (share, meta["depth"])


def test_ruler_templates_and_needles_are_rulers():
    template, noun = niah_template("numbers", singular=True, answer_prefix="user")
    assert noun == "number"
    # niah.py's singular template (constants.py template + answer prefix, then its replacements)
    assert template.format(type_needle_v=noun, context="C", query="Q") == (
        "A special magic number is hidden within the following text. Make sure to memorize it. I will quiz you "
        "about the number afterwards.\nC\nWhat is the special magic number for Q mentioned in the provided text? "
        "The special magic number for Q mentioned in the provided text is")
    conv = load("ruler_niah", {"haystack": "noise", "type_needle_k": "words", "type_needle_v": "numbers"}, 1024, limit=1)[0]
    key = re.search(r"for (\S+) mentioned", conv.turns[0].user).group(1)
    # RULER's answer prefix is the start of the assistant's answer, as its prepare.py places it
    assert conv.turns[0].assistant_prefix == f" The special magic number for {key} mentioned in the provided text is"
    assert "mentioned in the provided text is" not in conv.turns[0].user
    (value,) = conv.turns[0].metadata["references"]
    assert f"One of the special magic numbers for {key} is: {value}." in conv.context
    assert re.fullmatch(r"[a-z]+(-| )?[a-zA-Z -]*", key) and re.fullmatch(r"\d{7}", value)
    assert NOISE in conv.context
    uuids = load("ruler_niah", {"haystack": "needle", "type_needle_k": "uuids", "type_needle_v": "uuids"}, 1024, limit=1)[0]
    assert len(re.findall(r"One of the special magic uuids for [0-9a-f-]{36} is: [0-9a-f-]{36}\.", uuids.context)) > 5


def test_multi_query_asks_every_key_and_answers_every_value(tmp_path):
    conv = load("ruler_niah", {"haystack": "essay", "essay": str(essay_folder(tmp_path)), "num_needle_q": 4}, 2048,
                limit=1)[0]
    user = conv.turns[0].user
    assert user.startswith("Some special magic numbers are hidden") and ", and " in user
    refs = conv.turns[0].metadata["references"]
    assert len(refs) == 4 and all(f"is: {r}." in conv.context for r in refs)


def test_questions_about_one_haystack_share_its_context(tmp_path):
    essay = str(essay_folder(tmp_path))
    convs = load("ruler_niah", {"haystack": "essay", "essay": essay, "num_needle_k": 4, "queries_per_haystack": 4},
                 2048, limit=8)
    by_id: dict[str, list] = {}
    for c in convs:
        by_id.setdefault(c.context_id, []).append(c)
    assert len(by_id) == 2 and all(len(v) == 4 for v in by_id.values())
    for group in by_id.values():
        assert len({c.context for c in group}) == 1  # one text, prefilled once
        assert len({c.turns[0].reference for c in group}) == 4  # each asks another key
        assert {c.turns[0].metadata["haystack_id"] for c in group} == {group[0].context_id}
    capped = load("ruler_niah", {"haystack": "essay", "essay": essay, "num_needle_k": 4, "queries_per_haystack": 4},
                  2048, limit=None, per_context=2)
    assert Counter(c.context_id for c in capped).most_common(1)[0][1] == 2
    with pytest.raises(UserError) as err:
        load("ruler_niah", {"haystack": "noise", "queries_per_haystack": 2}, 1024)
    assert err.value.field == "options.queries_per_haystack"


def test_limit_and_contexts_choose_samples_without_changing_them():
    every = load("ruler_niah", {"haystack": "noise", "num_samples": 6}, 1024, limit=None)
    assert len(every) == 6
    asked: list[str] = []
    chosen = load("ruler_niah", {"haystack": "noise", "num_samples": 6}, 1024, limit=None,
                  select=lambda cid: asked.append(cid) or cid.endswith(("h0002", "h0004")))
    assert asked == [f"1k/h{i:04d}" for i in range(6)]  # every id offered before the limit
    same = {c.conv_id: c.context for c in every}
    assert [c.context_id for c in chosen] == ["1k/h0004", "1k/h0002"] and all(same[c.conv_id] == c.context for c in chosen)


def test_variable_tracking_hides_the_chain_and_asks_for_its_variables():
    conv = load("ruler_vt", {}, 2048, limit=1)[0]
    refs = conv.turns[0].metadata["references"]
    assert len(refs) == 5 and all(re.fullmatch(r"[A-Z]{5}", v) for v in refs)
    value = re.search(rf"VAR {refs[0]} = (\d{{5}})", conv.context).group(1)
    for a, b in zip(refs, refs[1:]):
        assert f"VAR {b} = VAR {a}" in conv.context
    user = conv.turns[0].user
    # one worked example with three-letter variables first, then the question about this value
    assert user.count("Memorize and track the chain(s)") == 2 and re.search(r"VAR [A-Z]{3} = VAR [A-Z]{3}", user)
    assert user.endswith(f"in the text above.")
    # RULER's answer prefix: the start of the assistant's answer
    assert conv.turns[0].assistant_prefix.endswith(f"5 variables are assigned the value {value}, they are: ")


def test_common_words_are_listed_most_often_and_frequent_words_follow_zipf():
    cwe = load("ruler_cwe", {}, 4096, limit=1)[0]
    numbers = [int(n) for n in re.findall(r"(?:^| )(\d+)\. ", cwe.context)]
    counts = Counter(re.findall(r"(?:^| )\d+\. (.+?)(?= \d+\. |$)", cwe.context))
    common = cwe.turns[0].metadata["references"]
    assert numbers == list(range(1, sum(counts.values()) + 1))  # "1. word 2. word ..." as RULER numbers it
    assert len(common) == 10 and all(counts[w] == 30 for w in common)
    assert set(counts.values()) == {30, 3}
    short = load("ruler_cwe", {}, 2048, limit=1)[0]  # below 4k RULER lists them 6 times and 1
    assert set(Counter(re.findall(r"(?:^| )\d+\. (.+?)(?= \d+\. |$)", short.context)).values()) == {6, 1}
    fwe = load("ruler_fwe", {}, 4096, limit=1)[0]
    freq = Counter(fwe.context.split()).most_common(4)
    assert freq[0][0] == "..." and [w for w, _ in freq[1:]] == fwe.turns[0].metadata["references"]
    assert zeta(2.0) == pytest.approx(3.141592653589793 ** 2 / 6, rel=1e-12)


def test_a_small_limit_still_spans_the_depths_ends_and_middle_first():
    """--limit 3 over five depths asks at both ends and the middle, not at the three shallowest;
    the depths are spread by value whatever order the list gives them in."""
    convs = load("ruler_niah", {"haystack": "noise", "depths": [50, 0, 75, 100, 25]}, 1024, limit=3)
    assert sorted(c.turns[0].metadata["depth"] for c in convs) == [0, 50, 100]
    convs = load("ruler_niah", {"haystack": "noise"}, 1024, limit=2)
    assert sorted(c.turns[0].metadata["depth"] for c in convs) == [0, 100]


def test_rulers_40_depths():
    np = pytest.importorskip("numpy")
    assert DEPTHS == list(np.round(np.linspace(0, 100, num=40, endpoint=True)).astype(int))


# -- bad input ---------------------------------------------------------------------------

def test_a_length_past_the_window_names_context_lengths():
    with pytest.raises(UserError) as err:
        load("ruler_niah", {"haystack": "noise"}, 16384, model=ScriptedModel(window=8192))
    assert err.value.field == "--context-lengths" and "16k" in err.value.message and "8,192" in err.value.message
    with pytest.raises(UserError) as err:  # without --context-lengths: the spec's length
        load("ruler_niah", {"haystack": "noise", "length": 9000}, None, model=ScriptedModel(window=8192))
    assert err.value.field == "options.length"


def test_a_model_without_tokenizer_is_refused():
    task_type = TASK_TYPES["ruler_fwe"]()
    ctx = TaskContext(spec={"options": complete(task_type, {}), "generation": {"max_new_tokens": 50}},
                      spec_path=Path("t.yaml"), data_home=Path("."), splits=None, limit=1, record_file=lambda p: None,
                      model_tokenizer=lambda: None, context_length=1024)
    with pytest.raises(UserError) as err:
        task_type.load(ctx)
    assert err.value.field == "--model" and "tokenizer" in err.value.message


def test_essay_sources_and_their_errors(tmp_path, monkeypatch):
    files: list = []
    convs = load("ruler_niah", {"haystack": "essay", "essay": str(essay_folder(tmp_path))}, 1024, limit=1, files=files)
    assert sorted(p.name for p in files) == ["a.txt", "b.md"] and "Sentence 0 says" in convs[0].context
    jsonl = tmp_path / "essays.jsonl"
    jsonl.write_text('{"body": "One. Two. Three."}\n' * 2)
    with pytest.raises(UserError) as err:  # the haystack cannot reach the length, and is not to be repeated
        load("ruler_niah", {"haystack": "essay", "essay": str(jsonl), "essay_field": "body", "essay_repeat": False}, 1024)
    assert err.value.field == "options.essay" and "1k" in err.value.message
    with pytest.raises(UserError) as err:
        load("ruler_niah", {"haystack": "essay", "essay": str(jsonl), "essay_field": "text"}, 1024)
    assert err.value.field == "options.essay_field" and err.value.line == 1
    with pytest.raises(UserError) as err:
        load("ruler_niah", {"haystack": "essay", "essay": str(tmp_path / "missing.txt")}, 1024)
    assert err.value.field == "options.essay" and "missing.txt" in err.value.message
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError) as err:
        load("ruler_vt", {"haystack": "essay", "essay": str(tmp_path / "empty")}, 1024)
    assert err.value.field == "options.essay" and "no .txt" in err.value.message
    with pytest.raises(UserError) as err:  # the default: ELITR transcripts of the data home
        load("ruler_niah", {"haystack": "essay"}, 1024, home=tmp_path)
    assert err.value.field == "options.essay" and "data fetch elitr-bench" in err.value.hint


def test_more_needles_than_the_length_holds_is_refused():
    with pytest.raises(UserError) as err:
        load("ruler_niah", {"haystack": "noise", "num_needle_k": 200, "type_needle_v": "uuids"}, 1024)
    assert err.value.field == "options.num_needle_k" and "200" in err.value.hint


def test_a_common_words_list_longer_than_the_word_list_needs_options_word_list(tmp_path):
    big = ScriptedModel(window=200_000)  # 2 tokens an entry: 64k tokens need ~10,800 distinct words
    with pytest.raises(UserError) as err:
        load("ruler_cwe", {}, 65536, model=big, limit=1)
    assert err.value.field == "options.word_list" and "8,168" in err.value.message
    more = tmp_path / "words.txt"
    more.write_text("\n".join(f"extra{i}" for i in range(4000)))
    files: list = []
    (conv,) = load("ruler_cwe", {"word_list": str(more)}, 65536, model=big, limit=1, files=files)
    assert files == [more] and "extra" in conv.context
    assert 0.99 * 65536 <= conv.turns[0].metadata["length_built"] <= 65536


def test_splits_are_refused():
    with pytest.raises(UserError) as err:
        load("ruler_niah", {"haystack": "noise"}, 1024, splits=["dev"])
    assert err.value.field == "--split"


class Counting(ScriptedModel):
    """Counts the tokens it is asked to tokenize and the prompts it is asked to count."""

    def __init__(self, window: int = 8192) -> None:
        super().__init__(window=window)
        self.tokenized = 0  # words passed to tokenize
        self.prompts = 0  # calls of count_tokens on a whole prompt (more than 500 words)

    def tokenize(self, text):
        self.tokenized += len(text.split())
        return super().tokenize(text)

    def count_tokens(self, messages):
        self.prompts += sum(len(m.content.split()) for m in messages) > 500
        return super().count_tokens(messages)


def test_the_haystack_is_tokenized_once_and_each_sample_counted_about_once(tmp_path):
    essay = str(essay_folder(tmp_path, sentences=6000))
    model = Counting()
    load("ruler_niah", {"haystack": "essay", "essay": essay, "num_samples": 40}, 4096, model=model, limit=40)
    first = model.tokenized
    assert 4096 <= first < 4096 + 2000  # the sentences of the first 4k tokens, once, and the needles
    assert model.prompts <= 40 + 3  # one count of each prompt, a second for the first sample or two
    model.prompts = 0
    load("ruler_niah", {"haystack": "essay", "essay": essay, "num_samples": 40}, 8192, model=model, limit=40)
    # the next length tokenizes only the sentences it adds (the source is kept for the run)
    assert model.tokenized - first < 4096 + 2000 and model.prompts <= 40 + 3


#: samples_digest of the first 4 samples of each case at 2,048 tokens (issue 40: the shared
#: haystack builder changes none)
SAMPLES = ["3a3f5f5079bc81636c7e196a254c4ceccc7102b9f9a158ca79f0bf89922e4d84",
           "a8c505c14d611214ad2d348bb386fc63c13764bc996c48904e8e45d233b4f8e8",
           "29e4fe801eb00677c636f289a035ade6cfe2d115ad6880f6cddf08d5f2c7f456",
           "96adff7e4b8cdf5d70054ea0bdfe7343f0aa4183a025b9d5fde10c4bff671750",
           "785c2c814429da6702447807c5f0014320c58ae377cf424ef6ebe4459049c3ee",
           "1a5b280ef647f1c8ec80bb988195e6c52c4594e2e2779168ab458d3bf7d85df4",
           "a91e9ded7ad4a5d162c7ae8a2d9b22405d918f30c0579027f68c5edfc375c532",
           "4f73f6759fe7cbd36f39cca8419abdc004e1dc0bcd6b4a1c7ac4d16eb93df242",
           "f42b2c07c5eabe81fe8a85ed2ea1cbb37e2e12b18073192b301380b9185a1052"]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_every_generated_sample_is_pinned(case, tmp_path):
    from tests.plugins.samples_digest import samples_digest

    kind, options = CASES[case]
    if options.get("haystack") == "essay":
        options = {**options, "essay": str(essay_folder(tmp_path))}
    assert samples_digest(load(kind, options, 2048, limit=4)) == SAMPLES[case]
