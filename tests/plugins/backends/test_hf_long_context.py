"""The `hf:` backend's long-context settings (issue 44, part 4) on the tiny model folder of
test_hf_backend (random weights, trained window 2,048): `rope_scaling=TYPE:FACTOR` and
`original_max_position_embeddings=N` reach the config the weights are loaded with, the window
follows, `long_context()` reports what the loaded model holds, and bad values exit 2 naming
the option, the value and what is accepted."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from lceval.errors import UserError
from lceval.types import LongContextSettings, RopeScaling
from tests.cli import call
from tests.plugins.backends.test_hf_backend import QUESTIONS, ask, tiny_folder

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed"),
    pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers not installed"),
    pytest.mark.skipif(importlib.util.find_spec("tokenizers") is None, reason="tokenizers not installed"),
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tiny_folder(tmp_path_factory.mktemp("tiny-hf-rope"), layers=1)


def backend(folder: Path, **options: str):
    from lceval_plugins.backends.hf import make_hf

    return make_hf(str(folder), {"dtype": "auto", "device": "cpu", "batch_size": "1", **options})


@pytest.mark.parametrize("options, window, positions, rope", [
    ({}, 2048, 2048, None),
    ({"rope_scaling": "linear:2"}, 4096, 2048, RopeScaling("linear", 2.0, None)),
    ({"rope_scaling": "dynamic:2"}, 4096, 2048, RopeScaling("dynamic", 2.0, 2048)),
    # YaRN from a trained window of 512 (the config's 2,048 overridden): transformers' convention
    # keeps the stretched length in max_position_embeddings
    ({"rope_scaling": "YaRN:4", "original_max_position_embeddings": "512"}, 2048, 2048, RopeScaling("yarn", 4.0, 512)),
    ({"rope_scaling": "yarn:4", "n_ctx": "3000"}, 3000, 8192, RopeScaling("yarn", 4.0, 2048)),
])
def test_the_loaded_model_carries_the_scaling(folder, options, window, positions, rope):
    b = backend(folder, **options)
    try:
        before = b.long_context()  # from the config alone: no weights loaded for the cache key
        answer = b.generate([ask(QUESTIONS[0], new=2)])[0]
        assert answer.completion_tokens >= 1
        loaded = b.long_context()  # the loaded model's own config
        assert loaded == before == LongContextSettings(window=window, position_embeddings=positions, rope=rope,
                                                       chunked_prefill=True, prefill_chunk=1024,
                                                       prefix_caching=True)
        assert b.context_window == window
    finally:
        b.close()


@pytest.mark.parametrize("options, field, words", [
    ({"rope_scaling": "cubic:2"}, "rope_scaling", ["rope_scaling=cubic:2", "linear, dynamic, yarn", "at least 1"]),
    ({"rope_scaling": "yarn:0.5"}, "rope_scaling", ["rope_scaling=yarn:0.5", "at least 1"]),
    ({"rope_scaling": "yarn"}, "rope_scaling", ["rope_scaling=yarn", "TYPE:FACTOR"]),
    ({"original_max_position_embeddings": "512"}, "original_max_position_embeddings",
     ["original_max_position_embeddings=512", "needs rope_scaling"]),
    ({"rope_scaling": "linear:2", "original_max_position_embeddings": "0"}, "original_max_position_embeddings",
     ["original_max_position_embeddings=0"]),
])
def test_bad_scaling_names_the_option_the_value_and_what_is_accepted(folder, options, field, words):
    with pytest.raises(UserError) as err:
        backend(folder, **options)
    assert err.value.field == field and all(w in err.value.render() for w in words), err.value.render()


def test_a_bad_factor_exits_2_with_one_line(folder, tiny_home, tmp_path):
    code, out, err = call("run", "--tasks", "elitr_qa", "--limit", "1", "--data-home", tiny_home,
                          "--model", f"hf:{folder},rope_scaling=yarn:0.5", "--output", tmp_path / "runs",
                          "--no-progress")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "rope_scaling=yarn:0.5" in err and "at least 1" in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
