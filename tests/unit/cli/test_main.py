"""The command line is thin, fast to start, and honest about bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lceval.cli import main

HEAVY = ("torch", "transformers", "vllm", "llama_cpp", "litellm", "scipy", "numpy")


@pytest.mark.parametrize("argv", [["--help"], ["tasks"], ["tasks", "show", "elitr_qa"], ["plugins"]])
def test_listing_commands_import_no_heavy_library(argv):
    code = (
        "import sys\nfrom lceval.cli import main\n"
        "try:\n    main(%r)\nexcept SystemExit:\n    pass\n"
        "print('HEAVY=' + ','.join(sorted(m for m in sys.modules if m.split('.')[0] in %r)))" % (argv, HEAVY)
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "HEAVY="


def test_python_dash_m_works():
    proc = subprocess.run([sys.executable, "-m", "lceval", "tasks"], capture_output=True, text=True)
    assert proc.returncode == 0 and "elitr_conv" in proc.stdout


def test_tasks_show_prints_resolved_spec(capsys):
    assert main(["tasks", "show", "elitr_qa_mt"]) == 0
    out = capsys.readouterr().out
    assert "mode: multi-turn" in out and "policy: error" in out


@pytest.mark.parametrize("argv,needle", [
    (["run", "--tasks", "elitr_qq", "--model", "smollm2"], "Did you mean: elitr_qa"),
    (["run", "--tasks", "elitr_qa", "--model", "nonsense"], "neither SCHEME:MODEL nor a known alias"),
    (["run", "--tasks", "elitr_qa", "--model", "warp:x"], "no backend for scheme 'warp'"),
    (["run", "--tasks", "elitr_qa", "--model", "smollm2", "--seed", "a,b"], "seeds must be integers"),
    (["tasks", "show", "nope"], "unknown task or suite 'nope'"),
    (["run", "--tasks", "elitr_qa", "--model", "smollm2", "--set", "generation.max_new_token=5"],
     "field '--set generation.max_new_token'"),
    (["-p", "lexical", "plugins"], "-p takes no:NAME"),
])
def test_bad_input_exits_2_with_a_message(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_missing_dataset_says_how_to_fetch(tmp_path):
    from lceval.errors import UserError

    from tests.conftest import ScriptedModel, run_engine

    with pytest.raises(UserError) as err:
        run_engine(ScriptedModel(), "elitr_qa", tmp_path / "empty-home", tmp_path)
    assert "lceval data fetch elitr-bench" in err.value.render()
    # the whole dataset is missing: named with its archives and the offline commands (issue 30)
    assert "ELITR-English-dev.tar.zip" in err.value.render() and "--from elitr-bench-archives" in err.value.render()


def test_report_reads_finished_runs(tiny_home, tmp_path, capsys):
    from tests.conftest import ScriptedModel, run_engine

    run_dir, _, _ = run_engine(ScriptedModel(), "elitr_qa", tiny_home, tmp_path)
    assert main(["report", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "task" in out and "elitr_qa" in out and "dev" in out
    assert main(["report", str(run_dir), "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert "### ELITR-Bench (Thonet et al., 2024a, Table 2)" in out
    assert "| model | QA single-turn dev | QA single-turn test2 | QA single-turn mean |" in out
    assert "### elitr_qa, dev: breakdowns and tests" in out  # per split by default
    assert main(["report", str(run_dir), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["schema_version"] == 1
    assert main(["report", str(tmp_path)]) == 2


def test_a_plugin_command_cannot_take_a_built_in_name(monkeypatch, capsys):
    import lceval.engine
    from lceval import hookimpl
    from lceval.interfaces import Command

    class Extra(Command):
        help = "extra"

        def add_arguments(self, parser):
            parser.add_argument("--flavour")

        def run(self, args):
            return f"ran with {args.flavour}"

    class Plugin:
        @hookimpl
        def register_commands(self, register):
            register("run", Extra())
            register("extra", Extra())

    real = lceval.engine.load_plugins
    monkeypatch.setattr(lceval.engine, "load_plugins",
                        lambda disabled=(), extra=(), overrides=(): real(disabled, [("extra", Plugin())], overrides))
    clash = "command 'run': plugin 'extra' (in-process) also provides it and is ignored; lceval's own command is used"
    assert main(["extra", "--flavour", "x"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "ran with x"
    assert err.count("also provides it and is ignored") == 1 and clash in err  # printed as a clash on every command
    # `run` is still lceval's own: its required flags apply, the plugin's do not
    assert main(["run", "--flavour", "x"]) == 2
    err = capsys.readouterr().err
    assert clash in err and "the following arguments are required: --tasks, --model" in err
    assert main(["run", "--tasks", "t", "--model", "m", "--flavour", "x"]) == 2
    assert "unrecognized arguments: --flavour x" in capsys.readouterr().err
