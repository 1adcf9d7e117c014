"""Bad input to the synthetic needle families (NoLiMa, NeedleBench, Counting-Stars) exits 2 from
the command line, naming the spec, the option or flag and the value."""

from __future__ import annotations

import pytest

from tests.cli import call
from tests.paths import TEST_DATA

NOLIMA = ["--set", f"options.data={TEST_DATA / 'nolima'}", "--set", "options.haystack=haystack"]
CASES = [
    (["--tasks", "nolima", *NOLIMA, "--split", "12Q"], ["--split", "12Q"]),
    (["--tasks", "nolima", "--set", "options.data=/nonexistent/nolima"], ["options.data", "/nonexistent/nolima"]),
    (["--tasks", "nolima", *NOLIMA, "--set", "options.depth_intervals=0"], ["options.depth_intervals", "0"]),
    (["--tasks", "needlebench_single_4k", "--set", "options.kind=triple"], ["options.kind", "triple"]),
    (["--tasks", "needlebench_single_4k", "--set", "options.tokenizer=gpt-5"], ["options.tokenizer", "gpt-5"]),
    (["--tasks", "needlebench_single_4k", "--set", "options.data=/nonexistent/nb"], ["options.data", "/nonexistent/nb"]),
    (["--tasks", "counting_stars_acquisition_en", "--set", "options.context_data=/nonexistent/cd"],
     ["options.context_data", "/nonexistent/cd"]),
    (["--tasks", "counting_stars_acquisition_en", "--set", "options.language=FR"], ["options.language", "FR"]),
    (["--tasks", "counting_stars_acquisition_en", "--set", "judge.options.task=counting"], ["judge.options.task", "counting"]),
]


@pytest.mark.parametrize("args,words", CASES)
def test_bad_input_exits_2_naming_it(args, words):
    code, _, err = call("run", *args, "--model", "smollm2", "--dry-run")
    assert code == 2, err
    for w in words:
        assert w in err, (w, err)
