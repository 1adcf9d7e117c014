"""benchmarks/elitr_judge_cost.py on the authors' recorded files: the paper's protocol is
13,275 GPT-4 judgments (dev once, test2 three times), and a batch costs half."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests.paths import REPO

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed")]


def test_the_paper_protocol_costs_half_through_the_batch_api(real_home) -> None:
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "elitr_judge_cost.py"), "--data-home",
                          str(real_home), "--judge", "gpt-4-0613"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "13,275 GPT-4 judgments" in out.stdout
    (row,) = [line.split() for line in out.stdout.splitlines() if line.startswith("gpt-4-0613")]
    direct, batch = float(row[3].replace(",", "")), float(row[4].replace(",", ""))
    assert batch == pytest.approx(direct / 2, abs=0.01) and direct > 100
