"""Honest accounting through the engine: tokens prefilled are unknown (None) where the backend
cannot tell, in samples, results, manifest and report tables, never the sum of the known
part; the run's seconds are its wall time, not the sum of overlapping requests; the
progress bar moves once per answer."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from lceval.cli import main
from lceval.interfaces import PrefixCache
from lceval.types import Generation, GenerationRequest

from tests.conftest import ScriptedModel, run_engine


class Unreported(ScriptedModel):
    """Reports no prefill for the questions of one meeting (as a server without cached-token
    counts would); takes `slots` requests at once, each `delay` seconds."""

    def __init__(self, slots: int = 1, delay: float = 0.0) -> None:
        super().__init__()
        self.max_in_flight = slots
        self.prefix_cache = PrefixCache("none")
        self.delay = delay
        self.lock = threading.Lock()

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        time.sleep(self.delay)
        with self.lock:
            out = super().generate(requests)
        for request, gen in zip(requests, out):
            gen.seconds = self.delay
            if request.hints["meeting_id"] == "meeting_en_dev_902":
                gen.prefilled_tokens = None
        return out


def test_unknown_prefill_is_unknown_everywhere(tiny_home: Path, tmp_path: Path, capsys) -> None:
    run_dir, results, state = run_engine(Unreported(), "elitr_qa", tiny_home, tmp_path)
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    unknown = [s for s in samples if s["metadata"]["meeting_id"] == "meeting_en_dev_902"]
    assert len(unknown) == 2 and all(s["prefilled_tokens"] is None for s in unknown)
    assert all(s["prefilled_tokens"] == 5 for s in samples if s not in unknown)
    # the known five answers' 25 tokens are not passed off as the total
    assert state.usage["prefilled_tokens"] is None and state.usage["prefill_unknown"] == 2
    tokens = results["tasks"]["elitr_qa"]["accounting"]["tokens"]
    assert tokens["prefilled"] is None and tokens["prefill_unknown"] == 2
    assert tokens["prompt"] == sum(s["prompt_tokens"] for s in samples) > 0
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["usage"]["prefilled_tokens"] is None
    assert main(["report", str(run_dir), "--format", "csv"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Tokens")]
    assert len(rows) == 1 and rows[0].split(",")[2:5] == [str(tokens["prompt"]), "", str(tokens["completion"])]


def test_known_prefill_adds_up(tiny_home: Path, tmp_path: Path) -> None:
    _, results, state = run_engine(ScriptedModel(), "elitr_qa", tiny_home, tmp_path)
    assert state.usage["prefilled_tokens"] == 35 and state.usage["prefill_unknown"] == 0
    assert results["tasks"]["elitr_qa"]["accounting"]["tokens"]["prefilled"] == 35


def test_seconds_are_wall_time_not_the_sum_of_overlapping_requests(tiny_home: Path, tmp_path: Path) -> None:
    _, _, state = run_engine(Unreported(slots=7, delay=0.3), "elitr_qa", tiny_home, tmp_path)
    usage = state.usage
    assert usage["peak_in_flight"] == 7
    assert abs(usage["request_seconds"] - 7 * 0.3) < 0.01
    assert usage["seconds"] < 0.3 * 7 / 2  # the seven overlapped


def test_progress_advances_once_per_answer(tiny_home: Path, tmp_path: Path, monkeypatch) -> None:
    from lceval.engine import _progress as _runner

    updates: list[int] = []

    class Bar:
        def __init__(self, *args, total: int = 0, **kwargs) -> None:
            self.total = total

        def update(self, n: int = 1) -> None:
            updates.append(n)

        def close(self) -> None:
            pass

    monkeypatch.setattr(_runner, "tqdm", Bar)
    run_engine(ScriptedModel(), "elitr_qa", tiny_home, tmp_path)
    assert updates == [1] * 7  # every answer moves the bar, not every meeting
